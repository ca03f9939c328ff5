#!/usr/bin/python3
"""
./waf bench: smbd's name lookups in three configurations, side by side, on
the same directories, in one run of one private smbd:

  sensitive  case sensitive = yes            (the limit)
  stock      case sensitive = no             (what users run today)
  fastcase   case sensitive = no + vfs objects = fastcase

Every measurement uses fresh connections, so fresh smbd processes, one per
configuration; a "holder" connection per share stays open throughout, as
on a server in use (the shared cache lives while any process has it open).

Phases:
  fill         directories of N entries, made locally: files by a C
               helper (bench_helper.c, compiled into BUILD/bench/ at run
               time) and the first directories of the 8-level chains of
               the deep-path operation (one per iteration)
  cold         first wrong-case lookup in a directory the cache has never
               seen (a share with a cache file of its own per sample),
               against one plain readdir of it from C; the cache file's
               size after that build is the footprint
  operations   per size and operation, sensitive and fastcase take
               turns, one operation each, then stock runs alone (its
               directory scans would slow whatever ran next), on
               names no process has used before; each configuration has
               a time budget per cell and is reported "over budget" when
               it cannot finish its iterations within it
  concurrency  1, 8, 32 client processes (one smbd process each), a mixed
               load on one shared directory for a fixed time
  memory       resident memory of an smbd process of each configuration
               after one lookup in every directory

Results go to OUT/PERFORMANCE.md, OUT/performance.png and a JSON file
(report.py regenerates the first two from it).

usage: bench.py --build BUILD [--quick] [--out DIR] [--json FILE]
                [--sizes 1000,10000] [--iterations N] [--budget SECONDS]
                [--clients 1,8,32] [--concurrency-size N]
                [--concurrency-seconds S] [--cold-repeats R]
                [--cache-size BYTES] [--timeout SECONDS] [--no-pin]
As root: it runs itself again in new mount and network namespaces.
"""

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(TOP, 'tests', 'integration'))
sys.path.insert(0, HERE)

import harness  # noqa: E402
import report  # noqa: E402

FILE_OPEN = 1
FILE_CREATE = 2
READ_ATTR = 0x80
WRITE_DATA = 0x2
DELETE = 0x10000
SHARE_ALL = 7

CONFIGS = report.CONFIGS
OPS = report.OPS
DEEP_LEVELS = 8          # components below the size directory
PRIME = 7919             # coprime with every size: a permutation of indices

PROFILES = {
    'full': {
        'sizes': [1000, 10000, 100000, 1000000],
        'iterations': 250,
        'budget': 20.0,
        'cold_repeats': 3,
        'clients': [1, 8, 32],
        'concurrency_size': 100000,
        'concurrency_seconds': 15.0,
        'timeout': 3600,
    },
    'quick': {
        'sizes': [1000, 10000, 100000],
        'iterations': 60,
        'budget': 3.0,
        'cold_repeats': 3,
        'clients': [1, 8, 32],
        'concurrency_size': 10000,
        'concurrency_seconds': 3.0,
        'timeout': 900,
    },
}


def log(msg):
    print('bench: %s' % msg, flush=True)


# ---------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------

def file_name(i):
    return 'File_%07d_data.txt' % i


def size_dir(n):
    return 'd%d' % n


# Operations that change the directory. In these cells sensitive works in
# a twin of the size directory (same files, same deep paths): its creates
# and renames in the fastcase directory would be outside changes that the
# watching fastcase process applies, and were billed to fastcase's create
# and rename (DESIGN.md, "Where the time goes"). What outside changes cost
# a watching process is measured on its own (measure_outside()).
CHANGING_OPS = report.TWINNED_OPS


def twin_dir(n):
    return 'd%d_twin' % n


def index(k, files, offset=0):
    """The k-th file index of a sequence that repeats no index for
    k < files."""
    return ((k + offset) * PRIME) % files


# Files in each size directory: a directory of N entries holds the first
# directories of the deep paths (one per iteration) and N minus that many
# files. Set by run().
FILES = {}


def spelled(config, name):
    """The name as the client spells it: wrong case, except on the
    case-sensitive share (where a wrong-case open would only fail fast)."""
    return name if config == 'sensitive' else name.upper()


def deep_components(chain):
    parts = ['Deep_%05d_L%d' % (chain, level)
             for level in range(1, DEEP_LEVELS)]
    return parts + ['Leaf_%05d.txt' % chain]


# ---------------------------------------------------------------------------
# local side: the C helper, filling
# ---------------------------------------------------------------------------

def build_helper(build):
    out = os.path.join(build, 'bench')
    os.makedirs(out, exist_ok=True)
    src = os.path.join(HERE, 'bench_helper.c')
    exe = os.path.join(out, 'bench_helper')
    if (not os.path.exists(exe) or
            os.path.getmtime(exe) < os.path.getmtime(src)):
        subprocess.run(['cc', '-O2', '-Wall', '-o', exe, src], check=True)
    return exe


