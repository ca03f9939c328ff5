"""
The engine through a real smbd: wrong-case names, misses, creates, renames
and deletes answered from the shared cache; changes by local programs and
by other connections seen at once; atomic case-variant creates, mkdirs and
renames (one of several connections racing wins); each fold mode end to
end.
"""

import json
import multiprocessing
import os
import shutil
import subprocess
import time
import unicodedata

from samba import NTSTATUSError
from samba import ntstatus

import harness
from harness import SmbdTestCase, FASTCASE

FILE_OPEN = 1
FILE_CREATE = 2
READ_WRITE = 0x0012019f     # FILE_GENERIC_READ | FILE_GENERIC_WRITE
SHARE_ALL = 7


def status_of(exc):
    return exc.args[0] & 0xffffffff


def create(conn, path, disposition=FILE_CREATE, directory=False):
    fnum = conn.create(path, DesiredAccess=READ_WRITE,
                       ShareAccess=SHARE_ALL,
                       CreateDisposition=disposition,
                       CreateOptions=1 if directory else 0)
    conn.close(fnum)


class EngineTestCase(SmbdTestCase):
    def unchecked_notes(self):
        """The module's log lines about creates it could not check."""
        return [l for l in self.log_text().splitlines()
                if 'without the check' in l or 'refused' in l]

    def assertStatus(self, expected, fn, *args, **kw):
        with self.assertRaises(NTSTATUSError) as cm:
            fn(*args, **kw)
        self.assertEqual(status_of(cm.exception), expected & 0xffffffff,
                         'got 0x%08x' % status_of(cm.exception))

    def fill(self, share, d, names):
        for n in names:
            with open(self.local(share, d, n), 'w') as f:
                f.write(n)


class WrongCaseOperations(EngineTestCase):
    shares = {'fc': dict(FASTCASE)}

    def test_open_stat_find_unlink_rename_by_wrong_case(self):
        d = self.fresh_dir('fc')
        self.fill('fc', d, ['File%03d.txt' % i for i in range(300)])
        c = self.conn('fc')
        self.assertEqual(c.loadfile(d + '\\FILE123.TXT'), b'File123.txt')
        # exact-name directory search (QUERY_DIRECTORY without wildcard)
        found = c.list(d, mask='file200.TXT')
        self.assertEqual([e['name'] for e in found], ['File200.txt'])
        self.assertEqual(c.list(d, mask='nosuchfile.txt'), [])
        c.chkpath(d.upper())
        c.unlink(d + '\\file007.TXT')
        self.assertFalse(os.path.exists(self.local('fc', d, 'File007.txt')))
        c.rename(d + '\\FILE008.TXT', d + '\\Renamed.TXT')
        self.assertIn('Renamed.TXT', os.listdir(self.local('fc', d)))
        self.assertNotIn('File008.txt', os.listdir(self.local('fc', d)))
        self.assertEqual(c.loadfile(d + '\\renamed.txt'), b'File008.txt')
        # a name that is not there is an authoritative miss
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\File999.txt')
        # the deleted and the renamed-away names are gone at once
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\FILE007.TXT')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\file008.txt')

    def test_wrong_case_in_every_component(self):
        d = self.fresh_dir('fc')
        path = self.local('fc', d, 'Alpha', 'Beta', 'Gamma', 'Delta',
                          'Epsilon')
        os.makedirs(path)
        with open(os.path.join(path, 'Deep.txt'), 'w') as f:
            f.write('deep')
        c = self.conn('fc')
        self.assertEqual(
            c.loadfile(d.upper() + '\\ALPHA\\beta\\GaMmA\\dELTA\\epsilon'
                       '\\DEEP.TXT'), b'deep')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_PATH_NOT_FOUND,
                          c.loadfile, d + '\\ALPHA\\nope\\GAMMA\\x.txt')

    def test_file_create_of_case_variant_collides(self):
        d = self.fresh_dir('fc')
        c = self.conn('fc')
        create(c, d + '\\Report.docx')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
                          create, c, d + '\\REPORT.DOCX')
        create(c, d + '\\Folder', directory=True)
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
                          c.mkdir, d + '\\FOLDER')
        self.assertEqual(sorted(os.listdir(self.local('fc', d))),
                         ['Folder', 'Report.docx'])

    def test_rename_onto_a_case_variant_collides(self):
        d = self.fresh_dir('fc')
        self.fill('fc', d, ['Alpha', 'Beta'])
        c = self.conn('fc')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
                          c.rename, d + '\\Beta', d + '\\ALPHA')
        c.rename(d + '\\alpha', d + '\\ALPHA')     # case-only rename
        self.assertEqual(sorted(os.listdir(self.local('fc', d))),
                         ['ALPHA', 'Beta'])
        self.assertEqual(c.loadfile(d + '\\alpha'), b'Alpha')

    def test_cache_answers_and_counts(self):
        # The lookups went through the module's cache, not smbd's scan:
        # its counters, flushed when the connection closes, say so.
        d = self.fresh_dir('fc')
        self.fill('fc', d, ['N%d' % i for i in range(50)])
        c = self.conn('fc')
        for i in range(50):
            self.assertEqual(c.loadfile(d + '\\n%d' % i), b'N%d' % i)
        del c
        stat_tool = os.path.join(os.environ['FASTCASE_BUILD'],
                                 'fastcase-stat')
        for _ in range(50):
            r = subprocess.run([stat_tool, '--json', self.smbd.cache_file],
                               capture_output=True, text=True)
            if '"fc"' in r.stdout:
                break
            import time
            time.sleep(0.1)
        import json
        doc = json.loads(r.stdout)
        self.assertGreaterEqual(doc['shares']['fc']['hits'], 50)
        self.assertGreaterEqual(doc['shares']['fc']['builds'], 1)


