#!/usr/bin/python3
"""
Where the time of a cold build goes: the first wrong-case lookup in a
directory of N entries that the cache has never seen, by a new smbd
process (after one lookup in the share's root, as ./waf bench measures
it), against one plain readdir pass of the same directory by a C program.
Each of --repeats shares has a cache file of its own, so each build is
cold; perf samples (cpu-clock) of each building process are merged.

usage: profile_cold.py --build BUILD [--entries N] [--repeats R]
                       [--symbols N [--callers]]
"""

import argparse
import os
import statistics
import subprocess
import time

import oneshot
from bench import (PRIME, Client, Placement, build_helper, c_readdir,
                   open_or_miss)


def report(data, symbols, callers):
    graph = (['--no-children', '-g', 'caller,2,callee', '--percent-limit',
              '2'] if callers else ['-g', 'none'])
    r = subprocess.run(['perf', 'report', '-i', data, '--stdio',
                        '--sort', 'dso,sym'] + graph, capture_output=True,
                       text=True)
    shown = 0
    for line in r.stdout.splitlines():
        if line.strip() and not line.lstrip().startswith('#'):
            print('    ' + line.strip())
            shown += 1
            if shown == symbols:
                break


def run(args):
    with oneshot.Server(args.build, 'fastcase-cold-') as server:
        big = server.fill('big', ('File_%07d_data.txt' % i
                                  for i in range(args.entries)))
        shares = {}
        for r in range(args.repeats):
            shares['cold%d' % r] = {
                'path': server.tree, 'case sensitive': 'no',
                'vfs objects': 'fastcase',
                'fastcase:cache file': os.path.join(
                    server.work, 'cold%d.tdb' % r)}
        smbd = server.start(shares)
        placement = Placement(True)
        placement.timed()
        ms = []
        for r in range(args.repeats):
            c = Client(smbd, 'cold%d' % r)
            placement.serve(c)
            open_or_miss(c.conn, 'WARMUP_%d.TXT' % r)
            data = os.path.join(server.work, 'perf%d.data' % r)

            def first():
                t0 = time.perf_counter()
                open_or_miss(c.conn, 'big\\FILE_%07d_DATA.TXT'
                             % ((r * PRIME) % args.entries))
                ms.append((time.perf_counter() - t0) * 1e3)

            if args.symbols:
                oneshot.perf_record([c.pid], first, data,
                                    999 if args.callers else 4999,
                                    call_graph=args.callers)
            else:
                first()
            c.close()
        helper = build_helper(args.build)
        readdir_ns, _ = c_readdir(helper, big, args.repeats)
        rd = statistics.median(readdir_ns) / 1e6
        print('%d entries: first wrong-case lookup %s ms (median %.1f), '
              'C readdir median %.1f ms, ratio %.2fx'
              % (args.entries, ', '.join('%.1f' % m for m in ms),
                 statistics.median(ms), rd, statistics.median(ms) / rd))
        if args.symbols:
            print('  perf of the last build, by object and symbol:')
            report(data, args.symbols, args.callers)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--entries', type=int, default=100000)
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--symbols', type=int, default=0)
    p.add_argument('--callers', action='store_true',
                   help='record call graphs and show who called each '
                   'symbol (lines, not symbols, then count for --symbols)')
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
