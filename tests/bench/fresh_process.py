#!/usr/bin/python3
"""
What a fastcase lookup costs in a new smbd process and in one that has
served a while. Every SMB connection gets its own smbd process, and each
maps the shared cache file; the first lookups of a process touch pages of
that mapping it has not touched yet, and each such page costs a page
fault. `case sensitive = yes` has no such file.

One smbd serves a `case sensitive = yes` share and a fastcase share of the
same directory of N entries; the cache is built beforehand by another
connection. For each operation (a miss, a wrong-case open) a new
connection to each share makes --ops operations, the two taking turns,
then --ops more ("warm"). Reports the median smbd CPU time per operation
(/proc/PID/task/*/schedstat) and the minor page faults per operation of
each share's process, first and warm.

usage: fresh_process.py --build BUILD [--entries N] [--ops N] [--no-pin]
"""

import argparse
import statistics

import oneshot
from bench import Client, Placement, open_or_miss

SHARES = ('sensitive', 'fastcase')


def minor_faults(pid):
    with open('/proc/%d/stat' % pid) as f:
        return int(f.read().rsplit(')', 1)[1].split()[7])


def op_path(kind, share, i, entries):
    if kind == 'miss':
        return 'big\\Missing_%07d.txt' % i
    j = (i * 7919) % entries
    if share == 'fastcase':
        return 'big\\FILE_%07d_DATA.TXT' % j
    return 'big\\File_%07d_data.txt' % j


def measure(clients, kind, first, count, entries):
    cpu = {s: [] for s in SHARES}
    faults0 = {s: minor_faults(clients[s].pid) for s in SHARES}
    for i in range(first, first + count):
        order = SHARES if i % 2 == 0 else SHARES[::-1]
        for s in order:
            c = clients[s]
            t0 = c.cpu_ns()
            open_or_miss(c.conn, op_path(kind, s, i, entries))
            cpu[s].append(c.cpu_ns() - t0)
    return {s: (statistics.median(cpu[s]) / 1e3,
                (minor_faults(clients[s].pid) - faults0[s]) / count)
            for s in SHARES}


def run(args):
    with oneshot.Server(args.build, 'fastcase-fresh-') as server:
        server.fill('big', ('File_%07d_data.txt' % i
                            for i in range(args.entries)))
        smbd = server.start({
            'sensitive': {'path': server.tree, 'case sensitive': 'yes'},
            'fastcase': {'path': server.tree, 'case sensitive': 'no',
                         'vfs objects': 'fastcase'},
        })
        placement = Placement(not args.no_pin)
        placement.timed()
        builder = Client(smbd, 'fastcase')
        open_or_miss(builder.conn, 'big\\Build_the_cache.txt')
        print('%d entries; median smbd CPU us per operation and minor '
              'page faults per operation, over %d operations of a new '
              'process ("first") and its next %d ("warm")'
              % (args.entries, args.ops, args.ops))
        print('| operation | process | sensitive us | fastcase us | ratio '
              '| sensitive faults | fastcase faults |')
        print('|---|---|---|---|---|---|---|')
        for kind in ('miss', 'wrong-case open'):
            clients = {s: Client(smbd, s) for s in SHARES}
            for s in SHARES:
                placement.serve(clients[s])
                open_or_miss(clients[s].conn, 'big\\Warmup_%s.txt' % kind[0])
            for label, first in (('first', 0), ('warm', args.ops)):
                r = measure(clients, kind, first, args.ops, args.entries)
                print('| %s | %s | %.0f | %.0f | %.2fx | %.2f | %.2f |'
                      % (kind, label, r['sensitive'][0], r['fastcase'][0],
                         r['fastcase'][0] / r['sensitive'][0],
                         r['sensitive'][1], r['fastcase'][1]))
            for c in clients.values():
                c.close()
        builder.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--entries', type=int, default=1000000)
    p.add_argument('--ops', type=int, default=250)
    p.add_argument('--no-pin', action='store_true',
                   help='leave the processes to the scheduler (default: '
                   'the client on one CPU, the smbd processes on another, '
                   'as ./waf bench places them)')
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