class TwoSharesOneProcess(EngineTestCase):
    """A client that maps two fastcase shares uses one connection, so one
    smbd process serves both, on one cache file."""
    shares = {'fc': dict(FASTCASE), 'fc2': dict(FASTCASE)}

    def stats(self):
        stat_tool = os.path.join(os.environ['FASTCASE_BUILD'],
                                 'fastcase-stat')
        r = subprocess.run([stat_tool, '--json', self.smbd.cache_file],
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout)['shares']

    def test_both_shares_answer_from_the_cache(self):
        names = ['Name%02d.txt' % i for i in range(20)]
        for share in ('fc', 'fc2'):
            os.makedirs(self.local(share, 'two'), exist_ok=True)
            self.fill(share, 'two', names)
        gets = ';'.join('get two\\%s /dev/null' % n.upper() for n in names)
        r = self.smbclient('fc', '%s; tcon fc2; %s; get two\\missing '
                           '/dev/null' % (gets, gets))
        self.assertNotIn('NT_STATUS_OBJECT_NAME_NOT_FOUND opening remote '
                         'file \\two\\NAME', r.stdout + r.stderr)
        self.assertIn('NT_STATUS_OBJECT_NAME_NOT_FOUND', r.stdout + r.stderr)
        # counters reach the file when the connection ends
        for _ in range(50):
            shares = self.stats()
            if 'fc' in shares and 'fc2' in shares:
                break
            time.sleep(0.1)
        for share in ('fc', 'fc2'):
            self.assertGreaterEqual(shares[share]['hits'], len(names),
                                    share)
        self.assertEqual(shares['fc2']['unknown'], 0)
        self.assertGreaterEqual(shares['fc2']['misses'], 1)


def _race_child(conf_fn, share, path, barrier, results):
    conn = conf_fn(share)
    barrier.wait()
    try:
        create(conn, path)
        results.put('ok')
    except NTSTATUSError as e:
        results.put('0x%08x' % status_of(e))


