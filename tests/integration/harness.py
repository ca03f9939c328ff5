r"""
vfs_fastcase integration harness: a real Debian smbd with the freshly built
module, all of its state in a temporary directory.

Pieces:

  VfsOverlay      a copy of smbd's VFS modules directory plus a symlink
                  fastcase.so -> <build>/fastcase.so, bind-mounted over the
                  compiled-in modules directory. Only ever inside a private
                  mount namespace (run.py and demo.py make one), so the
                  system never sees it.
  Smbd            writes smb.conf from a dict of shares, creates the state
                  directories and a passdb user, starts smbd in its own
                  session, waits for its port, hands out clients (Samba's
                  Python libsmb and the smbclient program), reads its logs
                  and stops it by PID.
  SmbdTestCase    a unittest.TestCase base: one smbd per test class, with
                  the shares the class declares.

Adding a test class (tests/integration/test_*.py):

    from harness import SmbdTestCase, FASTCASE

    class LocalChanges(SmbdTestCase):
        shares = {'fc': dict(FASTCASE, **{'fastcase:fold': 'unicode'})}

        def test_local_create_is_seen(self):
            d = self.fresh_dir('fc')        # <share>/<test name>, empty
            c = self.conn('fc')
            c.list(d)                       # the directory is now cached
            with open(self.local('fc', d, 'Notes.txt'), 'w') as f:
                f.write('x')                # a plain local change
            self.assertEqual(c.loadfile(d + '\\NOTES.TXT'), b'x')

    Also: self.smbclient(share, 'cmd; cmd') -> CompletedProcess,
    self.log_mark() / self.log_text(since=mark) / self.wait_for_log(regex),
    self.smbd (the Smbd: .pid, .conf, .cache_file, .stop(), ...).

Environment:
  FASTCASE_BUILD        the build directory (run.py sets it)
  FASTCASE_KEEP_TMP=1   keep a failed test class's temporary directory
  FASTCASE_DEBUGLEVEL   smbd's debug level (default 1)
  FASTCASE_TMPDIR       where temporary directories go (default: $TMPDIR)
"""

import collections
import gc
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

# The interpreter running the tests (./waf runs them with Debian's python3,
# which has Samba's bindings); the scripts start their children with it.
PYTHON = sys.executable

# Set in the environment of a process running inside the namespaces that
# run.py / demo.py create.
NS_MARKER = 'FASTCASE_INTEGRATION_NS'
BUILD_ENV = 'FASTCASE_BUILD'
# The sanitizer runtime to preload into smbd (./waf test sets it for the
# run with the AddressSanitizer build of the module).
SANITIZER_ENV = 'FASTCASE_SMBD_PRELOAD'
# Set to run smbd under valgrind's memcheck (./waf test does once).
VALGRIND_ENV = 'FASTCASE_SMBD_VALGRIND'
SANITIZER_REPORT = re.compile(r'ERROR: AddressSanitizer|runtime error:|'
                              r'ERROR: LeakSanitizer')
# A file where every started smbd's PID and every temporary directory is
# recorded, so that run.py's supervisor can clean up if the test process
# dies or hangs.
PID_REGISTRY_ENV = 'FASTCASE_REGISTRY'

USER = 'root'
PASSWORD = 'fastcase-test'

# Parameters that make a share a fastcase share: merge into a share's dict.
FASTCASE = {'vfs objects': 'fastcase'}

# smbd's real-name memcache ("stat cache") answers a repeated wrong-case
# lookup before the module is asked: tests that count the module's own
# answers turn it off (test_engine.RealNameMemcache tests it on).
EVERY_LOOKUP_REACHES_THE_MODULE = {'stat cache': 'no'}

# Defaults of every share the harness writes (a share's dict overrides).
SHARE_DEFAULTS = {
    'read only': 'no',
    'case sensitive': 'no',
    'browseable': 'yes',
}

_tool_cache = {}


def tool(name):
    """Absolute path of a program: every command the tests run is looked
    up here, once, on PATH and then in the system directories (sbin, where
    smbd lives, is not always on PATH)."""
    if name not in _tool_cache:
        path = shutil.which(name, path=os.environ.get('PATH', '') +
                            ':/usr/sbin:/usr/bin:/sbin:/bin')
        if path is None:
            raise RuntimeError('%s not found: is its package installed?'
                               % name)
        _tool_cache[name] = path
    return _tool_cache[name]


