"""
Conformance: Debian's smbtorture, and a few direct checks, against a stock
share and a fastcase share on the same private smbd. The module may change
nothing a client sees except speed.

Two modes:

  CI (default, part of ./waf test): a subset of quick smbtorture tests plus
      the direct checks (8.3 names, listings, smbclient and smbcacls). A few
      minutes at most.
  full (FASTCASE_TORTURE_FULL=1, ./waf torture): every test of the list,
      base.casetable and base.utable included, each under a time limit
      ("timeout" in the table when exceeded, never dropped).

Each smbtorture test runs on the stock share, then on the fastcase share
(same seed, same options). Subtests are compared one by one: a subtest that
passes on stock and does not pass on fastcase is a regression and fails the
unittest, with smbtorture's reason and smbd's log lines. Subtests failing on
both are listed with their first error line (tests/torture/known-failures
says why, for those understood); none is hidden.

At the end of the module the side-by-side table is printed, and written to
$FASTCASE_TORTURE_REPORT when set. Raw smbtorture output goes to
$FASTCASE_TORTURE_OUTDIR/<test>.<share>.out when set.

Environment:
  FASTCASE_TORTURE_FULL=1        the full list
  FASTCASE_TORTURE_ONLY=a,b      only checks whose label contains one of these
  FASTCASE_TORTURE_TIMEOUT       seconds per test and share (default 900)
  FASTCASE_TORTURE_CASETABLE_TIMEOUT   the same for base.casetable (1800)
  FASTCASE_TORTURE_REPORT        write the table (markdown) here
  FASTCASE_TORTURE_OUTDIR        keep raw smbtorture output here
"""

import collections
import datetime
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata

from samba import NTSTATUSError

import harness
from harness import SmbdTestCase, FASTCASE, USER, PASSWORD

HERE = os.path.dirname(os.path.abspath(__file__))
TORTURE_DIR = os.path.join(os.path.dirname(HERE), 'torture')

SEED = 4711


def _flag(name):
    return os.environ.get(name, '') not in ('', '0')


FULL = _flag('FASTCASE_TORTURE_FULL')
ONLY = [s for s in os.environ.get('FASTCASE_TORTURE_ONLY', '').split(',')
        if s]
DEFAULT_TIMEOUT = int(os.environ.get('FASTCASE_TORTURE_TIMEOUT', '900'))
CASETABLE_TIMEOUT = int(os.environ.get('FASTCASE_TORTURE_CASETABLE_TIMEOUT',
                                       '1800'))
REPORT_FILE = os.environ.get('FASTCASE_TORTURE_REPORT')
OUTDIR = os.environ.get('FASTCASE_TORTURE_OUTDIR')

# SMB1 tests need NT1 on both ends.
NT1_SERVER = {'server min protocol': 'NT1'}

# ---------------------------------------------------------------------------
# What runs
# ---------------------------------------------------------------------------

Check = collections.namedtuple('Check', 'label names timeout options')


def check(label, subtests=None, timeout=None, options=()):
    """One row of the table: a top-level smbtorture test, or a named subset
    of its subtests (label gets " (subset)")."""
    if subtests:
        names = ['%s.%s' % (label, s) for s in subtests]
        label += ' (subset)'
    else:
        names = [label]
    return Check(label, names, timeout or DEFAULT_TIMEOUT, tuple(options))


SMB2_CREATE_QUICK = ['gentest', 'blob', 'open', 'brlocked', 'multi', 'delete',
                     'leading-slash', 'impersonation', 'aclfile', 'acldir',
                     'nulldacl', 'mkdir-dup', 'dir-alloc-size',
                     'dosattr_tmp_dir', 'quota-fake-file']
SMB2_RENAME_QUICK = ['simple', 'simple_nodelete', 'no_sharing',
                     'share_delete_and_delete_access',
                     'no_share_delete_but_delete_access',
                     'share_delete_no_delete_access',
                     'no_share_delete_no_delete_access', 'msword',
                     'rename_dir_openfile', 'rename_dir_bench']
SMB2_DIR_QUICK = ['find', 'fixed', 'one', 'many', 'modify', 'sorted']

# stock vs fastcase, SMB1 and SMB2
FULL_CHECKS = [
    check('base.dir1'), check('base.dir2'), check('base.mangle'),
    check('base.rename'), check('base.delete'), check('base.unlink'),
    check('base.chkpath'), check('base.attr'),
    check('raw.samba3caseinsensitive'), check('raw.mkdir'),
    check('raw.search'), check('raw.open'), check('raw.rename'),
    check('raw.unlink'), check('raw.chkpath'), check('raw.qfileinfo'),
    check('raw.sfileinfo'),
    check('smb2.create'), check('smb2.dir'), check('smb2.rename'),
    check('smb2.getinfo'), check('smb2.setinfo'),
    check('smb2.delete-on-close-perms'), check('smb2.notify'),
    check('base.utable'),
    check('base.casetable', timeout=CASETABLE_TIMEOUT),
]
CI_CHECKS = [
    check('base.dir1'), check('base.mangle'), check('base.chkpath'),
    check('base.rename'), check('base.delete'),
    check('raw.samba3caseinsensitive'), check('raw.mkdir'),
    check('raw.unlink'), check('raw.chkpath'), check('raw.search'),
    check('raw.rename'),
    check('smb2.create', SMB2_CREATE_QUICK), check('smb2.rename',
                                                   SMB2_RENAME_QUICK),
    check('smb2.dir', SMB2_DIR_QUICK), check('smb2.getinfo'),
    check('smb2.delete-on-close-perms'),
]

# stacked module lists, SMB2
FULL_STACKED = [check('smb2.create'), check('smb2.rename'),
                check('smb2.getinfo'), check('smb2.streams'),
                check('smb2.dir')]