class ConcurrentCreates(EngineTestCase):
    shares = {'fc': dict(FASTCASE)}

    def test_case_variants_created_at_once_yield_one_file(self):
        d = self.fresh_dir('fc')
        ctx = multiprocessing.get_context('fork')
        spellings = ['Report.docx', 'REPORT.DOCX', 'report.docx',
                     'RePoRt.DoCx', 'rEPORT.docx', 'REPORT.docx']
        for rnd in range(15):
            name = 'Round%02d' % rnd
            barrier = ctx.Barrier(len(spellings))
            results = ctx.Queue()
            # the same new name in six spellings, one per connection
            procs = [ctx.Process(target=_race_child,
                                 args=(self.conn, 'fc',
                                       '%s\\%s' % (d, name + s),
                                       barrier, results))
                     for s in spellings]
            for p in procs:
                p.start()
            for p in procs:
                p.join(60)
            outcomes = sorted(results.get(timeout=5) for _ in procs)
            on_disk = [n for n in os.listdir(self.local('fc', d))
                       if n.lower() == (name + 'report.docx').lower()]
            self.assertEqual(len(on_disk), 1, (rnd, on_disk, outcomes,
                                               self.unchecked_notes()))
            self.assertEqual(outcomes.count('ok'), 1, outcomes)
            collision = '0x%08x' % (
                ntstatus.NT_STATUS_OBJECT_NAME_COLLISION & 0xffffffff)
            self.assertEqual(outcomes.count(collision), len(spellings) - 1,
                             outcomes)


def _race(conn_fn, share, op, barrier, results):
    """op(conn) on a connection of its own once every racer is ready."""
    conn = conn_fn(share)
    barrier.wait()
    try:
        op(conn)
        results.put('ok')
    except NTSTATUSError as e:
        results.put('0x%08x' % status_of(e))


class ConcurrentCaseVariants(EngineTestCase):
    """Connections (several smbd processes) make one new name at the same
    moment, each in its own spelling: exactly one wins, the others are
    told the name exists."""
    shares = {'fc': dict(FASTCASE)}
    SPELLINGS = ['Folder', 'FOLDER', 'folder', 'FoLdEr', 'fOLDER', 'FOLDEr']
    ROUNDS = 15

    def race(self, ops):
        """Run each op(conn) at once; their outcomes, sorted."""
        ctx = multiprocessing.get_context('fork')
        barrier = ctx.Barrier(len(ops))
        results = ctx.Queue()
        procs = [ctx.Process(target=_race, args=(self.conn, 'fc', op,
                                                 barrier, results))
                 for op in ops]
        for p in procs:
            p.start()
        outcomes = sorted(results.get(timeout=60) for _ in procs)
        for p in procs:
            p.join(10)
        return outcomes

    def assertOneWins(self, outcomes, what):
        collision = '0x%08x' % (
            ntstatus.NT_STATUS_OBJECT_NAME_COLLISION & 0xffffffff)
        self.assertEqual(outcomes.count('ok'), 1, (what, outcomes))
        self.assertEqual(outcomes.count(collision), len(outcomes) - 1,
                         (what, outcomes))

    def test_mkdir_of_case_variants_at_once_yields_one_directory(self):
        d = self.fresh_dir('fc')
        for rnd in range(self.ROUNDS):
            name = 'Round%02d' % rnd
            outcomes = self.race([
                lambda c, p='%s\\%s%s' % (d, name, s): c.mkdir(p)
                for s in self.SPELLINGS])
            made = [n for n in os.listdir(self.local('fc', d))
                    if n.lower() == (name + 'folder').lower()]
            self.assertEqual(len(made), 1, (rnd, made, outcomes))
            self.assertTrue(os.path.isdir(self.local('fc', d, made[0])))
            self.assertOneWins(outcomes, rnd)

    def test_renames_onto_case_variants_at_once_yield_one_file(self):
        d = self.fresh_dir('fc')
        for rnd in range(self.ROUNDS):
            name = 'Round%02d' % rnd
            # a different file per connection, each renamed onto its own
            # spelling of one new name
            sources = ['%s-source%d.txt' % (name, i)
                       for i in range(len(self.SPELLINGS))]
            self.fill('fc', d, sources)
            outcomes = self.race([
                lambda c, src=src, s=s: c.rename(
                    '%s\\%s' % (d, src), '%s\\%s%s.txt' % (d, name, s))
                for src, s in zip(sources, self.SPELLINGS)])
            listing = os.listdir(self.local('fc', d))
            made = [n for n in listing
                    if n.lower() == (name + 'folder.txt').lower()]
            left = [n for n in sources if n in listing]
            self.assertEqual(len(made), 1, (rnd, made, outcomes))
            self.assertEqual(len(left), len(sources) - 1, (rnd, left))
            # the file there is the one source that is gone
            gone, = set(sources) - set(left)
            with open(self.local('fc', d, made[0])) as f:
                self.assertEqual(f.read(), gone)
            self.assertOneWins(outcomes, rnd)