# ---------------------------------------------------------------------------
# Host-wide sysctls (fs.inotify.*): restored even when a run is killed
# ---------------------------------------------------------------------------

# The supervisor's record of the values the tests changed (set by run.py).
SYSCTL_RECORD_ENV = 'FASTCASE_SYSCTL_RECORD'
# Where records live: not $TMPDIR, which may differ from one run to the
# next, but /run, which is emptied at boot, when the sysctls reset too.
SYSCTL_RECORD_DIR = '/run/fastcase-it'


def _boot_id():
    with open('/proc/sys/kernel/random/boot_id') as f:
        return f.read().strip()


def new_sysctl_record():
    """A record for this supervisor: {pid, boot, values}."""
    os.makedirs(SYSCTL_RECORD_DIR, exist_ok=True)
    path = os.path.join(SYSCTL_RECORD_DIR, 'sysctl.%d.json' % os.getpid())
    _write_sysctl_record(path, {'pid': os.getpid(), 'boot': _boot_id(),
                                'values': {}})
    return path


def _write_sysctl_record(path, record):
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def create_and_delete_until(path, interval, stop):
    """A local program changing a directory: create, then delete, a file
    in path every interval seconds until stop (an Event) is set."""
    k = 0
    while not stop.is_set():
        name = os.path.join(path, 'Local_%06d.tmp' % (k // 2))
        if k % 2 == 0:
            os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o644))
        else:
            os.unlink(name)
        k += 1
        time.sleep(interval)


def has_inotify(pid):
    """Whether the process holds an inotify instance."""
    try:
        fds = os.listdir('/proc/%d/fd' % pid)
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink('/proc/%d/fd/%s' % (pid, fd))
        except OSError:
            continue
        if link == 'anon_inode:inotify':
            return True
    return False


def set_sysctl(name, value):
    """Write /proc/sys/<name> (fs/inotify/max_queued_events) after
    recording its value in the supervisor's record: run.py writes the
    recorded value back when the run ends, and at its next start when the
    run was killed. Returns the value it had (to restore at once)."""
    record_path = os.environ.get(SYSCTL_RECORD_ENV)
    if not record_path:
        raise RuntimeError('set_sysctl outside run.py: nothing would '
                           'restore %s' % name)
    path = os.path.join('/proc/sys', name)
    with open(path) as f:
        old = f.read().strip()
    with open(record_path) as f:
        record = json.load(f)
    # the first value seen is the host's own
    record['values'].setdefault(path, old)
    _write_sysctl_record(record_path, record)
    with open(path, 'w') as f:
        f.write(str(value))
    return old


