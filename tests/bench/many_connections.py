#!/usr/bin/python3
"""
Many connections of one user to one fastcase share while local programs
change the directory (issue 17, item 6): does every smbd process stay O(1)?

Each connection has its own smbd process, and each process makes its
inotify instance at its first request, counted against the connected
user's fs.inotify.max_user_instances (128 by default). Processes past
that limit have no watch: they validate a directory by its times, which
never settle while a local program creates and deletes a file in it
every --interval seconds, so they hand lookups to smbd's scan (see
`fastcase:rebuild interval`).

One smbd serves the share `fc` (fastcase) of a directory of --entries
files. --connections connections are made and each makes one first
lookup, in order; a local writer then starts. Each connection in turn
makes --lookups wrong-case opens of existing files (each must succeed),
for --rounds rounds. Reports, for the first 100 and the last 100
connections, the median smbd CPU time per lookup (/proc/PID/task/*/
schedstat) and how many of those processes hold an inotify instance,
and the ratio last/first (issue 17's target: at most 1.5x). Exit status
1 when a lookup failed.

fs.inotify.max_user_instances is set to --instances (128, the kernel's
default) for the run and restored after it, so that processes past the
limit are measured whatever this machine's setting.

usage: many_connections.py --build BUILD [--connections N] [--entries N]
           [--lookups N] [--rounds N] [--interval S] [--instances N]
"""

import argparse
import contextlib
import statistics
import threading

import oneshot
from bench import Client
from oneshot import harness

READ_ATTR = 0x80
SHARE_ALL = 7
FILE_OPEN = 1
GROUP = 100
INSTANCES = '/proc/sys/fs/inotify/max_user_instances'


@contextlib.contextmanager
def inotify_instances(limit):
    """fs.inotify.max_user_instances = limit while the block runs."""
    with open(INSTANCES) as f:
        old = f.read().strip()
    with open(INSTANCES, 'w') as f:
        f.write(str(limit))
    try:
        yield
    finally:
        with open(INSTANCES, 'w') as f:
            f.write(old)


def wrong_case_open(client, i, entries):
    path = 'big\\FILE_%07d_DATA.TXT' % ((i * 7919) % entries)
    fnum = client.conn.create(path, DesiredAccess=READ_ATTR,
                              ShareAccess=SHARE_ALL,
                              CreateDisposition=FILE_OPEN)
    client.conn.close(fnum)


def cpu_per_lookup(clients, args):
    """Median smbd CPU per lookup of each client, microseconds."""
    per_client = [[] for _ in clients]
    k = 0
    for _ in range(args.rounds):
        for n, c in enumerate(clients):
            t0 = c.cpu_ns()
            for _ in range(args.lookups):
                wrong_case_open(c, k, args.entries)
                k += 1
            per_client[n].append((c.cpu_ns() - t0) / 1e3 / args.lookups)
    return [statistics.median(x) for x in per_client]


def report(clients, cpu):
    groups = {'first %d' % GROUP: slice(0, GROUP),
              'last %d' % GROUP: slice(len(clients) - GROUP, None)}
    medians = {}
    print('| connections | median smbd CPU us per lookup | with inotify |')
    print('|---|---:|---:|')
    for label, sl in groups.items():
        medians[label] = statistics.median(cpu[sl])
        watching = sum(1 for c in clients[sl] if harness.has_inotify(c.pid))
        print('| %s | %.0f | %d of %d |' % (label, medians[label],
                                            watching, len(clients[sl])))
    first, last = medians.values()
    print('last / first: %.2fx (target: at most 1.5x)' % (last / first))


def run(args):
    if args.connections < 2 * GROUP:
        raise SystemExit('--connections must be at least %d' % (2 * GROUP))
    with inotify_instances(args.instances), \
            oneshot.Server(args.build, 'fastcase-many-') as server:
        big = server.fill('big', ('File_%07d_data.txt' % i
                                  for i in range(args.entries)))
        smbd = server.start({'fc': {'path': server.tree,
                                    'case sensitive': 'no',
                                    'vfs objects': 'fastcase'}})
        clients = []
        for n in range(args.connections):
            c = Client(smbd, 'fc')
            wrong_case_open(c, n, args.entries)
            clients.append(c)
        stop = threading.Event()
        writer = threading.Thread(target=harness.create_and_delete_until,
                                  args=(big, args.interval, stop))
        writer.start()
        try:
            print('%d connections of one user, %d entries, a local '
                  'create or delete every %.0f ms; %d rounds of %d '
                  'wrong-case opens per connection'
                  % (args.connections, args.entries, args.interval * 1e3,
                     args.rounds, args.lookups))
            cpu = cpu_per_lookup(clients, args)
        finally:
            stop.set()
            writer.join()
        report(clients, cpu)
        for c in clients:
            c.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--build', required=True)
    p.add_argument('--connections', type=int, default=300)
    p.add_argument('--entries', type=int, default=10000)
    p.add_argument('--lookups', type=int, default=10)
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--interval', type=float, default=0.005)
    p.add_argument('--instances', type=int, default=128)
    oneshot.main(__file__, p, run)


if __name__ == '__main__':
    main()
