"""
Reliability: a storm of concurrent clients and local programs on names that
differ only in case, smbd children killed in the middle, broken or unusable
cache files, exhausted inotify limits, directories beyond the cache's size
limit, long names and paths. Whatever happens, clients get correct answers.

FASTCASE_STRESS_SECONDS makes the storm longer (./waf stress).
"""

import json
import multiprocessing
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
import unittest

from samba import NTSTATUSError
from samba import ntstatus

import harness
from harness import SmbdTestCase, FASTCASE

FILE_OPEN = 1
FILE_CREATE = 2
READ_WRITE = 0x0012019f
SHARE_ALL = 7

BASES = ['alpha', 'beta', 'gamma', 'delta']
STORM_SECONDS = float(os.environ.get('FASTCASE_STRESS_SECONDS', '8'))


def spellings(base):
    return [base, base.upper(), base.capitalize(), base.swapcase().title(),
            base[:2].upper() + base[2:]]


def status_of(exc):
    return exc.args[0] & 0xffffffff


# What an operation of the storm may meet: other workers create, rename and
# delete the same names under it. Any other status fails the test.
RACE_STATUSES = {
    ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
    ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
    ntstatus.NT_STATUS_SHARING_VIOLATION,
    ntstatus.NT_STATUS_DELETE_PENDING,
    ntstatus.NT_STATUS_ACCESS_DENIED,
}
# What a client meets when its smbd child is killed (only expected then).
DISCONNECT_STATUSES = {
    ntstatus.NT_STATUS_CONNECTION_DISCONNECTED,
    ntstatus.NT_STATUS_CONNECTION_RESET,
    # the client library's own status once its socket to the killed
    # process is gone (seen with Samba 4.22's python bindings)
    ntstatus.NT_STATUS_CONNECTION_REFUSED,
    ntstatus.NT_STATUS_END_OF_FILE,
    ntstatus.NT_STATUS_INVALID_NETWORK_RESPONSE,
    ntstatus.NT_STATUS_PIPE_BROKEN,
    ntstatus.NT_STATUS_IO_TIMEOUT,
}
RACE_STATUSES = {s & 0xffffffff for s in RACE_STATUSES}
DISCONNECT_STATUSES = {s & 0xffffffff for s in DISCONNECT_STATUSES}


def smb_operation(conn, rnd, d):
    """One random operation on a random spelling; its kind."""
    base = rnd.choice(BASES)
    name = d + '\\' + rnd.choice(spellings(base))
    op = rnd.random()
    if op < 0.35:
        fnum = conn.create(name, DesiredAccess=READ_WRITE,
                           ShareAccess=SHARE_ALL,
                           CreateDisposition=FILE_CREATE)
        conn.write(fnum, b'smb', 0)
        conn.close(fnum)
        return 'create'
    if op < 0.6:
        conn.loadfile(name)
        return 'load'
    if op < 0.8:
        other = rnd.choice(BASES)
        conn.rename(name, d + '\\' + rnd.choice(spellings(other)))
        return 'rename'
    if op < 0.95:
        conn.unlink(name)
        return 'unlink'
    conn.mkdir(d + '\\' + rnd.choice(spellings('dir-' + base)))
    return 'mkdir'


def smb_worker(conn_fn, share, d, seed, deadline, disconnects, results):
    """Random operations until deadline; puts (kind, {op: successes},
    {status: count}) or ('error', traceback) on results."""
    rnd = random.Random(seed)
    conn = None
    done = {}
    statuses = {}
    try:
        while time.time() < deadline:
            try:
                if conn is None:
                    conn = conn_fn(share)
                op = smb_operation(conn, rnd, d)
                done[op] = done.get(op, 0) + 1
            except NTSTATUSError as e:
                status = status_of(e)
                if status in DISCONNECT_STATUSES and disconnects:
                    conn = None     # its smbd was killed: reconnect
                elif status not in RACE_STATUSES:
                    raise
                statuses[status] = statuses.get(status, 0) + 1
        results.put(('smb', done, statuses))
    except BaseException:
        results.put(('error', 'SMB worker %d:\n%s'
                     % (seed, traceback.format_exc())))


def local_worker(path, seed, deadline, results):
    rnd = random.Random(seed)
    done = {}
    try:
        while time.time() < deadline:
            name = os.path.join(path, rnd.choice(
                spellings('local-' + rnd.choice(BASES))))
            op = rnd.random()
            try:
                if op < 0.4:
                    with open(name, 'wb') as f:
                        f.write(b'local')
                    kind = 'local create'
                elif op < 0.7:
                    os.unlink(name)
                    kind = 'local unlink'
                else:
                    os.rename(name, os.path.join(path, rnd.choice(
                        spellings('local-' + rnd.choice(BASES)))))
                    kind = 'local rename'
            except FileNotFoundError:
                continue    # the other local worker moved it first
            done[kind] = done.get(kind, 0) + 1
        results.put(('local', done, {}))
    except BaseException:
        results.put(('error', 'local worker %d:\n%s'
                     % (seed, traceback.format_exc())))


