"""
Two nodes on one GlusterFS volume (tests/integration/cluster.py): each node
an smbd of its own, with its own address and its own cache file, serving
its own FUSE mount of the volume, as the nodes of a cluster serve theirs.
A change made through node A queues no inotify event on node B's mount, so
B's module must not trust inotify there (fastcase:trust inotify = auto
detects FUSE) and must see A's changes as soon as a stat through B's mount
shows them: after GlusterFS's attribute caching (1 s by default).

Not yet covered here: CTDB (the smbds run with clustering = no) and
creates of case variants at the same instant on both nodes, which the
module's host-local create lock does not serialise.
"""

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
            subprocess.run([harness.tool('ip'), 'addr', 'add',
                                    address + '/32', 'dev', 'lo'],
                                   check=True)
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