class ChangesSeenAtOnce(EngineTestCase):
    global_params = harness.EVERY_LOOKUP_REACHES_THE_MODULE
    shares = {'fc': dict(FASTCASE)}

    def test_local_create_delete_rename_replace(self):
        d = self.fresh_dir('fc')
        self.fill('fc', d, ['Existing.txt'])
        self.smbd.wait_unused()
        c = self.conn('fc')
        self.assertEqual(c.loadfile(d + '\\EXISTING.TXT'), b'Existing.txt')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\LOCAL.TXT')
        # create
        self.fill('fc', d, ['Local.txt'])
        self.assertEqual(c.loadfile(d + '\\LOCAL.TXT'), b'Local.txt')
        # delete
        os.unlink(self.local('fc', d, 'Existing.txt'))
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\existing.TXT')
        # rename
        os.rename(self.local('fc', d, 'Local.txt'),
                  self.local('fc', d, 'Moved.txt'))
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\local.txt')
        self.assertEqual(c.loadfile(d + '\\MOVED.TXT'), b'Local.txt')
        # directory replaced by another one with other contents
        sub = self.local('fc', d, 'Sub')
        os.mkdir(sub)
        self.fill('fc', d, ['Sub/Old.txt'])
        self.assertEqual(c.loadfile(d + '\\SUB\\OLD.TXT'), b'Sub/Old.txt')
        shutil.rmtree(sub)
        os.mkdir(sub)
        self.fill('fc', d, ['Sub/New.txt'])
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\SUB\\OLD.TXT')
        self.assertEqual(c.loadfile(d + '\\SUB\\NEW.TXT'), b'Sub/New.txt')
        del c
        # The cache answered each lookup, the changes reached it as inotify
        # events, and the replaced directory was built anew (d, Sub, the
        # new Sub): EXISTING, LOCAL, MOVED, SUB+OLD, SUB, SUB+NEW hit;
        # LOCAL, existing, local, OLD miss.
        c = self.assertAnsweredFromCache('fc', hits=8, misses=4, builds=3)
        self.assertGreater(c['events'], 0, dict(c))

    def test_two_connections_see_each_others_changes(self):
        d = self.fresh_dir('fc')
        self.smbd.wait_unused()
        a, b = self.conn('fc'), self.conn('fc')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          b.loadfile, d + '\\SHARED.TXT')
        a.savefile(d + '\\Shared.txt', b'from a')
        self.assertEqual(b.loadfile(d + '\\SHARED.TXT'), b'from a')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
                          create, b, d + '\\shared.TXT')
        b.unlink(d + '\\sHaReD.txt')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          a.loadfile, d + '\\Shared.txt')
        del a, b
        # SHARED.TXT, shared.TXT, sHaReD.txt hit; SHARED.TXT before the
        # save and Shared.txt after the unlink miss
        self.assertAnsweredFromCache('fc', hits=3, misses=2)

    def test_create_after_local_delete_takes_the_clients_case(self):
        # stock smbd's per-process real-name memcache would keep the
        # deleted file's spelling and create "report.docx" again
        d = self.fresh_dir('fc')
        self.fill('fc', d, ['report.docx'])
        self.smbd.wait_unused()
        c = self.conn('fc')
        self.assertEqual(c.loadfile(d + '\\REPORT.DOCX'), b'report.docx')
        os.unlink(self.local('fc', d, 'report.docx'))
        create(c, d + '\\REPORT.DOCX', disposition=FILE_CREATE)
        self.assertEqual(os.listdir(self.local('fc', d)), ['REPORT.DOCX'])
        del c
        # the cache said "no such name" after the delete, at once
        self.assertAnsweredFromCache('fc', hits=1, misses=1)