def fill(helper, path, files, chains):
    subprocess.run([helper, 'fill', path, str(files)], check=True)
    for c in range(chains):
        parts = deep_components(c)
        d = os.path.join(path, *parts[:-1])
        os.makedirs(d)
        with open(os.path.join(d, parts[-1]), 'w'):
            pass


def c_readdir(helper, path, repeat):
    out = subprocess.run([helper, 'readdir', path, str(repeat)],
                         check=True, capture_output=True, text=True).stdout
    rows = [line.split() for line in out.splitlines()]
    return [int(ns) for ns, _ in rows], int(rows[0][1])


def names_bytes(path):
    total = count = 0
    with os.scandir(path) as it:
        for e in it:
            total += len(os.fsencode(e.name))
            count += 1
    return count, total


# ---------------------------------------------------------------------------
# smbd processes
# ---------------------------------------------------------------------------

class Placement:
    """Where the timed processes run. With two CPUs or more, the bench
    (the client) runs on one and each timed smbd process on another,
    while cells are measured: left to the scheduler, two smbd processes
    of one configuration doing the same operations differed by up to 28%
    in median CPU time per operation, more than the differences measured;
    pinned, by at most 3% (process_spread.py). The concurrency phase runs
    unpinned, as a server does."""

    def __init__(self, enabled):
        self.allowed = sorted(os.sched_getaffinity(0))
        self.enabled = enabled and len(self.allowed) >= 2
        self.client_cpu = self.allowed[:1]
        self.server_cpu = self.allowed[-1:]

    def describe(self):
        if not self.enabled:
            return None
        return {'client_cpu': self.client_cpu[0],
                'server_cpu': self.server_cpu[0]}

    def timed(self):
        """The bench process, before its cells are measured."""
        if self.enabled:
            os.sched_setaffinity(0, self.client_cpu)

    def untimed(self):
        """The bench process, before it forks the concurrency clients."""
        if self.enabled:
            os.sched_setaffinity(0, self.allowed)

    def serve(self, client):
        """Every thread of the smbd process serving client."""
        if not self.enabled or client.pid is None:
            return
        try:
            for t in os.listdir('/proc/%d/task' % client.pid):
                os.sched_setaffinity(int(t), self.server_cpu)
        except OSError as e:
            log('cannot pin smbd %d: %s' % (client.pid, e))


# set by run(); scripts that reuse measure_cell() leave processes unpinned
PLACEMENT = Placement(False)


def children(pid):
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            return set(int(x) for x in f.read().split())
    except OSError:
        return set()


class Client:
    """A connection to a share and the smbd process that serves it."""

    def __init__(self, smbd, share):
        before = children(smbd.pid)
        self.conn = smbd.conn(share)
        new = children(smbd.pid) - before
        self.pid = new.pop() if len(new) == 1 else None
        self.share = share

    def cpu_ns(self):
        """CPU time of the smbd process (all its threads), nanoseconds,
        from /proc/PID/task/*/schedstat."""
        if self.pid is None:
            return None
        total = 0
        try:
            for t in os.listdir('/proc/%d/task' % self.pid):
                with open('/proc/%d/task/%s/schedstat' % (self.pid, t)) as f:
                    total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return total

    def memory(self):
        """VmRSS, RssAnon, RssFile, RssShmem of the smbd process, bytes."""
        out = {}
        if self.pid is None:
            return out
        with open('/proc/%d/status' % self.pid) as f:
            for line in f:
                key, _, value = line.partition(':')
                if key in ('VmRSS', 'RssAnon', 'RssFile', 'RssShmem'):
                    out[key] = int(value.split()[0]) * 1024
        return out

    def close(self):
        """Disconnect; wait for the smbd process to exit so that the
        number of live processes (and inotify instances) stays small."""
        self.conn = None
        if self.pid is None:
            return
        deadline = time.monotonic() + 5
        while os.path.exists('/proc/%d' % self.pid):
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)


def open_close(conn, path, access=READ_ATTR, disposition=FILE_OPEN):
    fnum = conn.create(path, DesiredAccess=access, ShareAccess=SHARE_ALL,
                       CreateDisposition=disposition)
    conn.close(fnum)


def open_or_miss(conn, path):
    """Opens and closes path if it exists: where the lookup is what is
    measured, a miss is as good as a hit."""
    from samba import NTSTATUSError
    try:
        open_close(conn, path)
    except NTSTATUSError:
        pass


def expect_missing(conn, path):
    from samba import NTSTATUSError
    try:
        open_close(conn, path)
    except NTSTATUSError:
        return
    raise RuntimeError('%s exists' % path)


# ---------------------------------------------------------------------------
# one operation
# ---------------------------------------------------------------------------

