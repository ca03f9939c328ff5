"""
A private GlusterFS volume for the cluster tests: Debian's glusterd, one
volume on a local brick, mounted through FUSE once per node.

Everything runs inside run.py's network and mount namespaces: glusterd's
working, log and run directories are bind mounts of a temporary directory
(the host's /var/lib/glusterd is never touched), its address is one added
to the namespace's loopback device, and every process is stopped by its
PID (glusterd, the brick, each FUSE client). A change made through one
mount queues no inotify event on another: what nodes of a cluster see of
each other's changes.
"""

import glob
import os
import signal
import subprocess
import time

import harness

# glusterd refuses loopback addresses for bricks: one of its own on lo
ADDRESS = '10.99.0.1'
VOLUME = 'fcvol'
# The GlusterFS client's own metadata cache (md-cache) answers a stat for
# up to a second even when the kernel asks it afresh (statx with
# AT_STATX_FORCE_SYNC): without it, a create's check through one node sees
# the other nodes' creates of a moment ago.
FRESH_METADATA = (('performance.stat-prefetch', 'off'),)
GLUSTER_DIRS = ('/var/lib/glusterd', '/var/log/glusterfs', '/run/gluster')


class GlusterError(Exception):
    pass


def add_address(address):
    """address/32 on the namespace's loopback device, once: the test
    classes of one run share the namespace."""
    r = subprocess.run([harness.tool('ip'), 'addr', 'add', address + '/32',
                        'dev', 'lo'], capture_output=True, text=True)
    if r.returncode != 0 and 'already assigned' not in r.stderr:
        raise RuntimeError('ip addr add %s: %s' % (address, r.stderr))


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _signal(pid, sig):
    """Whether pid was there to take sig: a process told to shut down
    (ctdb shutdown) may be gone between the look and the kill."""
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _stop_pid(pid, timeout=10):
    """SIGTERM, wait (bounded), then SIGKILL: one process, by PID."""
    if pid is None or not _signal(pid, signal.SIGTERM):
        return
    deadline = time.monotonic() + timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    if _pid_alive(pid):
        _signal(pid, signal.SIGKILL)


