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


def serve(args):
    build = os.path.abspath(args.build)
    address = '127.0.0.1'
    if port_in_use(address, args.port):
        sys.exit('demo: something already listens on %s:%d; choose another '
                 'port with --port' % (address, args.port))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)

    root = harness.make_tmpdir('fastcase-demo-')
    overlay = harness.VfsOverlay(build, root)
    smbd = None
    try:
        overlay.setup()
        os.mkdir(os.path.join(root, 'smbd'))
        smbd = harness.Smbd(
            {'demo': dict(harness.FASTCASE, **{
                'comment': 'vfs_fastcase demo',
                'path': os.path.join(root, 'share'),
            })},
            port=args.port, address=address,
            global_params={'netbios name': 'FASTCASEDEMO'},
            user='root', password=args.password,
            username_map={'root': args.user},
            debuglevel=args.debuglevel,
            tmp=os.path.join(root, 'smbd'))
        os.mkdir(os.path.join(root, 'share'))
        seed(os.path.join(root, 'share'))
        smbd.start()

        cmd = ("smbclient //%s/demo -p %d -U %s%%%s -c 'ls; get REPORT.DOCX -'"
               % (address, args.port, args.user, args.password))
        print('vfs_fastcase demo: smbd (pid %d) serves //%s/demo on port %d'
              % (smbd.pid, address, args.port))
        print('  smbd:    %s (%s)' % (harness.smbd_version_text(),
                                       harness.tool('smbd')))
        print('  module:  %s/fastcase.so' % build)
        print('  share:   %s' % smbd.share_path('demo'))
        print('  logs:    %s' % smbd.logdir)
        print('From another shell on this machine:')
        print()
        print('  ' + cmd)
        print("  smbclient //%s/demo -p %d -U %s%%%s -c "
              "'cd PROJECTS; get \"q4 PLAN.txt\" -'"
              % (address, args.port, args.user, args.password))
        print()
        print('Ctrl-C stops the demo.', flush=True)
        while smbd.running():
            time.sleep(0.5)
        print('demo: smbd exited with %s' % smbd.proc.returncode)
        print(smbd.log_tail())
        return 1
    except Stop:
        print('\ndemo: stopping', flush=True)
        return 0
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        if smbd is not None:
            smbd.stop()
        overlay.teardown()
        harness.remove_tree(root)


def main():
    args = parse_args()
    if not harness.in_namespace():
        if not os.path.isfile(os.path.join(args.build, 'fastcase.so')):
            sys.exit('demo: %s/fastcase.so does not exist: run ./waf build'
                     % os.path.abspath(args.build))
        # A private mount namespace only: the network stays the machine's.
        harness.reexec_in_namespace(__file__, sys.argv[1:], net=False)
    return serve(args)


if __name__ == '__main__':
    sys.exit(main())