class DirectoryPathSpelling(EngineTestCase):
    """A wrong-case path of directories, answered from the cache in one
    step: smbd still holds the file under its on-disk spelling, as stock
    smbd's walk would (share modes, and so smbstatus, notify, query-name
    information)."""
    shares = {'fc': dict(FASTCASE, **{'mangled names': 'yes'}),
              'stock': {'mangled names': 'yes'},
              # catia's openat passes its own copy of the name down
              'catia_fc': {'vfs objects': 'catia fastcase'}}

    def held_as(self, conn, path):
        """The names smbd holds open files under (smbstatus) while
        conn has path open."""
        fnum = conn.create(path, DesiredAccess=READ_WRITE,
                           ShareAccess=SHARE_ALL, CreateDisposition=FILE_OPEN)
        try:
            r = subprocess.run([harness.tool('smbstatus'),
                                '--configfile=' + self.smbd.conf, '-L',
                                '--json'], capture_output=True, text=True,
                               check=True)
        finally:
            conn.close(fnum)
        files = json.loads(r.stdout).get('open_files', {})
        return sorted(f['filename'] for f in files.values())

    def test_held_under_the_disk_spelling(self):
        for share in ('stock', 'fc', 'catia_fc'):
            d = self.fresh_dir(share, 'Paths_' + share)
            os.makedirs(self.local(share, d, 'Sub Dir', 'Deeper'))
            self.fill(share, d, ['Sub Dir/Deeper/leaf.txt'])
            c = self.conn(share)
            # twice: the second finds every directory cached
            for _ in range(2):
                self.assertEqual(
                    self.held_as(c, d.upper() +
                                 '\\SUB DIR\\DEEPER\\LEAF.TXT'),
                    [d + '/Sub Dir/Deeper/leaf.txt'], share)
            del c

    def test_mangled_component_left_to_smbd(self):
        # only smbd's scan demangles an 8.3 name
        for share in ('stock', 'fc'):
            d = self.fresh_dir(share, 'Mangled_' + share)
            os.makedirs(self.local(share, d, 'Long Directory Name'))
            self.fill(share, d, ['Long Directory Name/leaf.txt'])
            c = self.conn(share)
            short = [e['short_name'] for e in c.list(d)
                     if e['name'] == 'Long Directory Name'][0]
            self.assertIn('~', short)
            # a directory whose own name is the 8.3 name in lower case
            os.makedirs(self.local(share, d, short.lower()))
            self.fill(share, d, [short.lower() + '/leaf.txt'])
            path = d.upper() + '\\' + short + '\\LEAF.TXT'
            self.assertEqual(c.loadfile(path),
                             b'Long Directory Name/leaf.txt', share)
            self.assertEqual(self.held_as(c, path),
                             [d + '/Long Directory Name/leaf.txt'], share)
            del c


class RealNameMemcache(EngineTestCase):
    """smbd's per-process memcache of real names ("stat cache") stays on
    for every share the process serves: the module keeps it true for its
    own shares instead of switching it off process-wide."""
    shares = {'fc': dict(FASTCASE), 'plain': {}}
    global_params = {'smbd profiling level': 'on'}

    def statcache_counters(self):
        r = subprocess.run([harness.tool('smbstatus'),
                            '--configfile=' + self.smbd.conf, '--profile'],
                           capture_output=True, text=True)
        counters = {}
        for line in r.stdout.splitlines():
            name, _, value = line.partition(':')
            if name.strip().startswith('statcache_'):
                counters[name.strip()] = int(value.split()[0])
        return counters

    def test_other_shares_keep_the_memcache(self):
        dfc = self.fresh_dir('fc')
        dplain = self.fresh_dir('plain')
        self.fill('fc', dfc, ['Report.docx'])
        self.fill('plain', dplain, ['Notes.txt'])
        self.smbd.wait_unused()
        fc, plain = self.conn('fc'), self.conn('plain')
        self.assertEqual(fc.loadfile(dfc + '\\REPORT.DOCX'), b'Report.docx')
        for _ in range(3):
            self.assertEqual(plain.loadfile(dplain + '\\NOTES.TXT'),
                             b'Notes.txt')
        # profile counters reach the shared profile file within seconds
        deadline = time.monotonic() + 15
        counters = {}
        while time.monotonic() < deadline:
            counters = self.statcache_counters()
            if counters.get('statcache_hits_count', 0) > 0:
                break
            time.sleep(0.2)
        self.assertGreater(counters.get('statcache_hits_count', 0), 0,
                           counters)
        del fc, plain

    def test_memcache_answer_dropped_after_local_change(self):
        # the memcache would answer "Report.docx" after a local program
        # replaced it by "REPORT.docx"
        d = self.fresh_dir('fc')
        self.fill('fc', d, ['Report.docx'])
        self.smbd.wait_unused()
        c = self.conn('fc')
        for _ in range(2):
            self.assertEqual(c.loadfile(d + '\\report.DOCX'),
                             b'Report.docx')
        os.unlink(self.local('fc', d, 'Report.docx'))
        self.fill('fc', d, ['REPORT.docx'])
        self.assertEqual(c.loadfile(d + '\\report.DOCX'), b'REPORT.docx')
        os.unlink(self.local('fc', d, 'REPORT.docx'))
        create(c, d + '\\report.DOCX', disposition=FILE_CREATE)
        self.assertEqual(os.listdir(self.local('fc', d)), ['report.DOCX'])
        del c


