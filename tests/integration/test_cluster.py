"""
Two nodes on one GlusterFS volume (tests/integration/cluster.py): each node
an smbd of its own, with its own address and its own cache file, serving
its own FUSE mount of the volume, as the nodes of a cluster serve theirs.
A change made through node A queues no inotify event on node B's mount, so
B's module must not trust inotify there (fastcase:trust inotify = auto
detects FUSE) and must see A's changes as soon as a stat through B's mount
shows them: after GlusterFS's attribute caching (1 s by default).

CtdbTwoNodes adds CTDB: each node's smbd runs with clustering = yes on a
ctdbd of its own (Debian's), and creates take a cluster-wide lock of their
directory (Samba's g_lock, clustered by CTDB) keyed by the identity
vfs_fileid gives it on every node, so that clients on two nodes creating
case variants of one new name at the same instant get one file and one
NT_STATUS_OBJECT_NAME_COLLISION.
"""

import functools
import signal
import multiprocessing
import os
import subprocess
import sys
import time
import traceback
import unittest

from samba import NTSTATUSError
from samba import ntstatus

import harness
import cluster
from harness import FASTCASE

NT_STATUS_OK = 0
FILE_CREATE = 2
READ_WRITE = 0x0012019f     # FILE_GENERIC_READ | FILE_GENERIC_WRITE
SHARE_ALL = 7


def create_new(conn, path):
    conn.close(conn.create(path, DesiredAccess=READ_WRITE,
                           ShareAccess=SHARE_ALL,
                           CreateDisposition=FILE_CREATE))


NODES = {'a': '10.99.0.2', 'b': '10.99.0.3'}
# GlusterFS's FUSE default, and the bound each wait allows beyond it
ATTRIBUTE_TIMEOUT = 1.0
VISIBLE_WITHIN = 10.0


class TwoNodes(unittest.TestCase):
    """A GlusterFS volume, mounted once per node, and an smbd per node
    serving its mount (start_nodes()); stopped by PID at the end."""

    gluster = None
    ctdb = None
    smbds = {}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_environment()
        cls.tmp = harness.make_tmpdir('fastcase-%s-' % cls.__name__)
        cls.smbds = {}
        try:
            cls.start_nodes()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_smbd(cls, node, shares, global_params=None):
        smbd = harness.Smbd(
            shares, address=NODES[node],
            global_params=dict(harness.EVERY_LOOKUP_REACHES_THE_MODULE,
                               **(global_params or {})),
            prefix='fastcase-%s-%s-' % (cls.__name__, node))
        cls.smbds[node] = smbd
        smbd.start()
        return smbd

    @classmethod
    def tearDownClass(cls):
        for smbd in cls.smbds.values():
            smbd.stop()
        if cls.ctdb is not None:
            cls.ctdb.stop()
            cls.ctdb = None
        if cls.gluster is not None:
            cls.gluster.stop()
            cls.gluster = None
        for smbd in cls.smbds.values():
            smbd.cleanup(keep=harness.keep_tmp())
        cls.smbds = {}
        if harness.keep_tmp():
            sys.stderr.write('harness: kept %s\n' % cls.tmp)
        else:
            harness.remove_tree(cls.tmp)
        super().tearDownClass()

    def conn(self, node, share='fc'):
        return self.smbds[node].conn(share)

    def fresh_dir(self, suffix=''):
        """A new directory, made through node A (SMB path, no slashes)."""
        name = self.id().rsplit('.', 1)[-1] + suffix
        self.conn('a').mkdir(name)
        return name

    @staticmethod
    def status_of(fn, *args):
        try:
            fn(*args)
            return NT_STATUS_OK
        except NTSTATUSError as e:
            return e.args[0]

    def wait_for_status(self, want, fn, *args):
        """Seconds until fn(*args) gives NT status want (bounded)."""
        start = time.monotonic()
        harness.wait_until(lambda: self.status_of(fn, *args) == want,
                           VISIBLE_WITHIN,
                           '%s(%r) to give 0x%08x' % (fn.__name__, args,
                                                      want & 0xffffffff))
        return time.monotonic() - start


