#!/usr/bin/python3
"""
Where the machine's time goes when many clients share one directory:
--clients client processes (one smbd process each) run ./waf bench's
concurrency mix (wrong-case open, miss, create, exact-case open) on a
directory of --entries entries (sensitive's in a twin directory, as in the
bench), sensitive and fastcase in turn; for each,
the operations per second, the machine's CPU split from /proc/stat, and a
system-wide perf profile of the smbd processes (self time by symbol, us
per operation) over the middle of the run. Prints the symbols whose time
grew most from sensitive to fastcase. --by-command: the time of every
process (idle included, as "swapper") by command instead; --syscalls: the
system calls of every process per operation, by name (perf stat of the
syscalls:sys_enter_* tracepoints), instead of a profile: counting them
slows the machine, so the operations per second are then not comparable
with other runs, but the calls per operation are exact.

usage: profile_concurrency.py --build BUILD [--clients N] [--entries N]
                              [--seconds S] [--top N]
                              [--by-command | --syscalls]
"""

import argparse
import collections
import os
import re
import subprocess
import threading
import time

import bench
import oneshot
from bench import Client

FREQ = 2999
CONFIGS = ('sensitive', 'fastcase')


def cpu_times():
    with open('/proc/stat') as f:
        return [int(x) for x in f.readline().split()[1:]]


def perf_samples(out, seconds, by_command):
    """perf samples of the whole machine for seconds: {(object, symbol):
    samples} of the smbd processes, or {('command', name): samples} of
    every process."""
    subprocess.run(['perf', 'record', '-e', 'cpu-clock', '-F', str(FREQ),
                    '-a', '-o', out, '--', 'sleep', str(seconds)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if by_command:
        sort = ['--sort', 'comm', '-F', 'sample,comm']
        pattern = r'\s*(\d+)\s+()(.*)$'
    else:
        sort = ['--comm', 'smbd', '--sort', 'dso,sym', '-F',
                'sample,dso,sym']
        pattern = r'\s*(\d+)\s+(\S+)\s+\[.\]\s+(.*)$'
    r = subprocess.run(['perf', 'report', '-i', out, '--stdio'] + sort,
                       capture_output=True, text=True)
    samples = collections.Counter()
    for line in r.stdout.splitlines():
        m = re.match(pattern, line)
        if m:
            key = (m.group(2) or 'command', m.group(3).strip())
            samples[key] += int(m.group(1))
    return samples


def syscall_counts(seconds):
    """System calls of every process for seconds, by name, scaled so
    that measure() turns them into calls per operation."""
    r = subprocess.run(['perf', 'stat', '-a', '-x', ',', '-e',
                        'syscalls:sys_enter_*', '--', 'sleep', str(seconds)],
                       capture_output=True, text=True)
    counts = collections.Counter()
    for line in r.stderr.splitlines():
        f = line.split(',')
        if len(f) > 2 and f[0].isdigit():
            counts[('syscall', f[2].split(':sys_enter_')[-1])] += (
                int(f[0]) * FREQ / 1e6)
    return counts


def measure(smbd, tree, args, config, work):
    window = max(1.0, args.seconds - 3)
    found = {}

    def record():
        time.sleep(2)
        if args.syscalls:
            found['samples'] = syscall_counts(window)
        else:
            found['samples'] = perf_samples(
                os.path.join(work, 'perf.data'), window, args.by_command)

    before = cpu_times()
    t = threading.Thread(target=record)
    t.start()
    r = bench.measure_concurrency(smbd, tree, args.entries, args.clients,
                                  config, args.seconds)
    t.join()
    d = [b - a for a, b in zip(before, cpu_times())]
    total = sum(d)
    rate = len(r['times']) / r['seconds']
    print('%-9s %6.0f ops/s; CPU: user %.0f%%, system %.0f%%, idle '
          '%.0f%%, softirq %.0f%%; errors %d' % (
              config, rate, 100 * d[0] / total, 100 * d[2] / total,
              100 * (d[3] + d[4]) / total, 100 * d[6] / total, r['errors']))
    ops = rate * window
    return {k: v * 1e6 / FREQ / ops
            for k, v in found.get('samples', {}).items()}


def run(args):
    with oneshot.Server(args.build, 'fastcase-pconc-') as server:
        bench.FILES[args.entries] = args.entries
        for d in (bench.size_dir(args.entries),
                  bench.twin_dir(args.entries)):
            server.fill(d, (bench.file_name(i)
                            for i in range(args.entries)))
        smbd = server.start({
            'sensitive': {'path': server.tree, 'case sensitive': 'yes'},
            'fastcase': {'path': server.tree, 'case sensitive': 'no',
                         'vfs objects': 'fastcase'}})
        holders = [Client(smbd, c) for c in CONFIGS]
        us = {c: measure(smbd, server.tree, args, c, server.work)
              for c in CONFIGS}
        del holders
    s, f = us['sensitive'], us['fastcase']
    print('%s: sensitive %.1f, fastcase %.1f' % (
        'system calls per operation, every process' if args.syscalls else
        'time per operation by command, us' if args.by_command else
        'smbd self time, us per operation',
        sum(s.values()), sum(f.values())))
    for k in sorted(set(s) | set(f),
                    key=lambda k: -(f.get(k, 0) - s.get(k, 0)))[:args.top]:
        print('  %7.2f %7.2f %+7.2f  %s %s' % (
            s.get(k, 0), f.get(k, 0), f.get(k, 0) - s.get(k, 0), k[0],
            k[1][:60]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--clients', type=int, default=32)
    p.add_argument('--entries', type=int, default=100000)
    p.add_argument('--seconds', type=float, default=8)
    p.add_argument('--top', type=int, default=20)
    p.add_argument('--by-command', action='store_true',
                   help='the time of every process, by command')
    p.add_argument('--syscalls', action='store_true',
                   help='system calls of every process, by name')
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