CI_STACKED = [check('smb2.streams'), check('smb2.create', SMB2_CREATE_QUICK),
              check('smb2.rename', ['simple', 'msword',
                                    'rename_dir_openfile']),
              check('smb2.getinfo')]


# stock vs fastcase with "mangled names = yes"
FULL_MANGLED = [check('base.mangle'), check('base.dir1'), check('base.dir2'),
                check('raw.search'), check('raw.samba3caseinsensitive'),
                check('smb2.dir'), check('smb2.create'),
                check('raw.open')]
CI_MANGLED = [check('base.mangle'), check('raw.search'),
              check('smb2.dir', SMB2_DIR_QUICK)]


def selected(checks):
    if not ONLY:
        return checks
    return [c for c in checks if any(o in c.label for o in ONLY)]


# ---------------------------------------------------------------------------
# Running smbtorture and reading its output
# ---------------------------------------------------------------------------

RESULT_LINE = re.compile(r'^(success|successful|failure|fail|failed|error|'
                         r'skip|xfail|uxsuccess|todo): (.*)$')
STATUS = {'success': 'success', 'successful': 'success', 'xfail': 'xfail',
          'failure': 'failure', 'fail': 'failure', 'failed': 'failure',
          'uxsuccess': 'failure', 'error': 'error', 'skip': 'skip',
          'todo': 'skip'}
FAILING = ('failure', 'error', 'timeout')
NOISE = re.compile(r'^(smbtorture \d|Using seed|time:|progress:|WARNING: no '
                   r'network)')


def parse_output(text, timed_out, rc):
    """{subtest: (status, first reason line)} in smbtorture's order. A
    subtest that started without a result is "timeout" (killed) or
    "error" (smbtorture died)."""
    results = collections.OrderedDict()
    started = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith('test: '):
            started.append(line[6:].strip())
            continue
        m = RESULT_LINE.match(line)
        if not m:
            continue
        word, rest = m.groups()
        reason = []
        if rest.endswith(' ['):
            name = rest[:-2]
            while i < len(lines) and lines[i] != ']':
                reason.append(lines[i])
                i += 1
            i += 1
        elif rest.endswith(']') and ' [' in rest:
            name, r = rest.split(' [', 1)
            reason = [r[:-1]]
        else:
            name = rest
        first = next((r.strip() for r in reason if r.strip()), '')
        results[name.strip()] = (STATUS[word], first)
    for name in started:
        if name not in results:
            if timed_out:
                results[name] = ('timeout', 'no result before the time '
                                 'limit')
            else:
                results[name] = ('error', 'no result: smbtorture exited '
                                 'with %s' % rc)
    return results


class Run:
    """One smbtorture invocation on one share."""

    def __init__(self, share, names, out, rc, seconds, timed_out, timeout):
        self.share = share
        self.names = names
        self.output = out
        self.rc = rc
        self.seconds = seconds
        self.timed_out = timed_out
        self.timeout = timeout
        self.results = parse_output(out, timed_out, rc)
        if not self.results:
            # Nothing ran, or nothing we can read: a connection or usage
            # error, or output of another form. Never a pass.
            why = next((l.strip() for l in out.splitlines()
                        if l.strip() and not NOISE.match(l)),
                       'no output')
            why = 'no result in the output (exit %s): %s' % (rc, why)
            for n in names:
                self.results[n] = ('timeout' if timed_out else 'error', why)

    def failing(self):
        return {n: r for n, r in self.results.items() if r[0] in FAILING}

    def cell(self, single):
        """The table cell: pass / FAIL / skip / timeout / error, with
        counts for a suite."""
        n = len(self.results)
        bad = len(self.failing())
        skips = sum(1 for s, _ in self.results.values() if s == 'skip')
        if single:
            (status, _), = self.results.values()
            return {'success': 'pass', 'xfail': 'xfail', 'skip': 'skip',
                    'failure': 'FAIL'}.get(status, status)
        if self.timed_out:
            text = 'timeout (%d/%d done)' % (
                sum(1 for s, _ in self.results.values()
                    if s != 'timeout'), n)
        elif bad:
            text = 'fail %d/%d' % (bad, n)
        else:
            text = 'pass %d/%d' % (n - skips, n)
        if skips:
            text += ', %d skip' % skips
        return text


def client_conf(smbd):
    """A client smb.conf of our own: never /etc/samba/smb.conf."""
    path = os.path.join(smbd.tmp, 'client.conf')
    if not os.path.exists(path):
        state = os.path.join(smbd.tmp, 'client-state')
        os.makedirs(state, exist_ok=True)
        with open(path, 'w') as f:
            f.write('[global]\n'
                    '\tinterfaces = 127.0.0.1/8\n'
                    '\tclient min protocol = NT1\n'
                    '\tlock directory = %s\n'
                    '\tstate directory = %s\n'
                    '\tcache directory = %s\n'
                    '\tprivate dir = %s\n' % ((state,) * 4))
    return path


def smbtorture(smbd, share, names, timeout, options=()):
    cmd = [harness.tool('smbtorture'), '//127.0.0.1/%s' % share,
           '-U', '%s%%%s' % (USER, PASSWORD),
           '--configfile=' + client_conf(smbd),
           '--option=clientminprotocol=NT1',
           '--target=samba3', '--fullname', '--seed=%d' % SEED]
    cmd += list(options) + list(names)
    start = time.monotonic()
    # some tests write local files (valid.dat) into their cwd
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True,
                            cwd=os.path.dirname(client_conf(smbd)))
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
    seconds = time.monotonic() - start
    out = out.decode('utf-8', 'replace')
    if OUTDIR:
        os.makedirs(OUTDIR, exist_ok=True)
        fname = '%s.%s.out' % ('+'.join(names)[:150].replace(' ', '_')
                               .replace('/', '_'), share)
        with open(os.path.join(OUTDIR, fname), 'w') as f:
            f.write('$ %s\n' % ' '.join(cmd))
            f.write(out)
    return Run(share, names, out, proc.returncode, seconds, timed_out,
               timeout)


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

