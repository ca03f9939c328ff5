"""
Foundation: smbd loads the freshly built module, names are case-insensitive
through it, and a bad fastcase: parameter refuses the share.
"""

import os
import random
import re
import signal
import socket
import subprocess
import time
import unittest

from samba import NTSTATUSError
from samba import ntstatus

import harness
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



class DemoCommand(unittest.TestCase):
    """What `./waf demo` runs (tests/integration/demo.py): the smbclient
    command it prints lists the demo share and reads a file by a
    wrong-case name, and Ctrl-C stops its smbd and removes its files."""

    def setUp(self):
        harness.require_environment()

    def free_port(self, count=1):
        """A port P with P .. P+count-1 free on 127.0.0.1, below the
        ephemeral range (where a client's connection could take P+1)."""
        for port in random.Random().sample(range(20000, 30000), 200):
            socks = []
            try:
                for p in range(port, port + count):
                    s = socket.socket()
                    socks.append(s)
                    s.bind(('127.0.0.1', p))
                return port
            except OSError:
                continue
            finally:
                for s in socks:
                    s.close()
        self.fail('no %d free ports in a row on 127.0.0.1' % count)

    def read_banner(self, proc, deadline):
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith('Ctrl-C stops the demo.'):
                return lines
        self.fail('no banner from the demo:\n' + ''.join(lines))

    def run_demo(self, *extra, timeout=60, ports=1):
        """Start demo.py as from a shell (it makes its own mount
        namespace), run the first smbclient command it prints for each
        smbd (or node), then Ctrl-C it: everything it started must be
        gone."""
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              'demo.py')
        env = {k: v for k, v in os.environ.items()
               if k != harness.NS_MARKER}
        proc = subprocess.Popen(
            [harness.PYTHON, script, '--build', os.environ['FASTCASE_BUILD'],
             '--port', str(self.free_port(ports))] + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=env, stdin=subprocess.DEVNULL)
        try:
            lines = self.read_banner(proc, time.monotonic() + timeout)
            banner = ''.join(lines)
            pids = [int(p) for p in re.findall(r'pid (\d+)', banner)]
            shares = re.findall(r'share:? +(/\S+)', banner)
            commands = [ln.strip() for ln in lines
                        if ln.strip().startswith('smbclient ')]
            self.assertTrue(pids and shares and commands, banner)
            for share in shares:
                self.assertTrue(os.path.isdir(share), share)
            for cmd in commands[::2]:
                r = subprocess.run([harness.tool('sh'), '-c', cmd],
                                   capture_output=True, text=True,
                                   timeout=60, stdin=subprocess.DEVNULL)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn('Report.docx', r.stdout)
                self.assertIn('Quarterly report', r.stdout)

            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=120)
            self.assertEqual(proc.returncode, 0, out)
            self.assertIn('demo: stopping', out)
            for pid in pids:
                self.assertFalse(os.path.exists('/proc/%d' % pid),
                                 'the demo left pid %d running' % pid)
            for share in shares:
                self.assertFalse(os.path.exists(share),
                                 'the demo left %s behind' % share)
            return banner
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def test_printed_command_works_and_ctrl_c_cleans_up(self):
        banner = self.run_demo()
        self.assertEqual(len(re.findall(r'^  smbclient ', banner, re.M)),
                         2, banner)

    def test_cluster_demo_reaches_both_nodes(self):
        # one command per node reads the share through that node
        banner = self.run_demo('--cluster', timeout=180, ports=2)
        self.assertIn('node a:', banner)
        self.assertIn('node b:', banner)
        self.assertEqual(len(re.findall(r'^  smbclient ', banner, re.M)),
                         4, banner)


if __name__ == '__main__':
    unittest.main()
