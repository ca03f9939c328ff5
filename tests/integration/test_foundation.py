"""
Foundation: smbd loads the freshly built module, names are case-insensitive
through it, and a bad fastcase: parameter refuses the share.
"""

import os
import re
import unittest

from samba import NTSTATUSError
from samba import ntstatus

from harness import SmbdTestCase, FASTCASE

# smbd's messages when a VFS module cannot be loaded or initialised
# (lib/util/modules.c, source3/smbd/vfs.c).
LOAD_ERRORS = re.compile(
    r"(Error loading module|Loading module .* failed|Unable to find|"
    r"initialization failed|error probing vfs module|"
    r"Can't find a vfs module|vfs_init_custom failed|Can't load|"
    r"failed to load).*fastcase", re.I)


class ModuleLoads(SmbdTestCase):
    shares = {
        'fc': dict(FASTCASE),
        'plain': {},
    }

    def test_connect_and_list(self):
        path = self.local('fc', 'Seed.txt')
        with open(path, 'w') as f:
            f.write('seed')
        c = self.conn('fc')
        names = [e['name'] for e in c.list('')]
        self.assertIn('Seed.txt', names)
        # The tree connect went through fastcase_connect: its cache file
        # exists where the share's parameters put it.
        self.assertTrue(os.path.exists(self.smbd.cache_file),
                        'fastcase:cache file was not created')
        log = self.log_text()
        self.assertIsNone(LOAD_ERRORS.search(log), log)

    def test_module_is_the_built_one(self):
        # The smbd serving us has the build's fastcase.so mapped.
        c = self.conn('fc')     # keep the connection (and its smbd)
        c.list('')
        build = os.path.realpath(os.path.join(os.environ['FASTCASE_BUILD'],
                                              'fastcase.so'))
        found = False
        for pid in os.listdir('/proc'):
            if not pid.isdigit():
                continue
            try:
                with open('/proc/%s/maps' % pid) as f:
                    maps = f.read()
                with open('/proc/%s/stat' % pid) as f:
                    pgrp = int(f.read().rsplit(')', 1)[1].split()[2])
            except OSError:
                continue
            if pgrp == self.smbd.pid and build in maps:
                found = True
                break
        self.assertTrue(found, 'no smbd process has %s mapped' % build)


class WrongCase(SmbdTestCase):
    shares = {'fc': dict(FASTCASE)}

    def test_python_create_then_wrong_case_read(self):
        d = self.fresh_dir('fc')
        c = self.conn('fc')
        c.savefile(d + '\\Report.docx', b'quarterly numbers\n')
        self.assertEqual(os.listdir(self.local('fc', d)), ['Report.docx'])
        self.assertEqual(c.loadfile(d + '\\REPORT.DOCX'),
                         b'quarterly numbers\n')
        self.assertEqual(c.loadfile(d.upper() + '\\report.DOCX'),
                         b'quarterly numbers\n')
        # A second connection sees it too.
        self.assertEqual(self.conn('fc').loadfile(d + '\\rEpOrT.dOcX'),
                         b'quarterly numbers\n')

    def test_wrong_case_missing_name_is_not_found(self):
        d = self.fresh_dir('fc')
        c = self.conn('fc')
        c.savefile(d + '\\Present.txt', b'x')
        with self.assertRaises(NTSTATUSError) as cm:
            c.loadfile(d + '\\ABSENT.TXT')
        self.assertEqual(cm.exception.args[0],
                         ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND)

    def test_smbclient_get_wrong_case(self):
        d = self.fresh_dir('fc')
        c = self.conn('fc')
        c.savefile(d + '\\Notes.TXT', b'hello from python\n')
        r = self.smbclient('fc', 'cd %s; get notes.txt -' % d.upper())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('hello from python', r.stdout)

    def test_smbclient_get_wrong_case_missing_fails(self):
        d = self.fresh_dir('fc')
        r = self.smbclient('fc', 'cd %s; get nothere.txt -' % d)
        self.assertIn('NT_STATUS_OBJECT_NAME_NOT_FOUND', r.stdout + r.stderr)


class BadParameters(SmbdTestCase):
    shares = {
        'good': dict(FASTCASE),
        'sideways': dict(FASTCASE, **{'fastcase:fold': 'sideways'}),
        'typo': dict(FASTCASE, **{'fastcase:flod': 'windows'}),
    }

    def assertRefused(self, share, param):
        mark = self.log_mark()
        with self.assertRaises(NTSTATUSError) as cm:
            self.conn(share)
        # The session setup worked (same credentials as the good share):
        # it is the tree connect that failed.
        self.assertNotEqual(cm.exception.args[0],
                            ntstatus.NT_STATUS_LOGON_FAILURE)
        log = self.smbd.wait_for_log(r'parameter "%s"' % re.escape(param),
                                     since=mark)
        self.assertIsNotNone(log, 'smbd log does not name %s:\n%s'
                             % (param, self.log_text(mark)))
        return cm.exception

    def test_good_share_connects(self):
        self.assertIsInstance(self.conn('good').list(''), list)

    def test_malformed_fold_refused(self):
        self.assertRefused('sideways', 'fastcase:fold')

    def test_unknown_parameter_refused(self):
        self.assertRefused('typo', 'fastcase:flod')

    def test_smbclient_refused(self):
        r = self.smbclient('sideways', 'ls')
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('tree connect failed', r.stdout + r.stderr)


if __name__ == '__main__':
    unittest.main()
