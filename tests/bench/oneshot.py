"""
Scaffolding of the benchmark scripts that each answer one question
(profile_lookup.py, bench_listing.py, fresh_process.py): a private smbd
in the namespaces of tests/integration/harness.py, serving shares of a
tree in a temporary directory that goes away with it.

    def run(args):
        with oneshot.Server(args.build, 'fastcase-example-') as server:
            big = server.fill('big', ('File_%07d.txt' % i for i in ...))
            smbd = server.start({'fc': {'path': server.tree, ...}})
            ...

    oneshot.main(__file__, parser, run)
"""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import harness  # noqa: E402


class Server:
    """The temporary tree, the module overlay and at most one smbd; all
    of it stopped and removed on leaving the with block."""

    def __init__(self, build, prefix):
        self.build = build
        self.prefix = prefix
        self.work = None
        self.tree = None
        self.overlay = None
        self.smbd = None

    def __enter__(self):
        harness.loopback_up()
        self.work = harness.make_tmpdir(self.prefix)
        self.tree = os.path.join(self.work, 'tree')
        os.makedirs(self.tree)
        self.overlay = harness.VfsOverlay(self.build, self.work)
        self.overlay.setup()
        return self

    def __exit__(self, *exc):
        try:
            if self.smbd is not None:
                self.smbd.stop()
                self.smbd.cleanup()
        finally:
            self.overlay.teardown()
            harness.remove_tree(self.work)
        return False

    def fill(self, subdir, names):
        """Empty files of the given names in tree/subdir, made locally."""
        path = os.path.join(self.tree, subdir)
        os.makedirs(path)
        for name in names:
            os.close(os.open(os.path.join(path, name),
                             os.O_CREAT | os.O_WRONLY, 0o644))
        return path

    def start(self, shares):
        self.smbd = harness.Smbd(shares, prefix=self.prefix + 'smbd-')
        self.smbd.start()
        return self.smbd


def perf_record(pids, fn, out, freq, call_graph=False):
    """perf samples (cpu-clock, freq per second) of the processes pids
    into the file out while fn runs; with call_graph, with their callers
    (DWARF unwinding: Debian's libraries have no frame pointers)."""
    graph = ['--call-graph', 'dwarf,16384'] if call_graph else []
    perf = subprocess.Popen(['perf', 'record', '-e', 'cpu-clock'] + graph +
                            ['-F', str(freq), '-p',
                             ','.join(str(p) for p in pids), '-o', out],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        fn()
    finally:
        perf.send_signal(2)
        perf.wait()


def main(script, parser, run):
    """Parse the arguments (parser must have --build), move into the
    test namespaces (re-running the script there) and run."""
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    if not harness.in_namespace():
        harness.reexec_in_namespace(script, sys.argv[1:], net=True)
    run(args)