def smbd_children(parent):
    out = subprocess.run([harness.tool('pgrep'), '-P', str(parent)],
                         capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


class Storm(SmbdTestCase):
    shares = {'fc': dict(FASTCASE)}

    def check_quiet_state(self, d):
        """Every name on disk is reachable by any spelling; no two names
        made over SMB fold equal."""
        c = self.conn('fc')
        names = os.listdir(self.local('fc', d))
        groups = {}
        for n in names:
            groups.setdefault(n.lower(), []).append(n)
        for key, group in groups.items():
            if not key.startswith('local-'):
                self.assertEqual(len(group), 1,
                                 'names that fold equal made over SMB: %r'
                                 % group)
            path = self.local('fc', d, group[0])
            if os.path.isdir(path):
                for spelling in (key, key.upper()):
                    c.chkpath(d + '\\' + spelling)
                continue
            for spelling in (key, key.upper(), key.capitalize()):
                data = c.loadfile(d + '\\' + spelling)
                self.assertIn(data, (b'smb', b'local', b''), spelling)
        # a miss is a miss
        with self.assertRaises(NTSTATUSError) as cm:
            c.loadfile(d + '\\never-there')
        self.assertEqual(status_of(cm.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND)

    def run_storm(self, d, kill_children):
        ctx = multiprocessing.get_context('fork')
        deadline = time.time() + STORM_SECONDS
        results = ctx.Queue()
        procs = [ctx.Process(target=smb_worker,
                             args=(self.conn, 'fc', d, i, deadline,
                                   kill_children, results))
                 for i in range(16)]
        procs += [ctx.Process(target=local_worker,
                              args=(self.local('fc', d), 100 + i, deadline,
                                    results))
                  for i in range(2)]
        for p in procs:
            p.start()
        killed = 0
        while time.time() < deadline:
            time.sleep(1.0)
            if kill_children:
                children = smbd_children(self.smbd.pid)
                if len(children) > 2:
                    os.kill(random.choice(children), signal.SIGKILL)
                    killed += 1
        reports = []
        for _ in procs:
            try:
                reports.append(results.get(timeout=STORM_SECONDS + 60))
            except queue.Empty:
                break
        for p in procs:
            p.join(10)
        errors = [r[1] for r in reports if r[0] == 'error']
        self.assertEqual(errors, [], 'a worker met the unexpected')
        self.assertEqual(len(reports), len(procs),
                         'workers died without a report: exit codes %r'
                         % [p.exitcode for p in procs])
        done = {}
        statuses = {}
        for _kind, ops, st in reports:
            for op, n in ops.items():
                done[op] = done.get(op, 0) + n
            for status, n in st.items():
                statuses['0x%08x' % status] = (
                    statuses.get('0x%08x' % status, 0) + n)
        sys.stderr.write('storm: successes %r, statuses met %r\n'
                         % (done, statuses))
        # only operations that succeeded count; each kind did
        for op in ('create', 'load', 'rename', 'unlink', 'mkdir',
                   'local create', 'local unlink', 'local rename'):
            self.assertGreater(done.get(op, 0), 0, (op, done))
        self.assertGreater(sum(done.values()), 100, done)
        return killed

    def test_storm(self):
        d = self.fresh_dir('fc')
        self.run_storm(d, kill_children=False)
        self.check_quiet_state(d)

    def test_storm_with_killed_smbd_children(self):
        d = self.fresh_dir('fc')
        killed = self.run_storm(d, kill_children=True)
        self.assertGreater(killed, 0)
        self.check_quiet_state(d)


class UnusableCache(SmbdTestCase):
    """The cache file cannot be used: answers come from smbd's scan; the
    next connection whose smbd can make it answers from the cache."""
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE

    @classmethod
    def setUpClass(cls):
        cls.ro = harness.make_tmpdir('fastcase-ro-')
        # a read-only file system under the cache file, root or not
        mount = harness.tool('mount')
        subprocess.run([mount, '--bind', cls.ro, cls.ro], check=True)
        subprocess.run([mount, '-o', 'remount,bind,ro', cls.ro], check=True)
        cls.cache_file = os.path.join(cls.ro, 'c.tdb')
        cls.shares = {
            'ro': dict(FASTCASE, **{'fastcase:cache file': cls.cache_file}),
        }
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        harness.unmount(cls.ro)
        harness.remove_tree(cls.ro)

    def test_read_only_cache_directory(self):
        d = self.fresh_dir('ro')
        with open(self.local('ro', d, 'Present.txt'), 'w') as f:
            f.write('here')
        mark = self.log_mark()
        c = self.conn('ro')
        self.assertEqual(c.loadfile(d + '\\PRESENT.TXT'), b'here')
        with self.assertRaises(NTSTATUSError) as cm:
            c.loadfile(d + '\\absent.txt')
        self.assertEqual(status_of(cm.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND)
        # a case variant is refused after a scan; a new name goes ahead
        # and the log says the check was not under a lock
        with self.assertRaises(NTSTATUSError) as cm:
            c.create(d + '\\present.TXT', DesiredAccess=READ_WRITE,
                     ShareAccess=SHARE_ALL, CreateDisposition=FILE_CREATE)
        self.assertEqual(status_of(cm.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_COLLISION)
        c.savefile(d + '\\New.txt', b'new')
        self.assertTrue(os.path.exists(self.local('ro', d, 'New.txt')))
        log = self.log_text(since=mark)
        self.assertIn('cannot use the cache file', log)
        self.assertIn('[ro]', log)
        self.assertRegex(log, r'"New.txt" in .* is created without the '
                              r'full check for case variants: no usable '
                              r'cache file, so no directory lock')
        del c
        # the next connection whose smbd can make the file answers from it
        subprocess.run([harness.tool('mount'), '-o', 'remount,bind,rw',
                        self.ro], check=True)
        self.smbd.wait_unused(self.cache_file)
        c = self.conn('ro')
        self.assertEqual(c.loadfile(d + '\\PRESENT.TXT'), b'here')
        with self.assertRaises(NTSTATUSError):
            c.loadfile(d + '\\absent.txt')
        del c
        self.assertAnsweredFromCache('ro', hits=1, misses=1, builds=1)


class BrokenCacheFiles(SmbdTestCase):
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE
    shares = {'fc': dict(FASTCASE)}

    def answers_are_right(self):
        d = self.fresh_dir('fc')
        with open(self.local('fc', d, 'Present.txt'), 'w') as f:
            f.write('here')
        c = self.conn('fc')
        self.assertEqual(c.loadfile(d + '\\PRESENT.TXT'), b'here')
        with self.assertRaises(NTSTATUSError):
            c.loadfile(d + '\\absent.txt')
        with self.assertRaises(NTSTATUSError) as cm:
            c.create(d + '\\present.TXT', DesiredAccess=READ_WRITE,
                     ShareAccess=SHARE_ALL, CreateDisposition=FILE_CREATE)
        self.assertEqual(status_of(cm.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_COLLISION)

    def cache_answered(self):
        """The broken file was made anew: the module built the directory
        and answered the lookups of answers_are_right() itself."""
        self.assertAnsweredFromCache('fc', hits=2, misses=1, builds=1)

    def replace_cache_file(self, data):
        # the last test's smbd child may still be exiting
        self.smbd.wait_unused()
        with open(self.smbd.cache_file, 'wb') as f:
            f.write(data)

    def test_garbage_file(self):
        self.replace_cache_file(os.urandom(65536))
        self.answers_are_right()
        self.cache_answered()

    def test_truncated_file(self):
        self.conn('fc').list('')
        self.smbd.wait_unused()
        size = os.path.getsize(self.smbd.cache_file)
        with open(self.smbd.cache_file, 'r+b') as f:
            f.truncate(size // 3)
        self.answers_are_right()
        self.cache_answered()

    def test_older_format_held_open(self):
        # another process (an older module) holds the file with another
        # format: the module must not use it, and must not clear it
        import struct
        import tdb
        if os.path.exists(self.smbd.cache_file):
            os.unlink(self.smbd.cache_file)
        db = tdb.Tdb(self.smbd.cache_file, 0, tdb.CLEAR_IF_FIRST,
                     os.O_RDWR | os.O_CREAT, 0o600)
        db.store(b'fastcase-format', struct.pack('=I', 0))
        try:
            mark = self.log_mark()
            self.answers_are_right()
            self.assertIn('cannot use the cache file',
                          self.log_text(since=mark))
            self.assertEqual(db.get(b'fastcase-format'),
                             struct.pack('=I', 0))
        finally:
            db.close()


# A process without a watch puts off a rebuild that would follow its last
# one too closely (fastcase:rebuild interval). Tests that count the cache's
# answers to changes made one after another rebuild at once.
EAGER = {'fastcase:rebuild interval': '0'}


class NoInotify(SmbdTestCase):
    """Stamps alone, no inotify: local changes are still seen at once, in
    the cache's answers; in a directory that keeps changing, the rebuilds
    are put off and the questions scanned meanwhile."""
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE
    shares = {'fc': dict(FASTCASE, **{'fastcase:watch limit': '0'},
                         **EAGER),
              'busy': dict(FASTCASE, **{'fastcase:watch limit': '0'})}

    def test_local_changes_without_inotify(self):
        d = self.fresh_dir('fc')
        self.smbd.wait_unused()
        c = self.conn('fc')
        for i in range(20):
            with open(self.local('fc', d, 'File%d' % i), 'w') as f:
                f.write(str(i))
            self.assertEqual(c.loadfile(d + '\\FILE%d' % i),
                             str(i).encode())
            if i % 2:
                os.unlink(self.local('fc', d, 'File%d' % (i - 1)))
                with self.assertRaises(NTSTATUSError):
                    c.loadfile(d + '\\file%d' % (i - 1))
        del c
        # the cache answered every lookup, and no inotify event was read
        c = self.assertAnsweredFromCache('fc', hits=20, misses=10)
        self.assertEqual(c['events'], 0, dict(c))

    def test_busy_directory_is_not_read_for_every_lookup(self):
        d = self.fresh_dir('busy')
        for i in range(1000):
            open(self.local('busy', d, 'Old%d' % i), 'w').close()
        self.smbd.wait_unused()
        c = self.conn('busy')
        self.assertEqual(c.loadfile(d + '\\OLD0'), b'')
        started = time.monotonic()
        for i in range(40):
            with open(self.local('busy', d, 'File%d' % i), 'w') as f:
                f.write(str(i))
            self.assertEqual(c.loadfile(d + '\\FILE%d' % i),
                             str(i).encode())
            os.unlink(self.local('busy', d, 'Old%d' % i))
            with self.assertRaises(NTSTATUSError):
                c.loadfile(d + '\\old%d' % i)
            # a case variant of a name made a moment ago is refused,
            # by a scan under the lock when the records are put off
            with self.assertRaises(NTSTATUSError) as caught:
                c.create(d + '\\file%d' % i, DesiredAccess=READ_WRITE,
                         ShareAccess=SHARE_ALL,
                         CreateDisposition=FILE_CREATE)
            self.assertEqual(status_of(caught.exception),
                             ntstatus.NT_STATUS_OBJECT_NAME_COLLISION
                             & 0xffffffff)
        elapsed = time.monotonic() - started
        del c
        c = self.counters('busy')
        shown = dict(c)
        # every change made the records out of date: each would have
        # been a read of the whole directory; at most one per interval
        self.assertGreater(c['deferred_builds'], 0, shown)
        self.assertLessEqual(c['builds'], 2 + elapsed / 0.25, shown)
        self.assertEqual(c['fallbacks'], 0, shown)


class UntrustedInotify(SmbdTestCase):
    """Where names change through another machine, inotify sees nothing of
    it: a share on a FUSE file system (bindfs here, as GlusterFS is) or
    with fastcase:trust inotify = no validates every lookup by the
    directory's timestamps. A change made beside the FUSE mount, in the
    directory it serves, stands in for one made through another node: it
    queues no event on the mount."""
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE
    shares = {'fuse': dict(FASTCASE, **EAGER),
              'forced': dict(FASTCASE, **{'fastcase:trust inotify': 'yes'}),
              'untrusted': dict(FASTCASE, **EAGER,
                                **{'fastcase:trust inotify': 'no'}),
              'put-off': dict(FASTCASE, **{'fastcase:trust inotify': 'no'})}
    FUSE_SHARES = ('fuse', 'forced')

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.backing = {}
        try:
            for name in cls.FUSE_SHARES:
                path = cls.smbd.share_path(name)
                backing = path + '.backing'
                os.mkdir(backing)
                # no attribute caching: a stat through the mount shows
                # the directory's times as they are
                subprocess.run([harness.tool('bindfs'), '-o',
                                'attr_timeout=0,entry_timeout=0,'
                                'negative_timeout=0', backing, path],
                               check=True)
                cls.backing[name] = backing
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.smbd is not None:
            cls.smbd.stop()
        for name in getattr(cls, 'backing', {}):
            harness.unmount(cls.smbd.share_path(name))
        super().tearDownClass()

    def beside(self, share, *parts):
        """The path of a name in the directory the mount serves."""
        if share in self.backing:
            return os.path.join(self.backing[share], *parts)
        return self.local(share, *parts)

    def change_beside_while_cached(self, share):
        """Cache a directory through one connection, then create a file
        beside the mount: the answer to a wrong-case open of it."""
        d = self.fresh_dir(share)
        with open(self.beside(share, d, 'Old.txt'), 'w') as f:
            f.write('old')
        self.smbd.wait_unused()
        c = self.conn(share)
        self.assertEqual(c.loadfile(d + '\\OLD.TXT'), b'old')
        with open(self.beside(share, d, 'New.txt'), 'w') as f:
            f.write('new')
        try:
            return c.loadfile(d + '\\NEW.TXT')
        except NTSTATUSError as e:
            return e.args[0]

    def test_fuse_share_sees_changes_made_beside_it(self):
        self.assertEqual(self.change_beside_while_cached('fuse'), b'new')
        c = self.assertAnsweredFromCache('fuse', hits=2, builds=2)
        self.assertEqual(c['events'], 0, dict(c))
        self.assertEqual(c['watch_failures'], 0, dict(c))

    def test_trusting_inotify_on_fuse_misses_them(self):
        # what the detection prevents: an in-sync process answers from
        # records that never heard of the new name
        self.assertEqual(self.change_beside_while_cached('forced'),
                         ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND)

    def test_untrusted_local_share(self):
        self.assertEqual(self.change_beside_while_cached('untrusted'),
                         b'new')
        c = self.assertAnsweredFromCache('untrusted', hits=2, builds=2)
        self.assertEqual(c['events'], 0, dict(c))

    def test_change_right_after_a_build_is_scanned(self):
        # the default interval: the directory changed within 250 ms of
        # its build, so the question goes to smbd's scan, which finds it
        self.assertEqual(self.change_beside_while_cached('put-off'),
                         b'new')
        c = self.counters('put-off')
        shown = dict(c)
        self.assertEqual(c['deferred_builds'], 1, shown)
        self.assertEqual(c['unknown'], 1, shown)
        self.assertEqual(c['builds'], 1, shown)


class FrozenDirectoryTimes(SmbdTestCase):
    """A file system whose directories keep their times when their names
    change (tests/integration/frozen_times_fs.py, FUSE): a process that
    cannot watch a directory has nothing to tell it of a change, so once
    a create through the module shows the times standing still, smbd's
    scan answers there, and the module says why, once."""
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE
    shares = {'frozen': dict(FASTCASE, **EAGER)}
    MESSAGE = 'this file system gives no usable directory times'

    @classmethod
    def setUpClass(cls):
        try:
            import fusepy  # noqa: F401 (python3-fusepy: not in sid)
        except ImportError:
            raise unittest.SkipTest('no python3-fusepy in this root')
        super().setUpClass()
        cls.fs = None
        try:
            path = cls.smbd.share_path('frozen')
            cls.backing = path + '.backing'
            os.mkdir(cls.backing)
            cls.fs = subprocess.Popen(
                [sys.executable, os.path.join(os.path.dirname(__file__),
                                              'frozen_times_fs.py'),
                 cls.backing, path])
            harness.wait_until(lambda: os.path.ismount(path), 30,
                               'the frozen-times FUSE mount at ' + path)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.smbd is not None:
            cls.smbd.stop()
            harness.unmount(cls.smbd.share_path('frozen'))
        if cls.fs is not None:
            cls.fs.kill()
            cls.fs.wait()
        super().tearDownClass()

    def beside(self, *parts):
        return os.path.join(self.backing, *parts)

    def test_create_that_leaves_the_times_hands_lookups_back(self):
        d = self.fresh_dir('frozen')
        with open(self.beside(d, 'Old.txt'), 'w') as f:
            f.write('old')
        c = self.conn('frozen')
        self.assertEqual(c.loadfile(d + '\\OLD.TXT'), b'old')
        mark = self.log_mark()
        c.savefile(d + '\\Made.txt', b'made')
        self.assertIn(self.MESSAGE, self.log_text(since=mark))
        # a change the cache cannot know of: smbd's scan finds it, in
        # this process and in a new one
        with open(self.beside(d, 'Beside.txt'), 'w') as f:
            f.write('beside')
        self.assertEqual(c.loadfile(d + '\\BESIDE.TXT'), b'beside')
        c2 = self.conn('frozen')
        self.assertEqual(c2.loadfile(d + '\\beside.txt'), b'beside')
        with self.assertRaises(NTSTATUSError) as cm:
            c2.create(d + '\\BESIDE.txt', DesiredAccess=READ_WRITE,
                      ShareAccess=SHARE_ALL, CreateDisposition=FILE_CREATE)
        self.assertEqual(status_of(cm.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_COLLISION)
        os.unlink(self.beside(d, 'Old.txt'))
        with self.assertRaises(NTSTATUSError):
            c2.loadfile(d + '\\old.txt')
        self.assertEqual(self.log_text(since=mark).count(self.MESSAGE), 1)


class InotifyInstancesExhausted(SmbdTestCase):
    """inotify instances count per user (fs.inotify.max_user_instances).
    Each smbd process makes its instance at its first request, as the
    connected user: one user's connections past the limit validate by
    timestamps, and neither root's daemons nor other users pay for
    them."""
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE
    shares = {'fc': dict(FASTCASE, **EAGER)}
    SYSCTL = 'fs/inotify/max_user_instances'
    OTHER_USER = 'nobody'
    OTHER_PASSWORD = 'Other-pw-1'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.smbd.add_user(cls.OTHER_USER, cls.OTHER_PASSWORD)

    def take_roots_instances(self):
        """Every inotify instance root may have, held until the test
        ends (the limit lowered to 16, restored afterwards)."""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        saved = harness.set_sysctl(self.SYSCTL, 16)
        self.addCleanup(harness.set_sysctl, self.SYSCTL, saved)
        while True:
            fd = libc.inotify_init1(os.O_CLOEXEC)
            if fd < 0:
                break
            self.addCleanup(os.close, fd)

    def test_another_users_connection_has_its_own(self):
        d = self.fresh_dir('fc')
        # the other user may reach the directory (in the test's tree only)
        path = self.local('fc', d)
        os.chmod(path, 0o777)
        while path != self.smbd.tmp:
            path = os.path.dirname(path)
            os.chmod(path, os.stat(path).st_mode | 0o755)
        self.smbd.wait_unused()
        self.take_roots_instances()
        mark = self.log_mark()
        c = self.conn('fc', user=self.OTHER_USER,
                      password=self.OTHER_PASSWORD)
        c.savefile(d + '\\Made.txt', b'm')
        with open(self.local('fc', d, 'Local.txt'), 'w') as f:
            f.write('l')
        self.assertEqual(c.loadfile(d + '\\LOCAL.TXT'), b'l')
        self.assertNotIn('no inotify instance', self.log_text(since=mark))
        del c
        # the local create reached the cache as an inotify event
        c = self.counters('fc')
        self.assertGreaterEqual(c['events'], 1, dict(c))

    def test_no_inotify_instance_left(self):
        d = self.fresh_dir('fc')
        self.smbd.wait_unused()
        # every instance root may have taken, then connect as root
        self.take_roots_instances()
        mark = self.log_mark()
        c = self.conn('fc')
        with open(self.local('fc', d, 'Made.txt'), 'w') as f:
            f.write('m')
        self.assertEqual(c.loadfile(d + '\\MADE.TXT'), b'm')
        os.unlink(self.local('fc', d, 'Made.txt'))
        with self.assertRaises(NTSTATUSError):
            c.loadfile(d + '\\made.txt')
        self.assertIn('no inotify instance', self.log_text(since=mark))
        del c
        # validated by timestamps: still the cache's answers
        c = self.assertAnsweredFromCache('fc', hits=1, misses=1)
        self.assertEqual(c['events'], 0, dict(c))


class ManyConnections(SmbdTestCase):
    """300 connections of one user to one share, each its own smbd
    process, make wrong-case lookups while a local program changes the
    directory every 5 ms. Past the user's inotify limit the processes
    have no watch and the directory's times never settle, yet every
    wrong-case hit is answered by the cache (confirmed by a stat of the
    name), not by smbd's scan of the directory or a read of it per
    lookup. The CPU per lookup, first 100 against last 100 processes, is
    measured by tests/bench/many_connections.py."""
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE
    shares = {'fc': dict(FASTCASE)}
    SYSCTL = 'fs/inotify/max_user_instances'
    CONNECTIONS = 300
    ENTRIES = 2000
    LOOKUPS = 5

    def connect_all(self, d):
        """Every connection, each making its first request (and so its
        inotify instance, while the user's limit allows) in turn."""
        conns = []
        for n in range(self.CONNECTIONS):
            conn = self.conn('fc')
            self.assertEqual(conn.loadfile(d + '\\FILE_%05d.TXT' % n),
                             b'')
            conns.append(conn)
        return conns

    def test_300_connections_past_the_inotify_limit(self):
        d = self.fresh_dir('fc')
        path = self.local('fc', d)
        for i in range(self.ENTRIES):
            open(os.path.join(path, 'File_%05d.txt' % i), 'w').close()
        self.smbd.wait_unused()
        saved = harness.set_sysctl(self.SYSCTL, 128)
        self.addCleanup(harness.set_sysctl, self.SYSCTL, saved)
        conns = self.connect_all(d)
        children = smbd_children(self.smbd.pid)
        unwatched = [p for p in children if not harness.has_inotify(p)]
        # the case under test: processes past the limit
        self.assertGreaterEqual(len(unwatched), 100,
                                (len(children), len(unwatched)))
        stop = threading.Event()
        writer = threading.Thread(target=harness.create_and_delete_until,
                                  args=(path, 0.005, stop))
        writer.start()
        try:
            k = 0
            for conn in conns:
                for _ in range(self.LOOKUPS):
                    i = (k * 7919) % self.ENTRIES
                    self.assertEqual(
                        conn.loadfile(d + '\\FILE_%05d.TXT' % i), b'', i)
                    k += 1
            del conn
        finally:
            stop.set()
            writer.join()
        # the other answers of a process past the limit stay right
        last = conns[-1]
        with open(os.path.join(path, 'Made_late.txt'), 'w') as f:
            f.write('late')
        self.assertEqual(last.loadfile(d + '\\MADE_LATE.TXT'), b'late')
        with self.assertRaises(NTSTATUSError) as caught:
            last.loadfile(d + '\\NO_SUCH_FILE.TXT')
        self.assertEqual(status_of(caught.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND
                         & 0xffffffff)
        del conns, last
        c = self.counters('fc')
        shown = dict(c)
        lookups = self.CONNECTIONS * (1 + self.LOOKUPS)
        self.assertGreaterEqual(c['confirmed_hits'],
                                100 * self.LOOKUPS, shown)
        # only the two lookups above may go to smbd's scan; each
        # watching process reads the directory at most once
        self.assertLessEqual(c['unknown'], 2, shown)
        self.assertGreaterEqual(c['hits'], lookups, shown)
        self.assertLessEqual(c['builds'],
                             len(children) - len(unwatched) + 2, shown)


class Limits(SmbdTestCase):
    shares = {
        'fc': dict(FASTCASE),
        'tiny': dict(FASTCASE, **{'fastcase:cache size': '1M'}),
    }

    def test_directory_larger_than_the_cache(self):
        d = self.fresh_dir('tiny')
        for i in range(20000):
            open(self.local('tiny', d, 'Entry-%05d-padding-padding' % i),
                 'w').close()
        mark = self.log_mark()
        c = self.conn('tiny')
        c.loadfile(d + '\\ENTRY-12345-PADDING-PADDING')
        with self.assertRaises(NTSTATUSError):
            c.loadfile(d + '\\entry-99999')
        self.assertIn('exceeds', self.log_text(since=mark))

    def test_255_byte_names_and_4000_byte_paths(self):
        d = self.fresh_dir('fc')
        long_name = 'L' * 250 + '.txt'
        with open(self.local('fc', d, long_name), 'w') as f:
            f.write('long')
        c = self.conn('fc')
        self.assertEqual(c.loadfile(d + '\\' + long_name.lower()), b'long')
        parts = ['Component%03d' % i + 'x' * 60 for i in range(54)]
        # longer than the local absolute path may be: walk with dir fds
        fd = os.open(self.local('fc', d), os.O_RDONLY | os.O_DIRECTORY)
        for p in parts:
            os.mkdir(p, dir_fd=fd)
            sub = os.open(p, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        leaf = os.open('Leaf.txt', os.O_WRONLY | os.O_CREAT, 0o644,
                       dir_fd=fd)
        os.write(leaf, b'leaf')
        os.close(leaf)
        os.close(fd)
        smb = '\\'.join([d] + [p.upper() for p in parts] + ['LEAF.TXT'])
        self.assertGreater(len(smb), 3900)
        self.assertEqual(c.loadfile(smb), b'leaf')


class MillionEntries(SmbdTestCase):
    """A directory of 1,000,000 entries: wrong-case opens, misses, an
    exact-name search, creates and collisions answer correctly, from the
    cache (default size limit), and a local change is seen at once."""
    shares = {'fc': dict(FASTCASE)}
    ENTRIES = 1000000

    def test_million_entries(self):
        d = self.fresh_dir('fc')
        fd = os.open(self.local('fc', d), os.O_RDONLY | os.O_DIRECTORY)
        for i in range(self.ENTRIES):
            os.close(os.open('Entry_%07d.dat' % i,
                             os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
        os.close(fd)
        c = self.conn('fc')
        for i in (0, 1, 499999, 999999):
            self.assertEqual(c.loadfile(d + '\\ENTRY_%07d.DAT' % i), b'')
        with self.assertRaises(NTSTATUSError) as cm:
            c.loadfile(d + '\\entry_%07d.dat' % self.ENTRIES)
        self.assertEqual(status_of(cm.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND)
        self.assertEqual([e['name'] for e in
                          c.list(d, mask='entry_0123456.DAT')],
                         ['Entry_0123456.dat'])
        with self.assertRaises(NTSTATUSError) as cm:
            c.create(d + '\\ENTRY_0000007.DAT', DesiredAccess=READ_WRITE,
                     ShareAccess=SHARE_ALL, CreateDisposition=FILE_CREATE)
        self.assertEqual(status_of(cm.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_COLLISION)
        c.close(c.create(d + '\\New_Entry.dat', DesiredAccess=READ_WRITE,
                         ShareAccess=SHARE_ALL,
                         CreateDisposition=FILE_CREATE))
        self.assertTrue(os.path.exists(self.local('fc', d, 'New_Entry.dat')))
        os.rename(self.local('fc', d, 'Entry_0000042.dat'),
                  self.local('fc', d, 'Moved_0000042.dat'))
        self.assertEqual(c.loadfile(d + '\\MOVED_0000042.DAT'), b'')
        with self.assertRaises(NTSTATUSError):
            c.loadfile(d + '\\ENTRY_0000042.DAT')
        del c
        stat_tool = os.path.join(os.environ['FASTCASE_BUILD'],
                                 'fastcase-stat')
        for _ in range(50):
            r = subprocess.run([stat_tool, '--json', self.smbd.cache_file],
                               capture_output=True, text=True)
            if '"fc"' in r.stdout:
                break
            time.sleep(0.1)
        fc = json.loads(r.stdout)['shares']['fc']
        # one build; every answer came from the cache, none from a scan
        self.assertEqual(fc['too_big'], 0)
        self.assertGreaterEqual(fc['hits'], 6)
        self.assertGreaterEqual(fc['misses'], 2)


class TallocPerRequest(SmbdTestCase):
    """No talloc memory kept per lookup: smbd's own talloc report of the
    serving process stays flat across 10,000 lookups."""
    shares = {'fc': dict(FASTCASE)}

    def talloc_total(self, pid):
        r = subprocess.run([harness.tool('smbcontrol'),
                            '--configfile=' + self.smbd.conf,
                            str(pid), 'pool-usage'],
                           capture_output=True, text=True, timeout=30,
                           errors='replace')
        for line in r.stdout.splitlines():
            if line.startswith('full talloc report on'):
                # "full talloc report on 'null_context' (total N bytes
                # in M blocks)"
                return int(line.split('(total', 1)[1].split()[0])
        self.fail('no talloc report from %d: %s %s'
                  % (pid, r.stdout[:300], r.stderr[:300]))

    def test_10000_lookups(self):
        d = self.fresh_dir('fc')
        for i in range(200):
            open(self.local('fc', d, 'Name%03d' % i), 'w').close()
        c = self.conn('fc')

        def lookups(n):
            for i in range(n):
                try:
                    c.loadfile(d + '\\NAME%03d' % (i % 400))
                except NTSTATUSError:
                    pass    # the upper half are misses

        lookups(1000)
        # the process serving this session, as smbstatus names it
        pids = self.smbd.session_pids()
        self.assertEqual(len(pids), 1, pids)
        pid = pids[0]
        before = self.talloc_total(pid)
        lookups(10000)
        after = self.talloc_total(pid)
        sys.stderr.write('talloc total of smbd %d: %d -> %d bytes\n'
                         % (pid, before, after))
        # 10,000 lookups: even 8 bytes kept per lookup would show
        self.assertLess(after - before, 40000, (before, after))


class CacheFileSystemFull(SmbdTestCase):
    """The cache's file system fills up during a build: the build fails,
    smbd scans, answers stay right."""
    FS_SIZE = '6m'
    ENTRIES = 60000
    LOGGED = 'cannot cache directory'

    @classmethod
    def setUpClass(cls):
        cls.small = harness.make_tmpdir('fastcase-full-')
        subprocess.run([harness.tool('mount'), '-t', 'tmpfs', '-o',
                        'size=%s' % cls.FS_SIZE, 'fastcase-full',
                        cls.small], check=True)
        cls.shares = {'fc': dict(FASTCASE, **{
            'fastcase:cache file': os.path.join(cls.small, 'c.tdb')})}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        harness.unmount(cls.small)
        harness.remove_tree(cls.small)

    def test_directory_too_big_for_the_disk(self):
        d = self.fresh_dir('fc')
        name = 'Entry-%05d-with-a-long-name-' + 'x' * 60
        for i in range(self.ENTRIES):
            open(self.local('fc', d, name % i), 'w').close()
        mark = self.log_mark()
        c = self.conn('fc')
        for i in range(0, self.ENTRIES, self.ENTRIES // 10):
            c.loadfile(d + '\\' + (name % i).upper())
        with self.assertRaises(NTSTATUSError) as cm:
            c.loadfile(d + '\\entry-99999')
        self.assertEqual(status_of(cm.exception),
                         ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND)
        # a small directory is still cached and right
        d2 = self.fresh_dir('fc')
        open(self.local('fc', d2, 'Small.txt'), 'w').close()
        self.assertEqual(c.loadfile(d2 + '\\SMALL.TXT'), b'')
        self.assertIn(self.LOGGED, self.log_text(since=mark))


class CacheFileSystemTooFullToOpen(CacheFileSystemFull):
    """Too little room to create the cache file at all: smbd scans."""
    FS_SIZE = '256k'
    ENTRIES = 5000
    LOGGED = 'cannot use the cache file'


def voluntary_switches(pid):
    """How often the process has gone to sleep (/proc/PID/status)."""
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('voluntary_ctxt_switches:'):
                return int(line.split()[1])
    raise RuntimeError('no voluntary_ctxt_switches for %d' % pid)


class InotifyLimits(SmbdTestCase):
    """Few watches and a short event queue: overflows and failed watches
    fall back to validation, never to a stale answer, and the cache still
    answers."""
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE
    shares = {'fc': dict(FASTCASE, **EAGER)}
    WATCHES = 'fs/inotify/max_user_watches'
    QUEUE = 'fs/inotify/max_queued_events'

    def set_limit(self, name, value):
        # run.py restores it too if this process is killed
        saved = harness.set_sysctl(name, value)
        self.addCleanup(harness.set_sysctl, name, saved)

    def test_queue_overflow(self):
        self.set_limit(self.QUEUE, 16)
        d = self.fresh_dir('fc')
        self.smbd.wait_unused()
        c = self.conn('fc')     # a new process: its queue holds 16
        with self.assertRaises(NTSTATUSError):
            c.loadfile(d + '\\FILE0')
        # smbd reads its queue as soon as an event arrives: stopped, it
        # cannot, and the queue overflows for certain
        pids = self.smbd.session_pids()
        self.assertEqual(len(pids), 1, pids)
        os.kill(pids[0], signal.SIGSTOP)
        try:
            for i in range(200):    # far more events than the queue holds
                with open(self.local('fc', d, 'File%d' % i), 'w') as f:
                    f.write(str(i))
        finally:
            os.kill(pids[0], signal.SIGCONT)
        for i in range(0, 200, 7):
            self.assertEqual(c.loadfile(d + '\\FILE%d' % i), b'%d' % i)
        for i in range(0, 200, 2):
            os.unlink(self.local('fc', d, 'File%d' % i))
        for i in range(0, 200, 9):
            if i % 2:
                self.assertEqual(c.loadfile(d + '\\file%d' % i),
                                 b'%d' % i)
            else:
                with self.assertRaises(NTSTATUSError):
                    c.loadfile(d + '\\file%d' % i)
        del c
        # the queue did overflow, and the cache, revalidated, answered
        self.assertAnsweredFromCache('fc', hits=29 + 11, misses=1 + 12,
                                     overflows=1)

    def test_idle_process_wakes_per_batch(self):
        # a queue that holds a burst of changes: an idle process applies
        # them a batch at a time (vfs_fastcase.c, FASTCASE_BATCH_USEC),
        # not waking once per change, and its lookups still see each one
        self.set_limit(self.QUEUE, 16384)
        d = self.fresh_dir('fc')
        self.smbd.wait_unused()
        c = self.conn('fc')
        with self.assertRaises(NTSTATUSError):
            c.loadfile(d + '\\FILE0')
        pids = self.smbd.session_pids()
        self.assertEqual(len(pids), 1, pids)
        woken = voluntary_switches(pids[0])
        for i in range(300):
            with open(self.local('fc', d, 'File%d' % i), 'w') as f:
                f.write(str(i))
            time.sleep(0.001)
        time.sleep(0.1)
        woken = voluntary_switches(pids[0]) - woken
        # one at a time it woke 300 times; in batches twice per 20 ms
        self.assertLess(woken, 150)
        for i in range(0, 300, 7):
            self.assertEqual(c.loadfile(d + '\\FILE%d' % i), b'%d' % i)
        del c
        counters = self.assertAnsweredFromCache('fc', hits=43, misses=1)
        self.assertEqual(counters['overflows'], 0, counters)

    def test_watches_exhausted(self):
        # no watch can be added by anyone of this user
        self.set_limit(self.WATCHES, 1)
        d = self.fresh_dir('fc')
        os.mkdir(self.local('fc', d, 'Sub'))
        self.smbd.wait_unused()
        c = self.conn('fc')
        for i in range(10):
            with open(self.local('fc', d, 'Sub', 'F%d' % i), 'w') as f:
                f.write('x')
            self.assertEqual(c.loadfile(d + '\\SUB\\f%d' % i), b'x')
            os.unlink(self.local('fc', d, 'Sub', 'F%d' % i))
            with self.assertRaises(NTSTATUSError):
                c.loadfile(d + '\\sub\\F%d' % i)
        del c
        # no watch, validated by timestamps: the cache still answered
        self.assertAnsweredFromCache('fc', hits=20, misses=10,
                                     watch_failures=1)