# SMB3 POSIX extensions: smbd negotiates them since 4.19
HAS_SMB3_POSIX = harness.samba_version() >= (4, 19, 0)


def posix_create(conn, path, directory=False):
    from samba.samba3 import libsmb_samba_internal as libsmb
    mode = 0o755 if directory else 0o644
    fnum, _, _ = conn.create_ex(
        path, DesiredAccess=READ_WRITE, ShareAccess=SHARE_ALL,
        CreateDisposition=FILE_CREATE,
        CreateOptions=1 if directory else 0,
        CreateContexts=[(libsmb.SMB2_CREATE_TAG_POSIX,
                         mode.to_bytes(4, 'little'))])
    conn.close(fnum)


class PosixClients(EngineTestCase):
    """A client speaking SMB3 POSIX extensions names files
    case-sensitively on the same share, as smbd resolves its names: its
    creates of case variants are not collisions, while a Windows client
    beside it keeps case-insensitive names and its collision checks."""
    shares = {'fc': dict(FASTCASE)}
    global_params = ({'smb3 unix extensions': 'yes'}
                     if HAS_SMB3_POSIX else {})

    def setUp(self):
        if not HAS_SMB3_POSIX:
            self.skipTest('smbd %d.%d.%d has no SMB3 POSIX extensions' %
                          harness.samba_version())

    def test_posix_case_variants_are_separate_names(self):
        d = self.fresh_dir('fc')
        self.fill('fc', d, ['Report.docx'])
        posix = self.conn('fc', posix=True)
        self.assertTrue(posix.have_posix())
        win = self.conn('fc')
        # the Windows client's view is cached first
        self.assertEqual(win.loadfile(d + '\\REPORT.DOCX'), b'Report.docx')
        # a POSIX client's separator is '/'
        posix_create(posix, d + '/REPORT.DOCX')
        posix_create(posix, d + '/Sub', directory=True)
        posix_create(posix, d + '/SUB', directory=True)
        self.assertEqual(sorted(os.listdir(self.local('fc', d))),
                         ['REPORT.DOCX', 'Report.docx', 'SUB', 'Sub'])
        # the Windows client still collides with every one of them
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
                          create, win, d + '\\report.docx')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
                          create, win, d + '\\sub', directory=True)
        self.assertEqual(len(os.listdir(self.local('fc', d))), 4)
        del posix, win


# on disk ':' and '?', for clients the private-use characters macOS sends
CATIA_MAPPINGS = '0x3a:0xf022,0x3f:0xf025'


class CatiaStacked(EngineTestCase):
    """catia maps U+F022 to ':' (and more) from client to disk. fastcase
    listed after it (below) sees the on-disk names and answers; listed
    before it, its own reads of the disk would miss catia's mapping, so
    it hands every lookup to smbd. Either way the answers are catia's."""
    shares = {
        'catia': {'vfs objects': 'catia', 'catia:mappings': CATIA_MAPPINGS},
        'catia_fc': {'vfs objects': 'catia fastcase',
                     'catia:mappings': CATIA_MAPPINGS},
        'fc_catia': {'vfs objects': 'fastcase catia',
                     'catia:mappings': CATIA_MAPPINGS},
    }

    def answers(self, share, d, spellings):
        c = self.conn(share)
        out = {}
        for name in spellings:
            try:
                out[name] = c.loadfile(d + '\\' + name)
            except NTSTATUSError as e:
                out[name] = hex(status_of(e))
        out['listing'] = sorted(e['name'] for e in c.list(d))
        return out

    def test_same_answers_as_catia_alone(self):
        spellings = ['A\uf022B.TXT', 'a\uf022b.txt', 'Q\uf025.DOC',
                     'q\uf025.doc', 'NONE\uf022X']
        results = {}
        for share in self.shares:
            d = self.fresh_dir(share)
            self.fill(share, d, ['a:b.txt', 'Q?.doc'])
            results[share] = self.answers(share, d, spellings)
        self.assertEqual(results['catia']['A\uf022B.TXT'], b'a:b.txt')
        for share in ('catia_fc', 'fc_catia'):
            self.assertEqual(results[share], results['catia'], share)
        self.assertTrue(self.wait_for_log(r'vfs_catia is below fastcase'))