class GlusterTwoNodes(TwoNodes):
    """Changes through one node, wrong-case lookups on the other."""

    @classmethod
    def start_nodes(cls):
        cls.gluster = cluster.Gluster(cls.tmp)
        cls.gluster.start()
        for node, address in NODES.items():
            cluster.add_address(address)
            mnt = cls.gluster.mount(os.path.join(cls.tmp, 'mnt-' + node))
            # every rebuild at once: these tests count the cache's own
            # answers (put-off rebuilds are tested in test_reliability)
            shares = {'fc': dict(FASTCASE, path=mnt, **{
                'fastcase:rebuild interval': '0'})}
            if node == 'b':
                # the same mount with inotify trusted, in a cache file of
                # its own: what the detection prevents
                shares['trusting'] = dict(FASTCASE, path=mnt, **{
                    'fastcase:trust inotify': 'yes',
                    'fastcase:cache file': os.path.join(
                        cls.tmp, 'trusting.tdb')})
            cls.start_smbd(node, shares)

    def cache_dir_on_b(self, d):
        """Build node B's records of d and return B's connection."""
        self.conn('a').savefile(d + '\\Old.txt', b'old')
        b = self.conn('b')
        self.wait_for_status(NT_STATUS_OK, b.loadfile,
                             d + '\\OLD.TXT')
        return b

    def test_create_through_a_found_by_wrong_case_on_b(self):
        d = self.fresh_dir()
        b = self.cache_dir_on_b(d)
        self.conn('a').savefile(d + '\\Report.docx', b'from a')
        took = self.wait_for_status(NT_STATUS_OK, b.loadfile,
                                    d + '\\REPORT.DOCX')
        self.assertEqual(b.loadfile(d + '\\report.DOCX'), b'from a')
        sys.stderr.write('(node B found it by wrong case %.2f s after '
                         'node A created it) ' % took)
        # seen once the stat through B's mount shows it, not later
        self.assertLess(took, ATTRIBUTE_TIMEOUT + 2.0)

    def test_case_variant_of_a_name_made_through_a_refused_on_b(self):
        d = self.fresh_dir()
        b = self.cache_dir_on_b(d)
        self.conn('a').savefile(d + '\\Budget.xlsx', b'a')
        self.wait_for_status(NT_STATUS_OK, b.loadfile,
                             d + '\\BUDGET.XLSX')
        self.assertEqual(
            self.status_of(create_new, b, d + '\\BUDGET.xlsx'),
            ntstatus.NT_STATUS_OBJECT_NAME_COLLISION)
        names = sorted(e['name'] for e in self.conn('a').list(d))
        self.assertEqual(names, ['Budget.xlsx', 'Old.txt'])

    def test_delete_through_a_seen_on_b(self):
        d = self.fresh_dir()
        b = self.cache_dir_on_b(d)
        self.conn('a').unlink(d + '\\Old.txt')
        self.wait_for_status(ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND,
                             b.loadfile, d + '\\OLD.TXT')

    def test_b_answers_from_its_cache_without_events(self):
        self.smbds['b'].wait_unused()
        d = self.fresh_dir()
        b = self.cache_dir_on_b(d)
        self.conn('a').savefile(d + '\\Seen.txt', b's')
        self.wait_for_status(NT_STATUS_OK, b.loadfile,
                             d + '\\SEEN.TXT')
        del b
        c = self.smbds['b'].counters('fc')
        shown = dict(c)
        self.assertEqual(c['unknown'], 0, shown)
        self.assertEqual(c['fallbacks'], 0, shown)
        self.assertGreaterEqual(c['hits'], 2, shown)
        self.assertGreaterEqual(c['builds'], 2, shown)
        self.assertEqual(c['events'], 0, shown)

    def test_trusting_inotify_misses_the_other_nodes_create(self):
        d = self.fresh_dir()
        self.conn('a').savefile(d + '\\Old.txt', b'old')
        trusting = self.conn('b', 'trusting')
        self.wait_for_status(NT_STATUS_OK, trusting.loadfile,
                             d + '\\OLD.TXT')
        self.conn('a').savefile(d + '\\Missed.txt', b'm')
        # once B's detecting share sees it, the stat shows it...
        self.wait_for_status(NT_STATUS_OK, self.conn('b').loadfile,
                             d + '\\MISSED.TXT')
        # ...yet a process that trusts inotify answers from its records
        self.assertEqual(self.status_of(trusting.loadfile,
                                        d + '\\MISSED.TXT'),
                         ntstatus.NT_STATUS_OBJECT_NAME_NOT_FOUND)


