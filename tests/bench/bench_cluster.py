#!/usr/bin/python3
"""
./waf bench --cluster: smbd on a two-node CTDB cluster over GlusterFS, four
configurations side by side on the same directories, in one run:

  sensitive       case sensitive = yes                    (the limit)
  stock           case sensitive = no                     (smbd's own scan)
  glusterfs_fuse  stock with vfs_glusterfs_fuse           (the bricks scan)
  fastcase        fastcase (with vfs_fileid), as the cluster tests run it
  fastcase_gfuse  fastcase above vfs_glusterfs_fuse: what it cannot answer
                  goes to the bricks instead of smbd's scan

A private GlusterFS volume (one local brick, performance.stat-prefetch off
as docs/DESIGN.md requires for cross-node creates) is mounted through FUSE
once per node, with lru-limit=0 (CLIENT_OPTIONS); each node has its own
ctdbd and an smbd with clustering = yes on its own mount
(tests/integration/cluster.py). The operations are
bench.py's, measured the same way (fresh connections to node A, p50 and
the serving smbd's CPU per operation); then the time from a create
through node A until node B finds the name by wrong case.

Results: OUT/PERFORMANCE.md and a JSON file; the section "Cluster" of
docs/PERFORMANCE.md is rewritten from OUT by version_sections.py.

usage: bench_cluster.py --build BUILD [--out DIR] [--json FILE]
                        [--sizes 10000,100000] [--iterations N]
                        [--budget SECONDS] [--command TEXT]
As root: it runs itself again in new mount and network namespaces.
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(TOP, 'tests', 'integration'))
sys.path.insert(0, HERE)

import bench  # noqa: E402
import cluster  # noqa: E402
import harness  # noqa: E402

CONFIGS = ['sensitive', 'stock', 'glusterfs_fuse', 'fastcase',
           'fastcase_gfuse']
NODES = {'a': '10.99.0.2', 'b': '10.99.0.3'}
VISIBILITY_SAMPLES = 20
# The FUSE client keeps at most lru-limit (65,536) inodes; past that, each
# listing of a 100,000-entry directory through it (which makes an inode of
# every entry: readdirplus) took longer than the last (41 s the fourth
# time, 3.5 s with lru-limit=0: tests/bench/gluster_lru.py, docs/DESIGN.md
# "Other machines"), and stock smbd's scans and the module's builds
# outlasted the SMB client's 20 s timeout. An administrator with such
# directories sets lru-limit=0.
CLIENT_OPTIONS = ('--lru-limit=0',)
# Undo a cell's creates and renames through case sensitive = yes: no
# process is ever in sync with a directory here, so a fastcase process
# would read the directory twice per rename (its lookup and its check),
# and at 100,000 entries the untimed restore of the rename cell took
# longer than all the timed cells (2026-12-07). The cache gains nothing
# from it: every change moves the directory's times.
RESTORER = 'sensitive'


def shares(mnt):
    base = {'path': mnt}
    fileid = {'fileid:algorithm': 'fsname'}
    return {
        'sensitive': dict(base, **{'case sensitive': 'yes'}),
        'stock': dict(base, **{'case sensitive': 'no'}),
        'glusterfs_fuse': dict(base, **{'case sensitive': 'no',
                                        'vfs objects': 'glusterfs_fuse'}),
        'fastcase': dict(base, **fileid, **{
            'case sensitive': 'no', 'vfs objects': 'fastcase fileid'}),
        'fastcase_gfuse': dict(base, **fileid, **{
            'case sensitive': 'no',
            'vfs objects': 'fastcase glusterfs_fuse fileid'}),
    }


class Cluster:
    """GlusterFS, a ctdbd and an smbd per node; stop() stops whatever
    start() got to, by PID."""

    def __init__(self, work):
        self.work = work
        self.gluster = cluster.Gluster(os.path.join(work, 'gluster'))
        self.ctdb = cluster.Ctdb(work, NODES.values())
        self.mounts = {}
        self.smbds = {}

    def start(self):
        os.mkdir(self.gluster.tmp)
        self.gluster.start(cluster.FRESH_METADATA)
        for address in NODES.values():
            cluster.add_address(address)
        self.ctdb.start()
        for node in NODES:
            self.mounts[node] = self.gluster.mount(
                os.path.join(self.work, 'mnt-' + node), *CLIENT_OPTIONS)

    def start_smbds(self):
        for n, (node, address) in enumerate(NODES.items()):
            smbd = harness.Smbd(
                shares(self.mounts[node]), address=address,
                global_params={'clustering': 'yes',
                               'ctdbd socket': self.ctdb.socket(n)},
                prefix='fastcase-bench-cluster-%s-' % node)
            self.smbds[node] = smbd
            smbd.start()

    def stop(self):
        for smbd in self.smbds.values():
            smbd.stop()
            smbd.cleanup()
        self.ctdb.stop()
        self.gluster.stop()


def measure_visibility(smbds, d, samples):
    """Seconds from a create through node A until a wrong-case open of it
    through node B succeeds (B has the directory cached beforehand)."""
    from samba import NTSTATUSError
    a = smbds['a'].conn('fastcase')
    b = smbds['b'].conn('fastcase')
    bench.expect_missing(b, d + '\\Visible_warmup.txt')
    seen = []
    for i in range(samples):
        name = 'Visible_%03d.txt' % i
        bench.open_close(a, d + '\\' + name, bench.READ_ATTR |
                         bench.WRITE_DATA, bench.FILE_CREATE)
        created = time.monotonic()
        while True:
            try:
                bench.open_close(b, d + '\\' + name.upper())
                seen.append(time.monotonic() - created)
                break
            except NTSTATUSError:
                if time.monotonic() - created > 10:
                    seen.append(None)
                    break
                time.sleep(0.002)
        a.unlink(d + '\\' + name)
        time.sleep(0.3)
    return seen


def run(args):
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc)
    harness.loopback_up()
    work = harness.make_tmpdir('fastcase-bench-cluster-')
    overlay = harness.VfsOverlay(args.build, work)
    nodes = Cluster(work)
    res = {'command': args.command, 'configs': CONFIGS,
           'date': date.strftime('%Y-%m-%d %H:%M UTC'),
           'params': {'sizes': args.sizes, 'iterations': args.iterations,
                      'budget': args.budget},
           'ops': {}, 'visibility': {}}
    try:
        overlay.setup()
        res['machine'] = bench.machine_info(work)
        nodes.start()
        helper = bench.build_helper(args.build)
        tree = nodes.mounts['a']
        for n in args.sizes:
            bench.FILES[n] = n - args.iterations
            bench.log('filling %s through FUSE: %d files'
                      % (bench.size_dir(n), bench.FILES[n]))
            bench.fill(helper, os.path.join(tree, bench.size_dir(n)),
                       bench.FILES[n], args.iterations)
        nodes.start_smbds()
        res['smbd'] = harness.smbd_version_text()
        for n in args.sizes:
            for op in bench.OPS:
                if op == 'deep wrong-case path':
                    bench.warm_deep(nodes.smbds['a'], n, args.iterations)
                bench.log('cluster: %s, %s' % (bench.size_dir(n), op))
                cell = bench.Cell(n, op, tree, 's%d' % n, CONFIGS)
                res['ops']['%d|%s' % (n, op)] = bench.measure_cell(
                    nodes.smbds['a'], cell, args.iterations, args.budget,
                    RESTORER)
            bench.log('cluster: %s, visibility' % bench.size_dir(n))
            res['visibility'][str(n)] = measure_visibility(
                nodes.smbds, bench.size_dir(n), VISIBILITY_SAMPLES)
    finally:
        nodes.stop()
        overlay.teardown()
        harness.remove_tree(work)
    res['elapsed'] = time.monotonic() - started
    return res


def p50_ms(cell):
    return statistics.median(cell['times']) * 1000 if cell['times'] else None


def ratio(value, base):
    return '%.2fx' % (value / base) if value and base else '-'


def op_rows(res, n, op):
    cells = res['ops']['%d|%s' % (n, op)]
    base_p50 = p50_ms(cells['sensitive'])
    base_cpu = cells['sensitive']['cpu_ns_per_op']
    rows = []
    for c in CONFIGS:
        cell = cells[c]
        p50, cpu = p50_ms(cell), cell['cpu_ns_per_op']
        note = ('over budget: %d of %d' % (cell['done'], cell['iterations'])
                if cell['over_budget'] else '')
        if cell['errors']:
            note += ' %d errors' % cell['errors']
        rows.append('| %s | %s | %s | %s | %s | %s | %s | %s |' % (
            '{:,}'.format(n), op, c,
            '%.3g' % p50 if p50 else '-', ratio(p50, base_p50),
            '%.0f' % (cpu / 1000) if cpu else '-', ratio(cpu, base_cpu),
            note.strip()))
    return rows


def visibility_line(res, n):
    seen = res['visibility'][str(n)]
    found = sorted(s for s in seen if s is not None)
    if not found:
        return '- %s entries: never found within 10 s' % '{:,}'.format(n)
    return ('- %s entries: p50 %.3f s, max %.3f s, %d of %d samples found '
            'within 10 s' % ('{:,}'.format(n), statistics.median(found),
                             found[-1], len(found), len(seen)))


def write_report(res, out, raw):
    lines = [
        '# vfs_fastcase on a two-node cluster', '',
        'Generated by `%s` on %s; every figure below comes from that one '
        'run (%.0f s; raw results in `%s`).' % (
            res['command'], res['date'], res['elapsed'], raw), '',
        'Two smbds (%s) with `clustering = yes`, each on its own ctdbd and '
        'its own FUSE mount of one private GlusterFS volume (one local '
        'brick, `performance.stat-prefetch off`, clients mounted with '
        '`lru-limit=0`), on %s, %d cores. The '
        'operations run through node A, on fresh connections, each '
        'configuration on the same directories (see docs/PERFORMANCE.md, '
        'Method): `sensitive` is `case sensitive = yes`, `stock` smbd\'s '
        'own scan, `glusterfs_fuse` stock with vfs_glusterfs_fuse (its '
        'get_real_filename asks the bricks), `fastcase` `vfs objects = '
        'fastcase fileid`, `fastcase_gfuse` `vfs objects = fastcase '
        'glusterfs_fuse fileid`. Ratios are against `sensitive`; %d iterations, '
        'a budget of %.0f s per configuration and cell.' % (
            res['smbd'], res['machine'].get('cpu', '?'),
            res['machine'].get('cores', 0), res['params']['iterations'],
            res['params']['budget']), '',
        '| entries | operation | config | p50 ms | p50 / sensitive | '
        'server CPU µs/op | CPU / sensitive | |',
        '|---:|---|---|---:|---:|---:|---:|---|']
    for n in res['params']['sizes']:
        for op in bench.OPS:
            lines += op_rows(res, n, op)
    lines += ['', '## Seen through the other node', '',
              'Time from a create through node A (fastcase share) until a '
              'wrong-case open of the name through node B succeeds, B '
              'having the directory cached, %d samples per size:'
              % VISIBILITY_SAMPLES, '']
    lines += [visibility_line(res, n) for n in res['params']['sizes']]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'PERFORMANCE.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--build', required=True)
    p.add_argument('--out', default=os.path.join(TOP, 'docs', 'cluster'))
    p.add_argument('--json', default=None)
    p.add_argument('--sizes', default='10000,100000')
    p.add_argument('--iterations', type=int, default=60)
    p.add_argument('--budget', type=float, default=5.0)
    p.add_argument('--command', default='./waf bench --cluster')
    args = p.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(',')]
    args.build = os.path.abspath(args.build)
    args.json = args.json or os.path.join(args.out, 'results.json')
    return args


def main():
    argv = sys.argv[1:]
    args = parse_args(argv)
    if not harness.in_namespace():
        harness.reexec_in_namespace(__file__, argv, net=True)
    signal.signal(signal.SIGTERM, bench._interrupted)
    res = run(args)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, 'w') as f:
        json.dump(res, f)
    write_report(res, args.out, os.path.relpath(args.json, TOP))
    bench.log('%.0f s; report in %s' % (res['elapsed'], args.out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
