#!/usr/bin/python3
"""
Where the server's time goes in a wrong-case open and a miss on a fastcase
share: perf samples (cpu-clock) of the one smbd process serving a client,
by the shared object the sample fell in (self time; Debian's libraries
have no frame pointers, so time in libc and the kernel cannot be split
between smbd and the module). fastcase.so and libtdb.so bound the module's
user-space cost from above (smbd uses TDB too).

usage: profile_lookup.py --build BUILD [--entries N] [--ops N] [--symbols N]

--symbols N: also the N symbols with the most samples (kernel included).
"""

import argparse
import os
import subprocess
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


def profile(pid, fn, out, symbols):
    perf = subprocess.Popen(['perf', 'record', '-e', 'cpu-clock',
                             '-F', '4999', '-p', str(pid), '-o', out],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        import time
        time.sleep(0.5)
        fn()
    finally:
        perf.send_signal(2)
        perf.wait()
    r = subprocess.run(['perf', 'report', '-i', out, '--stdio',
                        '--sort', 'dso'], capture_output=True, text=True)
    rows = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].endswith('%'):
            rows.append((float(parts[0][:-1]), parts[1]))
    syms = []
    if symbols > 0:
        r = subprocess.run(['perf', 'report', '-i', out, '--stdio',
                            '--sort', 'dso,sym'],
                           capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if line.strip().endswith('%') or '%' not in line:
                continue
            if line.lstrip().startswith('#'):
                continue
            syms.append(line.strip())
            if len(syms) == symbols:
                break
    return rows, syms


def main_inner(args):
    harness.loopback_up()
    work = harness.make_tmpdir('fastcase-profile-')
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
        smbd = harness.Smbd({'fc': {'path': tree, 'case sensitive': 'no',
                                    'vfs objects': 'fastcase'}},
                            prefix='fastcase-profile-smbd-')
        smbd.start()
        c = Client(smbd, 'fc')
        try:
            c.conn.loadfile('big\\MISSING')
        except NTSTATUSError:
            pass

        def opens():
            for i in range(args.ops):
                f = c.conn.create('big\\FILE_%07d_DATA.TXT'
                                  % (i % args.entries),
                                  DesiredAccess=READ_ATTR,
                                  ShareAccess=SHARE_ALL,
                                  CreateDisposition=FILE_OPEN)
                c.conn.close(f)

        def misses():
            for i in range(args.ops):
                try:
                    c.conn.create('big\\Missing_%07d.txt' % i,
                                  DesiredAccess=READ_ATTR,
                                  ShareAccess=SHARE_ALL,
                                  CreateDisposition=FILE_OPEN)
                except NTSTATUSError:
                    pass

        for name, fn in (('wrong-case open', opens), ('miss', misses)):
            rows, syms = profile(c.pid, fn, os.path.join(work, 'perf.data'),
                                 args.symbols)
            print('%s, %d ops in a directory of %d entries: samples of '
                  'the smbd process by object' % (name, args.ops,
                                                  args.entries))
            for pct, dso in rows[:12]:
                print('  %6.2f%%  %s' % (pct, dso))
            if syms:
                print('  by symbol:')
                for line in syms:
                    print('    ' + line)
    finally:
        if smbd is not None:
            smbd.stop()
        overlay.teardown()
        harness.remove_tree(work)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--entries', type=int, default=100000)
    p.add_argument('--ops', type=int, default=3000)
    p.add_argument('--symbols', type=int, default=0)
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    if not harness.in_namespace():
        harness.reexec_in_namespace(__file__, sys.argv[1:], net=True)
    main_inner(args)


if __name__ == '__main__':
    main()
