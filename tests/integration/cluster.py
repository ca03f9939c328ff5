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
GLUSTER_DIRS = ('/var/lib/glusterd', '/var/log/glusterfs', '/run/gluster')


class GlusterError(Exception):
    pass


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _stop_pid(pid, timeout=10):
    """SIGTERM, wait (bounded), then SIGKILL: one process, by PID."""
    if pid is None or not _pid_alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    if _pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def _read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class Gluster:
    """One glusterd and one volume; mount() adds a FUSE mount of it."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.brick = os.path.join(tmp, 'brick')
        self.glusterd_pid = os.path.join(tmp, 'glusterd.pid')
        self.mounts = []        # (path, pid file)
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

    def start(self):
        os.makedirs(self.brick)
        self._bind_private_dirs()
        subprocess.run([harness.tool('ip'), 'addr', 'add', ADDRESS + '/32',
                        'dev', 'lo'], check=True)
        subprocess.run([harness.tool('glusterd'), '-p', self.glusterd_pid],
                       check=True)
        harness.wait_until(
            lambda: self.gluster('volume', 'list', check=False,
                                 timeout=10).returncode == 0,
            30, 'glusterd to answer')
        self.gluster('volume', 'create', VOLUME,
                     '%s:%s' % (ADDRESS, self.brick), 'force')
        self.gluster('volume', 'start', VOLUME)

    def mount(self, path, *options):
        """Mount the volume at path through FUSE, with the client's
        default caching unless options say otherwise."""
        os.makedirs(path, exist_ok=True)
        pid_file = path + '.pid'
        subprocess.run([harness.tool('glusterfs'),
                        '--volfile-server=' + ADDRESS,
                        '--volfile-id=' + VOLUME,
                        '--pid-file=' + pid_file] + list(options) + [path],
                       check=True)
        self.mounts.append((path, pid_file))
        harness.wait_until(lambda: os.path.ismount(path), 30,
                           'the FUSE mount of %s at %s' % (VOLUME, path))
        return path

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
