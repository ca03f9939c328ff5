#!/usr/bin/python3
"""
Where fastcase's extra server time goes, symbol by symbol: perf samples
(cpu-clock) of one smbd process doing --ops operations on a
`case sensitive = yes` share (names in on-disk case) and of one doing the
same operations on a fastcase share (names in upper case), as microseconds
per operation by shared object and symbol, and the symbols whose time
grew most. The two processes take turns, one operation each, and are
placed as ./waf bench places them (client on one CPU, smbd on another).
Debian's libraries have no frame pointers: self time only.

With --syscalls, the system calls instead: `perf trace -s` of the two
processes, as calls per operation of each (exact counts, unlike times).

usage: profile_diff.py --build BUILD
                       [--op wrong|miss|deep|deep-new|create|rename]
                       [--entries N] [--ops N] [--top N] [--syscalls]
"""

import argparse
import collections
import os
import re
import signal
import subprocess
import time

import oneshot
from bench import (FILE_CREATE, READ_ATTR, WRITE_DATA, Client, Placement,
                   open_close)

from samba import NTSTATUSError

FREQ = 4999
DEEP = ['Dir%d' % k for k in range(9)] + ['leaf']


def deep_chain(i):
    """deep-new: a chain of directories per operation, as ./waf bench
    walks them (none seen before by the measured process)."""
    return ['Chain%05d_L%d' % (i, k) for k in range(1, 9)]


def samples_per_op(pids, fn, out, ops):
    """{pid: {(object, symbol): microseconds per operation}} while fn
    runs."""
    oneshot.perf_record(pids, fn, out, FREQ)
    r = subprocess.run(['perf', 'report', '-i', out, '--stdio',
                        '--sort', 'pid,dso,sym', '-F',
                        'sample,pid,dso,sym'],
                       capture_output=True, text=True)
    us = {p: collections.Counter() for p in pids}
    for line in r.stdout.splitlines():
        m = re.match(r'\s*(\d+)\s+(\d+):\S*\s+(\S+)\s+\[.\]\s+(.*)$',
                     line)
        if m and int(m.group(2)) in us:
            us[int(m.group(2))][(m.group(3), m.group(4).strip())] += (
                int(m.group(1)) * 1e6 / FREQ / ops)
    return us


def path_of(op, share, i):
    upper = share == 'fastcase'
    if op == 'create':
        return 'big\\New_%s_%07d.txt' % (share, i)
    if op == 'miss':
        return 'big\\Missing_%s_%07d.txt' % (share, i)
    if op == 'deep':
        path = 'big\\' + '\\'.join(DEEP) + '\\F_%05d.txt' % i
    elif op == 'deep-new':
        path = 'big\\' + '\\'.join(deep_chain(i)) + '\\Leaf.txt'
    else:
        path = 'big\\File_%07d_data.txt' % i
    return path.upper() if upper else path


def one_operation(client, op, share, i):
    if op == 'rename':
        # a distinct source per share: they take turns
        src = 'big\\File_%07d_data.txt' % (2 * i + (share == 'fastcase'))
        client.conn.rename(src, 'big\\Renamed_%s_%07d.txt' % (share, i))
        return
    path = path_of(op, share, i)
    try:
        if op == 'create':
            open_close(client.conn, path, READ_ATTR | WRITE_DATA,
                       FILE_CREATE)
        else:
            open_close(client.conn, path)
    except NTSTATUSError:
        if op != 'miss':
            raise


def taking_turns(clients, op, count):
    """The shares take turns, one operation each, each first in every
    other round, as ./waf bench runs them."""
    def run():
        shares = list(clients)
        for i in range(count):
            for share in (shares if i % 2 == 0 else shares[::-1]):
                one_operation(clients[share], op, share, i)
    return run


