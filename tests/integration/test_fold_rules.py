"""
fastcase:fold = unicode where the cache cannot answer: the module reads the
directory itself and compares by the unicode rule, since smbd's own scan
would compare by smbd's rule. Asserted with names only the unicode rule
calls equal (straße and STRASSE: smbd's table keeps ß as its own upper
case), so a module that handed these lookups back to smbd would fail.
And a directory the connecting user cannot read: handed back to smbd,
with the same answers as a share without the module.
"""

import json
import os
import subprocess
import time

from samba import NTSTATUSError
from samba import ntstatus

from harness import (SmbdTestCase, FASTCASE, tool, make_tmpdir,
                     remove_tree)

FILE_CREATE = 2
READ_WRITE = 0x0012019f     # FILE_GENERIC_READ | FILE_GENERIC_WRITE
SHARE_ALL = 7

UNICODE = dict(FASTCASE, **{'fastcase:fold': 'unicode'})


def status_of(exc):
    return exc.args[0] & 0xffffffff


def outcome(fn, *args):
    """('ok', result) or ('error', NTSTATUS) of one client call."""
    try:
        return ('ok', fn(*args))
    except NTSTATUSError as e:
        return ('error', status_of(e))


def create(conn, path):
    fnum = conn.create(path, DesiredAccess=READ_WRITE,
                       ShareAccess=SHARE_ALL, CreateDisposition=FILE_CREATE)
    conn.close(fnum)


class UnicodeRuleTestCase(SmbdTestCase):
    """Shares 'uni' (the case under test) and 'stock' (no module)."""

    def put(self, share, d, name, data):
        with open(os.path.join(self.local(share, d).encode(),
                               name.encode()), 'wb') as f:
            f.write(data)

    def assertStockMisses(self):
        """Without the module, smbd's rule does not find straße.txt by
        STRASSE.TXT: the answers below are the unicode rule's own."""
        d = self.fresh_dir('stock')
        self.put('stock', d, 'straße.txt', b'sharp s')
        self.assertEqual(outcome(self.conn('stock').loadfile,
                                 d + '\\STRASSE.TXT'),
                         ('error', ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND))

    def assertUnicodeAnswers(self, d):
        """straße.txt is in uni's d."""
        c = self.conn('uni')
        self.assertEqual(c.loadfile(d + '\\STRASSE.TXT'), b'sharp s')
        self.assertEqual(c.loadfile(d + '\\strasse.txt'), b'sharp s')
        self.assertEqual(outcome(c.loadfile, d + '\\absent.txt'),
                         ('error', ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND))
        # a create of a variant meets the existing name
        self.assertEqual(outcome(create, c, d + '\\Strasse.txt'),
                         ('error', ntstatus.NT_STATUS_OBJECT_NAME_COLLISION))
        self.assertFalse(os.path.exists(self.local('uni', d, 'Strasse.txt')))

    def counters(self, share):
        """The share's counters in the cache file, once its connections
        have closed and flushed them."""
        stat_tool = os.path.join(os.environ['FASTCASE_BUILD'],
                                 'fastcase-stat')
        deadline = time.monotonic() + 5
        while True:
            r = subprocess.run([stat_tool, '--json', self.smbd.cache_file],
                               capture_output=True, text=True)
            if r.returncode == 0:
                shares = json.loads(r.stdout)['shares']
                if share in shares:
                    return shares[share]
            if time.monotonic() > deadline:
                self.fail('no counters for [%s] in the cache file: %s%s'
                          % (share, r.stdout, r.stderr))
            time.sleep(0.05)


class UnicodeWithoutCache(UnicodeRuleTestCase):
    """The cache file is on a read-only file system: no cache at all."""

    @classmethod
    def setUpClass(cls):
        cls.ro = make_tmpdir('fastcase-ro-')
        # read-only for root too, as whom the module opens the cache
        subprocess.run([tool('mount'), '--bind', cls.ro, cls.ro],
                       check=True)
        subprocess.run([tool('mount'), '-o', 'remount,bind,ro', cls.ro],
                       check=True)
        cls.shares = {
            'uni': dict(UNICODE, **{
                'fastcase:cache file': os.path.join(cls.ro, 'c.tdb')}),
            'stock': {},
        }
        try:
            super().setUpClass()
        except BaseException:
            cls.unmount()
            raise

    @classmethod
    def unmount(cls):
        subprocess.run([tool('umount'), cls.ro])
        remove_tree(cls.ro)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.unmount()

    def test_unicode_answers_without_a_cache(self):
        self.assertStockMisses()
        d = self.fresh_dir('uni')
        self.put('uni', d, 'straße.txt', b'sharp s')
        mark = self.log_mark()
        self.assertUnicodeAnswers(d)
        log = self.log_text(since=mark)
        self.assertIn('share [uni]: cannot use the cache file', log)


