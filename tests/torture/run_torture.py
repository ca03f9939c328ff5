#!/usr/bin/python3
"""
smbtorture, stock against fastcase, side by side: the runner behind
./waf torture.

    /usr/bin/python3 tests/torture/run_torture.py [--build build]
        [--only base.casetable,smb2.create] [--ci] [--timeout SECONDS]
        [--docs DIR --command './waf torture --samba 4.22']

As root. It runs tests/integration/run.py --filter test_torture (the
integration runner's network and mount namespaces, VFS overlay and
supervisor) with FASTCASE_TORTURE_FULL=1, so tests/integration/
test_torture.py runs its full list: every smbtorture test on a stock share
and a fastcase share of one private smbd, then the stacked shares, then the
direct checks. At the end it prints the side-by-side table (also written to
<build>/torture-report.md; raw smbtorture output in <build>/torture-out/).

Exit status: run.py's, non-zero when any subtest passes on stock and not on
fastcase, or a direct check differs.

  --only a,b     only smbtorture checks whose label contains a or b
                 (FASTCASE_TORTURE_ONLY); the direct checks still run
  --ci           the CI subset (what ./waf test runs) instead of the full list
  --timeout      for the whole run (default 10800 s); per test and share the
                 limits are FASTCASE_TORTURE_TIMEOUT (900 s) and
                 FASTCASE_TORTURE_CASETABLE_TIMEOUT (1800 s)
  --docs DIR     after a full run, also write DIR/CONFORMANCE.md: the
                 table under a heading naming --command, the start, the
                 duration and the exit status (./waf torture --samba V
                 writes docs/samba-V/)
"""

import argparse
import datetime
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[1])
    p.add_argument('--build', default=os.path.join(TOP, 'build'))
    p.add_argument('--only', default='')
    p.add_argument('--ci', action='store_true')
    p.add_argument('--timeout', type=int, default=10800)
    p.add_argument('--docs')
    p.add_argument('--command', default='./waf torture')
    args = p.parse_args()
    build = os.path.abspath(args.build)
    report = os.path.join(build, 'torture-report.md')
    env = dict(os.environ)
    env['FASTCASE_TORTURE_REPORT'] = report
    env['FASTCASE_TORTURE_OUTDIR'] = os.path.join(build, 'torture-out')
    if not args.ci:
        env['FASTCASE_TORTURE_FULL'] = '1'
    if args.only:
        env['FASTCASE_TORTURE_ONLY'] = args.only
    cmd = [sys.executable, os.path.join(TOP, 'tests/integration/run.py'),
           '--build', build, '--filter', 'test_torture',
           '--timeout', str(args.timeout)]
    if os.path.exists(report):
        os.unlink(report)
    started = datetime.datetime.now().astimezone()
    print('+ %s' % ' '.join(shlex.quote(c) for c in cmd), flush=True)
    rc = subprocess.call(cmd, env=env)
    minutes = (datetime.datetime.now().astimezone() - started
               ).total_seconds() / 60
    print()
    print('=' * 72)
    print('smbtorture conformance, %s, started %s, %.1f min, run.py exit %d'
          % ('CI subset' if args.ci else 'full list',
             started.strftime('%Y-%m-%d %H:%M %Z'), minutes, rc))
    print('command: %s' % ' '.join(shlex.quote(a) for a in sys.argv))
    print()
    try:
        with open(report) as f:
            table = f.read()
    except OSError:
        print('no report was written (%s): see the output above' % report)
        return rc or 1
    sys.stdout.write(table)
    print('(table also in %s)' % report)
    partial = args.ci or args.only or os.environ.get('FASTCASE_TORTURE_ONLY')
    if args.docs and not partial:
        write_docs(args, table, started, minutes, rc)
    return rc


def write_docs(args, table, started, minutes, rc):
    path = os.path.join(args.docs, 'CONFORMANCE.md')
    with open(path, 'w') as f:
        f.write('# smbtorture conformance: %s\n\n'
                % os.path.basename(os.path.abspath(args.docs)))
        f.write('Command: `%s` (started %s, %.1f minutes, exit status %d;'
                ' 2 shared cores). Method and known failures: '
                '[../CONFORMANCE.md](../CONFORMANCE.md).\n\n'
                % (args.command, started.strftime('%Y-%m-%d %H:%M %Z'),
                   minutes, rc))
        f.write(table)
    print('written to %s' % path)


if __name__ == '__main__':
    sys.exit(main())
