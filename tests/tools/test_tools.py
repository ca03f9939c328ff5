#!/usr/bin/python3
"""Tests of fastcase-check, fastcase-stat and the Debian package.

Run by ./waf test as: tests/tools/test_tools.py --build BUILDDIR
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = None
TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def counter_count():
    """How many counters the module keeps per share: the X() entries of
    FASTCASE_STATS_FIELDS in include/fastcase_engine.h."""
    import re
    with open(os.path.join(TOP, 'include', 'fastcase_engine.h')) as f:
        text = f.read()
    start = text.index('#define FASTCASE_STATS_FIELDS')
    end = text.index('\n\n', start)
    return len(re.findall(r'X\(\w+\)', text[start:end]))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, **kw)


class FastcaseCheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix='fastcase-check-')
        self.check = os.path.join(BUILD, 'fastcase-check')

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def touch(self, *parts):
        path = os.path.join(self.tmp.encode(), *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb'):
            pass

    def test_clean_tree_exits_zero(self):
        self.touch(b'a', b'Report.docx')
        self.touch(b'a', b'notes.txt')
        r = run([self.check, self.tmp])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_collision_found_in_subdirectory(self):
        self.touch(b'x', b'y', b'Report.docx')
        self.touch(b'x', b'y', b'REPORT.DOCX')
        r = run([self.check, '--json', self.tmp])
        self.assertEqual(r.returncode, 1)
        doc = json.loads(r.stdout)
        coll = [f for f in doc['findings'] if f['kind'] == 'collision']
        self.assertEqual(len(coll), 1)
        self.assertEqual(sorted(coll[0]['names']),
                         ['REPORT.DOCX', 'Report.docx'])
        self.assertTrue(coll[0]['directory'].endswith('/x/y'))

    def test_fold_rules_change_the_answer(self):
        # sharp s equals "ss" only under full Unicode folding
        self.touch('straße'.encode(), )
        self.touch(b'STRASSE')
        self.assertEqual(run([self.check, self.tmp]).returncode, 0)
        r = run([self.check, '--fold', 'unicode', self.tmp])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(b'collision', r.stdout)

    def test_invalid_utf8_and_legacy_names(self):
        self.touch(b'caf\xe9.txt')
        r = run([self.check, '--json', self.tmp])
        self.assertEqual(r.returncode, 1)
        kinds = [f['kind'] for f in json.loads(r.stdout)['findings']]
        self.assertEqual(kinds, ['invalid-utf8'])
        self.touch('CAFÉ.TXT'.encode())
        r = run([self.check, '--json', '--legacy-charset', 'ISO-8859-1',
                 self.tmp])
        doc = json.loads(r.stdout)
        kinds = sorted(f['kind'] for f in doc['findings'])
        self.assertEqual(kinds, ['collision', 'legacy-name'])
        legacy = [f for f in doc['findings'] if f['kind'] == 'legacy-name']
        self.assertEqual(legacy[0]['decoded'], 'café.txt')

    def test_large_directory(self):
        for i in range(30):
            self.touch(b'big', b'f%d' % i)
        r = run([self.check, '--large', '25', '--json', self.tmp])
        doc = json.loads(r.stdout)
        large = [f for f in doc['findings']
                 if f['kind'] == 'large-directory']
        self.assertEqual(len(large), 1)
        self.assertEqual(large[0]['entries'], 30)

    def test_symlinks_are_not_followed(self):
        self.touch(b'real', b'Foo')
        self.touch(b'real', b'FOO')
        os.symlink(os.path.join(self.tmp, 'real'),
                   os.path.join(self.tmp, 'link'))
        doc = json.loads(run([self.check, '--json', self.tmp]).stdout)
        self.assertEqual(doc['summary']['collisions'], 1)

    def test_share_options_from_smb_conf(self):
        self.touch('straße'.encode())
        self.touch(b'STRASSE')
        conf = os.path.join(self.tmp, 'smb.conf')
        with open(conf, 'w') as f:
            f.write('[global]\n\tserver role = standalone server\n'
                    '[uni]\n\tpath = %s\n\tfastcase:fold = unicode\n'
                    % self.tmp)
        r = run([self.check, '--config', conf, '--share', 'uni',
                 self.tmp])
        self.assertEqual(r.returncode, 1, r.stderr)
        r = run([self.check, '--config', conf, '--share', 'nosuch',
                 self.tmp])
        self.assertEqual(r.returncode, 2)

    def test_config_path_and_share_name_never_reach_a_shell(self):
        # testparm used to run through popen with the path in single
        # quotes: this path closed the quote and ran "touch pwned"
        self.touch('straße'.encode())
        self.touch(b'STRASSE')
        confdir = os.path.join(self.tmp, "c';touch pwned;'d $(touch pwned)")
        os.mkdir(confdir)
        conf = os.path.join(confdir, 'smb.conf')
        share = "it's $(touch pwned) & `touch pwned`; x"
        with open(conf, 'w') as f:
            f.write('[global]\n\tserver role = standalone server\n'
                    '[%s]\n\tpath = %s\n\tfastcase:fold = unicode\n'
                    % (share, self.tmp))
        work = os.path.join(self.tmp, 'cwd')
        os.mkdir(work)
        r = run([self.check, '--config', conf, '--share', share,
                 self.tmp], cwd=work)
        # nothing ran in the working directory
        self.assertEqual(os.listdir(work), [])
        # and the share's unicode rule was read: ß and ss collide
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b'collision', r.stdout)

    def test_errors_exit_two(self):
        r = run([self.check, os.path.join(self.tmp, 'missing')])
        self.assertEqual(r.returncode, 2)
        r = run([self.check, '--fold', 'sideways', self.tmp])
        self.assertEqual(r.returncode, 2)
        self.assertIn(b'fold', r.stderr)
        r = run([self.check, '--legacy-charset', 'NO-SUCH-CHARSET',
                 self.tmp])
        self.assertEqual(r.returncode, 2)
        self.assertIn(b'--legacy charset NO-SUCH-CHARSET: unknown to iconv',
                      r.stderr)


class FastcaseStatTest(unittest.TestCase):
    def test_reads_a_cache_file_without_changing_it(self):
        stat_tool = os.path.join(BUILD, 'fastcase-stat')
        r = run([stat_tool, '/nonexistent/fastcase.tdb'])
        self.assertEqual(r.returncode, 2)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'fastcase.tdb')
            # a cache file holding one share's counters, as the
            # module's fastcase_cache_add_counters() stores them
            import struct
            import tdb
            db = tdb.Tdb(path, 0, tdb.DEFAULT, os.O_RDWR | os.O_CREAT,
                         0o600)
            n = counter_count()
            counters = list(range(1, n + 1))
            db.store(b'fastcase-stats\0projects\0',
                     struct.pack('=%dQ' % n, *counters))
            db.close()
            before = open(path, 'rb').read()
            r = run([stat_tool, '--json', path])
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            self.assertEqual(doc['shares']['projects']['lookups'], 1)
            self.assertEqual(doc['shares']['projects']['fallbacks'], 11)
            self.assertEqual(open(path, 'rb').read(), before)
            r = run([stat_tool, path])
            self.assertIn(b'share [projects]', r.stdout)

    def test_unterminated_share_name_in_a_stats_key(self):
        """A stats key written by something other than the module: the
        share name runs to the end of the key, no NUL. The name must be
        read within the key, not up to the next zero byte in memory."""
        import struct
        import tdb
        stat_tool = os.path.join(BUILD, 'fastcase-stat')
        # no zero byte in the counters either: tdb hands the key and the
        # value to the tool in one buffer, key first
        n = counter_count()
        counters = [0x0101010101010101 * (i % 255 + 1) for i in range(n)]
        long_name = b'L' * 300
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'fastcase.tdb')
            db = tdb.Tdb(path, 0, tdb.DEFAULT, os.O_RDWR | os.O_CREAT,
                         0o600)
            db.store(b'fastcase-stats\0projects',
                     struct.pack('=%dQ' % n, *counters))
            db.store(b'fastcase-stats\0' + long_name,
                     struct.pack('=%dQ' % n, *counters))
            db.close()
            cmd = [stat_tool, '--json', path]
            r = run(cmd)
            self.assertEqual(r.returncode, 0, r.stderr)
            shares = json.loads(r.stdout)['shares']
            self.assertEqual(sorted(shares),
                             sorted(['projects', 'L' * 255]))
            self.assertEqual(shares['projects']['lookups'], counters[0])
            valgrind = shutil.which('valgrind')
            if valgrind is None:
                return
            # memcheck sees a read past the key even when the bytes
            # after it happen to hold a NUL
            r = run([valgrind, '-q', '--error-exitcode=99'] + cmd)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])


class SambaVersionGuard(unittest.TestCase):
    """include/fastcase_samba.h admits interfaces 47 to 53 and stops the
    compiler on any other, naming the version found and the newest
    supported."""

    def compile_for(self, version):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, 'guard.c')
            with open(src, 'w') as f:
                f.write('#define SMB_VFS_INTERFACE_VERSION %d\n'
                        '#include "fastcase_samba.h"\n'
                        'int fastcase_guard;\n' % version)
            return run(['gcc', '-fsyntax-only',
                        '-I' + os.path.join(TOP, 'include'), src])

    def test_supported_versions_compile(self):
        for version in range(47, 54):
            r = self.compile_for(version)
            self.assertEqual(r.returncode, 0, (version, r.stderr))

    def test_newer_version_stops_the_build_with_both_versions(self):
        r = self.compile_for(54)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b'SMB_VFS_INTERFACE_VERSION 54', r.stderr)
        self.assertIn(b'4.25', r.stderr)

    def test_older_version_stops_the_build(self):
        r = self.compile_for(46)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b'4.17', r.stderr)


class DevelopmentTreeChoice(unittest.TestCase):
    """./waf's development_commit(): for a release whose tag a Samba git
    mirror lacks, the newest commit of its minor release's branches, or
    master while master's VERSION is that minor release; nothing else."""

    def git(self, *args):
        subprocess.run(['git', '-C', self.repo] + list(args), check=True,
                       capture_output=True)

    def commit(self, minor):
        with open(os.path.join(self.repo, 'VERSION'), 'w') as f:
            f.write('SAMBA_VERSION_MAJOR=4\nSAMBA_VERSION_MINOR=%d\n'
                    'SAMBA_VERSION_RELEASE=0\n' % minor)
        self.git('add', 'VERSION')
        self.git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit',
                 '-qm', '4.%d' % minor)
        return subprocess.run(['git', '-C', self.repo, 'rev-parse', 'HEAD'],
                              capture_output=True, text=True,
                              check=True).stdout.strip()

    def choose(self, debian_version):
        with open(os.path.join(TOP, 'waf')) as f:
            waf = f.read()
        functions = ''.join(re.findall(r'^(?:upstream_of|development_commit)'
                                       r'\(\) \{\n.*?^\}\n', waf,
                                       re.S | re.M))
        r = subprocess.run(['bash', '-c', functions +
                            'development_commit "$1" "$2"', 'bash',
                            os.path.join(self.repo, '.git'), debian_version],
                           capture_output=True, text=True)
        return r.stdout if r.returncode == 0 else None

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = self.tmp.name
        self.git('init', '-q', '-b', 'master')

    def tearDown(self):
        self.tmp.cleanup()

    def test_master_of_the_same_minor_release(self):
        self.commit(24)
        head = self.commit(25)
        self.assertEqual(self.choose('2:4.25.1+dfsg-1'), head)
        self.assertIsNone(self.choose('2:4.26.0+dfsg-1'))
        self.assertIsNone(self.choose('2:4.24.5+dfsg-1'))

    def test_release_branch_before_master(self):
        branch = self.commit(25)
        self.git('branch', 'v4-25-test')
        self.commit(26)
        self.assertEqual(self.choose('2:4.25.1+dfsg-1'), branch)


