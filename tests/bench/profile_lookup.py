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
import re
import subprocess

import oneshot
from bench import Client

from samba import NTSTATUSError

READ_ATTR = 0x80
SHARE_ALL = 7
FILE_OPEN = 1


def profile(pid, fn, out, symbols):
    oneshot.perf_record([pid], fn, out, 4999)
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
            if not re.match(r'\s*\d+\.\d+%\s', line):
                continue
            syms.append(line.strip())
            if len(syms) == symbols:
                break
    return rows, syms


def run(args):
    with oneshot.Server(args.build, 'fastcase-profile-') as server:
        server.fill('big', ('File_%07d_data.txt' % i
                            for i in range(args.entries)))
        smbd = server.start({'fc': {'path': server.tree,
                                    'case sensitive': 'no',
                                    'vfs objects': 'fastcase'}})
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
            rows, syms = profile(c.pid, fn,
                                 os.path.join(server.work, 'perf.data'),
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--entries', type=int, default=100000)
    p.add_argument('--ops', type=int, default=3000)
    p.add_argument('--symbols', type=int, default=0)
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