class Cell:
    """One (size, operation): the names each configuration uses."""

    def __init__(self, size, op, tree, tag, configs=None, twinned=()):
        self.configs = configs or CONFIGS
        self.size = size
        self.files = FILES[size]
        self.op = op
        self.d = size_dir(size)
        self.local = os.path.join(tree, self.d)
        self.offset = OPS.index(op) * 1000003
        self.tag = tag
        # configuration -> its directory, when not self.d
        self.twin = {c: twin_dir(size) for c in twinned
                     if op in CHANGING_OPS}
        self.created = []
        self.renamed = []

    def dir_of(self, config):
        return self.twin.get(config, self.d)

    def run(self, client, config, k):
        conn, d = client.conn, self.dir_of(config)
        op = self.op
        if op in ('exact-case open', 'wrong-case open'):
            name = file_name(index(k, self.files, self.offset))
            if op == 'wrong-case open':
                name = spelled(config, name)
            open_close(conn, d + '\\' + name)
        elif op == 'miss':
            expect_missing(conn, d + '\\Missing_%s_%07d.txt' % (self.tag, k))
        elif op == 'create':
            name = 'New_%s_%s_%07d.txt' % (config, self.tag, k)
            open_close(conn, d + '\\' + name, READ_ATTR | WRITE_DATA,
                       FILE_CREATE)
            self.created.append((d, name))
        elif op == 'exact-name find':
            name = spelled(config, file_name(index(k, self.files,
                                                   self.offset)))
            found = conn.list(d, mask=name)
            if len(found) != 1:
                raise RuntimeError('find %s: %d entries' % (name,
                                                            len(found)))
        elif op == 'rename':
            # a distinct source per configuration: they take turns
            src = file_name(index(k * len(self.configs) +
                                  self.configs.index(config),
                                  self.files, self.offset))
            dst = 'Renamed_%s_%s_%07d.txt' % (config, self.tag, k)
            conn.rename(d + '\\' + src, d + '\\' + dst)
            self.renamed.append((d, src, dst))
        elif op == 'deep wrong-case path':
            parts = [spelled(config, p) for p in deep_components(k)]
            open_close(conn, '\\'.join([d] + parts))
        else:
            raise ValueError(op)

    def warm_up(self, client, config):
        """One lookup in the directory by this process before it is timed:
        the per-directory setup of a process (and, after local changes, a
        rebuild of the shared cache) is not what a steady server pays."""
        expect_missing(client.conn, self.dir_of(config) +
                       '\\Warmup_%s_%s.txt' % (config, self.tag))

    def restore(self, clients, restorer):
        """Undo creates and renames, untimed: in self.d through the
        restorer configuration's client (on one node the fastcase share's:
        the process is in sync with the directory, so the shared cache
        follows without a rebuild), in a twin through its own
        configuration's."""
        by_dir = {self.d: clients[restorer]}
        by_dir.update({t: clients[c] for c, t in self.twin.items()})
        for d, name in self.created:
            by_dir[d].conn.unlink(d + '\\' + name)
        for d, src, dst in self.renamed:
            by_dir[d].conn.rename(d + '\\' + dst, d + '\\' + src)
        self.created, self.renamed = [], []
        settle(clients[restorer].conn, self.d, 'restore_%s' % self.tag)


# configurations that read the whole directory: run apart (see turns())
SCANNING = ('stock', 'glusterfs_fuse')


def turns(iterations, configs=None):
    """(iteration, configurations in the order they run it): sensitive
    and fastcase alternate, each first in every other iteration, so that
    drift in the machine's speed hits both alike; stock runs its
    iterations afterwards, on its own. Interleaved, stock's full directory
    scans (up to seconds at 1,000,000 entries) slowed whichever
    configuration ran next, and with three configurations in rotation
    fastcase came right after stock in two iterations of three, sensitive
    in one. (A miss of sensitive at 1,000,000 entries: 160 us of smbd CPU
    in the rotation, docs/PERFORMANCE.md of 2026-12-03, commit 36b8575;
    50 us in the run of 2026-12-04 with stock apart.)"""
    configs = configs or CONFIGS
    pair = [c for c in configs if c not in SCANNING]
    for k in range(iterations):
        yield k, pair if k % 2 == 0 else pair[::-1]
    for c in configs:
        if c in SCANNING:
            for k in range(iterations):
                yield k, [c]


