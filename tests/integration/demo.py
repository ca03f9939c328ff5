#!/usr/bin/python3
"""
Serve a vfs_fastcase demo share in the foreground, for a person to try.

    /usr/bin/python3 tests/integration/demo.py --build build [--port 4455]

As root. A private smbd with the freshly built module listens on
127.0.0.1:<port> (not 445, so a system smbd is left alone); all of its
state is in a temporary directory. Only the mount namespace is private (for
the VFS modules overlay): the network is the machine's, so the share is
reachable from any other shell on this machine with the smbclient command
printed at start. Ctrl-C or SIGTERM stops smbd and removes everything.

With --cluster the share is served through two nodes of a cluster: a
private GlusterFS volume (glusterd on this machine's own address, since it
refuses loopback ones for bricks) mounted through FUSE once per node, a
private ctdbd per node (127.0.0.2 and 127.0.0.3), and an smbd per node with
clustering = yes, each serving its own mount, on 127.0.0.1 at <port> and
<port>+1.

Credentials: demo / demo. "demo" is mapped (username map, in the temporary
config only) to root, which has that password in the private passdb; no
system user or password is created or changed.
"""

import argparse
import os
import signal
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster  # noqa: E402
import harness  # noqa: E402

SEED = {
    'Report.docx': 'Quarterly report (a text file standing in for a '
                   'Word document).\n',
    'README.txt': 'This share is served through vfs_fastcase: names are '
                  'case-insensitive.\nTry: get readme.TXT -\n',
    'Projects/Q4 Plan.txt': 'Q4 plan: ship vfs_fastcase.\n',
    'Projects/Budget.csv': 'item,amount\nservers,1200\n',
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--build', required=True,
                   help='the build directory holding fastcase.so')
    p.add_argument('--port', type=int, default=4455,
                   help='TCP port on 127.0.0.1 (default 4455)')
    p.add_argument('--user', default='demo', help='login name (demo)')
    p.add_argument('--password', default='demo', help='password (demo)')
    p.add_argument('--debuglevel', type=int, default=1)
    p.add_argument('--cluster', action='store_true',
                   help='serve the share through two cluster nodes')
    return p.parse_args()


def port_in_use(address, port):
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def seed(root):
    for rel, text in SEED.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)


class Stop(Exception):
    pass


def _stop(signum, frame):
    # one stop is enough: a second Ctrl-C (or waf passing the first one
    # on) must not interrupt the cleanup
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise Stop(signum)


def refuse_used_ports(addresses, ports):
    for address, port in zip(addresses, ports):
        if port_in_use(address, port):
            sys.exit('demo: something already listens on %s:%d; choose '
                     'another port with --port' % (address, port))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)


def demo_smbd(args, root, name, path, address, global_params,
              share_params=None):
    os.mkdir(os.path.join(root, name))
    return harness.Smbd(
        {'demo': dict(harness.FASTCASE, **{
            'comment': 'vfs_fastcase demo',
            'path': path,
        }, **(share_params or {}))},
        port=args.port, address=address,
        global_params=dict({'netbios name': 'FASTCASEDEMO'},
                           **global_params),
        user='root', password=args.password,
        username_map={'root': args.user},
        debuglevel=args.debuglevel,
        tmp=os.path.join(root, name))


def print_commands(args, address):
    print("  smbclient //%s/demo -p %d -U %s%%%s -c 'ls; get REPORT.DOCX -'"
          % (address, args.port, args.user, args.password))
    print("  smbclient //%s/demo -p %d -U %s%%%s -c "
          "'cd PROJECTS; get \"q4 PLAN.txt\" -'"
          % (address, args.port, args.user, args.password))


class SingleDemo:
    """One smbd serving a local directory on 127.0.0.1:<port>."""

    def __init__(self, args, root):
        self.args = args
        self.root = root
        self.smbds = {}

    def start(self):
        share = os.path.join(self.root, 'share')
        os.mkdir(share)
        seed(share)
        self.smbds['smbd'] = demo_smbd(self.args, self.root, 'smbd', share,
                                       '127.0.0.1', {})
        self.smbds['smbd'].start()

    def stop(self):
        for smbd in self.smbds.values():
            smbd.stop()

    def describe(self):
        smbd = self.smbds['smbd']
        print('vfs_fastcase demo: smbd (pid %d) serves //127.0.0.1/demo on '
              'port %d' % (smbd.pid, self.args.port))
        print('  smbd:    %s (%s)' % (harness.smbd_version_text(),
                                       harness.tool('smbd')))
        print('  module:  %s/fastcase.so' % os.path.abspath(self.args.build))
        print('  share:   %s' % smbd.share_path('demo'))
        print('  logs:    %s' % smbd.logdir)
        print('From another shell on this machine:')
        print()
        print_commands(self.args, '127.0.0.1')