def load_known_failures():
    """tests/torture/known-failures: "subtest<TAB or 2+ spaces>why"."""
    known = {}
    path = os.path.join(TORTURE_DIR, 'known-failures')
    try:
        with open(path) as f:
            for line in f:
                line = line.rstrip('\n')
                if not line.strip() or line.lstrip().startswith('#'):
                    continue
                parts = re.split(r'\t+| {2,}', line.strip(), 1)
                known[parts[0]] = parts[1] if len(parts) > 1 else ''
    except OSError:
        pass
    return known


# (group title, [share labels], [(check, [Run per share], regressions)])
REPORT = collections.OrderedDict()
DIRECT = []         # (name, 'same' / 'DIFFERENT', seconds)


def record(group, share_labels, chk, runs, regressions):
    REPORT.setdefault(group, (share_labels, []))[1].append(
        (chk, runs, regressions))


def md_escape(text):
    return text.replace('|', '\\|')


def render_report():
    known = load_known_failures()
    out = []
    now = datetime.datetime.now().astimezone()
    version = subprocess.run([harness.tool('smbtorture'), '--version'],
                             capture_output=True, text=True).stdout
    version = version.strip().split('\n')[0]
    out.append('Run: %s, %s, kernel %s, mode %s, seed %d.'
               % (now.strftime('%Y-%m-%d %H:%M %Z'), version or 'smbtorture',
                  platform.release(), 'full' if FULL else 'CI subset', SEED))
    out.append('')
    total_reg = 0
    for group, (labels, rows) in REPORT.items():
        out.append('### %s' % group)
        out.append('')
        head = ['test'] + labels + ['%s s' % l for l in labels] + ['verdict']
        out.append('| ' + ' | '.join(head) + ' |')
        out.append('|' + '---|' * len(head))
        failures = collections.OrderedDict()
        for chk, runs, regressions in rows:
            single = (len(chk.names) == 1 and
                      all(list(r.results) == chk.names for r in runs))
            cells = [r.cell(single) for r in runs]
            secs = ['%.1f' % r.seconds for r in runs]
            if regressions:
                verdict = 'REGRESSION: %d' % len(regressions)
            elif len(set(cells)) == 1:
                verdict = 'same'
            else:
                verdict = 'differs (no regression)'
            total_reg += len(regressions)
            out.append('| ' + ' | '.join(md_escape(c) for c in
                                         [chk.label] + cells + secs +
                                         [verdict]) + ' |')
            names = []
            for r in runs:
                for n in r.results:
                    if n not in names:
                        names.append(n)
            for n in names:
                res = [r.results.get(n, ('missing', '')) for r in runs]
                if any(s in FAILING or s == 'missing' for s, _ in res):
                    failures[n] = res
        out.append('')
        if failures:
            out.append('Subtests that did not pass everywhere '
                       '(status: first error line):')
            out.append('')
            for n, res in failures.items():
                statuses = [s for s, _ in res]
                reasons = [w for _, w in res]
                if len(set(statuses)) == 1 and len(set(reasons)) == 1:
                    line = '- `%s`: %s on all: %s' % (n, statuses[0],
                                                     reasons[0])
                else:
                    line = '- `%s`: ' % n + '; '.join(
                        '%s %s: %s' % (l, s, w)
                        for l, (s, w) in zip(labels, res))
                if n in known:
                    line += ' _(known: %s)_' % known[n]
                out.append(line)
            out.append('')
    if DIRECT:
        out.append('### Direct checks, stock against fastcase')
        out.append('')
        out.append('| check | result | seconds |')
        out.append('|---|---|---|')
        for name, verdict, secs in DIRECT:
            out.append('| %s | %s | %.1f |' % (name, verdict, secs))
        out.append('')
    out.append('smbtorture regressions (pass on stock, not on fastcase): %d'
               % total_reg)
    if DIRECT:
        out.append('Direct checks that differ between stock and fastcase: %d'
                   % sum(1 for _, v, _ in DIRECT if v != 'same'))
    return '\n'.join(out) + '\n'


def tearDownModule():
    if not REPORT and not DIRECT:
        return
    text = render_report()
    sys.stdout.write('\n' + text)
    sys.stdout.flush()
    if REPORT_FILE:
        with open(REPORT_FILE, 'w') as f:
            f.write(text)


# ---------------------------------------------------------------------------
# smbtorture: stock against fastcase
# ---------------------------------------------------------------------------

LOG_INTEREST = re.compile(r'fastcase|error|fail|panic|NT_STATUS|assert',
                          re.I)


