"""
Hostile names and paths: invalid UTF-8, look-alikes, control characters,
names that would fold or normalize to "." or "..", symlinks and hard links
pointing outside the share. A fastcase share must give the same answer as
a stock share on the same directory, for every case spelling, and never let
a name escape the share.
"""

import os
import unicodedata

from samba import NTSTATUSError

from harness import SmbdTestCase, FASTCASE

DISK_NAMES = [
    b'caf\xe9.txt',             # latin-1
    b'trunc\xe2\x82.txt',       # truncated sequence
    b'over\xc0\xaf.txt',        # overlong "/"
    b'dots\xc0\xae\xc0\xae',    # overlong ".."
    '．．'.encode(),             # fullwidth full stops
    'ｆｕｌｌ.txt'.encode(),      # fullwidth letters
    b'ctl\x01\x1f.txt',         # control characters
    'Kelvin\u212a.txt'.encode(),  # folds to k under full Unicode rules
    'straße.txt'.encode(),
    unicodedata.normalize('NFD', 'Café-nfd.txt').encode(),
    b'Plain.txt',
]

CLIENT_NAMES = [
    'café.txt', 'CAFÉ.TXT', 'trunc.txt', 'over/.txt', 'over.txt', '..',
    '．．', '．．\\..\\..\\etc\\passwd', 'ＦＵＬＬ.TXT', 'full.txt',
    'CTL\x01\x1f.TXT', 'kelvink.txt', 'KELVIN\u212a.TXT', 'STRASSE.TXT',
    'STRAßE.TXT', 'Café-nfd.txt', 'PLAIN.TXT', 'plain.txt',
    'link-out\\passwd', 'LINK-OUT\\PASSWD', 'link-in\\INNER.TXT',
    'LINK-IN\\inner.txt', 'LINK-FILE-OUT', 'link-file-out',
    'hard-OUT', 'Sub\\..\\..\\etc\\passwd', 'SUB\\INNER.TXT',
]


def outcome(conn, name):
    try:
        return 'ok:%r' % conn.loadfile(name)[:16]
    except NTSTATUSError as e:
        return '0x%08x' % (e.args[0] & 0xffffffff)
    except Exception as e:
        return 'error:%s' % type(e).__name__


class SameAnswersAsStock(SmbdTestCase):
    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.tree = tempfile.mkdtemp(prefix='fastcase-hostile-')
        cls.outside = tempfile.mkdtemp(prefix='fastcase-outside-')
        with open(os.path.join(cls.outside, 'passwd'), 'w') as f:
            f.write('outside')
        for i, name in enumerate(DISK_NAMES):
            with open(os.path.join(cls.tree.encode(), name), 'wb') as f:
                f.write(b'f%d' % i)
        os.mkdir(os.path.join(cls.tree, 'Sub'))
        with open(os.path.join(cls.tree, 'Sub', 'Inner.txt'), 'w') as f:
            f.write('inner')
        os.symlink(cls.outside, os.path.join(cls.tree, 'link-out'))
        os.symlink('Sub', os.path.join(cls.tree, 'link-in'))
        os.symlink(os.path.join(cls.outside, 'passwd'),
                   os.path.join(cls.tree, 'link-file-out'))
        os.link(os.path.join(cls.outside, 'passwd'),
                os.path.join(cls.tree, 'hard-out'))
        narrow = {'path': cls.tree}
        wide = {'path': cls.tree, 'wide links': 'yes'}
        nofollow = {'path': cls.tree, 'follow symlinks': 'no'}
        cls.shares = {
            'stock': dict(narrow),
            'fc': dict(narrow, **FASTCASE),
            'fcuni': dict(narrow, **FASTCASE, **{
                'fastcase:fold': 'unicode', 'fastcase:normalize': 'nfc'}),
            'stockwide': dict(wide),
            'fcwide': dict(wide, **FASTCASE),
            'stocknofollow': dict(nofollow),
            'fcnofollow': dict(nofollow, **FASTCASE),
        }
        cls.global_params = {'allow insecure wide links': 'yes'}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        import shutil
        shutil.rmtree(cls.tree)
        shutil.rmtree(cls.outside)

    def compare(self, stock, fast):
        s, f = self.conn(stock), self.conn(fast)
        diffs = []
        answers = {}
        for name in CLIENT_NAMES:
            a, b = outcome(s, name), outcome(f, name)
            answers[name] = b
            if a != b:
                diffs.append((name, a, b))
        self.assertEqual(diffs, [])
        # the comparison means something: wrong-case names do resolve
        self.assertEqual(answers['PLAIN.TXT'], "ok:b'f10'")
        self.assertEqual(answers['SUB\\INNER.TXT'], "ok:b'inner'")
        return answers

    def test_default_links(self):
        answers = self.compare('stock', 'fc')
        # wide links = no: a symlink out of the share is refused
        self.assertNotEqual(answers['LINK-OUT\\PASSWD'], "ok:b'outside'")
        self.assertNotEqual(answers['link-file-out'], "ok:b'outside'")
        self.assertEqual(answers['LINK-IN\\inner.txt'], "ok:b'inner'")

    def test_wide_links(self):
        answers = self.compare('stockwide', 'fcwide')
        self.assertEqual(answers['LINK-OUT\\PASSWD'], "ok:b'outside'")

    def test_no_follow_symlinks(self):
        answers = self.compare('stocknofollow', 'fcnofollow')
        self.assertNotEqual(answers['LINK-IN\\inner.txt'], "ok:b'inner'")

    def test_nothing_escapes_under_unicode_rules(self):
        c = self.conn('fcuni')
        for name in ['link-out\\passwd', 'LINK-OUT\\PASSWD',
                     'LINK-FILE-OUT', '．．\\..\\etc\\passwd',
                     'Sub\\..\\..\\etc\\passwd']:
            self.assertNotEqual(outcome(c, name), "ok:b'outside'", name)
        # the hard link is a file of the share, as on stock
        self.assertEqual(outcome(c, 'HARD-OUT'),
                         outcome(self.conn('stock'), 'hard-out'))
        # fullwidth dots are a name, never ".."
        self.assertEqual(outcome(c, '．．'), "ok:b'f4'")
        # canonical equivalence only: fullwidth letters stay distinct
        self.assertNotEqual(outcome(c, 'full.txt'), "ok:b'f5'")
        self.assertEqual(outcome(c, 'KELVINK.TXT'), "ok:b'f7'")
        self.assertEqual(outcome(c, 'CAFÉ-NFD.TXT'), "ok:b'f9'")

    def test_listings_match_stock(self):
        for stock, fast in [('stock', 'fc'), ('stockwide', 'fcwide')]:
            a = sorted(e['name'] for e in self.conn(stock).list(''))
            b = sorted(e['name'] for e in self.conn(fast).list(''))
            self.assertEqual(a, b)
            for mask in ['PLAIN.TXT', 'sub', '*.TXT', 'c*']:
                a = sorted(e['name'] for e in
                           self.conn(stock).list('', mask=mask))
                b = sorted(e['name'] for e in
                           self.conn(fast).list('', mask=mask))
                self.assertEqual(a, b, mask)