def run(args):
    with oneshot.Server(args.build, 'fastcase-pdiff-') as server:
        server.fill('big', ('File_%07d_data.txt' % i
                            for i in range(args.entries)))
        for depth in range(1, len(DEEP) + 1):
            names = (['F_%05d.txt' % i for i in range(args.ops)]
                     if depth == len(DEEP) else [])
            server.fill('/'.join(['big'] + DEEP[:depth]), names)
        if args.op == 'deep-new':
            for i in range(args.ops):
                chain = deep_chain(i)
                for depth in range(1, len(chain)):
                    server.fill('/'.join(['big'] + chain[:depth]), [])
                server.fill('/'.join(['big'] + chain), ['Leaf.txt'])
        smbd = server.start({
            'sensitive': {'path': server.tree, 'case sensitive': 'yes'},
            'fastcase': {'path': server.tree, 'case sensitive': 'no',
                         'vfs objects': 'fastcase'}})
        warm = None
        if args.op == 'deep-new':
            # the shared cache knows every chain, as after warm_deep(),
            # and stays open (as ./waf bench's holders keep it)
            warm = Client(smbd, 'fastcase')
            for i in range(args.ops):
                open_close(warm.conn, path_of(args.op, 'fastcase', i))
        placement = Placement(True)
        placement.timed()
        clients = {}
        for share in ('sensitive', 'fastcase'):
            clients[share] = Client(smbd, share)
            placement.serve(clients[share])
            one_operation(clients[share], 'miss', 'warmup_' + share, 0)
        pids = [c.pid for c in clients.values()]
        run_ops = taking_turns(clients, args.op, args.ops)
        if args.syscalls:
            by_pid = syscalls_per_op(pids, run_ops,
                                     os.path.join(server.work, 'trace'),
                                     args.ops)
        else:
            by_pid = samples_per_op(pids, run_ops,
                                    os.path.join(server.work, 'perf.data'),
                                    args.ops)
        per_share = {share: by_pid[c.pid] for share, c in clients.items()}
        for c in list(clients.values()) + ([warm] if warm else []):
            c.close()
        if args.syscalls:
            report_syscalls(per_share, args)
        else:
            report(per_share, args)


def syscalls_per_op(pids, fn, out, ops):
    """{pid: {syscall: calls per operation}} while fn runs."""
    trace = subprocess.Popen(['perf', 'trace', '-s', '-o', out, '-p',
                              ','.join(str(p) for p in pids)],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        fn()
        time.sleep(0.3)
    finally:
        trace.send_signal(signal.SIGINT)
        trace.wait()
    calls = {p: collections.Counter() for p in pids}
    pid = None
    with open(out) as f:
        for line in f:
            m = re.match(r'\s*\S+ \((\d+)\), \d+ events', line)
            if m:
                pid = int(m.group(1))
                continue
            m = re.match(r'\s+([a-z_0-9]+)\s+(\d+)\s+\d+\s+[\d.]+', line)
            if m and pid in calls:
                calls[pid][m.group(1)] += int(m.group(2)) / ops
    return calls


def report_head(per_share, args, what, total_format):
    """The title and the totals; the two tables, sensitive's and
    fastcase's."""
    s, f = per_share['sensitive'], per_share['fastcase']
    print('%s, %d operations, %d entries: %s' % (args.op, args.ops,
                                                 args.entries, what))
    print(('total: sensitive %s, fastcase %s' % (total_format,
                                                 total_format))
          % (sum(s.values()), sum(f.values())))
    return s, f


def report_syscalls(calls, args):
    s, f = report_head(calls, args, 'system calls per operation '
                       '(perf trace -s)', '%.2f')
    print('| system call | sensitive | fastcase | difference |')
    print('|---|---:|---:|---:|')
    for name in sorted(set(s) | set(f),
                       key=lambda n: -(f.get(n, 0) - s.get(n, 0))):
        a, b = s.get(name, 0), f.get(name, 0)
        if a >= 0.005 or b >= 0.005:
            print('| %s | %.2f | %.2f | %+.2f |' % (name, a, b, b - a))


def report(us, args):
    s, f = report_head(us, args, 'smbd self time, us per operation '
                       '(perf, cpu-clock)', '%.1f')
    objects = collections.Counter()
    for share, table in us.items():
        for (dso, _sym), v in table.items():
            objects[(share, dso)] += v
    print('| object | sensitive | fastcase | difference |')
    print('|---|---:|---:|---:|')
    for dso in sorted({d for _s, d in objects},
                      key=lambda d: -objects[('fastcase', d)])[:args.top]:
        a, b = objects[('sensitive', dso)], objects[('fastcase', dso)]
        print('| %s | %.2f | %.2f | %+.2f |' % (dso, a, b, b - a))
    print('| symbol | sensitive | fastcase | difference |')
    print('|---|---:|---:|---:|')
    for key in sorted(set(s) | set(f),
                      key=lambda k: -(f.get(k, 0) - s.get(k, 0)))[:args.top]:
        a, b = s.get(key, 0), f.get(key, 0)
        print('| %s %s | %.2f | %.2f | %+.2f |' % (key[0], key[1][:60],
                                                  a, b, b - a))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--op', choices=('wrong', 'miss', 'deep', 'deep-new',
                                    'create',
                                    'rename'),
                   default='wrong')
    p.add_argument('--syscalls', action='store_true')
    p.add_argument('--entries', type=int, default=100000)
    p.add_argument('--ops', type=int, default=5000)
    p.add_argument('--top', type=int, default=15)
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