class TortureBase(SmbdTestCase):
    """Runs every check on each share of `order` (the first is the
    reference) and fails on any subtest that passes on the reference and
    not on another share."""

    order = ()          # share names, reference first
    labels = ()         # their column titles
    group = ''
    checks = []

    @classmethod
    def add_checks(cls, checks):
        for i, chk in enumerate(checks):
            name = 'test_%02d_%s' % (i, re.sub(r'\W+', '_', chk.label)
                                    .strip('_'))
            setattr(cls, name, lambda self, chk=chk: self.compare(chk))

    def compare(self, chk):
        runs = []
        logs = {}
        for share in self.order:
            mark = self.log_mark()
            runs.append(smbtorture(self.smbd, share, chk.names, chk.timeout,
                                   chk.options))
            logs[share] = self.log_text(since=mark)
        ref = runs[0]
        problems = []
        all_regressions = []
        if not self.reference_usable(ref, runs[1:]):
            # nothing to compare against: both shares may fail alike
            record(self.group, list(self.labels), chk, runs, [])
            self.fail('no subtest of %s passes on %s, the reference:\n%s'
                      % (chk.label, self.order[0], '\n'.join(
                          '  %s: %s: %s' % (n, st, why) for n, (st, why)
                          in list(ref.results.items())[:10])))
        for share, run in zip(self.order[1:], runs[1:]):
            regressions = [n for n, (s, _) in ref.results.items()
                           if s == 'success' and
                           run.results.get(n, ('missing', ''))[0]
                           != 'success']
            if not regressions:
                continue
            all_regressions += ['%s on %s' % (n, share) for n in regressions]
            problems.append(self.describe(chk, share, run, regressions,
                                          logs[share]))
        record(self.group, list(self.labels), chk, runs, all_regressions)
        if problems:
            self.fail('\n\n'.join(problems))

    @staticmethod
    def reference_usable(ref, others):
        """Something to compare against: a subtest that passes on the
        reference, or results that are all failures known on stock
        (tests/torture/known-failures) and that every other share gives
        alike. A run that could not connect or printed nothing readable
        has neither."""
        if any(st == 'success' for st, _ in ref.results.values()):
            return True
        known = load_known_failures()
        return (bool(ref.results) and all(n in known for n in ref.results)
                and all({n: st for n, (st, _) in run.results.items()} ==
                        {n: st for n, (st, _) in ref.results.items()}
                        for run in others))

    def describe(self, chk, share, run, regressions, log):
        lines = ['%d subtest(s) pass on %s and not on %s:'
                 % (len(regressions), self.order[0], share)]
        for n in regressions:
            status, why = run.results.get(n, ('missing', ''))
            lines.append('  %s: %s: %s' % (n, status, why))
            lines += ['    | ' + l for l in
                      self.output_of(run.output, n)[:25]]
        retry = smbtorture(self.smbd, share, regressions, chk.timeout,
                           chk.options)
        lines.append('isolated retry on %s: %s' % (share, ', '.join(
            '%s=%s' % (n, s) for n, (s, _) in retry.results.items())))
        interesting = [l for l in log.splitlines() if LOG_INTEREST.search(l)]
        lines.append('smbd log lines during the %s run (%d of %d):'
                     % (share, min(len(interesting), 40),
                        len(log.splitlines())))
        lines += ['    ' + l for l in interesting[-40:]]
        return '\n'.join(lines)

    @staticmethod
    def output_of(text, name):
        """smbtorture's output between "test: name" and its result."""
        got = []
        inside = False
        for l in text.splitlines():
            if l == 'test: ' + name:
                inside = True
                continue
            if inside:
                if l.startswith('time:'):
                    continue
                got.append(l)
                if RESULT_LINE.match(l) and l.split(': ', 1)[1].startswith(
                        name):
                    inside = l.endswith('[')
                    if not inside:
                        break
                if l == ']':
                    break
        return got


class Torture1StockFast(TortureBase):
    """smbtorture on a stock share and a fastcase share of one smbd."""
    shares = {
        'stock': {},
        'fast': dict(FASTCASE),
    }
    global_params = NT1_SERVER
    order = ('stock', 'fast')
    labels = ('stock', 'fastcase')
    group = ('stock (`case sensitive = no`) against fastcase '
             '(the same + `vfs objects = fastcase`)')


Torture1StockFast.add_checks(selected(FULL_CHECKS if FULL else CI_CHECKS))


class Torture3Mangled(TortureBase):
    """Again with "mangled names = yes" on both (smbd's default is
    "illegal"): every long name has an 8.3 name, as Windows clients
    expect."""
    shares = {
        'stock83': {'mangled names': 'yes'},
        'fast83': dict(FASTCASE, **{'mangled names': 'yes'}),
    }
    global_params = NT1_SERVER
    order = ('stock83', 'fast83')
    labels = ('stock', 'fastcase')
    group = 'the same with `mangled names = yes` on both'


Torture3Mangled.add_checks(selected(FULL_MANGLED if FULL else CI_MANGLED))


STACK = 'catia fruit streams_xattr acl_xattr'
STACK_PARAMS = {'ea support': 'yes', 'fruit:metadata': 'stream',
                'fruit:resource': 'stream'}


def user_xattrs_work(directory):
    """True when directory's file system takes user.* xattrs (needed by
    streams_xattr; acl_xattr uses security.NTACL)."""
    try:
        fd, path = tempfile.mkstemp(dir=directory, prefix='.xattr-probe-')
    except OSError:
        return False
    try:
        os.close(fd)
        os.setxattr(path, 'user.fastcase-probe', b'1')
        return True
    except OSError:
        return False
    finally:
        os.unlink(path)


