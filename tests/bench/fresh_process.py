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

usage: fresh_process.py --build BUILD [--entries N] [--ops N]
"""

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from bench import Client  # noqa: E402

from samba import NTSTATUSError  # noqa: E402

READ_ATTR = 0x80
SHARE_ALL = 7
FILE_OPEN = 1
SHARES = ('sensitive', 'fastcase')


def minor_faults(pid):
    with open('/proc/%d/stat' % pid) as f:
        return int(f.read().rsplit(')', 1)[1].split()[7])


def open_close(client, path):
    try:
        fnum = client.conn.create(path, DesiredAccess=READ_ATTR,
                                  ShareAccess=SHARE_ALL,
                                  CreateDisposition=FILE_OPEN)
    except NTSTATUSError:
        return
    client.conn.close(fnum)


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
            open_close(c, op_path(kind, s, i, entries))
            cpu[s].append(c.cpu_ns() - t0)
    return {s: (statistics.median(cpu[s]) / 1e3,
                (minor_faults(clients[s].pid) - faults0[s]) / count)
            for s in SHARES}


def main_inner(args):
    harness.loopback_up()
    work = harness.make_tmpdir('fastcase-fresh-')
    overlay = harness.VfsOverlay(args.build, work)
    smbd = None
    overlay.setup()
    try:
        tree = os.path.join(work, 'tree')
        d = os.path.join(tree, 'big')
        os.makedirs(d)
        for i in range(args.entries):
            os.close(os.open(os.path.join(d, 'File_%07d_data.txt' % i),
                             os.O_CREAT | os.O_WRONLY, 0o644))
        smbd = harness.Smbd({
            'sensitive': {'path': tree, 'case sensitive': 'yes'},
            'fastcase': {'path': tree, 'case sensitive': 'no',
                         'vfs objects': 'fastcase'},
        }, prefix='fastcase-fresh-smbd-')
        smbd.start()
        builder = Client(smbd, 'fastcase')
        open_close(builder, 'big\\Build_the_cache.txt')
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
                open_close(clients[s], 'big\\Warmup_%s.txt' % kind[0])
            for label, first in (('first', 0), ('warm', args.ops)):
                r = measure(clients, kind, first, args.ops, args.entries)
                print('| %s | %s | %.0f | %.0f | %.2fx | %.2f | %.2f |'
                      % (kind, label, r['sensitive'][0], r['fastcase'][0],
                         r['fastcase'][0] / r['sensitive'][0],
                         r['sensitive'][1], r['fastcase'][1]))
            for c in clients.values():
                c.close()
        builder.close()
    finally:
        if smbd is not None:
            smbd.stop()
        overlay.teardown()
        harness.remove_tree(work)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--entries', type=int, default=1000000)
    p.add_argument('--ops', type=int, default=250)
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    if not harness.in_namespace():
        harness.reexec_in_namespace(__file__, sys.argv[1:], net=True)
    main_inner(args)


if __name__ == '__main__':
    main()