class DebianPackageTest(unittest.TestCase):
    def test_deb_contents_and_exact_samba_dependency(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, 'src')
            files = subprocess.run(
                ['git', '-C', TOP, 'ls-files', '-z', '--cached',
                 '--others', '--exclude-standard'],
                capture_output=True, check=True).stdout.split(b'\0')
            for f in filter(None, files):
                dst = os.path.join(src.encode(), f)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(os.path.join(TOP.encode(), f), dst)
            r = run(['dpkg-buildpackage', '-b', '-uc', '-us'], cwd=src)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] +
                             r.stderr[-3000:])
            debs = [f for f in os.listdir(tmp)
                    if f.startswith('samba-vfs-fastcase_')
                    and f.endswith('.deb')]
            self.assertEqual(len(debs), 1)
            deb = os.path.join(tmp, debs[0])
            contents = run(['dpkg-deb', '-c', deb]).stdout.decode()
            modulesdir = subprocess.run(
                ['smbd', '-b'], capture_output=True, text=True).stdout
            modulesdir = [l.split(':', 1)[1].strip()
                          for l in modulesdir.splitlines()
                          if 'MODULESDIR' in l][0]
            for path in [modulesdir + '/vfs/fastcase.so',
                         '/usr/bin/fastcase-check',
                         '/usr/bin/fastcase-stat',
                         '/usr/share/man/man8/vfs_fastcase.8.gz']:
                self.assertIn('.' + path, contents)
            depends = run(['dpkg-deb', '-f', deb, 'Depends']).stdout
            samba = subprocess.run(
                ['dpkg-query', '-W', '-f=${Version}', 'samba'],
                capture_output=True, text=True).stdout
            self.assertIn(('samba (= %s)' % samba).encode(), depends)


# exit status when --filter selects no test (./waf test --filter tells it
# from a failure)
NONE_SELECTED = 5


def test_id(test):
    """test_tools.Class.test, whether run as a script or imported."""
    return 'test_tools.' + test.id().split('.', 1)[1]


def main():
    global BUILD
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', required=True)
    ap.add_argument('--filter', default='')
    args = ap.parse_args()
    BUILD = os.path.abspath(args.build)
    suite = unittest.defaultTestLoader.loadTestsFromModule(
        sys.modules[__name__])
    tests = []

    def flatten(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                flatten(t)
            elif args.filter in test_id(t):
                tests.append(t)
    flatten(suite)
    if not tests:
        # a renamed class must not make a run pass on nothing
        print('test_tools.py: no test id contains %r' % args.filter)
        print('0 passed, 0 failed')
        return NONE_SELECTED
    result = unittest.TextTestRunner(verbosity=2).run(
        unittest.TestSuite(tests))
    failed = len(result.failures) + len(result.errors)
    print('%d passed, %d failed' % (result.testsRun - failed, failed))
    return 1 if failed or result.testsRun == 0 else 0


if __name__ == '__main__':
    sys.exit(main())