class Torture2Stacked(TortureBase):
    """The same with fastcase in a stack of modules: last and first."""
    shares = {
        'stack': dict(STACK_PARAMS, **{'vfs objects': STACK}),
        'stackfast': dict(STACK_PARAMS,
                          **{'vfs objects': STACK + ' fastcase'}),
        'faststack': dict(STACK_PARAMS,
                          **{'vfs objects': 'fastcase ' + STACK}),
    }
    order = ('stack', 'stackfast', 'faststack')
    labels = ('stack', 'stack+fastcase', 'fastcase+stack')
    group = ('stacked: `vfs objects = %s` against the same with fastcase '
             'last and first' % STACK)

    @classmethod
    def setUpClass(cls):
        # streams_xattr needs user.* xattrs where the shares live
        cls.xattr_base = harness.make_tmpdir('fastcase-xattr-')
        cls.xattr_mounts = []
        saved = os.environ.get('FASTCASE_TMPDIR')
        try:
            os.environ['FASTCASE_TMPDIR'] = cls.xattr_dir()
            super().setUpClass()
        except BaseException:
            cls.unmount_xattr_dirs()
            raise
        finally:
            if saved is None:
                os.environ.pop('FASTCASE_TMPDIR', None)
            else:
                os.environ['FASTCASE_TMPDIR'] = saved

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.unmount_xattr_dirs()

    @classmethod
    def xattr_dir(cls):
        """A directory on a file system with user.* xattrs: the temporary
        directory's own, else a tmpfs (Linux 6.6 and later), else an ext4
        image on a loop device, mounted in run.py's private mount
        namespace. No such file system fails the class."""
        base = cls.xattr_base
        if user_xattrs_work(base):
            return base
        mount = harness.tool('mount')
        tmpfs = os.path.join(base, 'tmpfs')
        os.mkdir(tmpfs)
        subprocess.run([mount, '-t', 'tmpfs', '-o', 'size=512m,mode=0755',
                        'fastcase-xattr', tmpfs], check=True)
        cls.xattr_mounts.append(tmpfs)
        if user_xattrs_work(tmpfs):
            return tmpfs
        image = os.path.join(base, 'ext4.img')
        with open(image, 'wb') as f:
            f.truncate(512 << 20)
        subprocess.run([harness.tool('mkfs.ext4'), '-q', '-F', image],
                       check=True)
        ext4 = os.path.join(base, 'ext4')
        os.mkdir(ext4)
        subprocess.run([mount, '-o', 'loop', image, ext4], check=True)
        cls.xattr_mounts.append(ext4)
        if user_xattrs_work(ext4):
            return ext4
        raise AssertionError('no file system takes user.* xattrs for '
                             'streams_xattr: not %s, a tmpfs nor ext4'
                             % base)

    @classmethod
    def unmount_xattr_dirs(cls):
        for m in reversed(cls.xattr_mounts):
            harness.unmount(m)
        cls.xattr_mounts = []
        harness.remove_tree(cls.xattr_base)


Torture2Stacked.add_checks(selected(FULL_STACKED if FULL else CI_STACKED))


# ---------------------------------------------------------------------------
# Direct checks: the same operations on a stock and a fastcase share give
# the same answers
# ---------------------------------------------------------------------------

MTIME = 1600000000      # fixed times for locally made trees (Sep 2020)


def outcome(fn, *args, **kw):
    """('ok', value) or ('error', NTSTATUS code): comparable across
    shares."""
    try:
        return ('ok', fn(*args, **kw))
    except NTSTATUSError as e:
        return ('error', '0x%08x' % (e.args[0] & 0xffffffff))


def make_tree(root, files, dirs=()):
    """Files {relative path: bytes} and empty dirs, with fixed modes and
    times (directories last, after their contents)."""
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for rel, data in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(data)
    fix_times(root)


def fix_times(root):
    for top, dnames, fnames in os.walk(root, topdown=False):
        for n in fnames:
            p = os.path.join(top, n)
            os.chmod(p, 0o644)
            os.utime(p, (MTIME, MTIME))
        for n in dnames:
            p = os.path.join(top, n)
            os.chmod(p, 0o755)
            os.utime(p, (MTIME, MTIME))


def diff_dicts(a, b, la='stock', lb='fastcase', limit=30):
    lines = []
    for k in list(a) + [k for k in b if k not in a]:
        va, vb = a.get(k, '<absent>'), b.get(k, '<absent>')
        if va != vb:
            lines.append('%r:\n    %s: %r\n    %s: %r' % (k, la, va, lb, vb))
    more = len(lines) - limit
    lines = lines[:limit]
    if more > 0:
        lines.append('... and %d more' % more)
    return '\n'.join(lines)


LONG_NAMES = {
    # created through SMB
    'A Long Name With Spaces.text': b'spaces',
    'Report for the year 2024.docx': b'report',
    'lowercase-long-name.html': b'html',
    'dots.in.the.name.txt': b'dots',
}
LOCAL_LONG_NAMES = {
    # created on the server's file system, never seen through SMB before
    'Ünïcödé Lóng Nämé.txt': b'unicode',
    'UPPERCASE LONG NAME.TXT': b'upper',
    'short.txt': b'short',
    'MiXeD.Txt': b'mixed',
    'trailing.dot.': b'dot',
    # characters Windows does not allow: mangled even with the default
    # "mangled names = illegal"
    'What? Really.txt': b'question',
    'a:b.txt': b'colon',
    'star*.txt': b'star',
}
LONG_DIR = 'A Long Directory Name'
LONG_INNER = 'an inner file with a long name.txt'

