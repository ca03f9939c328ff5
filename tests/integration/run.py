#!/usr/bin/python3
"""
Run the vfs_fastcase integration tests against a private Debian smbd.

    /usr/bin/python3 tests/integration/run.py --build build [--filter SUBSTR]

As root. The script runs itself again inside new network and mount
namespaces (unshare --net --mount --propagation private): loopback only, so
smbd can listen on 127.0.0.1:445 (Samba's Python client dials no other
port) without meeting a system smbd, and the VFS modules overlay that makes
smbd load <build>/fastcase.so is seen by nobody else.

The outer process supervises: it stops every smbd the tests started if the
inner run dies or exceeds --timeout, and writes back the host-wide sysctls
the tests changed (harness.set_sysctl records them in /run/fastcase-it): at
its end, and at its next start for a run that was killed.

The last line printed is "N passed, N failed" (", N skipped" when any were
skipped). Exit status 0 only when something passed and nothing failed; 5
when --filter selects no test, 1 for any other failure (a selection that
was skipped entirely included).
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

# exit status when --filter selects no test (as pytest's "no tests
# collected"): ./waf test --filter tells it from a failure
NONE_SELECTED = 5


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--build', required=True,
                   help='the build directory holding fastcase.so')
    p.add_argument('--filter', default='',
                   help='run only tests whose id contains this')
    p.add_argument('--timeout', type=int, default=1800,
                   help='seconds before the whole run is stopped')
    p.add_argument('-q', '--quiet', action='store_true',
                   help='one line per test, no unittest chatter')
    return p.parse_args()


# ---------------------------------------------------------------------------
# outside the namespaces: supervise
# ---------------------------------------------------------------------------

def supervise(args):
    if os.geteuid() != 0:
        sys.exit('run.py: must run as root (namespaces, bind mount, smbd)')
    build = os.path.abspath(args.build)
    if not os.path.isfile(os.path.join(build, 'fastcase.so')):
        print('run.py: %s/fastcase.so does not exist: run ./waf build'
              % build)
        print('0 passed, 1 failed')
        return 1
    fd, registry = tempfile.mkstemp(prefix='fastcase-it-registry-')
    os.close(fd)
    harness.restore_stale_sysctls()
    sysctls = harness.new_sysctl_record()
    env = dict(os.environ, **{harness.NS_MARKER: '1',
                              harness.PID_REGISTRY_ENV: registry,
                              harness.SYSCTL_RECORD_ENV: sysctls})
    cmd = harness.unshare_command(net=True) + [
        harness.PYTHON, os.path.abspath(__file__), '--build', build,
        '--timeout', str(args.timeout)]
    if args.filter:
        cmd += ['--filter', args.filter]
    if args.quiet:
        cmd.append('--quiet')
    # Ctrl-C reaches the child too (same process group); it cleans up and
    # exits, and we wait for it.
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = subprocess.Popen(cmd, env=env)

    def forward(signum, frame):
        child.send_signal(signum)
    signal.signal(signal.SIGTERM, forward)
    try:
        try:
            rc = child.wait(args.timeout)
        except subprocess.TimeoutExpired:
            print('run.py: the run exceeded %ds: stopping it'
                  % args.timeout, flush=True)
            harness.kill_registered(registry)
            child.terminate()
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            print('0 passed, 1 failed')
            rc = 1
    finally:
        harness.kill_registered(registry)
        harness.remove_registered(registry)
        os.unlink(registry)
        harness.restore_sysctls(sysctls)
        signal.signal(signal.SIGINT, old_int)
    if rc < 0:
        print('run.py: the test run died of signal %d' % -rc)
        print('0 passed, 1 failed')
        rc = 1
    return rc


# ---------------------------------------------------------------------------
# inside the namespaces: run the tests
# ---------------------------------------------------------------------------

class Result(unittest.TextTestResult):
    """TextTestResult that keeps one outcome per test id."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = {}
        self._started = {}

    def _set(self, test, outcome):
        tid = test.id()
        if self.outcomes.get(tid) == 'failed':
            return
        self.outcomes[tid] = outcome

    def startTest(self, test):
        self._started[test.id()] = time.monotonic()
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, 'passed')

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[test.id()] = 'failed'

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[test.id()] = 'failed'

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(test, 'skipped')

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, 'passed')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcomes[test.id()] = 'failed'

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.outcomes[test.id()] = 'failed'


def iter_tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_tests(t)
        else:
            yield t


def loopback_and_overlay(overlay):
    harness.loopback_up()
    overlay.setup()


def _interrupted(signum, frame):
    raise KeyboardInterrupt('signal %d' % signum)


def run_tests(args):
    # The supervisor's SIGTERM unwinds like Ctrl-C: finally blocks run.
    signal.signal(signal.SIGTERM, _interrupted)
    build = os.path.abspath(args.build)
    os.environ[harness.BUILD_ENV] = build
    work = harness.make_tmpdir('fastcase-it-vfs-')
    overlay = harness.VfsOverlay(build, work)
    try:
        try:
            loopback_and_overlay(overlay)
        except Exception as e:
            print('run.py: cannot set up: %s' % e)
            print('0 passed, 1 failed', flush=True)
            return 1
        loader = unittest.TestLoader()
        suite = loader.discover(HERE, pattern='test_*.py', top_level_dir=HERE)
        tests = [t for t in iter_tests(suite)
                 if not args.filter or args.filter in t.id()
                 or isinstance(t, unittest.loader._FailedTest)]
        if not tests:
            # a renamed class must not make a run pass on nothing
            print('run.py: no test id contains %r' % args.filter)
            print('0 passed, 0 failed', flush=True)
            return NONE_SELECTED
        runner = unittest.TextTestRunner(stream=sys.stdout,
                                         verbosity=1 if args.quiet else 2,
                                         resultclass=Result)
        if args.quiet:
            runner.verbosity = 0
        result = runner.run(unittest.TestSuite(tests))
    finally:
        overlay.teardown()
        harness.remove_tree(work)
    counts = {'passed': 0, 'failed': 0, 'skipped': 0}
    print()
    for tid, outcome in result.outcomes.items():
        counts[outcome] += 1
        print('%-7s %s' % (outcome.upper(), tid))
    line = '%d passed, %d failed' % (counts['passed'], counts['failed'])
    if counts['skipped']:
        line += ', %d skipped' % counts['skipped']
    nothing = counts['passed'] + counts['failed'] == 0
    if nothing:
        print('run.py: no test ran: the %d selected were skipped'
              % len(tests))
    print(line, flush=True)
    return 1 if counts['failed'] or nothing else 0


def main():
    args = parse_args()
    if os.environ.get(harness.NS_MARKER) == '1':
        return run_tests(args)
    return supervise(args)


if __name__ == '__main__':
    sys.exit(main())