def restore_sysctls(record_path):
    """Write back the values a record holds, then remove it."""
    try:
        with open(record_path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return
    if record.get('boot') == _boot_id():
        for path, value in record.get('values', {}).items():
            try:
                with open(path, 'w') as f:
                    f.write(value)
            except OSError as e:
                sys.stderr.write('harness: cannot restore %s to %s: %s\n'
                                 % (path, value, e))
                return      # keep the record for the next start
    os.unlink(record_path)


def _supervisor_alive(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return b'run.py' in f.read()
    except OSError:
        return False


def restore_stale_sysctls():
    """Restore what runs that were killed left changed."""
    for path in glob.glob(os.path.join(SYSCTL_RECORD_DIR,
                                       'sysctl.*.json')):
        try:
            with open(path) as f:
                pid = json.load(f).get('pid', 0)
        except (OSError, ValueError):
            pid = 0
        if pid != os.getpid() and not _supervisor_alive(pid):
            sys.stderr.write('harness: restoring the sysctls a killed run '
                             'left changed (%s)\n' % path)
            restore_sysctls(path)


def smbd_build_value(name):
    """A path compiled into the installed smbd (smbd -b)."""
    out = subprocess.run([tool('smbd'), '-b'], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith(name + ':'):
            return line.split(':', 1)[1].strip()
    raise RuntimeError('smbd -b does not report %s' % name)


def smbd_version_text():
    """What `smbd --version` prints: Version 4.22.11-Debian-4.22.11+..."""
    return subprocess.run([tool('smbd'), '--version'], capture_output=True,
                          text=True, check=True).stdout.strip()


def samba_version():
    """The smbd under test's release as a tuple: (4, 22, 11)."""
    out = smbd_version_text()
    m = re.search(r'Version (\d+)\.(\d+)\.(\d+)', out)
    if m is None:
        raise RuntimeError('smbd --version printed %r' % out)
    return tuple(int(x) for x in m.groups())


def vfs_modules_dir():
    return os.path.join(smbd_build_value('MODULESDIR'), 'vfs')


def keep_tmp():
    return os.environ.get('FASTCASE_KEEP_TMP', '') not in ('', '0')


def make_tmpdir(prefix):
    base = os.environ.get('FASTCASE_TMPDIR') or None
    if base:
        os.makedirs(base, exist_ok=True)
    path = tempfile.mkdtemp(prefix=prefix, dir=base)
    os.chmod(path, 0o755)
    _registry_update('dir', path, True)
    return path


def remove_tree(path):
    """rmtree that refuses to cross into a mount point (a bind mount that
    was not undone must never have its target emptied)."""
    if not os.path.isdir(path) or os.path.islink(path):
        return
    for root, dirs, _files in os.walk(path):
        for d in dirs:
            p = os.path.join(root, d)
            if os.path.ismount(p):
                raise RuntimeError('refusing to remove %s: %s is a mount '
                                   'point' % (path, p))
    shutil.rmtree(path, ignore_errors=True)
    _registry_update('dir', path, False)


# ---------------------------------------------------------------------------
# Namespaces and the VFS modules overlay
# ---------------------------------------------------------------------------

def in_namespace():
    return os.environ.get(NS_MARKER) == '1'


def reexec_in_namespace(script, argv, net):
    """Replace this process with itself inside new namespaces.

    A private mount namespace always (for the VFS overlay), a new network
    namespace when net is true (the tests: smbd on 127.0.0.1:445 there
    disturbs nobody). unshare execs the program without forking, so
    signals reach it directly."""
    if os.geteuid() != 0:
        sys.exit('%s: must run as root (it needs namespaces and a bind '
                 'mount)' % os.path.basename(script))
    cmd = unshare_command(net) + [PYTHON, os.path.abspath(script)] + argv
    env = dict(os.environ, **{NS_MARKER: '1'})
    os.execvpe(cmd[0], cmd, env)


def unshare_command(net):
    cmd = [tool('unshare'), '--mount', '--propagation', 'private']
    if net:
        cmd.insert(1, '--net')
    return cmd


def loopback_up():
    subprocess.run([tool('ip'), 'link', 'set', 'lo', 'up'], check=True)


class VfsOverlay:
    """smbd's VFS modules directory with our fastcase.so in it.

    smbd 4.17 takes no absolute path in "vfs objects" and has no modules
    directory parameter, so the module has to appear under the compiled-in
    directory. The stock modules are copied (1-2 MB): symlinks back into
    the original directory would point into the bind mount itself once it
    is in place."""

    def __init__(self, build_dir, workdir):
        self.build_dir = os.path.abspath(build_dir)
        self.module = os.path.join(self.build_dir, 'fastcase.so')
        self.target = vfs_modules_dir()
        self.dir = os.path.join(workdir, 'vfs')
        self.mounted = False

    def setup(self):
        if not in_namespace():
            raise RuntimeError('VfsOverlay outside the private mount '
                               'namespace: refusing to touch the system')
        if not os.path.isfile(self.module):
            raise RuntimeError('%s does not exist: run ./waf build first'
                               % self.module)
        os.makedirs(self.dir)
        for name in os.listdir(self.target):
            if name == 'fastcase.so':
                continue
            src = os.path.join(self.target, name)
            if os.path.isfile(src):
                shutil.copy2(src, os.path.join(self.dir, name))
        os.symlink(self.module, os.path.join(self.dir, 'fastcase.so'))
        subprocess.run([tool('mount'), '--bind', self.dir, self.target],
                       check=True)
        self.mounted = True
        if not overlay_active(self.build_dir):
            raise RuntimeError('the VFS overlay is not in effect')

    def teardown(self):
        if self.mounted:
            subprocess.run([tool('umount'), self.target], check=False)
            self.mounted = False


def overlay_active(build_dir):
    """True when smbd would load <build_dir>/fastcase.so."""
    module = os.path.join(os.path.abspath(build_dir), 'fastcase.so')
    installed = os.path.join(vfs_modules_dir(), 'fastcase.so')
    return (os.path.exists(installed) and
            os.path.realpath(installed) == os.path.realpath(module))


# ---------------------------------------------------------------------------
# PID registry (for run.py's supervisor)
# ---------------------------------------------------------------------------

def _registry_update(kind, value, add):
    """Record (add) or forget a started smbd ("pid") or a temporary
    directory ("dir") in the registry file run.py's supervisor reads."""
    path = os.environ.get(PID_REGISTRY_ENV)
    if not path:
        return
    entry = '%s %s' % (kind, value)
    try:
        with open(path) as f:
            entries = [l.rstrip('\n') for l in f if l.strip()]
    except FileNotFoundError:
        entries = []
    if add:
        entries.append(entry)
    else:
        entries = [e for e in entries if e != entry]
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(''.join(e + '\n' for e in entries))
    os.replace(tmp, path)


def _registry_entries(path, kind):
    try:
        with open(path) as f:
            lines = [l.rstrip('\n') for l in f]
    except OSError:
        return []
    return [l.split(' ', 1)[1] for l in lines if l.startswith(kind + ' ')]


def is_smbd(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            argv0 = f.read().split(b'\0')[0]
    except OSError:
        return False
    return os.path.basename(argv0).startswith(b'smbd')


def kill_registered(path):
    """Stop the smbd process groups listed in a registry file."""
    for pid in _registry_entries(path, 'pid'):
        try:
            pid = int(pid)
        except ValueError:
            continue
        if is_smbd(pid):
            _killpg(pid, signal.SIGKILL)


def remove_registered(path):
    """Remove the temporary directories listed in a registry file. Only
    from outside the test namespace: no bind mount is visible there."""
    for d in _registry_entries(path, 'dir'):
        if keep_tmp():
            sys.stderr.write('harness: kept %s\n' % d)
        else:
            remove_tree(d)


def holders(path):
    """PIDs of the processes that have path open or mapped."""
    real = os.path.realpath(path)
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir('/proc/%s/fd' % pid)
            held = any(os.readlink('/proc/%s/fd/%s' % (pid, fd)) == real
                       for fd in fds)
            if not held:
                with open('/proc/%s/maps' % pid) as f:
                    held = any(line.rstrip('\n').endswith(' ' + real)
                               for line in f)
        except OSError:
            continue        # gone meanwhile, or a kernel thread
        if held:
            found.append(int(pid))
    return found


def wait_until(condition, timeout, what):
    """Poll condition() until it returns a true value (returned) or
    timeout seconds pass (AssertionError saying what was awaited)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError('waited %ss for %s' % (timeout, what))
        time.sleep(0.02)


def unmount(path, timeout=10):
    """umount path, waiting (bounded) while it is busy: the processes of a
    stopped smbd may still be exiting, their cwd on it."""
    def done():
        r = subprocess.run([tool('umount'), path], capture_output=True,
                           text=True)
        done.err = r.stderr.strip()
        return r.returncode == 0 or not os.path.ismount(path)
    done.err = ''
    try:
        wait_until(done, timeout, 'umount %s' % path)
    except AssertionError as e:
        raise AssertionError('%s: %s' % (e, done.err)) from None


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------
# smbd
# ---------------------------------------------------------------------------

class SmbdError(Exception):
    pass


class Smbd:
    """One private smbd.

    shares: {name: {param: value}}. Every share gets SHARE_DEFAULTS and,
    unless given, path = <tmp>/shares/<name> (created). A share whose
    "vfs objects" names fastcase gets "fastcase:cache file" in the
    temporary directory unless given.
    """

    def __init__(self, shares, port=445, address='127.0.0.1',
                 global_params=None, user=USER, password=PASSWORD,
                 username_map=None, debuglevel=None, tmp=None,
                 prefix='fastcase-it-'):
        self.shares = {n: dict(p) for n, p in shares.items()}
        self.port = port
        self.address = address
        self.global_params = dict(global_params or {})
        self.user = user
        self.password = password
        self.username_map = dict(username_map or {})
        if debuglevel is None:
            debuglevel = int(os.environ.get('FASTCASE_DEBUGLEVEL', '1'))
        self.debuglevel = debuglevel
        self.tmp = tmp or make_tmpdir(prefix)
        self.state = os.path.join(self.tmp, 'state')
        self.logdir = os.path.join(self.tmp, 'logs')
        self.conf = os.path.join(self.tmp, 'smb.conf')
        self.cache_file = os.path.join(self.state, 'fastcase.tdb')
        self.proc = None
        self._stdout = None
        self._lp = None

    # -- configuration ----------------------------------------------------

    def _dirs(self):
        s = self.state
        return {
            'lock directory': os.path.join(s, 'lock'),
            'state directory': os.path.join(s, 'state'),
            'cache directory': os.path.join(s, 'cache'),
            'private dir': os.path.join(s, 'private'),
            'binddns dir': os.path.join(s, 'bind-dns'),
            'pid directory': os.path.join(s, 'pid'),
            'ncalrpc dir': os.path.join(s, 'ncalrpc'),
            'winbindd socket directory': os.path.join(s, 'winbindd'),
            'usershare path': os.path.join(s, 'usershares'),
        }

    def share_path(self, name):
        return self.shares[name]['path']

    def global_config(self):
        g = {
            'server role': 'standalone server',
            'workgroup': 'FASTCASE',
            'netbios name': 'FASTCASETEST',
            'server string': 'vfs_fastcase test',
            'interfaces': self.address,
            'bind interfaces only': 'yes',
            'smb ports': str(self.port),
            'disable netbios': 'yes',
            'passdb backend': 'tdbsam:%s' %
                              os.path.join(self.state, 'private',
                                           'passdb.tdb'),
            'log file': os.path.join(self.logdir, 'log.%m'),
            'max log size': '0',
            'logging': 'file',
            'disable spoolss': 'yes',
            'load printers': 'no',
            'printing': 'bsd',
            'printcap name': '/dev/null',
            'dns proxy': 'no',
            'panic action': '',
            'map to guest': 'never',
        }
        g.update(self._dirs())
        if self.username_map:
            g['username map'] = os.path.join(self.state, 'username.map')
        g.update(self.global_params)
        return g

    def write_config(self):
        lines = ['# written by tests/integration/harness.py', '[global]']
        for k, v in self.global_config().items():
            lines.append('\t%s = %s' % (k, v))
        for name, params in self.shares.items():
            lines.append('')
            lines.append('[%s]' % name)
            for k, v in params.items():
                lines.append('\t%s = %s' % (k, v))
        with open(self.conf, 'w') as f:
            f.write('\n'.join(lines) + '\n')

    def prepare(self):
        os.makedirs(self.logdir, exist_ok=True)
        for d in self._dirs().values():
            os.makedirs(d, exist_ok=True)
        os.chmod(os.path.join(self.state, 'private'), 0o700)
        for name, params in self.shares.items():
            full = dict(SHARE_DEFAULTS)
            full.update(params)
            full.setdefault('path', os.path.join(self.tmp, 'shares', name))
            vfs = full.get('vfs objects', '').replace(',', ' ').split()
            if 'fastcase' in vfs:
                full.setdefault('fastcase:cache file', self.cache_file)
            self.shares[name] = full
            os.makedirs(full['path'], exist_ok=True)
        if self.username_map:
            with open(self.global_config()['username map'], 'w') as f:
                for unix, names in self.username_map.items():
                    f.write('%s = %s\n' % (unix, names))
        self.write_config()
        self.add_user(self.user, self.password)

    def add_user(self, user, password):
        """A passdb entry (the unix user must exist)."""
        r = subprocess.run([tool('smbpasswd'), '-c', self.conf, '-s', '-a',
                            user], input='%s\n%s\n' % (password, password),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SmbdError('smbpasswd -a %s failed: %s%s'
                            % (user, r.stdout, r.stderr))

    # -- process ----------------------------------------------------------

    def start(self, timeout=20):
        self.prepare()
        cmd = [tool('smbd'), '--foreground', '--no-process-group',
               '--configfile=' + self.conf,
               '--debuglevel=%d' % self.debuglevel]
        self._stdout = open(os.path.join(self.logdir, 'smbd.stdout'), 'wb')
        if os.environ.get(VALGRIND_ENV):
            # memcheck follows smbd's forked children by itself
            cmd = [tool('valgrind'), '--tool=memcheck', '--num-callers=40',
                   '--log-file=' + os.path.join(self.logdir,
                                                'valgrind.%p.log')] + cmd
            timeout = max(timeout, 120)
        env = dict(os.environ)
        preload = os.environ.get(SANITIZER_ENV)
        if preload:
            # a module built with -fsanitize=address,undefined needs the
            # runtime loaded first; smbd's own leaks are not ours
            env['LD_PRELOAD'] = preload
            env['ASAN_OPTIONS'] = 'detect_leaks=0:abort_on_error=1'
            env['UBSAN_OPTIONS'] = 'halt_on_error=1:print_stacktrace=1'
        # Its own session: smbd signals its whole process group on exit.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=self._stdout,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True, cwd=self.tmp,
                                     env=env)
        _registry_update('pid', self.proc.pid, True)
        self.wait_ready(timeout)

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise SmbdError('smbd exited with %s before listening\n%s'
                                % (self.proc.returncode, self.log_tail()))
            try:
                with socket.create_connection((self.address, self.port),
                                              timeout=1):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SmbdError('smbd not listening on %s:%d after %ss\n%s'
                                % (self.address, self.port, timeout,
                                   self.log_tail()))
            time.sleep(0.05)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=10):
        """SIGTERM to smbd's PID, wait, then SIGKILL; then whatever is left
        of its process group (its per-client children)."""
        if self.proc is None:
            return
        pid = self.proc.pid
        if self.proc.poll() is None:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self.proc.wait()
        # pid is the group's id: the session we created for smbd.
        _killpg(pid, signal.SIGKILL)
        _registry_update('pid', pid, False)
        if self._stdout:
            self._stdout.close()
            self._stdout = None

    def kill(self):
        """SIGKILL of smbd and all its children at once, as when its
        machine dies; start() serves again from the same state."""
        if self.proc is None:
            return
        pid = self.proc.pid
        _killpg(pid, signal.SIGKILL)
        self.proc.wait()
        _registry_update('pid', pid, False)
        if self._stdout:
            self._stdout.close()
            self._stdout = None

    def cleanup(self, keep=False):
        if keep:
            sys.stderr.write('harness: kept %s\n' % self.tmp)
            _registry_update('dir', self.tmp, False)
            return
        remove_tree(self.tmp)

    # -- logs -------------------------------------------------------------

    def log_files(self):
        return sorted(p for p in glob.glob(os.path.join(self.logdir, '*'))
                      if os.path.isfile(p))

    def log_mark(self):
        """Where the logs end now: pass to log_text(since=...)."""
        return {p: os.path.getsize(p) for p in self.log_files()}

    def log_text(self, since=None):
        """All log files concatenated (each after its mark, if given)."""
        parts = []
        for p in self.log_files():
            start = (since or {}).get(p, 0)
            with open(p, 'rb') as f:
                f.seek(start)
                data = f.read()
            if data:
                parts.append('==> %s <==\n' % os.path.basename(p))
                parts.append(data.decode('utf-8', 'replace'))
        return ''.join(parts)

    def wait_for_log(self, pattern, since=None, timeout=5):
        """The log text once pattern (a regex) appears in it, else None."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            text = self.log_text(since)
            if rx.search(text):
                return text
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def wait_unused(self, path=None, timeout=10):
        """Wait until no process has path (the cache file) open: every
        smbd child that used it has ended its trees and exited."""
        path = path or self.cache_file
        wait_until(lambda: not holders(path), timeout,
                   'no process to have %s open (held by %r)'
                   % (path, holders(path)))

    def session_pids(self):
        """PIDs of the smbd processes serving a session (smbstatus)."""
        r = subprocess.run([tool('smbstatus'), '--configfile=' + self.conf,
                            '-b', '--json'], capture_output=True, text=True,
                           check=True)
        sessions = json.loads(r.stdout).get('sessions', {})
        return sorted({int(s['server_id']['pid'])
                       for s in sessions.values()})

    def counters(self, share):
        """The share's counters in the cache file (fastcase-stat --json):
        hits, misses, unknown, fallbacks, builds, events, overflows, ...

        Waits until no process has the file open, as an smbd child adds
        its counters when its trees end. The file is cleared when it is
        next opened while nobody has it open (TDB_CLEAR_IF_FIRST): the
        counters tell what happened since it was last idle, so a test
        calls wait_unused() before its first connection. Every counter is
        0 for a share that has none."""
        # a connection dropped by the test may still sit in a reference
        # cycle (an exception's traceback): collect it, so that it closes
        gc.collect()
        path = self.shares[share].get('fastcase:cache file', self.cache_file)
        self.wait_unused(path)
        found = collections.defaultdict(int)
        if not os.path.exists(path):
            return found
        stat = os.path.join(os.environ[BUILD_ENV], 'fastcase-stat')
        r = subprocess.run([stat, '--json', path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SmbdError('fastcase-stat failed: %s' % r.stderr)
        found.update(json.loads(r.stdout)['shares'].get(share, {}))
        return found

    def valgrind_report(self):
        """memcheck errors whose stack passes through the module."""
        found = []
        logs = glob.glob(os.path.join(self.logdir, 'valgrind.*.log'))
        if not logs:
            return 'smbd did not run under valgrind: no valgrind logs'
        for path in logs:
            with open(path, errors='replace') as f:
                blocks = re.split(r'\n==\d+== \n', f.read())
            for b in blocks:
                if ('fastcase' in b and
                        re.search(r'Invalid (read|write|free)|'
                                  r'uninitialised|Mismatched|overlap|'
                                  r'definitely lost', b)):
                    found.append(b)
        return '\n\n'.join(found[:5]) or None

    def sanitizer_report(self):
        """The first sanitizer report in smbd's output and logs, or None."""
        for path in glob.glob(os.path.join(self.logdir, '*')):
            try:
                with open(path, errors='replace') as f:
                    text = f.read()
            except OSError:
                continue
            m = SANITIZER_REPORT.search(text)
            if m:
                return text[max(0, m.start() - 200):m.start() + 3000]
        return None

    def log_tail(self, lines=40):
        text = self.log_text()
        return '\n'.join(text.splitlines()[-lines:])

    # -- clients ----------------------------------------------------------

    def loadparm(self):
        # Loaded on every call: the context is process-global, and another
        # Smbd may have loaded its own config since.
        if True:
            # The s3 client reads smbd's (s3) global loadparm, not the
            # context it is handed: load the config there.
            from samba.samba3 import param as s3param
            lp = s3param.get_context()
            lp.load(self.conf)
            self._lp = lp
        return self._lp

    def credentials(self, user=None, password=None):
        from samba.credentials import Credentials
        creds = Credentials()
        creds.guess(self.loadparm())
        creds.set_username(user or self.user)
        creds.set_password(self.password if password is None else password)
        return creds

    def conn(self, share, user=None, password=None, **kw):
        """A samba.samba3.libsmb_samba_internal.Conn to the share (SMB2+).
        Raises samba.NTSTATUSError when the session or tree connect
        fails. Keyword arguments go to Conn (multi_threaded=True for
        oplock breaks, force_smb1=True)."""
        from samba import NTSTATUSError, ntstatus
        from samba.samba3 import libsmb_samba_internal as libsmb
        if self.port != 445:
            raise SmbdError('the Python client only dials port 445')
        try:
            return libsmb.Conn(self.address, share, self.loadparm(),
                               self.credentials(user, password), **kw)
        except NTSTATUSError as e:
            if (e.args[0] & 0xffffffff) == \
                    (ntstatus.NT_STATUS_CONNECTION_REFUSED & 0xffffffff):
                self._explain_refusal()
            raise

    def _explain_refusal(self):
        """Why nothing listened: for the log of the failed test."""
        if self.running():
            state = 'running as PID %d' % self.proc.pid
        elif self.proc is None:
            state = 'never started'
        else:
            state = 'exited with status %s' % self.proc.returncode
        sys.stderr.write('harness: %s:%d refused the connection; smbd %s; '
                         'its log ends:\n%s\n' % (self.address, self.port,
                                                   state, self.log_tail()))

    def smbclient(self, share, commands, user=None, password=None,
                  extra=(), timeout=60):
        """smbclient //address/share -c commands; a CompletedProcess
        (text, stdout and stderr apart)."""
        cmd = [tool('smbclient'), '//%s/%s' % (self.address, share),
               '--configfile=' + self.conf, '-p', str(self.port),
               '-U', '%s%%%s' % (user or self.user,
                                 self.password if password is None
                                 else password),
               '-c', commands] + list(extra)
        return subprocess.run(cmd, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)


# ---------------------------------------------------------------------------
# unittest base
# ---------------------------------------------------------------------------

def require_environment():
    """Skip unless inside run.py's namespaces with the overlay in place."""
    build = os.environ.get(BUILD_ENV)
    if not in_namespace() or not build:
        raise unittest.SkipTest('run through tests/integration/run.py')
    if not overlay_active(build):
        raise SmbdError('smbd would not load %s/fastcase.so: the VFS '
                        'overlay is missing' % build)
    return build


class SmbdTestCase(unittest.TestCase):
    """One smbd per test class.

    Class attributes:
      shares         {name: {param: value}} (see Smbd)
      global_params  extra [global] parameters
      debuglevel     smbd's debug level (None: FASTCASE_DEBUGLEVEL or 1)
    """

    shares = {}
    global_params = {}
    debuglevel = None

    smbd = None
    _failed = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        require_environment()
        cls._failed = False
        cls.smbd = Smbd(cls.shares, global_params=cls.global_params,
                        debuglevel=cls.debuglevel,
                        prefix='fastcase-%s-' % cls.__name__)
        try:
            cls.smbd.start()
        except BaseException:
            cls.smbd.stop()
            cls.smbd.cleanup(keep=keep_tmp())
            cls.smbd = None
            raise

    @classmethod
    def tearDownClass(cls):
        report = None
        if cls.smbd is not None:
            cls.smbd.stop()
            if os.environ.get(SANITIZER_ENV):
                report = cls.smbd.sanitizer_report()
            if os.environ.get(VALGRIND_ENV):
                report = cls.smbd.valgrind_report()
            if report:
                cls._failed = True
            if cls._failed:
                sys.stderr.write('harness: smbd log tail for %s:\n%s\n'
                                 % (cls.__name__, cls.smbd.log_tail()))
            cls.smbd.cleanup(keep=cls._failed and keep_tmp())
            cls.smbd = None
        super().tearDownClass()
        if report:
            raise AssertionError('sanitizer report from smbd:\n' + report)

    def run(self, result=None):
        before = None
        if result is not None:
            before = (len(result.failures) + len(result.errors) +
                      len(getattr(result, 'unexpectedSuccesses', ())))
        r = super().run(result)
        if result is not None:
            after = (len(result.failures) + len(result.errors) +
                     len(getattr(result, 'unexpectedSuccesses', ())))
            if after > before:
                type(self)._failed = True
        return r

    # -- helpers ----------------------------------------------------------

    def share_path(self, name):
        """The share's directory on the local file system."""
        return self.smbd.share_path(name)

    def local(self, share, *parts):
        """A path inside the share's directory (for plain os calls)."""
        return os.path.join(self.share_path(share), *parts)

    def conn(self, share, user=None, password=None, **kw):
        """A new Python libsmb connection to the share (see Smbd.conn)."""
        return self.smbd.conn(share, user, password, **kw)

    def smbclient(self, share, commands, **kw):
        return self.smbd.smbclient(share, commands, **kw)

    def log_mark(self):
        return self.smbd.log_mark()

    def log_text(self, since=None):
        return self.smbd.log_text(since)

    def wait_for_log(self, pattern, since=None, timeout=5):
        return self.smbd.wait_for_log(pattern, since, timeout)

    def counters(self, share):
        """The share's cache counters (see Smbd.counters)."""
        return self.smbd.counters(share)

    def assertAnsweredFromCache(self, share, hits=0, misses=0, **least):
        """Every lookup since the cache file was last idle was answered
        by the cache (no "unknown" handed to smbd's scan, no scan of the
        module's own), with at least this many hits and misses and at
        least the given value of any other counter (builds=1, ...). The
        connections must be closed. Returns the counters."""
        c = self.counters(share)
        shown = dict(c)
        self.assertEqual(c['unknown'], 0, shown)
        self.assertEqual(c['fallbacks'], 0, shown)
        self.assertGreaterEqual(c['hits'], hits, shown)
        self.assertGreaterEqual(c['misses'], misses, shown)
        for name, value in least.items():
            self.assertGreaterEqual(c[name], value, (name, shown))
        return c

    def fresh_dir(self, share, name=None):
        """An empty directory on the share for this test; its name relative
        to the share (SMB paths use backslashes; the name has none)."""
        name = name or self.id().rsplit('.', 1)[-1]
        path = self.local(share, name)
        if os.path.lexists(path):
            remove_tree(path)
        os.mkdir(path)
        return name