class UnicodeDirectoryTooBig(UnicodeRuleTestCase):
    """A directory over its share of fastcase:cache size is not cached:
    the module scans it on each lookup."""

    shares = {
        'uni': dict(UNICODE, **{'fastcase:cache size': '1M'}),
        'stock': {},
    }

    def test_unicode_answers_in_a_directory_over_the_limit(self):
        self.assertStockMisses()
        d = self.fresh_dir('uni')
        # about 600 KB of names: more than half of 1M
        for i in range(20000):
            open(self.local('uni', d, 'Entry-%05d-padding-padding' % i),
                 'w').close()
        self.put('uni', d, 'straße.txt', b'sharp s')
        mark = self.log_mark()
        self.assertUnicodeAnswers(d)
        self.assertIn('exceeds', self.log_text(since=mark))
        counters = self.counters('uni')
        # it was too big, and the module's own scans answered
        self.assertGreaterEqual(counters['too_big'], 1)
        self.assertGreaterEqual(counters['fallbacks'], 3)


class UnreadableDirectory(SmbdTestCase):
    """As a user who may pass through a directory but not read it, or not
    even pass: the module cannot read the directory, hands the question
    back to smbd, and the answers are those of a share without it. Also
    once root has read the directory through a share on the same path
    and so put its names in the shared cache."""

    NOBODY = {'force user': 'nobody', 'force group': 'nogroup'}
    SHARES = {
        'uni': dict(UNICODE, **NOBODY),
        'win': dict(FASTCASE, **NOBODY),
        'stock': dict(NOBODY),
        # the same directories, as root
        'uniroot': dict(UNICODE),
        'winroot': dict(FASTCASE),
    }

    @classmethod
    def setUpClass(cls):
        cls.base = make_tmpdir('fastcase-unreadable-')
        cls.shares = {}
        for name, params in cls.SHARES.items():
            path = os.path.join(cls.base, name.replace('root', ''))
            os.makedirs(path, exist_ok=True)
            cls.shares[name] = dict(params, path=path)
        try:
            super().setUpClass()
        except BaseException:
            remove_tree(cls.base)
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            remove_tree(cls.base)

    def layout(self, share):
        d = self.fresh_dir(share)
        for sub, mode in (('Locked', 0o711), ('Sealed', 0o000)):
            os.mkdir(self.local(share, d, sub))
            for name in ('Inner.txt', 'straße.txt'):
                with open(self.local(share, d, sub, name), 'w') as f:
                    f.write(sub + ' ' + name)
            os.chmod(self.local(share, d, sub), mode)
        self.addCleanup(self.unlock, share, d)
        return d

    def unlock(self, share, d):
        for sub in ('Locked', 'Sealed'):
            os.chmod(self.local(share, d, sub), 0o755)

    def answers(self, share, d):
        c = self.conn(share)
        got = {}
        for path in ('Locked\\Inner.txt', 'Locked\\INNER.TXT',
                     'LOCKED\\Inner.txt', 'Locked\\STRASSE.TXT',
                     'Locked\\absent.txt', 'Sealed\\Inner.txt',
                     'Sealed\\INNER.TXT'):
            got['load ' + path] = outcome(c.loadfile, d + '\\' + path)
        for sub in ('Locked', 'Sealed'):
            got['list ' + sub] = outcome(
                lambda p: sorted(e['name'] for e in c.list(p)),
                d + '\\' + sub)
        got['create Locked\\inner.TXT'] = outcome(
            create, c, d + '\\Locked\\inner.TXT')
        return got

    def read_as_root(self, share, d):
        """The module, as root, reads both directories into the cache."""
        c = self.conn(share + 'root')
        for sub in ('Locked', 'Sealed'):
            self.assertEqual(c.loadfile(d + '\\%s\\INNER.TXT' % sub),
                             ('%s Inner.txt' % sub).encode())

    def test_same_answers_as_stock(self):
        stock = self.answers('stock', self.layout('stock'))
        # the directories are what they claim for the forced user
        self.assertEqual(stock['load Locked\\Inner.txt'],
                         ('ok', b'Locked Inner.txt'))
        self.assertEqual(stock['load LOCKED\\Inner.txt'],
                         ('ok', b'Locked Inner.txt'))
        self.assertEqual(stock['load Locked\\INNER.TXT'][0], 'error')
        self.assertEqual(stock['list Locked'][0], 'error')
        self.assertEqual(stock['load Sealed\\Inner.txt'][0], 'error')
        for share in ('uni', 'win'):
            d = self.layout(share)
            self.assertEqual(self.answers(share, d), stock, share)
            self.read_as_root(share, d)
            self.assertEqual(self.answers(share, d), stock,
                             share + ', once cached by root')