def measure_cell(smbd, cell, iterations, budget, restorer='fastcase'):
    """Run cell's iterations; then undo its creates and renames through
    the restorer configuration's connection."""
    configs = cell.configs
    clients = {c: Client(smbd, c) for c in configs}
    for c in configs:
        PLACEMENT.serve(clients[c])
        cell.warm_up(clients[c], c)
    times = {c: [] for c in configs}
    errors = {c: [] for c in configs}
    spent = {c: 0.0 for c in configs}
    over = {c: False for c in configs}
    cpu0 = {c: clients[c].cpu_ns() for c in configs}
    cpu1 = {}
    for k, order in turns(iterations, configs):
        if order[0] in SCANNING and not cpu1:
            # the alternating pair is done: stock's creates and renames
            # that follow would queue inotify events for the fastcase
            # process, which it would apply while idle and bill here
            cpu1 = {c: clients[c].cpu_ns() for c in configs
                    if c not in SCANNING}
        active = [c for c in order if not over[c]]
        for c in active:
            t0 = time.perf_counter()
            try:
                cell.run(clients[c], c, k)
            except Exception as e:     # noqa: BLE001 (reported, not fatal)
                if len(errors[c]) < 3:
                    errors[c].append(str(e))
                errors[c].append(None)
                spent[c] += time.perf_counter() - t0
            else:
                dt = time.perf_counter() - t0
                times[c].append(dt)
                spent[c] += dt
            if spent[c] > budget and k + 1 < iterations:
                over[c] = True
    out = {}
    for c in configs:
        end = cpu1[c] if c in cpu1 else clients[c].cpu_ns()
        n = len(times[c])
        nerr = sum(1 for e in errors[c] if e is None)
        cpu = None
        if cpu0[c] is not None and end is not None and n + nerr:
            cpu = (end - cpu0[c]) / (n + nerr)
        out[c] = {
            'times': times[c],
            'iterations': iterations,
            'done': n,
            'errors': nerr,
            'error_text': [e for e in errors[c] if e is not None],
            'over_budget': over[c],
            'spent': spent[c],
            'cpu_ns_per_op': cpu,
        }
    cell.restore(clients, restorer)
    for c in configs:
        clients[c].close()
    return out


def settle(conn, d, tag):
    """Let a fastcase process that changed a directory refresh its
    stamp once the stamp is no longer racy: processes that attach later
    then trust the cache instead of rebuilding it, as they do on a server
    whose processes live long (the bench's end after each cell)."""
    time.sleep(0.15)
    expect_missing(conn, d + '\\Settle_%s.txt' % tag)


def warm_deep(smbd, size, chains):
    """Build the shared cache of every deep-path directory once, from a
    process that is not the one measured (only fastcase has a cache that
    outlives a process)."""
    client = Client(smbd, 'fastcase')
    d = size_dir(size)
    for k in range(chains):
        parts = [p.upper() for p in deep_components(k)]
        open_close(client.conn, '\\'.join([d] + parts))
    client.close()


# ---------------------------------------------------------------------------
# outside changes
# ---------------------------------------------------------------------------

OUTSIDE_CHANGES = 250
OUTSIDE_INTERVAL = 0.001


def measure_outside(smbd, tree, size):
    """What a fastcase process that watches a directory pays for changes
    other programs make there while it is idle: CPU time of the process
    per local create, then per local rename, one every OUTSIDE_INTERVAL;
    then a wrong-case open of the last renamed file must find it."""
    d = size_dir(size)
    local = os.path.join(tree, d)
    names = ['Outside_%07d.txt' % i for i in range(OUTSIDE_CHANGES)]
    client = Client(smbd, 'fastcase')
    PLACEMENT.serve(client)
    expect_missing(client.conn, d + '\\Outside_warmup.txt')
    out = {'changes': OUTSIDE_CHANGES, 'interval': OUTSIDE_INTERVAL}

    def changes(kind, change):
        time.sleep(0.3)
        cpu0 = client.cpu_ns()
        for name in names:
            change(os.path.join(local, name))
            time.sleep(OUTSIDE_INTERVAL)
        time.sleep(0.3)
        cpu1 = client.cpu_ns()
        if cpu0 is not None and cpu1 is not None:
            out[kind + '_cpu_ns'] = (cpu1 - cpu0) / OUTSIDE_CHANGES

    changes('create', lambda p: os.close(os.open(p, os.O_CREAT |
                                                 os.O_WRONLY, 0o644)))
    changes('rename', lambda p: os.rename(p, p + '.moved'))
    open_close(client.conn, d + '\\' + names[-1].upper() + '.MOVED')
    for name in names:
        os.unlink(os.path.join(local, name + '.moved'))
    settle(client.conn, d, 'outside')
    client.close()
    return out


# ---------------------------------------------------------------------------
# cold cost and footprint
# ---------------------------------------------------------------------------