class FoldModes(EngineTestCase):
    shares = {
        'win': dict(FASTCASE),
        'uni': dict(FASTCASE, **{'fastcase:fold': 'unicode'}),
        'tr': dict(FASTCASE, **{'fastcase:fold': 'unicode',
                                'fastcase:language': 'tr'}),
        'nfc': dict(FASTCASE, **{'fastcase:normalize': 'nfc'}),
    }

    def put(self, share, d, name, data=b'x'):
        with open(os.path.join(self.local(share, d).encode(),
                               name.encode()), 'wb') as f:
            f.write(data)

    def test_windows_rule_is_smbds(self):
        d = self.fresh_dir('win')
        self.put('win', d, 'straße.txt', b'sharp s')
        self.put('win', d, 'ΣΟΦΙΑ.txt', b'sigma')
        c = self.conn('win')
        # ß is its own upper case in smbd's table: no match for SS
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\STRASSE.TXT')
        self.assertEqual(c.loadfile(d + '\\STRAßE.TXT'), b'sharp s')
        self.assertEqual(c.loadfile(d + '\\σοφια.txt'), b'sigma')

    def test_unicode_rule_folds_fully(self):
        d = self.fresh_dir('uni')
        self.put('uni', d, 'straße.txt', b'sharp s')
        c = self.conn('uni')
        self.assertEqual(c.loadfile(d + '\\STRASSE.TXT'), b'sharp s')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
                          create, c, d + '\\strasse.txt')

    def test_turkish_dotless_i(self):
        d = self.fresh_dir('tr')
        self.put('tr', d, 'dİyarbakır.txt', b'tr')
        c = self.conn('tr')
        self.assertEqual(c.loadfile(d + '\\DİYARBAKIR.TXT'), b'tr')
        self.assertEqual(c.loadfile(d + '\\diyarbakır.txt'), b'tr')
        # in Turkish, I is the capital of dotless ı, not of i
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\DIYARBAKIR.TXT')

    def test_nfd_name_on_disk_opens_by_nfc(self):
        d = self.fresh_dir('nfc')
        nfd = unicodedata.normalize('NFD', 'Café.txt')
        self.put('nfc', d, nfd, b'decomposed')
        c = self.conn('nfc')
        self.assertEqual(c.loadfile(d + '\\' +
                                    unicodedata.normalize('NFC', 'CAFÉ.TXT')),
                         b'decomposed')

    def test_invalid_utf8_on_disk_does_not_break_the_directory(self):
        d = self.fresh_dir('win')
        with open(os.path.join(self.local('win', d).encode(),
                               b'caf\xe9.txt'), 'wb') as f:
            f.write(b'latin')
        self.put('win', d, 'Other.txt', b'other')
        c = self.conn('win')
        self.assertEqual(c.loadfile(d + '\\OTHER.TXT'), b'other')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                          c.loadfile, d + '\\missing.txt')


