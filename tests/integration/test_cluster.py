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
import multiprocessing
import os
import subprocess
import sys
import time
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


class GlusterTwoNodes(unittest.TestCase):
    """Changes through one node, wrong-case lookups on the other."""

    gluster = None
    smbds = {}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_environment()
        cls.tmp = harness.make_tmpdir('fastcase-GlusterTwoNodes-')
        cls.smbds = {}
        try:
            cls.start_cluster()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_cluster(cls):
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
            smbd = harness.Smbd(
                shares, address=address,
                global_params=harness.EVERY_LOOKUP_REACHES_THE_MODULE,
                prefix='fastcase-GlusterTwoNodes-%s-' % node)
            cls.smbds[node] = smbd
            smbd.start()

    @classmethod
    def tearDownClass(cls):
        for smbd in cls.smbds.values():
            smbd.stop()
        if cls.gluster is not None:
            cls.gluster.stop()
            cls.gluster = None
        for smbd in cls.smbds.values():
            smbd.cleanup(keep=harness.keep_tmp())
        cls.smbds = {}
        harness.remove_tree(cls.tmp)
        super().tearDownClass()

    def conn(self, node, share='fc'):
        return self.smbds[node].conn(share)

    def fresh_dir(self):
        """A new directory, made through node A (SMB path, no slashes)."""
        name = self.id().rsplit('.', 1)[-1]
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


def create_at_the_barrier(conn_fn, d, spelling, rounds, barrier, results):
    """One node's client: in each round, wait for the other node's client,
    then create this node's spelling of the round's new name; put the NT
    status of each round (or an error) on results."""
    try:
        conn = conn_fn()
        statuses = []
        for r in range(rounds):
            barrier.wait(timeout=60)
            statuses.append(GlusterTwoNodes.status_of(
                create_new, conn, d + '\\' + spelling % r))
        results.put(('ok', statuses))
    except BaseException as e:
        results.put(('error', repr(e)))


class CtdbTwoNodes(unittest.TestCase):
    """Two smbds with clustering = yes, each on its own ctdbd and its own
    FUSE mount of one GlusterFS volume."""

    smbds = {}
    gluster = None
    ctdb = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        harness.require_environment()
        cls.tmp = harness.make_tmpdir('fastcase-CtdbTwoNodes-')
        cls.smbds = {}
        try:
            cls.start_cluster()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_cluster(cls):
        cls.gluster = cluster.Gluster(cls.tmp)
        cls.gluster.start(cluster.FRESH_METADATA)
        for address in NODES.values():
            cluster.add_address(address)
        cls.ctdb = cluster.Ctdb(cls.tmp, NODES.values())
        cls.ctdb.start()
        for n, (node, address) in enumerate(NODES.items()):
            mnt = cls.gluster.mount(os.path.join(cls.tmp, 'mnt-' + node))
            smbd = harness.Smbd(
                {'fc': dict(CLUSTERED_FASTCASE, path=mnt)},
                address=address,
                global_params=dict(
                    harness.EVERY_LOOKUP_REACHES_THE_MODULE,
                    **{'clustering': 'yes',
                       'ctdbd socket': cls.ctdb.socket(n)}),
                prefix='fastcase-CtdbTwoNodes-%s-' % node)
            cls.smbds[node] = smbd
            smbd.start()

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
        harness.remove_tree(cls.tmp)
        super().tearDownClass()

    def conn(self, node):
        return self.smbds[node].conn('fc')

    def fresh_dir(self):
        name = self.id().rsplit('.', 1)[-1]
        self.conn('a').mkdir(name)
        return name

    def race(self, d, spellings, rounds):
        """Both nodes' clients create their spelling of each round's name
        at the same instant; the statuses per round, node by node."""
        ctx = multiprocessing.get_context('fork')
        barrier = ctx.Barrier(len(spellings))
        results = ctx.Queue()
        procs = [ctx.Process(target=create_at_the_barrier,
                             args=(functools.partial(self.smbds[node].conn, 'fc'), d,
                                   spelling, rounds, barrier, results))
                 for node, spelling in spellings.items()]
        for p in procs:
            p.start()
        got = [results.get(timeout=600) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        for kind, value in got:
            self.assertEqual(kind, 'ok', value)
        return list(zip(*[value for _, value in got]))

    def test_simultaneous_case_variants_on_two_nodes(self):
        d = self.fresh_dir()
        rounds = self.race(d, {'a': 'Report%d.docx',
                               'b': 'REPORT%d.DOCX'}, ROUNDS)
        names = sorted(e['name'] for e in self.conn('a').list(d))
        for r, statuses in enumerate(rounds):
            self.assertEqual(
                sorted(s & 0xffffffff for s in statuses),
                sorted([NT_STATUS_OK,
                        ntstatus.NT_STATUS_OBJECT_NAME_COLLISION &
                        0xffffffff]), 'round %d: %r' % (r, statuses))
        # exactly one file per round, whichever spelling won
        self.assertEqual(len(names), ROUNDS, names)
        self.assertEqual(len({n.lower() for n in names}), ROUNDS, names)
