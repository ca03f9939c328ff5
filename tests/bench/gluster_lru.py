#!/usr/bin/python3
"""
How long a listing of a large directory takes through GlusterFS's FUSE
client, with its default lru-limit (65,536 inodes) and with lru-limit=0.

A private volume (tests/integration/cluster.py), two FUSE mounts of it,
one with each setting; each mount makes N files in a directory of its own
(as an smbd node makes the files its clients create), then lists it
ROUNDS times, by getdents (the bench helper) and by os.listdir().

usage: gluster_lru.py --build BUILD [--entries 100000] [--rounds 4]
As root: it runs itself again in new mount and network namespaces.
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(TOP, 'tests', 'integration'))
sys.path.insert(0, HERE)

import bench  # noqa: E402
import cluster  # noqa: E402
import harness  # noqa: E402

MOUNTS = (('default', ()), ('lru-limit=0', ('--lru-limit=0',)))


def timed(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def run(args):
    harness.loopback_up()
    work = harness.make_tmpdir('fastcase-gluster-lru-')
    gluster = cluster.Gluster(os.path.join(work, 'gluster'))
    try:
        os.mkdir(gluster.tmp)
        gluster.start(cluster.FRESH_METADATA)
        helper = bench.build_helper(args.build)
        dirs = {}
        for n, (label, options) in enumerate(MOUNTS):
            mnt = gluster.mount(os.path.join(work, 'mnt%d' % n), *options)
            dirs[label] = os.path.join(mnt, 'd%d' % n)
            os.mkdir(dirs[label])
            took = timed(lambda: subprocess.run(
                [helper, 'fill', dirs[label], str(args.entries)],
                check=True))
            bench.log('%s: %d files made in %.1f s'
                      % (label, args.entries, took))
        for r in range(args.rounds):
            for label, d in dirs.items():
                by_getdents = timed(lambda: bench.c_readdir(helper, d, 1))
                by_listdir = timed(lambda: os.listdir(d))
                bench.log('%-12s round %d: getdents %.2f s, listdir %.2f s'
                          % (label, r, by_getdents, by_listdir))
    finally:
        gluster.stop()
        harness.remove_tree(work)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--build', required=True)
    p.add_argument('--entries', type=int, default=100000)
    p.add_argument('--rounds', type=int, default=4)
    argv = sys.argv[1:]
    args = p.parse_args(argv)
    args.build = os.path.abspath(args.build)
    if not harness.in_namespace():
        harness.reexec_in_namespace(__file__, argv, net=True)
    run(args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