# the directory's identity must be the same through every node's mount
CLUSTERED_FASTCASE = dict(FASTCASE, **{
    'vfs objects': 'fastcase fileid',
    'fileid:algorithm': 'fsname',
})
ROUNDS = 50
STORM_SPELLINGS = {'a': 'Storm%d.txt', 'b': 'STORM%d.TXT'}


def make_at_the_barrier(conn_fn, make, d, spelling, rounds, barrier,
                        results):
    """One node's client: in each round, wait for the other node's client,
    then make (create_new or mkdir) this node's spelling of the round's
    new name; put the NT status of each round (or an error) on results."""
    try:
        conn = conn_fn()
        statuses = []
        for r in range(rounds):
            barrier.wait(timeout=60)
            statuses.append(TwoNodes.status_of(
                make, conn, d + '\\' + spelling % r))
        results.put(('ok', statuses))
    except BaseException:
        results.put(('error', traceback.format_exc()))


def mkdir(conn, path):
    conn.mkdir(path)


# what a client of a node that dies meets, and what one of a surviving
# node may meet while CTDB recovers (a create refused, never let through)
DISCONNECTED = {s & 0xffffffff for s in (
    ntstatus.NT_STATUS_CONNECTION_DISCONNECTED,
    ntstatus.NT_STATUS_CONNECTION_RESET,
    ntstatus.NT_STATUS_END_OF_FILE,
    ntstatus.NT_STATUS_INVALID_NETWORK_RESPONSE,
    ntstatus.NT_STATUS_PIPE_BROKEN,
    ntstatus.NT_STATUS_IO_TIMEOUT)}
CREATE_OUTCOMES = {NT_STATUS_OK,
                   ntstatus.NT_STATUS_OBJECT_NAME_COLLISION & 0xffffffff,
                   ntstatus.NT_STATUS_IO_TIMEOUT & 0xffffffff}


def storm_worker(conn_fn, d, spelling, seconds, results):
    """Create spelling % i for i = 0, 1, ... for seconds, or until the
    connection dies; put ('ok', [(i, status, time)]) on results."""
    done = []
    try:
        conn = conn_fn()
        deadline = time.time() + seconds
        i = 0
        while time.time() < deadline:
            status = TwoNodes.status_of(create_new, conn,
                                        d + '\\' + spelling % i)
            done.append((i, status & 0xffffffff, time.time()))
            if status & 0xffffffff in DISCONNECTED - CREATE_OUTCOMES:
                break
            i += 1
        results.put(('ok', done))
    except BaseException:
        results.put(('error', traceback.format_exc()))