class LegacyCharset(EngineTestCase):
    shares = {
        'latin': dict(FASTCASE, **{'fastcase:legacy charset': 'ISO-8859-1'}),
        'cp': dict(FASTCASE, **{'fastcase:legacy charset': 'CP1252'}),
        'stock': {},
    }

    def raw(self, share, d, name, data):
        with open(os.path.join(self.local(share, d).encode(), name),
                  'wb') as f:
            f.write(data)

    def test_latin1_names_listed_opened_renamed(self):
        d = self.fresh_dir('latin')
        self.raw('latin', d, b'caf\xe9.txt', b'latin')
        self.raw('latin', d, b'W\xe9\xeerd\xd1\xe0m\xeb', b'weird')
        c = self.conn('latin')
        names = sorted(e['name'] for e in c.list(d))
        self.assertIn('café.txt', names)
        self.assertIn('WéîrdÑàmë', names)
        self.assertEqual(c.loadfile(d + '\\CAFÉ.TXT'), b'latin')
        self.assertEqual(c.loadfile(d + '\\wÉÎrdñÀMË'), b'weird')
        c.rename(d + '\\café.txt', d + '\\Renamed café.txt')
        on_disk = os.listdir(self.local('latin', d).encode())
        self.assertIn('Renamed café.txt'.encode(), on_disk)
        self.assertNotIn(b'caf\xe9.txt', on_disk)
        # the other legacy name's bytes are untouched
        self.assertIn(b'W\xe9\xeerd\xd1\xe0m\xeb', on_disk)
        c.unlink(d + '\\WÉÎRDÑÀMË')
        self.assertNotIn(b'W\xe9\xeerd\xd1\xe0m\xeb',
                         os.listdir(self.local('latin', d).encode()))

    def test_legacy_directories_in_the_middle_of_a_path(self):
        d = self.fresh_dir('latin')
        top = os.path.join(self.local('latin', d).encode(), b'D\xe9j\xe0')
        os.makedirs(top + b'/R\xe9p')
        self.raw('latin', d, b'D\xe9j\xe0/R\xe9p/Fichier.txt', b'deep')
        c = self.conn('latin')
        rep = d + '\\Déjà\\Rép'
        self.assertEqual(c.loadfile(rep + '\\Fichier.txt'), b'deep')
        self.assertEqual(c.loadfile(d + '\\DÉJÀ\\rÉP\\FICHIER.TXT'),
                         b'deep')
        self.assertIn('Fichier.txt', [e['name'] for e in c.list(rep)])
        c.savefile(rep + '\\New.txt', b'new')
        c.mkdir(rep + '\\Sub')
        self.assertEqual(sorted(os.listdir(top + b'/R\xe9p')),
                         [b'Fichier.txt', b'New.txt', b'Sub'])
        c.rename(rep + '\\New.txt', d + '\\Déjà\\Moved.txt')
        self.assertEqual(c.loadfile(d + '\\déjà\\moved.TXT'), b'new')
        self.assertStatus(ntstatus.NT_STATUS_OBJECT_NAME_COLLISION,
                          c.mkdir, d + '\\DÉJÀ\\rép')
        c.unlink(d + '\\Déjà\\Moved.txt')
        c.rmdir(rep + '\\Sub')
        self.assertEqual(sorted(os.listdir(top)), [b'R\xe9p'])
        self.assertEqual(sorted(os.listdir(top + b'/R\xe9p')),
                         [b'Fichier.txt'])

    def test_stock_share_hides_legacy_names(self):
        d = self.fresh_dir('stock')
        self.raw('stock', d, b'caf\xe9.txt', b'latin')
        names = [e['name'] for e in self.conn('stock').list(d)]
        self.assertNotIn('café.txt', names)

    def test_cp1252_and_its_holes(self):
        d = self.fresh_dir('cp')
        self.raw('cp', d, b'\x93quoted\x94.txt', b'quotes')
        self.raw('cp', d, b'hole\x81.txt', b'hole')
        c = self.conn('cp')
        names = [e['name'] for e in c.list(d)]
        self.assertIn('\u201cquoted\u201d.txt', names)
        self.assertFalse([n for n in names if n.startswith('hole')], names)
        self.assertEqual(c.loadfile(d + '\\\u201cQUOTED\u201d.TXT'),
                         b'quotes')

    def test_utf8_name_wins_over_equal_legacy_name(self):
        d = self.fresh_dir('latin')
        self.raw('latin', d, b'caf\xe9.txt', b'latin')
        self.raw('latin', d, 'CAFÉ.txt'.encode(), b'utf8')
        c = self.conn('latin')
        names = [e['name'] for e in c.list(d)]
        self.assertEqual([n for n in names if n.lower() == 'café.txt'],
                         ['CAFÉ.txt'])
        self.assertEqual(c.loadfile(d + '\\café.txt'), b'utf8')
        # never merged: the legacy bytes are still on disk
        self.assertIn(b'caf\xe9.txt',
                      os.listdir(self.local('latin', d).encode()))
