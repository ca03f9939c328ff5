#!/usr/bin/python3
"""
How much two smbd processes of the same configuration differ: two
connections to a `case sensitive = yes` share and two to a fastcase share
(so four smbd processes) make exact-case opens in a directory of
--entries entries, in turn, --batch operations each, for --rounds rounds.
Prints, per process, the median CPU time (from /proc/PID/task/*/schedstat)
of each position in its batch, then the median over the batch. With
--pin, the client runs on one CPU and the four processes on another, as
./waf bench places them.

usage: process_spread.py --build BUILD [--pin] [--entries N]
                         [--batch N] [--rounds N]
"""

import argparse
import statistics

import oneshot
from bench import Client, Placement

from samba import NTSTATUSError

READ_ATTR = 0x80
SHARE_ALL = 7
FILE_OPEN = 1


def run(args):
    with oneshot.Server(args.build, 'fastcase-spread-') as server:
        server.fill('big', ('File_%07d.txt' % i
                            for i in range(args.entries)))
        smbd = server.start({
            'sensitive': {'path': server.tree, 'case sensitive': 'yes'},
            'fastcase': {'path': server.tree, 'case sensitive': 'no',
                         'vfs objects': 'fastcase'}})
        placement = Placement(args.pin)
        placement.timed()
        clients = {}
        for i in range(2):
            for share in ('sensitive', 'fastcase'):
                c = Client(smbd, share)
                placement.serve(c)
                try:
                    c.conn.loadfile('big\\Warmup')
                except NTSTATUSError:
                    pass
                clients['%s %d' % (share, i)] = c
        cpu = {k: [[] for _ in range(args.batch)] for k in clients}
        k = 0
        for r in range(args.rounds):
            names = list(clients) if r % 2 == 0 else list(clients)[::-1]
            for name in names:
                c = clients[name]
                for j in range(args.batch):
                    t0 = c.cpu_ns()
                    f = c.conn.create('big\\File_%07d.txt'
                                      % (k % args.entries),
                                      DesiredAccess=READ_ATTR,
                                      ShareAccess=SHARE_ALL,
                                      CreateDisposition=FILE_OPEN)
                    c.conn.close(f)
                    cpu[name][j].append((c.cpu_ns() - t0) / 1000)
                    k += 1
        print('exact-case opens, %s; median us of smbd CPU at each '
              'position of a batch, then over all' % (
                  'pinned' if placement.enabled else 'not pinned'))
        for name, positions in cpu.items():
            flat = [v for p in positions for v in p]
            print('%-12s %s | %.0f' % (name, ' '.join(
                '%.0f' % statistics.median(p) for p in positions),
                statistics.median(flat)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--pin', action='store_true')
    p.add_argument('--entries', type=int, default=100000)
    p.add_argument('--batch', type=int, default=10)
    p.add_argument('--rounds', type=int, default=40)
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