def cache_stat(build, path):
    r = subprocess.run([os.path.join(build, 'fastcase-stat'), '--json',
                        path], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def cold_share(size, r):
    return 'cold_%d_%d' % (size, r)


def measure_cold(smbd, build, helper, tree, size, repeats):
    d = size_dir(size)
    local = os.path.join(tree, d)
    samples = []
    for r in range(repeats):
        share = cold_share(size, r)
        cache = smbd.shares[share]['fastcase:cache file']
        client = Client(smbd, share)
        PLACEMENT.serve(client)
        # the process's own first-use costs (loading the fold tables,
        # mapping the cache file) are not the directory's: one wrong-case
        # lookup in the share's small root directory first
        expect_missing(client.conn, 'COLD_WARMUP_%d.TXT' % r)
        before = os.path.getsize(cache) if os.path.exists(cache) else 0
        name = file_name(index(r, FILES[size], 77)).upper()
        cpu0 = client.cpu_ns()
        t0 = time.perf_counter()
        open_close(client.conn, d + '\\' + name)
        dt = time.perf_counter() - t0
        cpu1 = client.cpu_ns()
        after = os.path.getsize(cache)
        st = cache_stat(build, cache)
        client.close()
        samples.append({
            'seconds': dt,
            'cpu_ns': (cpu1 - cpu0) if cpu0 is not None and cpu1 else None,
            'file_bytes_before': before,
            'file_bytes': after,
            'stat': st,
        })
    readdir_ns, entries = c_readdir(helper, local, repeats)
    count, nbytes = names_bytes(local)
    return {
        'samples': samples,
        'readdir_ns': readdir_ns,
        'readdir_entries': entries,
        'entries': count,
        'name_bytes': nbytes,
    }


# ---------------------------------------------------------------------------
# concurrency
# ---------------------------------------------------------------------------

MIX = ['wrong-case open', 'miss', 'create', 'exact-case open']


def conc_worker(smbd, config, size, w, nclients, seconds, barriers, queue):
    """One client process: its own connection (its own smbd process), a
    warm-up lookup, then the mixed load until the time is up; then it
    deletes what it created (untimed) and, once every worker has, lets
    the directory's stamp settle."""
    start, done = barriers
    lat, created, errors = [], [], 0
    d = concurrency_dir(config, size)
    files = FILES[size]
    try:
        conn = smbd.conn(config)
        expect_missing(conn, d + '\\Warmup_c_%s_%d_%d.txt'
                       % (config, nclients, w))
        start.wait(180)
        end = time.perf_counter() + seconds
        k = 0
        while True:
            t0 = time.perf_counter()
            if t0 >= end:
                break
            op = MIX[k % len(MIX)]
            i = index(w * 100003 + k, files, 0)
            try:
                if op == 'wrong-case open':
                    open_close(conn, d + '\\' + spelled(config,
                                                        file_name(i)))
                elif op == 'exact-case open':
                    open_close(conn, d + '\\' + file_name(i))
                elif op == 'miss':
                    expect_missing(conn, d + '\\Missing_c%d_%d_%d.txt'
                                   % (nclients, w, k))
                else:
                    name = 'Conc_%s_%d_%d_%07d.txt' % (config, nclients,
                                                       w, k)
                    open_close(conn, d + '\\' + name,
                               READ_ATTR | WRITE_DATA, FILE_CREATE)
                    created.append(name)
            except Exception:          # noqa: BLE001 (counted)
                errors += 1
            else:
                lat.append(time.perf_counter() - t0)
            k += 1
        for name in created:
            conn.unlink(d + '\\' + name)
        done.wait(600)
        settle(conn, d, 'c_%s_%d_%d' % (config, nclients, w))
        queue.put((w, lat, errors, created, None))
    except Exception as e:             # noqa: BLE001 (reported)
        for b in barriers:
            try:
                b.abort()
            except Exception:          # noqa: BLE001
                pass
        queue.put((w, lat, errors, created, repr(e)))


def measure_concurrency(smbd, tree, size, nclients, config, seconds):
    ctx = multiprocessing.get_context('fork')
    barriers = (ctx.Barrier(nclients + 1), ctx.Barrier(nclients))
    queue = ctx.Queue()
    procs = [ctx.Process(target=conc_worker,
                         args=(smbd, config, size, w, nclients, seconds,
                               barriers, queue))
             for w in range(nclients)]
    for p in procs:
        p.start()
    failure = None
    try:
        barriers[0].wait(180)
    except Exception as e:             # noqa: BLE001
        failure = 'workers did not start: %r' % e
    results = []
    deadline = time.monotonic() + seconds + 900
    while len(results) < nclients and time.monotonic() < deadline:
        try:
            results.append(queue.get(timeout=5))
        except Exception:              # noqa: BLE001 (queue.Empty)
            if not any(p.is_alive() for p in procs) and queue.empty():
                break
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()
    lat, errors, created = [], 0, []
    for _w, wl, we, wc, err in results:
        lat += wl
        errors += we
        created += wc
        if err and not failure:
            failure = err
    if len(results) < nclients and not failure:
        failure = '%d of %d workers reported' % (len(results), nclients)
    local = os.path.join(tree, concurrency_dir(config, size))
    for name in created:               # only after a failure
        try:
            os.unlink(os.path.join(local, name))
        except FileNotFoundError:
            pass
    return {
        'times': lat,
        'seconds': seconds,
        'errors': errors,
        'failure': failure,
    }


def concurrency_dir(config, size):
    """Sensitive's clients work in the twin: when ext4 (without a
    journal) allocates an inode, it skips the inodes of its group freed
    in the last dirty_expire_centisecs (recently_deleted()), and every
    run deletes what it created. In one directory, one configuration's
    creates paid for the other's deletes: a system-wide profile of 32
    fastcase clients right after 32 sensitive ones put 28% of the smbd
    processes' samples in __ext4_new_inode (DESIGN.md, "Where the time
    goes"). A directory of its own puts each configuration's new inodes
    in groups of its own."""
    return twin_dir(size) if config == 'sensitive' else size_dir(size)


def concurrency_order():
    """(configuration, share of the time) in the order they run: the
    pair in two halves each, A B B A, then the scanning ones alone.
    Creates get slower through a run (ext4 skips inodes deleted in the
    last seconds when it allocates one, and every run deletes what it
    created), and a configuration that always ran last paid for it: in
    the order sensitive, stock, fastcase, one client of fastcase got
    0.65x sensitive's operations per second in ./waf bench, 0.88x in
    this order (docs/PERFORMANCE.md, 2026-12-07)."""
    pair = [c for c in CONFIGS if c not in SCANNING]
    order = [(c, 0.5) for c in pair] + [(c, 0.5) for c in pair[::-1]]
    return order + [(c, 1.0) for c in CONFIGS if c in SCANNING]


def merge_runs(runs):
    """One result of a configuration measured in several runs."""
    out = {'times': [], 'seconds': 0.0, 'errors': 0, 'failure': None}
    for r in runs:
        out['times'] += r['times']
        out['seconds'] += r['seconds']
        out['errors'] += r['errors']
        out['failure'] = out['failure'] or r['failure']
    return out


def measure_concurrency_balanced(smbd, tree, size, nclients, seconds):
    runs = {}
    for c, share in concurrency_order():
        log('concurrency: %d clients, %s' % (nclients, c))
        runs.setdefault(c, []).append(measure_concurrency(
            smbd, tree, size, nclients, c, seconds * share))
    return {c: merge_runs(r) for c, r in runs.items()}


# ---------------------------------------------------------------------------
# memory, machine
# ---------------------------------------------------------------------------

def measure_memory(smbd, sizes):
    out = {}
    for c in CONFIGS:
        client = Client(smbd, c)
        for n in sizes:
            name = spelled(c, file_name(index(5, FILES[n], 4242)))
            open_close(client.conn, size_dir(n) + '\\' + name)
            expect_missing(client.conn, size_dir(n) + '\\Memory_probe.txt')
        out[c] = client.memory()
        client.close()
    return out


def samba_headers():
    """The Samba source the module was built against: the version ./waf
    fetched, and the commit when that was a development tree (no source
    of the exact release was to be had)."""
    tree = os.environ.get('FASTCASE_SAMBA_TREE', '')
    version = os.environ.get('FASTCASE_SAMBA_VERSION', 'unknown')
    try:
        with open(os.path.join(tree, '.fastcase-source-commit')) as f:
            commit = f.read().strip()
    except OSError:
        return 'the source of samba %s' % version
    return ('the development tree %s of Samba git (no source of samba %s '
            'to be had)' % (commit[:12], version))


def machine_info(work):
    info = {'cores': os.cpu_count()}
    with open('/proc/cpuinfo') as f:
        for line in f:
            if line.startswith('model name'):
                info['cpu'] = line.split(':', 1)[1].strip()
                break
    with open('/proc/meminfo') as f:
        for line in f:
            if line.startswith('MemTotal:'):
                info['ram_bytes'] = int(line.split()[1]) * 1024
    info['kernel'] = platform.release()
    info['smbd'] = subprocess.run([harness.tool('smbd'), '-V'],
                                  capture_output=True,
                                  text=True).stdout.strip()
    info['samba_headers'] = samba_headers()
    fs = subprocess.run(['findmnt', '-n', '-o', 'FSTYPE', '-T', work],
                        capture_output=True, text=True).stdout.strip()
    info['filesystem'] = fs
    try:
        git = subprocess.run(['git', '-C', TOP, 'rev-parse', '--short',
                              'HEAD'], capture_output=True,
                             text=True).stdout.strip()
        dirty = subprocess.run(['git', '-C', TOP, 'status', '--porcelain',
                                '--untracked-files=no', 'modules',
                                'include'], capture_output=True,
                               text=True).stdout.strip()
    except OSError:
        git, dirty = 'unknown (no git)', ''
    info['commit'] = git + (' (module sources modified)' if dirty else '')
    try:
        with open('/proc/sys/kernel/perf_event_paranoid') as f:
            info['perf_event_paranoid'] = f.read().strip()
    except OSError:
        pass
    return info


def perf_can_count():
    """Whether perf stat can count instructions here (it cannot in many
    virtual machines); the bench then uses CPU time instead."""
    try:
        r = subprocess.run(['perf', 'stat', '-x,', '-e', 'instructions',
                            '--', 'true'], capture_output=True, text=True,
                           timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and 'not supported' not in r.stderr and \
        '<not counted>' not in r.stderr


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------

def run(args):
    global PLACEMENT
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc)
    harness.loopback_up()
    work = harness.make_tmpdir('fastcase-bench-')
    overlay = harness.VfsOverlay(args.build, work)
    smbd = None
    holders = []
    res = {
        'profile': args.profile,
        # 2: processes pinned, CPU read at a configuration's own end,
        # the concurrency pair in halves A B B A (report.py's Method);
        # 3: sensitive changes a twin directory, outside changes apart
        'method_version': 3,
        'command': args.command,
        'raw': os.path.relpath(args.json, os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__))))),
        'date': date.strftime('%Y-%m-%d %H:%M UTC'),
        'params': {
            'sizes': args.sizes,
            'iterations': args.iterations,
            'budget': args.budget,
            'cold_repeats': args.cold_repeats,
            'clients': args.clients,
            'concurrency_size': args.concurrency_size,
            'concurrency_seconds': args.concurrency_seconds,
            'cache_size': args.cache_size,
            'fastcase_params': dict(args.fastcase_param),
            'deep_levels': DEEP_LEVELS,
            'timeout': args.timeout,
        },
        'ops': {},
        'cold': {},
        'concurrency': {},
        'outside': {},
        'memory': {},
        'phase_seconds': {},
    }
    try:
        overlay.setup()
        res['machine'] = machine_info(work)
        res['server_cost_method'] = (
            'perf' if perf_can_count() else 'schedstat')
        helper = build_helper(args.build)
        tree = os.path.join(work, 'tree')
        os.makedirs(tree)
        t = time.monotonic()
        sizes = list(args.sizes)
        fill_sizes = sorted(set(sizes + [args.concurrency_size]))
        for n in fill_sizes:
            chains = args.iterations if n in sizes else 0
            FILES[n] = n - chains
            log('filling %s: %d files, %d deep paths'
                % (size_dir(n), FILES[n], chains))
            fill(helper, os.path.join(tree, size_dir(n)), FILES[n], chains)
            fill(helper, os.path.join(tree, twin_dir(n)), FILES[n], chains)
        res['phase_seconds']['fill'] = time.monotonic() - t
        time.sleep(0.2)     # past the racy window of the fill's stamps

        base = {'path': tree}
        shares = {
            'sensitive': dict(base, **{'case sensitive': 'yes'}),
            'stock': dict(base, **{'case sensitive': 'no'}),
            'fastcase': dict(base, **{'case sensitive': 'no',
                                      'vfs objects': 'fastcase'}),
        }
        if args.cache_size:
            shares['fastcase']['fastcase:cache size'] = str(args.cache_size)
        for name, value in args.fastcase_param:
            shares['fastcase']['fastcase:' + name] = value
        smbd = harness.Smbd(shares, prefix='fastcase-bench-smbd-')
        for n in sizes:
            for r in range(args.cold_repeats):
                s = dict(shares['fastcase'])
                s['fastcase:cache file'] = os.path.join(
                    smbd.state, 'cold-%d-%d.tdb' % (n, r))
                smbd.shares[cold_share(n, r)] = s
        smbd.start()
        # one client per share stays connected throughout, as on a server
        # in use: the cache lives while any smbd process has it open
        for c in CONFIGS:
            h = Client(smbd, c)
            h.conn.echo()
            holders.append(h)

        PLACEMENT = Placement(not args.no_pin)
        res['placement'] = PLACEMENT.describe()
        PLACEMENT.timed()
        t = time.monotonic()
        for n in sizes:
            log('cold: %s' % size_dir(n))
            res['cold'][str(n)] = measure_cold(smbd, args.build, helper,
                                               tree, n, args.cold_repeats)
        res['phase_seconds']['cold'] = time.monotonic() - t

        t = time.monotonic()
        for n in sizes:
            tag = 's%d' % n
            for op in OPS:
                if op == 'deep wrong-case path':
                    warm_deep(smbd, n, args.iterations)
                log('%s, %s' % (size_dir(n), op))
                cell = Cell(n, op, tree, tag, twinned=('sensitive',))
                res['ops']['%d|%s' % (n, op)] = measure_cell(
                    smbd, cell, args.iterations, args.budget)
                time.sleep(0.2)
        res['phase_seconds']['operations'] = time.monotonic() - t

        t = time.monotonic()
        for n in sizes:
            log('outside changes: %s' % size_dir(n))
            res['outside'][str(n)] = measure_outside(smbd, tree, n)
        res['phase_seconds']['outside'] = time.monotonic() - t

        PLACEMENT.untimed()
        t = time.monotonic()
        for nc in args.clients:
            for c, r in measure_concurrency_balanced(
                    smbd, tree, args.concurrency_size, nc,
                    args.concurrency_seconds).items():
                res['concurrency']['%d|%s' % (nc, c)] = r
        res['phase_seconds']['concurrency'] = time.monotonic() - t

        log('memory')
        res['memory'] = measure_memory(smbd, sizes)
        res['holder_memory'] = {h.share: h.memory() for h in holders}
        res['main_cache'] = {
            'file_bytes': os.path.getsize(smbd.cache_file),
            'stat': cache_stat(args.build, smbd.cache_file),
        }
    finally:
        holders = None
        if smbd is not None:
            smbd.stop()
            smbd.cleanup()
        overlay.teardown()
        harness.remove_tree(work)
    res['elapsed'] = time.monotonic() - started
    return res