LISTING_FILES = {
    'Report.txt': b'1',
    'README': b'333',
    'ReadMe.md': b'4444',
    'Ärger.txt': b'5',
    'straße.txt': b'66',
    'STRASSE.TXT': b'777',
    'İstanbul.txt': b'8',
    'ǅemal.txt': b'99',
    'ﬁle.txt': b'10',
    'Café.txt': b'11',                          # NFC
    unicodedata.normalize('NFD', 'Café au lait.txt'): b'12',
    'ΣΊΣΥΦΟΣ.txt': b'13',
    'x.TXT': b'14',
    'a[1].txt': b'15',
    'Long File Name With Spaces.txt': b'16',
    '.hidden': b'17',
    'Sub Dir/Inner.TXT': b'18',
    'Sub Dir/inner two.txt': b'19',
    'Sub Dir/Deeper/leaf.txt': b'20',
}
LISTING_DIRS = ['Empty Dir']
LISTING_MASKS = [
    ('', '*'), ('', '*.txt'), ('', '*.TXT'), ('', '*.*'), ('', '*.'),
    ('', 'report.txt'), ('', 'REPORT.TXT'), ('', 'Report.txt'),
    ('', 'r*'), ('', 'R?????.*'), ('', 'readme'), ('', 'README.*'),
    ('', 'ärger.txt'), ('', 'ÄRGER.TXT'), ('', 'strasse.txt'),
    ('', 'STRASSE.TXT'), ('', 'straße.TXT'), ('', 'STRAẞE.TXT'),
    ('', 'istanbul.txt'), ('', 'İSTANBUL.TXT'), ('', 'ǆemal.txt'),
    ('', 'Ǆemal.TXT'), ('', 'FILE.TXT'), ('', 'ﬁle.TXT'), ('', 'café.txt'),
    ('', 'CAFÉ.TXT'), ('', 'CAFÉ AU LAIT.TXT'),
    ('', unicodedata.normalize('NFD', 'CAFÉ AU LAIT.TXT')),
    ('', 'σίσυφος.txt'), ('', 'ΣΊΣΥΦΟΣ.TXT'), ('', 'long file name*'),
    ('', 'LONG FILE NAME WITH SPACES.TXT'), ('', '.HIDDEN'), ('', 'A[1].TXT'),
    ('', 'nosuch*'), ('', 'nosuch.txt'), ('', 'sub dir'), ('', 'SUB DIR'),
    ('', 'empty dir'), ('', '<.txt'), ('', 'report"txt'), ('', 'READ>E'),
    ('SUB DIR', '*'), ('sub dir', 'INNER.txt'), ('Sub Dir', 'inner*'),
    ('SUB DIR\\deeper', '*'), ('sub dir\\DEEPER', 'LEAF.TXT'),
    ('EMPTY DIR', '*'), ('nosuch dir', '*'),
]


def entries(listing, with_mtime=True):
    return sorted((e['name'], e['short_name'], e['attrib'], e['size']) +
                  ((e['mtime'],) if with_mtime else ())
                  for e in listing)


# Names that differ only in case, side by side on the server's disk (made
# there, or through NFS, or by a case-sensitive share).
COLLISION_FILES = {'Report.txt': b'1', 'report.TXT': b'22',
                   'REPORT.txt': b'333', 'Other.txt': b'4',
                   'Sub/Inner.txt': b'5', 'SUB/inner.TXT': b'66'}
COLLISION_MASKS = [('', '*'), ('', 'report.txt'), ('', 'REPORT.TXT'),
                   ('', 'Report.txt'), ('', 'report.TXT'), ('', 'R*'),
                   ('', 'report.*'), ('', 'sub'), ('sub', '*'),
                   ('SUB', '*'), ('Sub', 'INNER.TXT')]