def _process_tree(pid):
    """pid and its live (not zombie) descendants."""
    children = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        # after the name: state, ppid
        if fields[0] != 'Z':
            children.setdefault(int(fields[1]), []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def _live(pid):
    """Whether pid is a process that has not exited (not a zombie)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def _read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class Gluster:
    """One glusterd and one volume; mount() adds a FUSE mount of it."""

    def __init__(self, tmp, address=ADDRESS, own_address=True):
        """address: glusterd's and the brick's (not a loopback one);
        own_address: add it to the loopback device of the namespace."""
        self.tmp = tmp
        self.address = address
        self.own_address = own_address
        self.brick = os.path.join(tmp, 'brick')
        self.glusterd_pid = os.path.join(tmp, 'glusterd.pid')
        self.mounts = []        # (path, pid file)
        self.detached = []      # clients of mounts unmounted lazily
        self.bound = []

    def gluster(self, *args, check=True, timeout=60):
        r = subprocess.run([harness.tool('gluster'), '--mode=script'] +
                           list(args), capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise GlusterError('gluster %s: %s%s' % (
                ' '.join(args), r.stdout, r.stderr))
        return r

    def _bind_private_dirs(self):
        for d in GLUSTER_DIRS:
            private = os.path.join(self.tmp, 'gluster' + d.replace('/', '-'))
            os.makedirs(private)
            os.makedirs(d, exist_ok=True)
            subprocess.run([harness.tool('mount'), '--bind', private, d],
                           check=True)
            self.bound.append(d)

    def start(self, options=()):
        """glusterd and the volume, with these (name, value) volume
        options set before it starts."""
        os.makedirs(self.brick)
        self._bind_private_dirs()
        if self.own_address:
            add_address(self.address)
        subprocess.run([harness.tool('glusterd'), '-p', self.glusterd_pid],
                       check=True)
        harness.wait_until(
            lambda: self.gluster('volume', 'list', check=False,
                                 timeout=10).returncode == 0,
            30, 'glusterd to answer')
        self.gluster('volume', 'create', VOLUME,
                     '%s:%s' % (self.address, self.brick), 'force')
        for name, value in options:
            self.gluster('volume', 'set', VOLUME, name, value)
        self.gluster('volume', 'start', VOLUME)

    def mount(self, path, *options):
        """Mount the volume at path through FUSE, with the client's
        default caching unless options say otherwise."""
        os.makedirs(path, exist_ok=True)
        # a pid file of its own: the client of an earlier mount of path,
        # unmounted lazily, may still hold its pid file's lock, and a
        # client that cannot lock its pid file unmounts and exits
        pid_file = '%s.%d.pid' % (path, len(self.mounts) +
                                  len(self.detached))
        subprocess.run([harness.tool('glusterfs'),
                        '--volfile-server=' + self.address,
                        '--volfile-id=' + VOLUME,
                        '--pid-file=' + pid_file] + list(options) + [path],
                       check=True)
        self.mounts.append((path, pid_file))
        harness.wait_until(lambda: os.path.ismount(path), 30,
                           'the FUSE mount of %s at %s' % (VOLUME, path))
        return path

    def forget_mount(self, path):
        """The mount at path was unmounted lazily (its client lives on
        while files stay open on it): stop that client by its PID with
        the rest, and let path be mounted again."""
        for entry in list(self.mounts):
            if entry[0] == path:
                self.detached.append(_read_pid(entry[1]))
                self.mounts.remove(entry)

    def brick_pids(self):
        return [p for p in map(_read_pid, glob.glob(
            '/run/gluster/vols/%s/*.pid' % VOLUME)) if p]

    def stop(self):
        """Unmount every mount, stop the volume, then every process by
        its PID; then drop the bind mounts. Safe to call twice."""
        for path, pid_file in reversed(self.mounts):
            pid = _read_pid(pid_file)
            if os.path.ismount(path):
                harness.unmount(path)
            _stop_pid(pid)
        self.mounts = []
        for pid in self.detached:
            _stop_pid(pid)
        self.detached = []
        if _pid_alive_file(self.glusterd_pid):
            bricks = self.brick_pids()
            self.gluster('volume', 'stop', VOLUME, check=False)
            for pid in bricks:
                _stop_pid(pid)
            _stop_pid(_read_pid(self.glusterd_pid))
        for d in reversed(self.bound):
            harness.unmount(d)
        self.bound = []


def _pid_alive_file(path):
    pid = _read_pid(path)
    return pid is not None and _pid_alive(pid)


# Where Debian installs ctdbd's helpers (ctdb_lock_helper, ctdb-eventd).
CTDB_HELPER_DIR = '/usr/libexec/ctdb'


class CtdbError(Exception):
    pass


class Ctdb:
    """Debian's ctdbd, one per node, each in a base directory of its own
    (CTDB_TEST_MODE with CTDB_BASE: configuration, sockets, databases and
    logs all under it), each on its own address of the namespace's
    loopback device. No public addresses, no failover, no event scripts:
    what the nodes' smbds need of CTDB is its clustered databases (g_lock,
    locking) and the liveness of each other's processes."""

    def __init__(self, tmp, addresses):
        self.tmp = tmp
        self.addresses = list(addresses)
        self.bases = [os.path.join(tmp, 'ctdb-node%d' % n)
                      for n in range(len(self.addresses))]

    def env(self, node):
        e = dict(os.environ)
        # Samba 4.25's ctdb in test mode also takes its helpers'
        # directory from the environment (and aborts without it)
        e.update(CTDB_TEST_MODE='1', CTDB_BASE=self.bases[node],
                 CTDB_TEST_HELPER_BINDIR=CTDB_HELPER_DIR)
        return e

    def socket(self, node):
        return os.path.join(self.bases[node], 'run', 'ctdbd.socket')

    def pid(self, node):
        return _read_pid(os.path.join(self.bases[node], 'run',
                                      'ctdbd.pid'))

    def log(self, node):
        try:
            with open(os.path.join(self.bases[node], 'log.ctdb')) as f:
                return f.read()
        except OSError:
            return ''

    def _write_base(self, node):
        base = self.bases[node]
        db = os.path.join(base, 'db')
        for d in ('run', 'var', 'events/legacy', 'db/volatile',
                  'db/persistent', 'db/state'):
            os.makedirs(os.path.join(base, d), exist_ok=True)
        with open(os.path.join(base, 'nodes'), 'w') as f:
            f.write(''.join(a + '\n' for a in self.addresses))
        open(os.path.join(base, 'public_addresses'), 'w').close()
        with open(os.path.join(base, 'ctdb.conf'), 'w') as f:
            f.write('[logging]\n\tlocation = file:%s/log.ctdb\n'
                    '\tlog level = NOTICE\n'
                    '[cluster]\n\tnode address = %s\n'
                    '[database]\n'
                    '\tvolatile database directory = %s/volatile\n'
                    '\tpersistent database directory = %s/persistent\n'
                    '\tstate database directory = %s/state\n'
                    '[failover]\n\tdisabled = true\n'
                    % (base, self.addresses[node], db, db, db))

    def ctdb(self, node, *args, check=True, timeout=30):
        r = subprocess.run([harness.tool('ctdb')] + list(args),
                           env=self.env(node), capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise CtdbError('ctdb %s on node %d: %s%s' % (
                ' '.join(args), node, r.stdout, r.stderr))
        return r

    def start_node(self, node):
        self._write_base(node)
        subprocess.run([harness.tool('ctdbd')], env=self.env(node),
                       check=True)

    def start(self):
        for node in range(len(self.addresses)):
            self.start_node(node)
        self.wait_healthy()

    def healthy(self, node):
        """Whether node says every node is connected and healthy."""
        r = self.ctdb(node, 'nodestatus', 'all', check=False, timeout=10)
        return r.returncode == 0

    def wait_healthy(self, nodes=None, timeout=60):
        for node in nodes if nodes is not None else \
                range(len(self.addresses)):
            try:
                harness.wait_until(lambda: self.healthy(node), timeout,
                                   'ctdb node %d to be healthy' % node)
            except AssertionError as e:
                raise AssertionError('%s\n%s' % (e, self.report(node)))

    def report(self, node):
        """What node says of the cluster, and the end of every node's
        log: why it is not healthy."""
        try:
            r = self.ctdb(node, 'status', check=False, timeout=10)
            parts = ['ctdb status on node %d:\n%s%s' % (node, r.stdout,
                                                        r.stderr)]
        except subprocess.TimeoutExpired:
            parts = ['ctdb status on node %d: no answer' % node]
        for n in range(len(self.addresses)):
            parts.append('log of node %d (ctdbd pid %s):\n%s' % (
                n, self.pid(n), self.log(n)[-3000:]))
        return '\n'.join(parts)

    def kill_node(self, node):
        """SIGKILL of the node's ctdbd and of its helpers (recoverd,
        eventd, lock helpers), as when its machine dies. All are
        gone before this returns: a helper that outlived it would hold
        the node's sockets against the next ctdbd."""
        pid = self.pid(node)
        if pid is not None and _pid_alive(pid):
            tree = _process_tree(pid)
            for p in tree:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            harness.wait_until(
                lambda: not any(_live(p) for p in tree), 10,
                'ctdbd %d and its helpers %r to die' % (pid, tree[1:]))
        try:
            os.unlink(os.path.join(self.bases[node], 'run', 'ctdbd.pid'))
        except FileNotFoundError:
            pass

    def stop(self):
        """Every node's ctdbd, by PID (its eventd and recoverd follow
        it). Safe to call twice."""
        for node in range(len(self.addresses)):
            pid = self.pid(node)
            if pid is None or not _pid_alive(pid):
                continue
            self.ctdb(node, 'shutdown', check=False, timeout=20)
            _stop_pid(pid)