def fastcase_param(text):
    name, sep, value = text.partition('=')
    if not sep or not name:
        raise argparse.ArgumentTypeError('expected NAME=VALUE: %r' % text)
    return name.replace('_', ' ').strip(), value.strip()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--build', required=True)
    p.add_argument('--quick', action='store_true',
                   help='a short run for development')
    p.add_argument('--out', help='where PERFORMANCE.md and performance.png '
                   'go (default: BUILD/bench)')
    p.add_argument('--json', help='the raw results (default: '
                   'BUILD/bench/results-PROFILE.json)')
    p.add_argument('--command', default=None,
                   help='the command line to state in the report')
    p.add_argument('--sizes')
    p.add_argument('--iterations', type=int)
    p.add_argument('--budget', type=float,
                   help='seconds per configuration, size and operation')
    p.add_argument('--cold-repeats', type=int)
    p.add_argument('--clients')
    p.add_argument('--concurrency-size', type=int)
    p.add_argument('--concurrency-seconds', type=float)
    p.add_argument('--cache-size', type=int, default=0,
                   help='fastcase:cache size of the fastcase share '
                   '(default: the module default)')
    p.add_argument('--fastcase-param', action='append', default=[],
                   type=fastcase_param, metavar='NAME=VALUE',
                   help='a fastcase: parameter of the fastcase share, such '
                   'as trust_inotify=no (_ for a space; repeatable)')
    p.add_argument('--timeout', type=int,
                   help='seconds before the whole run is stopped')
    p.add_argument('--no-pin', action='store_true',
                   help='leave the timed processes to the scheduler '
                   '(default: the client on one CPU, each timed smbd '
                   'process on another)')
    args = p.parse_args(argv)
    args.profile = 'quick' if args.quick else 'full'
    prof = PROFILES[args.profile]
    args.sizes = ([int(s) for s in args.sizes.split(',')] if args.sizes
                  else prof['sizes'])
    args.clients = ([int(s) for s in args.clients.split(',')]
                    if args.clients else prof['clients'])
    for key in ('iterations', 'budget', 'cold_repeats',
                'concurrency_size', 'concurrency_seconds', 'timeout'):
        if getattr(args, key) is None:
            setattr(args, key, prof[key])
    args.build = os.path.abspath(args.build)
    if args.out is None:
        args.out = os.path.join(args.build, 'bench')
    args.out = os.path.abspath(args.out)
    if args.json is None:
        args.json = os.path.join(args.build, 'bench',
                                 'results-%s.json' % args.profile)
    args.json = os.path.abspath(args.json)
    if args.command is None:
        args.command = ' '.join(['tests/bench/bench.py'] + argv)
    if 4 * args.iterations > min(args.sizes):
        # renames take three files per iteration, deep paths one entry
        p.error('--iterations: at most a quarter of the smallest size')
    return args