class DirectParity(SmbdTestCase):
    """The same client operations on a stock share and a fastcase share."""
    MANGLED = {'mangled names': 'yes'}
    shares = {
        # "mangled names = yes": every long name has an 8.3 name
        'stock': dict(MANGLED),
        'fast': dict(FASTCASE, **MANGLED),
        # smbd's default, "illegal": only names with characters Windows
        # does not allow have one
        'stockdef': {},
        'fastdef': dict(FASTCASE),
    }
    global_params = NT1_SERVER

    def record(self, name, fn):
        start = time.monotonic()
        verdict = 'DIFFERENT'
        try:
            fn()
            verdict = 'same'
        finally:
            DIRECT.append((name, verdict, time.monotonic() - start))

    def connections(self, share):
        return [('smb2', self.conn(share)),
                ('smb1', self.conn(share, force_smb1=True))]

    # -- 8.3 names --------------------------------------------------------

    @staticmethod
    def short_names(listing):
        """{listed name: its 8.3 name} for the entries that have one: the
        short_name field, or the listed name itself when smbd shows a
        mangled name in its place (characters Windows does not allow)."""
        short = {}
        for e in listing:
            if e['short_name']:
                short[e['name']] = e['short_name']
            elif '~' in e['name']:
                short[e['name']] = e['name']
        return short

    def mangled_observations(self, share):
        d = self.fresh_dir(share, 'mangled')
        obs = collections.OrderedDict()
        c = self.conn(share)
        for name, data in LONG_NAMES.items():
            c.savefile('%s\\%s' % (d, name), data)
        c.mkdir('%s\\%s' % (d, LONG_DIR))
        c.savefile('%s\\%s\\%s' % (d, LONG_DIR, LONG_INNER), b'inner')
        for name, data in LOCAL_LONG_NAMES.items():
            with open(self.local(share, d, name), 'wb') as f:
                f.write(data)
        for proto, cc in self.connections(share):
            short = self.short_names(cc.list(d))
            obs[proto, 'short names'] = sorted(short.items())
            for name, s in sorted(short.items()):
                for form in (s, s.lower(), s.upper()):
                    p = '%s\\%s' % (d, form)
                    if name == LONG_DIR:
                        obs[proto, name, form, 'list'] = outcome(
                            lambda: entries(cc.list(p), False))
                        inner = self.short_names(cc.list(p))[LONG_INNER]
                        obs[proto, name, form, 'inner short'] = inner
                        obs[proto, name, form, 'load inner'] = outcome(
                            cc.loadfile, '%s\\%s' % (p, inner))
                        obs[proto, name, form, 'load inner long'] = outcome(
                            cc.loadfile, '%s\\%s' % (p, LONG_INNER.upper()))
                    else:
                        obs[proto, name, form, 'load'] = outcome(
                            cc.loadfile, p)
                        obs[proto, name, form, 'list exact'] = outcome(
                            lambda: entries(cc.list(d, mask=form), False))
        # rename and delete by 8.3 name, then a real file whose name is
        # another file's 8.3 name
        short = self.short_names(c.list(d))
        targets = sorted(n for n in short if n != LONG_DIR)
        s = short[targets[0]]
        obs['rename by short'] = outcome(c.rename, '%s\\%s' % (d, s.lower()),
                                         '%s\\Renamed Report.docx' % d)
        s = short[targets[1]]
        obs['unlink by short'] = outcome(c.unlink, '%s\\%s' % (d, s))
        obs['after rename/unlink'] = entries(c.list(d), False)
        s = short[targets[2]]
        with open(self.local(share, d, s), 'wb') as f:
            f.write(b'the real one')
        c2 = self.conn(share)
        obs['real file named like a short name: load'] = outcome(
            c2.loadfile, '%s\\%s' % (d, s))
        obs['real file named like a short name: load lower'] = outcome(
            c2.loadfile, '%s\\%s' % (d, s.lower()))
        obs['real file named like a short name: list'] = entries(
            c2.list(d), False)
        return obs

    def check_mangled(self, stock_share, fast_share, least):
        stock = self.mangled_observations(stock_share)
        fast = self.mangled_observations(fast_share)
        # the check means something: stock resolves 8.3 names (since 4.22
        # stock refuses some spellings with OBJECT_NAME_INVALID; the
        # module must then refuse them too)
        loads = [v for k, v in stock.items()
                 if k[-1] == 'load' and k[0] == 'smb2']
        resolved = [v for v in loads if v[0] == 'ok']
        self.assertTrue(len(resolved) >= least // 2,
                        'stock does not resolve 8.3 names: %r' % loads)
        self.assertEqual(stock, fast, '8.3 names behave differently:\n'
                         + diff_dicts(stock, fast))

    def test_mangled_names(self):
        # two spellings (as listed, lower case) of at least 8 names
        self.record('8.3 names, `mangled names = yes`: list short_name, '
                    'open/list/rename/unlink by it (SMB2, SMB1)',
                    lambda: self.check_mangled('stock', 'fast', 16))

    def test_mangled_names_default(self):
        # only the 4 names with characters Windows does not allow (and the
        # trailing dot)
        self.record('8.3 names, `mangled names = illegal` (the default): '
                    'the same', lambda: self.check_mangled(
                        'stockdef', 'fastdef', 8))

    # -- listings ----------------------------------------------------------

    def listing_observations(self, share, phase, obs):
        for proto, c in self.connections(share):
            for d, mask in LISTING_MASKS:
                path = 'listing' + ('\\' + d if d else '')
                obs[phase, proto, d, mask] = outcome(
                    lambda: entries(c.list(path, mask=mask)))

    def test_listings(self):
        def body():
            obs = {}
            for share in ('stock', 'fast'):
                d = self.fresh_dir(share, 'listing')
                make_tree(self.local(share, d), LISTING_FILES, LISTING_DIRS)
                obs[share] = collections.OrderedDict()
                # first through a cold cache, then again (warm)
                self.listing_observations(share, 'cold', obs[share])
                self.listing_observations(share, 'warm', obs[share])
                # local changes behind the server's back
                root = self.local(share, d)
                os.rename(os.path.join(root, 'README'),
                          os.path.join(root, 'readme'))
                os.rename(os.path.join(root, 'Sub Dir'),
                          os.path.join(root, 'SUB dir'))
                os.unlink(os.path.join(root, 'x.TXT'))
                with open(os.path.join(root, 'X.txt'), 'wb') as f:
                    f.write(b'new x')
                fix_times(root)
                self.listing_observations(share, 'changed', obs[share])
            stock, fast = obs['stock'], obs['fast']
            found = [v for k, v in stock.items()
                     if k[3] == '*' and k[2] == '' and v[0] == 'ok']
            self.assertTrue(found and len(found[0][1]) > 10,
                            'stock lists nothing: %r' % found)
            self.assertEqual(stock, fast, 'listings differ:\n' +
                             diff_dicts(stock, fast))
        self.record('listings: %d exact and wildcard masks, SMB2 and SMB1, '
                    'cold/warm/after local changes' % len(LISTING_MASKS),
                    body)

    def test_listings_case_collision(self):
        def body():
            obs = {}
            for share in ('stock', 'fast'):
                d = self.fresh_dir(share, 'collision')
                make_tree(self.local(share, d), COLLISION_FILES)
                obs[share] = collections.OrderedDict()
                for phase in ('cold', 'warm'):
                    for proto, c in self.connections(share):
                        for sub, mask in COLLISION_MASKS:
                            path = d + ('\\' + sub if sub else '')
                            obs[share][phase, proto, sub, mask] = outcome(
                                lambda: entries(c.list(path, mask=mask)))
                        for name in ('report.txt', 'REPORT.TXT',
                                     'Report.txt', 'sub\\INNER.TXT'):
                            obs[share][phase, proto, 'load', name] = outcome(
                                c.loadfile, '%s\\%s' % (d, name))
            stock, fast = obs['stock'], obs['fast']
            self.assertEqual(stock, fast, 'listings of names that differ '
                             'only in case differ:\n' +
                             diff_dicts(stock, fast))
        self.record('listings and opens where names differ only in case '
                    '(made on the server)', body)

    # -- real clients ------------------------------------------------------

    CLIENT_FILES = {
        'Report.txt': b'report\n',
        'Other File With A Long Name.doc': b'other\n',
        'Sub Dir/Inner.TXT': b'inner\n',
        'Sub Dir/second.txt': b'second\n',
    }
    SMB1 = ['-m', 'NT1', '--option=clientminprotocol=NT1']

    @staticmethod
    def normalize(text, share, localdir):
        out = []
        date = re.compile(r'[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d '
                          r'\d\d:\d\d:\d\d \d{4}')
        for line in text.splitlines():
            line = line.replace('\\\\127.0.0.1\\%s\\' % share,
                                '\\\\127.0.0.1\\<share>\\')
            if localdir:
                line = line.replace(localdir, '<local>')
            line = re.sub(r'\([^()]*KiloBytes/sec\) \(average [^()]*\)',
                          '(<speed>)', line)
            if 'blocks of size' in line and 'blocks available' in line:
                continue
            fields = line.split()
            # directory times move with every change inside them;
            # birth, access and change times differ between any two runs
            if (re.match(r'\s+\S.*\s+[A-Z]*D[A-Z]*\s+\d+\s+', line) or
                    (fields and fields[0] in ('.', '..')) or
                    re.match(r'(create|access|change)_time:', line)):
                line = date.sub('<date>', line)
            out.append(line)
        return '\n'.join(out)

    def client_runs(self, share, runner):
        """runner(share, dir, localdir, proto, extra options) over SMB3
        and SMB1, each on a fresh copy of CLIENT_FILES; also the files
        the client fetched."""
        localdir = tempfile.mkdtemp(prefix='got-', dir=self.smbd.tmp)
        results = collections.OrderedDict()
        for proto, extra in (('smb3', []), ('smb1', self.SMB1)):
            d = self.fresh_dir(share, 'clients')
            make_tree(self.local(share, d), self.CLIENT_FILES)
            results[proto] = runner(share, d, localdir, proto, extra)
        got = {n: open(os.path.join(localdir, n), 'rb').read()
               for n in sorted(os.listdir(localdir))}
        return results, got

    def smbclient_commands(self, d, localdir, proto):
        q = d.upper()
        return ('cd %s; ls; ls REPORT.TXT; ls SUB*; ls "sub dir\\*"; '
                'get REPORT.TXT %s/%s-1; get "SUB DIR\\inner.txt" %s/%s-2; '
                'allinfo "OTHER FILE WITH A LONG NAME.DOC"; '
                'cd "sub DIR"; pwd; get SECOND.TXT %s/%s-3; cd ..; '
                'rename REPORT.TXT Renamed.txt; '
                'rename "sub dir\\INNER.TXT" "SUB DIR\\Inner2.txt"; '
                'rename "OTHER FILE WITH A LONG NAME.DOC" other.DOC; '
                'ls; ls "Sub Dir\\*"; get RENAMED.TXT %s/%s-4; '
                'rename nosuch.txt x.txt; get NoSuch.txt %s/%s-5; '
                'del RENAMED.txt; rmdir "SUB DIR"; ls'
                % ((q,) + (localdir, proto) * 5))

    def test_smbclient(self):
        def runner(share, d, localdir, proto, extra):
            r = self.smbclient(share, self.smbclient_commands(
                d, localdir, proto), extra=extra)
            return (r.returncode, self.normalize(r.stdout, share, localdir),
                    self.normalize(r.stderr, share, localdir))

        def body():
            stock = self.client_runs('stock', runner)
            fast = self.client_runs('fast', runner)
            self.assertIn('Renamed.txt', stock[0]['smb3'][1])
            self.assertEqual(len(stock[1]), 8, stock[1])
            self.assertEqual(stock, fast, 'smbclient differs:\n' +
                             text_diff(stock, fast))
        self.record('smbclient get/ls/rename/allinfo/del with wrong-case '
                    'names (SMB3, SMB1)', body)

    def smbcacls(self, share, args, extra=()):
        cmd = [harness.tool('smbcacls'), '//127.0.0.1/%s' % share] + \
            list(args) + ['-U', '%s%%%s' % (USER, PASSWORD),
                          '--configfile=' + self.smbd.conf] + list(extra)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        return (r.returncode, self.normalize(r.stdout, share, ''),
                self.normalize(r.stderr, share, ''))

    def test_smbcacls(self):
        def runner(share, d, localdir, proto, extra):
            q = d.upper()
            res = collections.OrderedDict()
            for path in ('%s\\REPORT.TXT' % q, '%s\\report.txt' % d,
                         '%s\\sub dir\\INNER.txt' % q,
                         '%s\\SUB DIR' % q, '%s\\nosuch.txt' % q,
                         '%s\\NOSUCH\\x.txt' % q):
                res[path] = self.smbcacls(share, [path], extra)
            res['add'] = self.smbcacls(
                share, ['-a', 'ACL:S-1-1-0:ALLOWED/0x0/READ',
                        '%s\\SUB DIR\\inner.TXT' % q], extra)
            res['after add'] = self.smbcacls(
                share, ['%s\\Sub Dir\\Inner.TXT' % d], extra)
            res['add to missing'] = self.smbcacls(
                share, ['-a', 'ACL:S-1-1-0:ALLOWED/0x0/READ',
                        '%s\\SUB DIR\\nosuch.TXT' % q], extra)
            return res

        def body():
            stock = self.client_runs('stock', runner)
            fast = self.client_runs('fast', runner)
            self.assertIn('OWNER:', stock[0]['smb3']['CLIENTS\\REPORT.TXT'][1])
            self.assertEqual(stock, fast, 'smbcacls differs:\n' +
                             text_diff(stock, fast))
        self.record('smbcacls get/add with wrong-case paths (SMB3, SMB1)',
                    body)


def text_diff(a, b):
    import difflib
    import pprint
    return '\n'.join(difflib.unified_diff(
        pprint.pformat(a, width=100).splitlines(),
        pprint.pformat(b, width=100).splitlines(), 'stock', 'fastcase',
        lineterm=''))
