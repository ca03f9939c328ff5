#!/usr/bin/python3
"""
What `fastcase:legacy charset` costs a listing of a directory that has no
legacy names: the same directory of UTF-8 names listed in full (SMB2
QUERY_DIRECTORY "*") through three shares of one smbd: stock
`case sensitive = no`, the same with `vfs objects = fastcase`, and the
same with `fastcase:legacy charset = ISO-8859-1`. Rounds alternate between
the shares so that drift in the machine's speed hits all three alike.
Reports the median wall time per listing and the median CPU time of the
serving smbd process, and their ratios to stock.

usage: bench_listing.py --build BUILD [--entries N] [--rounds N]
"""

import argparse
import statistics
import time

import oneshot
from bench import Client

SHARES = (
    ('stock', {}),
    ('fastcase', {'vfs objects': 'fastcase'}),
    ('legacy', {'vfs objects': 'fastcase',
                'fastcase:legacy charset': 'ISO-8859-1'}),
)


def run(args):
    with oneshot.Server(args.build, 'fastcase-bench-listing-') as server:
        server.fill('big', ('Dokument_%07d_résumé.txt' % i
                            for i in range(args.entries)))
        shares = {}
        for name, extra in SHARES:
            shares[name] = dict({'path': server.tree,
                                 'case sensitive': 'no'}, **extra)
        smbd = server.start(shares)
        clients = {name: Client(smbd, name) for name, _ in SHARES}
        wall = {name: [] for name, _ in SHARES}
        cpu = {name: [] for name, _ in SHARES}
        for c in clients.values():
            n = len(c.conn.list('big'))
            if n != args.entries:
                raise SystemExit('%s listed %d entries, not %d'
                                 % (c.share, n, args.entries))
        for _ in range(args.rounds):
            for name, _ in SHARES:
                c = clients[name]
                cpu0 = c.cpu_ns()
                t0 = time.perf_counter()
                c.conn.list('big')
                wall[name].append(time.perf_counter() - t0)
                if cpu0 is not None:
                    cpu[name].append(c.cpu_ns() - cpu0)
        base_wall = statistics.median(wall['stock'])
        base_cpu = statistics.median(cpu['stock']) if cpu['stock'] else None
        print('Full listing of a directory of %d UTF-8 names, median of '
              '%d rounds' % (args.entries, args.rounds))
        print('| share | wall ms | ratio | smbd CPU ms | ratio |')
        print('|---|---|---|---|---|')
        for name, _ in SHARES:
            w = statistics.median(wall[name])
            line = '| %s | %.1f | %.2fx |' % (name, w * 1e3, w / base_wall)
            if cpu[name] and base_cpu:
                u = statistics.median(cpu[name])
                line += ' %.1f | %.2fx |' % (u / 1e6, u / base_cpu)
            else:
                line += ' n/a | n/a |'
            print(line)
        for c in clients.values():
            c.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--entries', type=int, default=100000)
    p.add_argument('--rounds', type=int, default=7)
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