def _interrupted(signum, frame):
    raise KeyboardInterrupt('signal %d' % signum)


def supervise(args, argv):
    """Outside the namespaces: run the bench inside them, stop it after
    --timeout, and stop every smbd it started whatever happens."""
    if os.geteuid() != 0:
        sys.exit('bench.py: must run as root (namespaces, bind mount, '
                 'smbd)')
    if not os.path.isfile(os.path.join(args.build, 'fastcase.so')):
        sys.exit('bench.py: %s/fastcase.so does not exist: run ./waf '
                 'build' % args.build)
    fd, registry = tempfile.mkstemp(prefix='fastcase-bench-registry-')
    os.close(fd)
    env = dict(os.environ, **{harness.NS_MARKER: '1',
                              harness.PID_REGISTRY_ENV: registry})
    cmd = harness.unshare_command(net=True) + [
        harness.PYTHON, os.path.abspath(__file__)] + argv
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = subprocess.Popen(cmd, env=env)

    def forward(signum, frame):
        child.send_signal(signum)
    signal.signal(signal.SIGTERM, forward)
    try:
        try:
            rc = child.wait(args.timeout)
        except subprocess.TimeoutExpired:
            print('bench.py: the run exceeded %ds: stopping it'
                  % args.timeout, flush=True)
            child.terminate()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            rc = 1
    finally:
        harness.kill_registered(registry)
        harness.remove_registered(registry)
        os.unlink(registry)
        signal.signal(signal.SIGINT, old_int)
    return 1 if rc < 0 else rc


def main():
    argv = sys.argv[1:]
    args = parse_args(argv)
    if not harness.in_namespace():
        return supervise(args, argv)
    signal.signal(signal.SIGTERM, _interrupted)
    res = run(args)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, 'w') as f:
        json.dump(res, f)
    os.makedirs(args.out, exist_ok=True)
    report.write(res, args.out)
    log('%.0f s; results in %s, report in %s'
        % (res['elapsed'], args.json, args.out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
