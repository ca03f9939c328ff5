#!/usr/bin/python3
"""
What an idle fastcase process pays for changes other programs make in a
directory it watches: the smbd process has looked up a name there and
then waits, while this script creates files in the directory locally, one
every --interval seconds. Reported: that process's CPU time per create
(from /proc/PID/task/*/schedstat); then its lookups must find a sample of
the files by wrong case.

usage: idle_events.py --build BUILD [--entries N] [--creates N]
                      [--interval SECONDS]
"""

import argparse
import os
import time

import oneshot
from bench import Client

from samba import NTSTATUSError

READ_ATTR = 0x80
SHARE_ALL = 7
FILE_OPEN = 1


def run(args):
    with oneshot.Server(args.build, 'fastcase-idle-') as server:
        big = server.fill('big', ('File_%07d.txt' % i
                                  for i in range(args.entries)))
        smbd = server.start({'fc': {'path': server.tree,
                                    'case sensitive': 'no',
                                    'vfs objects': 'fastcase'}})
        c = Client(smbd, 'fc')
        try:
            c.conn.loadfile('big\\MISSING')
        except NTSTATUSError:
            pass
        time.sleep(0.5)
        cpu0 = c.cpu_ns()
        for i in range(args.creates):
            os.close(os.open(os.path.join(big, 'Outside_%06d.txt' % i),
                             os.O_CREAT | os.O_WRONLY, 0o644))
            time.sleep(args.interval)
        time.sleep(0.2)
        cpu = (c.cpu_ns() - cpu0) / args.creates / 1000
        print('idle smbd process: %.1f us of CPU per create made '
              'outside smbd (%d creates, one every %.1f ms, in a '
              'directory of %d entries)' % (cpu, args.creates,
                                            args.interval * 1000,
                                            args.entries))
        for i in range(0, args.creates, max(1, args.creates // 50)):
            f = c.conn.create('big\\OUTSIDE_%06d.TXT' % i,
                              DesiredAccess=READ_ATTR,
                              ShareAccess=SHARE_ALL,
                              CreateDisposition=FILE_OPEN)
            c.conn.close(f)
        print('then its lookups found every file sampled by wrong case')


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--entries', type=int, default=10000)
    p.add_argument('--creates', type=int, default=2000)
    p.add_argument('--interval', type=float, default=0.001)
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
