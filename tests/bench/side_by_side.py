#!/usr/bin/python3
"""
Side-by-side latency of smbd's name lookups in three configurations on the
same directories, one private smbd, a fresh connection (smbd process) per
configuration and size:

  sensitive  case sensitive = yes            (the limit)
  stock      case sensitive = no             (what users run today)
  fastcase   case sensitive = no + fastcase

Operations, each on names no per-process cache has seen: wrong-case open
(on "sensitive": the same open in on-disk case), miss (open of a name that
does not exist), create (FILE_CREATE of a new name), exact-name directory
query (QUERY_DIRECTORY with a name, no wildcard).

usage: side_by_side.py --build BUILD [--sizes 1000,10000,100000]
                       [--iterations N] [--budget SECONDS]
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import harness  # noqa: E402

from samba import NTSTATUSError  # noqa: E402

FILE_OPEN = 1
FILE_CREATE = 2
READ_ATTR = 0x80
SHARE_ALL = 7
CONFIGS = ['sensitive', 'stock', 'fastcase']
OPS = ['wrong-case open', 'miss', 'create', 'exact-name find']


def fill(path, n):
    os.makedirs(path, exist_ok=True)
    for i in range(n):
        fd = os.open(os.path.join(path, 'File_%07d_data.txt' % i),
                     os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)


def one_op(conn, config, d, op, i):
    on_disk = 'File_%07d_data.txt' % i
    asked = on_disk if config == 'sensitive' else on_disk.upper()
    if op == 'wrong-case open':
        fnum = conn.create(d + '\\' + asked, DesiredAccess=READ_ATTR,
                           ShareAccess=SHARE_ALL,
                           CreateDisposition=FILE_OPEN)
        conn.close(fnum)
    elif op == 'miss':
        try:
            conn.create(d + '\\Missing_%07d.txt' % i,
                        DesiredAccess=READ_ATTR, ShareAccess=SHARE_ALL,
                        CreateDisposition=FILE_OPEN)
            raise RuntimeError('miss found a file')
        except NTSTATUSError:
            pass
    elif op == 'create':
        fnum = conn.create(d + '\\New_%s_%07d.txt' % (config, i),
                           DesiredAccess=READ_ATTR | 0x2,
                           ShareAccess=SHARE_ALL,
                           CreateDisposition=FILE_CREATE)
        conn.close(fnum)
    elif op == 'exact-name find':
        found = conn.list(d, mask=asked)
        if len(found) != 1:
            raise RuntimeError('find returned %d entries' % len(found))


def measure(smbd, share, config, d, size, op, iterations, budget):
    conn = smbd.conn(share)
    conn.list(d, mask='File_0000000_data.txt')   # warm the connection
    times = []
    deadline = time.monotonic() + budget
    step = max(1, size // (iterations + 1))
    for k in range(iterations):
        i = (k * step + 7919 * (OPS.index(op) + 1)) % size
        t0 = time.perf_counter()
        one_op(conn, config, d, op, i)
        times.append(time.perf_counter() - t0)
        if time.monotonic() > deadline:
            break
    return times


def main_inner(args):
    harness.loopback_up()
    work = harness.make_tmpdir('fastcase-bench-')
    overlay = harness.VfsOverlay(args.build, work)
    overlay.setup()
    tree = os.path.join(work, 'tree')
    sizes = [int(s) for s in args.sizes.split(',')]
    for n in sizes:
        fill(os.path.join(tree, 'd%d' % n), n)
    base = {'path': tree}
    shares = {
        'sensitive': dict(base, **{'case sensitive': 'yes'}),
        'stock': dict(base, **{'case sensitive': 'no'}),
        'fastcase': dict(base, **{'case sensitive': 'no',
                                  'vfs objects': 'fastcase'}),
    }
    smbd = harness.Smbd(shares, prefix='fastcase-bench-smbd-')
    results = {}
    holder = None
    try:
        smbd.start()
        # one client stays connected throughout, as on a server in use:
        # the cache lives while any smbd process has it open
        holder = smbd.conn('fastcase')
        holder.list('')
        for n in sizes:
            d = 'd%d' % n
            for op in OPS:
                for config in CONFIGS:
                    t = measure(smbd, config, config, d, n, op,
                                args.iterations, args.budget)
                    results[(n, op, config)] = t
    finally:
        smbd.stop()
        smbd.cleanup()
        overlay.teardown()
        harness.remove_tree(work)

    print('| size | operation | config | n | p50 ms | p99 ms | '
          'p50 / sensitive |')
    print('|---:|---|---|---:|---:|---:|---:|')
    for n in sizes:
        for op in OPS:
            ref = statistics.median(results[(n, op, 'sensitive')])
            for config in CONFIGS:
                t = sorted(results[(n, op, config)])
                p50 = statistics.median(t)
                p99 = t[min(len(t) - 1, int(len(t) * 0.99))]
                print('| %d | %s | %s | %d | %.3f | %.3f | %.2fx |'
                      % (n, op, config, len(t), p50 * 1000, p99 * 1000,
                         p50 / ref))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', required=True)
    ap.add_argument('--sizes', default='1000,10000,100000')
    ap.add_argument('--iterations', type=int, default=200)
    ap.add_argument('--budget', type=float, default=20.0,
                    help='seconds per (size, operation, config)')
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if not harness.in_namespace():
        harness.reexec_in_namespace(__file__, sys.argv[1:], net=True)
    return main_inner(args)


if __name__ == '__main__':
    sys.exit(main())
