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
grew most from sensitive to fastcase.

usage: profile_concurrency.py --build BUILD [--clients N] [--entries N]
                              [--seconds S] [--top N]
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


def smbd_profile(out, seconds):
    subprocess.run(['perf', 'record', '-e', 'cpu-clock', '-F', str(FREQ),
                    '-a', '-o', out, '--', 'sleep', str(seconds)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = subprocess.run(['perf', 'report', '-i', out, '--stdio', '--comm',
                        'smbd', '--sort', 'dso,sym', '-F', 'sample,dso,sym'],
                       capture_output=True, text=True)
    samples = collections.Counter()
    for line in r.stdout.splitlines():
        m = re.match(r'\s*(\d+)\s+(\S+)\s+\[.\]\s+(.*)$', line)
        if m:
            samples[(m.group(2), m.group(3).strip())] += int(m.group(1))
    return samples


def measure(smbd, tree, args, config, work):
    window = max(1.0, args.seconds - 3)
    found = {}

    def record():
        time.sleep(2)
        found['samples'] = smbd_profile(os.path.join(work, 'perf.data'),
                                        window)

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
    print('smbd self time, us per operation: sensitive %.1f, fastcase %.1f'
          % (sum(s.values()), sum(f.values())))
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
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