def serve(args, demo_class, ports):
    """Start the demo, say how to reach it, serve until Ctrl-C or until an
    smbd exits; then stop everything it started, by PID."""
    refuse_used_ports(['127.0.0.1'] * len(ports), ports)
    root = harness.make_tmpdir('fastcase-demo-')
    overlay = harness.VfsOverlay(os.path.abspath(args.build), root)
    demo = None
    try:
        overlay.setup()
        demo = demo_class(args, root)
        demo.start()
        demo.describe()
        print()
        print('Ctrl-C stops the demo.', flush=True)
        while all(s.running() for s in demo.smbds.values()):
            time.sleep(0.5)
        for smbd in demo.smbds.values():
            if not smbd.running():
                print('demo: smbd exited with %s' % smbd.proc.returncode)
                print(smbd.log_tail())
        return 1
    except Stop:
        print('\ndemo: stopping', flush=True)
        return 0
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        if demo is not None:
            demo.stop()
        overlay.teardown()
        harness.remove_tree(root)


# ctdbd's node addresses; each node's smbd listens on 127.0.0.1, node a
# on --port, node b on the next port (smbd binds only addresses that are
# an interface's own)
CLUSTER_NODES = {'a': '127.0.0.2', 'b': '127.0.0.3'}


def brick_address():
    """(address, on_loopback) for glusterd and its brick, which must not be
    a loopback address: this machine's address on its default route, or,
    in a network namespace without one (the tests'), 10.99.0.1 added to
    the namespace's loopback device."""
    import socket as sk
    try:
        with sk.socket(sk.AF_INET, sk.SOCK_DGRAM) as s:
            s.connect(('203.0.113.1', 9))   # a route; no packet is sent
            return s.getsockname()[0], False
    except OSError:
        return cluster.ADDRESS, True


class DemoCluster:
    """GlusterFS, a ctdbd per node and an smbd per node; stop() stops
    whatever start() got to, by PID."""

    def __init__(self, args, root):
        self.args = args
        self.root = root
        address, on_loopback = brick_address()
        self.gluster = cluster.Gluster(os.path.join(root, 'gluster'),
                                       address=address,
                                       own_address=on_loopback)
        self.ctdb = cluster.Ctdb(root, CLUSTER_NODES.values())
        self.smbds = {}

    def start(self):
        os.mkdir(self.gluster.tmp)
        self.gluster.start(cluster.FRESH_METADATA)
        self.ctdb.start()
        for n, node in enumerate(CLUSTER_NODES):
            mnt = self.gluster.mount(os.path.join(self.root, 'mnt-' + node))
            if n == 0:
                seed(mnt)
            args = argparse.Namespace(**vars(self.args))
            args.port = self.args.port + n
            smbd = demo_smbd(
                args, self.root, 'smbd-' + node, mnt, '127.0.0.1',
                {'clustering': 'yes', 'ctdbd socket': self.ctdb.socket(n)},
                {'vfs objects': 'fastcase fileid',
                 'fileid:algorithm': 'fsname'})
            self.smbds[node] = smbd
            smbd.start()

    def stop(self):
        for smbd in self.smbds.values():
            smbd.stop()
        self.ctdb.stop()
        self.gluster.stop()

    def describe(self):
        print('vfs_fastcase cluster demo: //demo through two nodes on one '
              'GlusterFS volume (%s:%s)' % (self.gluster.address,
                                           cluster.VOLUME))
        print('  smbd:    %s (%s)' % (harness.smbd_version_text(),
                                       harness.tool('smbd')))
        for n, (node, smbd) in enumerate(self.smbds.items()):
            print('  node %s: smbd pid %d on 127.0.0.1:%d, ctdbd pid %s on '
                  '%s, share %s' % (node, smbd.pid, smbd.port,
                                    self.ctdb.pid(n), CLUSTER_NODES[node],
                                    smbd.share_path('demo')))
        for node, smbd in self.smbds.items():
            print('From another shell on this machine, node %s:' % node)
            args = argparse.Namespace(**vars(self.args))
            args.port = smbd.port
            print_commands(args, '127.0.0.1')


def main():
    args = parse_args()
    if not harness.in_namespace():
        if not os.path.isfile(os.path.join(args.build, 'fastcase.so')):
            sys.exit('demo: %s/fastcase.so does not exist: run ./waf build'
                     % os.path.abspath(args.build))
        # A private mount namespace only: the network stays the machine's.
        harness.reexec_in_namespace(__file__, sys.argv[1:], net=False)
    if args.cluster:
        return serve(args, DemoCluster, [args.port, args.port + 1])
    return serve(args, SingleDemo, [args.port])


if __name__ == '__main__':
    sys.exit(main())