class CtdbTwoNodes(TwoNodes):
    """Two smbds with clustering = yes, each on its own ctdbd and its own
    FUSE mount of one GlusterFS volume."""

    @classmethod
    def start_nodes(cls):
        cls.gluster = cluster.Gluster(cls.tmp)
        cls.gluster.start(cluster.FRESH_METADATA)
        for address in NODES.values():
            cluster.add_address(address)
        cls.ctdb = cluster.Ctdb(cls.tmp, NODES.values())
        cls.ctdb.start()
        cls.mounts = {}
        for node in NODES:
            cls.mounts[node] = cls.gluster.mount(
                os.path.join(cls.tmp, 'mnt-' + node))
            cls.start_node_smbd(node)

    @classmethod
    def start_node_smbd(cls, node):
        n = list(NODES).index(node)
        mnt = cls.mounts[node]
        shares = {
            'fc': dict(CLUSTERED_FASTCASE, path=mnt),
            # what GlusterFS administrators stack today, under fastcase
            'gfuse': dict(CLUSTERED_FASTCASE, path=mnt, **{
                'vfs objects': 'fastcase glusterfs_fuse fileid'}),
        }
        for name, objects in (('gfapi', 'fastcase glusterfs'),
                              ('gfapi_plain', 'glusterfs')):
            shares[name] = dict(FASTCASE, path='/', **{
                'vfs objects': objects,
                'glusterfs:volume': cluster.VOLUME,
                'glusterfs:volfile_server': cls.gluster.address,
                'glusterfs:logfile': os.path.join(
                    cls.tmp, '%s-%s.log' % (name, node)),
                'kernel share modes': 'no'})
        return cls.start_smbd(
            node, shares,
            {'clustering': 'yes', 'ctdbd socket': cls.ctdb.socket(n)})

    def run_workers(self, target, per_node, during=None):
        """One client process per node, target(conn_fn, *per_node[node]);
        during() runs meanwhile. Their results, node by node."""
        ctx = multiprocessing.get_context('fork')
        results = {node: ctx.Queue() for node in per_node}
        procs = {node: ctx.Process(
                    target=target,
                    args=(functools.partial(self.smbds[node].conn, 'fc'),) +
                    tuple(args) + (results[node],))
                 for node, args in per_node.items()}
        for p in procs.values():
            p.start()
        if during is not None:
            during()
        got = {node: q.get(timeout=600) for node, q in results.items()}
        for p in procs.values():
            p.join(timeout=60)
        for kind, value in got.values():
            self.assertEqual(kind, 'ok', value)
        return {node: value for node, (_, value) in got.items()}

    def race(self, make, d, spellings, rounds):
        """Both nodes' clients make their spelling of each round's name
        at the same instant; the statuses of each round."""
        barrier = multiprocessing.get_context('fork').Barrier(
            len(spellings))
        got = self.run_workers(make_at_the_barrier, {
            node: (make, d, spelling, rounds, barrier)
            for node, spelling in spellings.items()})
        return list(zip(*[got[node] for node in spellings]))

    def assertOneEachRound(self, make, d):
        rounds = self.race(make, d, {'a': 'Report%d.docx',
                                     'b': 'REPORT%d.DOCX'}, ROUNDS)
        names = sorted(e['name'] for e in self.conn('a').list(d))
        for r, statuses in enumerate(rounds):
            self.assertEqual(
                sorted(s & 0xffffffff for s in statuses),
                sorted([NT_STATUS_OK,
                        ntstatus.NT_STATUS_OBJECT_NAME_COLLISION &
                        0xffffffff]), 'round %d: %r' % (r, statuses))
        # exactly one per round, whichever spelling won
        self.assertEqual(len(names), ROUNDS, names)
        self.assertEqual(len({n.lower() for n in names}), ROUNDS, names)

    def test_simultaneous_case_variants_on_two_nodes(self):
        self.assertOneEachRound(create_new, self.fresh_dir())

    def test_simultaneous_directory_variants_on_two_nodes(self):
        self.assertOneEachRound(mkdir, self.fresh_dir())

    def test_create_checked_by_its_own_lookup(self):
        """A create right after the lookup that read the directory, no
        create through either node having begun since, is not checked by
        a second read (counted_checks); a case variant of a name made
        through the other node a moment before is still refused, and so
        is one of a name made through this node."""
        d = self.fresh_dir()
        local = os.path.join(self.mounts['a'], d)
        for i in range(200):
            open(os.path.join(local, 'File%03d.txt' % i), 'w').close()
        self.smbds['a'].counters('fc')     # from here on: this test's
        a, b = self.conn('a'), self.conn('b')
        for i in range(10):
            create_new(a, '%s\\New%02d.txt' % (d, i))
        create_new(b, d + '\\FromB.txt')
        for name in ('FROMB.TXT', 'new05.TXT'):
            self.assertEqual(self.status_of(create_new, a, d + '\\' + name),
                             ntstatus.NT_STATUS_OBJECT_NAME_COLLISION, name)
        names = sorted(e['name'] for e in a.list(d))
        self.assertEqual(names[-11:], ['FromB.txt'] +
                         ['New%02d.txt' % i for i in range(10)])
        del a, b
        counters = self.smbds['a'].counters('fc')
        self.assertGreaterEqual(counters['counted_checks'], 8, counters)

    def storm(self, d, seconds, during):
        """Both nodes create case variants of the same names for
        seconds; during() runs meanwhile. Each node's (i, status, time)."""
        return self.run_workers(storm_worker, {
            node: (d, STORM_SPELLINGS[node], seconds)
            for node in NODES}, during)

    def assertNothingLostOrDoubled(self, d, done):
        """Names on disk fold-unique, and every create that succeeded on
        disk under its own spelling."""
        names = {e['name'] for e in self.conn('a').list(d)}
        self.assertEqual(len({n.lower() for n in names}), len(names),
                         sorted(names))
        for node, results in done.items():
            for i, status, _ in results:
                if status == NT_STATUS_OK:
                    self.assertIn(STORM_SPELLINGS[node] % i, names)
        return names

    def test_node_killed_in_a_create_storm(self):
        d = self.fresh_dir()
        killed = {}

        def kill_b():
            time.sleep(2)
            killed['at'] = time.time()
            self.smbds['b'].kill()
            self.ctdb.kill_node(1)

        try:
            done = self.storm(d, 8, kill_b)
            for node, results in done.items():
                for i, status, _ in results:
                    allowed = CREATE_OUTCOMES if node == 'a' else \
                        CREATE_OUTCOMES | DISCONNECTED
                    self.assertIn(status, allowed, (node, i, hex(status)))
            # the survivor went on creating once CTDB let B go
            self.assertTrue(any(status == NT_STATUS_OK and t > killed['at']
                                for _, status, t in done['a']), done['a'])
            names = self.assertNothingLostOrDoubled(d, done)
        finally:
            self.restart_b()
        # the restarted node finds every name, by wrong case
        b = self.conn('b')
        for name in sorted(names):
            self.assertEqual(b.loadfile(d + '\\' + name.swapcase()), b'')
        self.assertEqual(self.status_of(create_new, b, d + '\\' +
                                        sorted(names)[-1].upper()),
                         ntstatus.NT_STATUS_OBJECT_NAME_COLLISION)

    def restart_b(self):
        if not self.smbds['b'].running():
            self.ctdb.start_node(1)
            self.ctdb.wait_healthy()
            self.smbds['b'].start()

    def test_recovery_in_a_create_storm(self):
        d = self.fresh_dir()

        def recover():
            time.sleep(1.5)
            self.ctdb.ctdb(0, 'recover')

        done = self.storm(d, 5, recover)
        for node, results in done.items():
            for i, status, _ in results:
                self.assertIn(status, CREATE_OUTCOMES,
                              (node, i, hex(status)))
        self.assertNothingLostOrDoubled(d, done)

    def assertBothNodesAgree(self, d, names):
        """Each node finds every name by wrong case, lists the same
        names, and refuses a case variant of each: nothing lost,
        doubled or hidden."""
        listed = {}
        for node in NODES:
            c = self.conn(node)
            for name in names:
                self.assertEqual(
                    self.status_of(c.loadfile, d + '\\' + name.swapcase()),
                    NT_STATUS_OK, (node, name))
                self.assertEqual(
                    self.status_of(create_new, c, d + '\\' + name.upper()),
                    ntstatus.NT_STATUS_OBJECT_NAME_COLLISION, (node, name))
            listed[node] = sorted(e['name'] for e in c.list(d))
        self.assertEqual(listed['a'], listed['b'])
        self.assertEqual(set(listed['a']), set(names))

    def test_cache_files_deleted_and_corrupted_under_the_nodes(self):
        d = self.fresh_dir()
        a, b = self.conn('a'), self.conn('b')
        names = ['Alpha%d.txt' % i for i in range(20)]
        for name in names:
            a.savefile(d + '\\' + name, b'')
        for name in names:
            self.wait_for_status(NT_STATUS_OK, b.loadfile,
                                 d + '\\' + name.upper())
        # A's cache and lock files go while its processes use them; B's
        # records are overwritten with garbage (not TDB's header)
        cache_a = self.smbds['a'].cache_file
        for path in (cache_a, cache_a + '.lock'):
            os.unlink(path)
        cache_b = self.smbds['b'].cache_file
        size = os.path.getsize(cache_b)
        with open(cache_b, 'r+b') as f:
            f.seek(size // 2)
            f.write(os.urandom(size - size // 2))
        del a, b
        # the cluster lock still pairs every create across nodes
        self.assertOneEachRound(create_new, self.fresh_dir('-race'))
        self.assertBothNodesAgree(d, names)
        for node in NODES:
            self.assertTrue(self.smbds[node].running(), node)

    def test_file_system_unmounted_under_a_node(self):
        d = self.fresh_dir()
        a, b = self.conn('a'), self.conn('b')
        names = ['Before%d.txt' % i for i in range(5)]
        for name in names:
            a.savefile(d + '\\' + name, b'')
        self.wait_for_status(NT_STATUS_OK, b.loadfile,
                             d + '\\' + names[-1].upper())
        del b
        mnt_b = self.mounts['b']
        try:
            subprocess.run([harness.tool('umount'), '-l', mnt_b],
                           check=True)
            # B's new connections see the empty mount point: none of the
            # volume's names may be answered there from B's records
            b = self.conn('b')
            self.assertNotEqual(self.status_of(b.loadfile, d + '\\' +
                                               names[0].upper()),
                                NT_STATUS_OK)
            del b
            # the surviving node answers and checks creates
            later = ['During%d.txt' % i for i in range(5)]
            for name in later:
                a.savefile(d + '\\' + name, b'')
                self.assertEqual(a.loadfile(d + '\\' + name.lower()), b'')
            self.assertEqual(self.status_of(create_new, a,
                                            d + '\\' + names[0].upper()),
                             ntstatus.NT_STATUS_OBJECT_NAME_COLLISION)
            names += later
        finally:
            self.remount_b()
        self.assertBothNodesAgree(d, names)

    @classmethod
    def remount_b(cls):
        mnt_b = cls.mounts['b']
        if not os.path.ismount(mnt_b):
            cls.gluster.forget_mount(mnt_b)
            cls.gluster.mount(mnt_b)

    def test_stacked_above_glusterfs_fuse(self):
        # vfs_glusterfs_fuse answers smbd's scan by asking the bricks;
        # fastcase above it answers from its cache and checks creates
        d = self.fresh_dir()
        a, b = self.conn('a', 'gfuse'), self.conn('b', 'gfuse')
        a.savefile(d + '\\Plan.txt', b'plan')
        self.wait_for_status(NT_STATUS_OK, b.loadfile, d + '\\PLAN.TXT')
        self.assertEqual(self.status_of(create_new, b, d + '\\plan.TXT'),
                         ntstatus.NT_STATUS_OBJECT_NAME_COLLISION)
        del a, b
        # fastcase answered what its cache could; what it put off went
        # to glusterfs_fuse, never to smbd's own scan
        c = self.smbds['b'].counters('gfuse')
        self.assertGreaterEqual(c['hits'], 1, dict(c))
        self.assertEqual(c['fallbacks'], 0, dict(c))

    def test_above_libgfapi_says_why_not(self):
        # vfs_glusterfs has no kernel fds: fastcase says so at connect and
        # leaves every question to smbd, which answers as without it
        mark = self.smbds['a'].log_mark()
        d = self.fresh_dir()
        self.conn('a').savefile(d + '\\Notes.txt', b'n')
        answers = {}
        for share in ('gfapi', 'gfapi_plain'):
            g = self.conn('a', share)
            answers[share] = [self.status_of(g.loadfile, d + '\\' + name)
                              for name in ('NOTES.TXT', 'Notes.txt',
                                           'Missing.txt')]
        self.assertEqual(answers['gfapi'], answers['gfapi_plain'])
        self.assertIn('vfs_glusterfs is below fastcase',
                      self.smbds['a'].log_text(since=mark))
