#!/usr/bin/python3
"""
The report of ./waf bench: PERFORMANCE.md and performance.png from the raw
results bench.py writes (JSON).

usage: report.py RESULTS.json OUTDIR
"""

import math
import os
import statistics
import sys

CONFIGS = ['sensitive', 'stock', 'fastcase']
OPS = ['exact-case open', 'wrong-case open', 'miss', 'create',
       'exact-name find', 'rename', 'deep wrong-case path']

# Issue 15's targets. (operations, the largest ratio fastcase / sensitive
# allowed, of p50 latency and of server CPU per operation alike)
RATIO_TARGETS = [
    (['wrong-case open', 'miss', 'create', 'exact-name find', 'rename'],
     1.15),
    (['deep wrong-case path'], 1.25),
    (['exact-case open'], 1.03),
]
COLD_TARGET_SIZES = [100000, 1000000]
COLD_TARGET = 2.0
CONCURRENCY_TARGET_CLIENTS = 32
CONCURRENCY_TARGET = 0.9
FOOTPRINT_TARGET = 3.0

# sensitive's in a twin directory since method_version 3 (bench.py)
TWINNED_OPS = ('create', 'rename')

DESCRIPTIONS = {
    'exact-case open': 'open (FILE_OPEN) of an existing file, on-disk case',
    'wrong-case open': 'open of an existing file, name in upper case',
    'miss': 'open of a name that does not exist',
    'create': 'FILE_CREATE of a new file',
    'exact-name find': 'SMB2 QUERY_DIRECTORY with a file name, no wildcard '
                       '(upper case)',
    'rename': 'rename of an existing file (on-disk case) to a new name',
    'deep wrong-case path': 'open of a file 8 components below the '
                            'directory, every component in upper case',
}


# ---------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------

def pct(times, q):
    t = sorted(times)
    if not t:
        return None
    return t[min(len(t) - 1, int(math.ceil(len(t) * q)) - 1)]


def p50(times):
    return statistics.median(times) if times else None


def fmt_ms(s):
    if s is None:
        return 'n/a'
    ms = s * 1000
    if ms >= 100:
        return '%.0f' % ms
    if ms >= 10:
        return '%.1f' % ms
    if ms >= 1:
        return '%.2f' % ms
    return '%.3f' % ms


def fmt_us(ns):
    return 'n/a' if ns is None else '%.1f us' % (ns / 1000)


def fmt_ratio(r):
    return 'n/a' if r is None else '%.2fx' % r


def fmt_int(n):
    return '{:,}'.format(int(n))


def fmt_bytes(n):
    if n is None:
        return 'n/a'
    for unit, div in (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if n >= div:
            return '%.1f %s' % (n / div, unit)
    return '%d B' % n


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def cell_stats(cell):
    t = cell['times']
    total = sum(t)
    return {
        'n': len(t),
        'p50': p50(t),
        'p99': pct(t, 0.99),
        'ops': len(t) / total if total else None,
        'cpu': cell.get('cpu_ns_per_op'),
        'over': cell['over_budget'],
        'errors': cell['errors'],
        'iterations': cell['iterations'],
    }


def op_table(res):
    """{(size, op): {config: stats}}"""
    out = {}
    for key, cell in res['ops'].items():
        size, op = key.split('|', 1)
        out[(int(size), op)] = {c: cell_stats(cell[c]) for c in CONFIGS}
    return out


def verdict(ok):
    return 'met' if ok else '**MISSED**'


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------

def ratio_target_row(table, sizes, op, limit):
    """Met when, at every size, both the p50 and the server CPU ratio are
    within limit."""
    worst, worst_size, parts, cpu_parts, ok = None, None, [], [], True
    for n in sizes:
        s = table.get((n, op))
        if s is None:
            continue
        fc, ref = s['fastcase'], s['sensitive']
        r = ratio(fc['p50'], ref['p50'])
        rc = ratio(fc['cpu'], ref['cpu'])
        note = ''
        if fc['over'] or fc['errors']:
            ok = False
            note = ' (over budget)' if fc['over'] else ' (errors)'
        if r is None or r > limit or (rc is not None and rc > limit):
            ok = False
        if r is not None and (worst is None or r > worst):
            worst, worst_size = r, n
        parts.append('%s: %s%s' % (fmt_int(n), fmt_ratio(r), note))
        cpu_parts.append('%s' % fmt_ratio(rc))
    return ('%s, p50 latency and server CPU' % op,
            'at most %.2fx at every size' % limit,
            'p50 worst %s at %s (%s); server CPU: %s'
            % (fmt_ratio(worst), fmt_int(worst_size or 0),
               ', '.join(parts), ', '.join(cpu_parts)),
            verdict(ok and worst is not None))


def cold_target_row(res, size):
    name = 'cold build of a %s-entry directory' % fmt_int(size)
    limit = 'at most %.0fx one plain readdir' % COLD_TARGET
    cold = res['cold'].get(str(size))
    if not cold:
        return (name, limit, 'not measured (size not in this run)', 'n/a')
    first = p50([s['seconds'] for s in cold['samples']])
    rd = p50(cold['readdir_ns']) / 1e9
    r = ratio(first, rd)
    return (name, limit, '%s (first lookup %s ms, readdir %s ms)'
            % (fmt_ratio(r), fmt_ms(first), fmt_ms(rd)),
            verdict(r is not None and r <= COLD_TARGET))


def targets(res, table):
    sizes = res['params']['sizes']
    rows = [ratio_target_row(table, sizes, op, limit)
            for ops, limit in RATIO_TARGETS for op in ops]
    rows += [cold_target_row(res, n) for n in COLD_TARGET_SIZES]
    nc = CONCURRENCY_TARGET_CLIENTS
    fc = res['concurrency'].get('%d|fastcase' % nc)
    ref = res['concurrency'].get('%d|sensitive' % nc)
    if fc and ref:
        r = ratio(len(fc['times']), len(ref['times']))
        ok = (r is not None and r >= CONCURRENCY_TARGET and
              not fc['failure'] and not fc['errors'])
        rows.append(('%d connections, aggregate ops/s' % nc,
                     'at least %.1fx' % CONCURRENCY_TARGET,
                     '%s (%s against %s ops/s)'
                     % (fmt_ratio(r),
                        fmt_int(len(fc['times']) / fc['seconds']),
                        fmt_int(len(ref['times']) / ref['seconds'])),
                     verdict(ok)))
    big = max(sizes)
    c = res['cold'].get(str(big))
    if c:
        fb = c['samples'][0]['file_bytes']
        r = ratio(fb, c['name_bytes'])
        rows.append(('cache footprint (%s entries)' % fmt_int(big),
                     'at most %.0fx the bytes of the names' %
                     FOOTPRINT_TARGET,
                     '%s (%s file for %s of names)'
                     % (fmt_ratio(r), fmt_bytes(fb),
                        fmt_bytes(c['name_bytes'])),
                     verdict(r is not None and r <= FOOTPRINT_TARGET)))
    return rows


def outside_section(res):
    """What a watching fastcase process pays for other programs'
    changes (bench.measure_outside())."""
    sizes = sorted(res['outside'], key=int)
    first = res['outside'][sizes[0]]
    L = ['## Outside changes', '']
    L.append('A fastcase process that has looked up a name in the '
             'directory, then stays idle while the bench creates %d files '
             'there locally, one every %.0f ms, then renames each: its CPU '
             'time per change, applying the inotify events (in batches, '
             'while idle). Every process watching the directory pays this '
             'per change made outside it; the create and rename cells '
             'above do not include it (sensitive changes a twin '
             'directory).' % (first['changes'], first['interval'] * 1000))
    L.append('')
    L.append('| entries | CPU per outside create | per outside rename |')
    L.append('|---:|---:|---:|')
    for n in sizes:
        x = res['outside'][n]
        L.append('| %s | %s | %s |' % (
            fmt_int(int(n)), fmt_us(x.get('create_cpu_ns')),
            fmt_us(x.get('rename_cpu_ns'))))
    L.append('')
    return L


def markdown(res, plot_name):
    table = op_table(res)
    p = res['params']
    m = res['machine']
    sizes = p['sizes']
    L = []
    L.append('# vfs_fastcase performance')
    L.append('')
    if res['profile'] == 'quick':
        L.append('**A quick development run (`--quick`): written to '
                 '`build/bench/`, not the committed report. Small '
                 'iterations and budgets; the numbers are rough.**')
        L.append('')
    L.append('Generated by `%s` on %s; every figure below comes from that '
             'one run (%.0f s; raw results in `%s`).'
             % (res['command'], res['date'], res['elapsed'],
                res.get('raw', 'build/bench/')))
    L.append('')
    L.append('| machine | |')
    L.append('|---|---|')
    L.append('| CPU | %s, %d cores |' % (m.get('cpu', '?'), m['cores']))
    L.append('| RAM | %s |' % fmt_bytes(m.get('ram_bytes')))
    L.append('| kernel | %s |' % m['kernel'])
    L.append('| smbd | %s |' % m['smbd'])
    if 'samba_headers' in m:
        L.append('| built against | %s |' % m['samba_headers'])
    L.append('| file system of the directories | %s |' % m['filesystem'])
    L.append('| module built from | %s |' % m['commit'])
    L.append('')
    L.append('Three configurations of one private smbd serve the same '
             'directories:')
    L.append('')
    L.append('- **sensitive**: `case sensitive = yes`, the limit: exact '
             'lookups only;')
    L.append('- **stock**: `case sensitive = no`, what users run today;')
    params = dict(p.get('fastcase_params', {}))
    if p['cache_size']:
        params['cache size'] = str(p['cache_size'])
    L.append('- **fastcase**: `case sensitive = no` with '
             '`vfs objects = fastcase`%s.' %
             (''.join(' and `fastcase:%s = %s`' % kv
                      for kv in sorted(params.items()))
              if params else ' (module defaults)'))
    L.append('')
    L.append('Each ratio is a configuration against `sensitive` doing the '
             'same operation with the name spelled in the on-disk case.')
    L.append('')
    L.append('Parameters: sizes %s; %d iterations per operation; a budget '
             'of %.0f s per configuration, size and operation; %d cold '
             'samples per size; %s concurrent clients for %.0f s each on '
             '%s entries. The run stops after %d s at most.' % (
                 ', '.join(fmt_int(n) for n in sizes), p['iterations'],
                 p['budget'], p['cold_repeats'],
                 ', '.join(str(c) for c in p['clients']),
                 p['concurrency_seconds'], fmt_int(p['concurrency_size']),
                 p.get('timeout', 0)))
    L.append('')

    L.append('## Targets')
    L.append('')
    L.append('| target | limit | measured | |')
    L.append('|---|---|---|---|')
    for row in targets(res, table):
        L.append('| %s |' % ' | '.join(row))
    L.append('')
    L.append('The targets are those of issue 15. Latency ratios are of p50 '
             'latency as the client sees it; "server CPU" is the same '
             'ratio of the smbd process\'s CPU time per operation (see '
             'Method), which a client\'s own overhead does not dilute. '
             'A ratio target is met when both are within it at every '
             'size.')
    L.append('')

    L.append('## Operations')
    L.append('')
    L.append('Directories of %s entries, filled locally: empty files and '
             'the %d directories that start the deep paths. One client '
             'connection '
             '(one smbd process) per configuration, size and operation; '
             'sensitive and fastcase take turns, one operation each, '
             'then stock runs its iterations alone (interleaved, its '
             'directory scans slowed the next configuration; see '
             'Method). '
             '%d iterations, each on a name no process has used before; '
             'a budget of %.0f s of operations per configuration, size '
             'and operation: a configuration that does not finish its '
             'iterations within it is reported *over budget* with what it '
             'did.' % (', '.join(fmt_int(n) for n in sizes),
                       p['iterations'], p['iterations'], p['budget']))
    L.append('')
    L.append('![p50 latency against directory size](%s)' % plot_name)
    L.append('')
    for op in OPS:
        L.append('### %s' % op)
        L.append('')
        L.append(DESCRIPTIONS[op] + '.')
        if op in TWINNED_OPS and res.get('method_version', 1) >= 3:
            L[-1] += (' Sensitive\'s in a twin of the directory (see '
                      'Method).')
        L.append('')
        L.append('| entries | config | ops | ops/s | p50 ms | p99 ms | '
                 'p50 / sensitive | server CPU µs/op | CPU / sensitive | '
                 '|')
        L.append('|---:|---|---:|---:|---:|---:|---:|---:|---:|---|')
        for n in sizes:
            s = table.get((n, op))
            if s is None:
                continue
            ref = s['sensitive']
            for c in CONFIGS:
                x = s[c]
                note = []
                if x['over']:
                    note.append('over budget: %d of %d in %.0f s'
                                % (x['n'], x['iterations'], p['budget']))
                if x['errors']:
                    note.append('%d errors' % x['errors'])
                L.append('| %s | %s | %d | %s | %s | %s | %s | %s | %s | '
                         '%s |' % (
                             fmt_int(n), c, x['n'],
                             fmt_int(x['ops']) if x['ops'] else 'n/a',
                             fmt_ms(x['p50']), fmt_ms(x['p99']),
                             fmt_ratio(ratio(x['p50'], ref['p50'])),
                             '%.0f' % (x['cpu'] / 1000)
                             if x['cpu'] is not None else 'n/a',
                             fmt_ratio(ratio(x['cpu'], ref['cpu'])),
                             '; '.join(note)))
        L.append('')
    errs = []
    for key, cell in sorted(res['ops'].items()):
        for c in CONFIGS:
            for e in cell[c].get('error_text', []):
                errs.append('- %s, %s: %s' % (key.replace('|', ', '), c, e))
    if errs:
        L.append('Errors (first of each cell):')
        L.append('')
        L += errs
        L.append('')

    L.append('## Cold cost')
    L.append('')
    L.append('The first wrong-case open in a directory the cache has never '
             'seen (a fastcase share with a cache file of its own, %d '
             'samples per size, each by a new smbd process after one '
             'lookup elsewhere; median) against one plain '
             '`opendir`/`readdir`/`closedir` pass over the same directory '
             'from a C program (median of %d). The stock column is the '
             'steady-state p50 of a wrong-case open on the stock share, '
             'a full scan.' % (p['cold_repeats'], p['cold_repeats']))
    L.append('')
    L.append('| entries | C readdir ms | fastcase first lookup ms | '
             'ratio | its server CPU ms | fastcase warm p50 ms | '
             'stock wrong-case p50 ms |')
    L.append('|---:|---:|---:|---:|---:|---:|---:|')
    for n in sizes:
        c = res['cold'].get(str(n))
        if not c:
            continue
        first = p50([s['seconds'] for s in c['samples']])
        cpus = [s['cpu_ns'] for s in c['samples'] if s['cpu_ns']]
        rd = p50(c['readdir_ns']) / 1e9
        warm = table.get((n, 'wrong-case open'), {})
        L.append('| %s | %s | %s | %s | %s | %s | %s |' % (
            fmt_int(c['entries']), fmt_ms(rd), fmt_ms(first),
            fmt_ratio(ratio(first, rd)),
            fmt_ms(p50(cpus) / 1e9) if cpus else 'n/a',
            fmt_ms(warm['fastcase']['p50']) if warm else 'n/a',
            fmt_ms(warm['stock']['p50']) if warm else 'n/a'))
    L.append('')

    L.append('## Concurrency')
    L.append('')
    L.append('N client processes, each with its own connection (so its own '
             'smbd process), on one shared directory of %s entries for %.0f s '
             'each: in turn a wrong-case open, a miss, a create and an '
             'exact-case open, on names the process has not used before.'
             % (fmt_int(p['concurrency_size']), p['concurrency_seconds']))
    if res.get('method_version', 1) >= 2:
        L[-1] += (' Sensitive and fastcase run in two halves each, in the '
                  'order sensitive, fastcase, fastcase, sensitive, and '
                  'stock after them: creates in the directory get slower '
                  'through a run, and a configuration that always ran '
                  'last paid for it.')
    L.append('')
    L.append('| clients | config | ops | ops/s | p50 ms | p99 ms | '
             'ops/s / sensitive | |')
    L.append('|---:|---|---:|---:|---:|---:|---:|---|')
    for nc in p['clients']:
        ref = res['concurrency'].get('%d|sensitive' % nc)
        for c in CONFIGS:
            x = res['concurrency'].get('%d|%s' % (nc, c))
            if not x:
                continue
            note = []
            if x['failure']:
                note.append(x['failure'])
            if x['errors']:
                note.append('%d errors' % x['errors'])
            L.append('| %d | %s | %s | %s | %s | %s | %s | %s |' % (
                nc, c, fmt_int(len(x['times'])),
                fmt_int(len(x['times']) / x['seconds']),
                fmt_ms(p50(x['times'])), fmt_ms(pct(x['times'], 0.99)),
                fmt_ratio(ratio(len(x['times']), len(ref['times'])))
                if ref else 'n/a', '; '.join(note)))
    L.append('')

    if res.get('outside'):
        L.extend(outside_section(res))

    L.append('## Footprint')
    L.append('')
    L.append('The cache file of a cold sample: before its build (after '
             'one lookup in the share\'s small root directory; mostly the '
             'fixed part, the TDB header and its hash table) and after it. '
             'The target is judged on the whole file.')
    L.append('')
    L.append('| entries | bytes of names | cache file before | after | '
             'added per entry | added / names | file / names |')
    L.append('|---:|---:|---:|---:|---:|---:|---:|')
    for n in sizes:
        c = res['cold'].get(str(n))
        if not c:
            continue
        s = c['samples'][0]
        added = s['file_bytes'] - s['file_bytes_before']
        L.append('| %s | %s | %s | %s | %.0f | %s | %s |' % (
            fmt_int(c['entries']), fmt_bytes(c['name_bytes']),
            fmt_bytes(s['file_bytes_before']), fmt_bytes(s['file_bytes']),
            added / c['entries'],
            fmt_ratio(ratio(added, c['name_bytes'])),
            fmt_ratio(ratio(s['file_bytes'], c['name_bytes']))))
    L.append('')
    L.append('Resident memory of one smbd process per configuration after '
             'one wrong-case open and one miss in each directory '
             '(`/proc/PID/status`; the cache file is mapped shared, so it '
             'shows in RssFile and is counted once for all processes):')
    L.append('')
    L.append('| config | VmRSS | RssAnon | RssFile | RssShmem |')
    L.append('|---|---:|---:|---:|---:|')
    for c in CONFIGS:
        x = res['memory'].get(c, {})
        L.append('| %s | %s | %s | %s | %s |' % (
            c, fmt_bytes(x.get('VmRSS')), fmt_bytes(x.get('RssAnon')),
            fmt_bytes(x.get('RssFile')), fmt_bytes(x.get('RssShmem'))))
    L.append('')
    mc = res.get('main_cache') or {}
    st = mc.get('stat') or {}
    counters = (st.get('shares') or {}).get('fastcase')
    if mc:
        L.append('The fastcase share\'s cache file at the end of the run: '
                 '%s.' % fmt_bytes(mc.get('file_bytes')))
        if counters:
            L.append('Its counters (`fastcase-stat`): %s.' % ', '.join(
                '%s %s' % (k, fmt_int(v)) for k, v in counters.items()))
        L.append('')

    L.append('## Method')
    L.append('')
    L.append('- One smbd (`tests/integration/harness.py`: private state, '
             'own mount and network namespaces, loopback), shares on the '
             'same directory tree; clients are Samba\'s Python bindings '
             '(SMB3). A holder connection per share stays open for the '
             'whole run.')
    L.append('- Before it is timed, every measured process makes one '
             'lookup (a miss) in its directory: a steady server has '
             'attached to its directories already. The deep-path '
             'directories are built into the shared cache by another '
             'fastcase process beforehand. The first lookup in a '
             'directory is what the cold cost measures.')
    L.append('- Creates and renames are undone after each cell, untimed, '
             'through the fastcase share; the concurrency clients delete '
             'what they created, untimed. A fastcase process that changed '
             'a directory then makes one more lookup after 150 ms, which '
             'lets it refresh the directory\'s stamp (as the long-lived '
             'processes of a server do), so that the processes of the '
             'next measurement find the cache valid instead of rebuilding '
             'it.')
    L.append('- Order: in each cell, sensitive and fastcase alternate, '
             'one operation each, each first in every other iteration; '
             'stock runs its iterations after them, alone. Stock\'s full '
             'directory scans take up to seconds at 1,000,000 entries and '
             'slow whatever runs next: in rotation with all three, the '
             'configuration that followed stock paid for them (fastcase '
             'in two iterations of three).')
    if res.get('server_cost_method') == 'perf':
        L.append('- Server CPU: `perf` could count instructions on this '
                 'machine, but the figures are CPU time from '
                 '`/proc/PID/task/*/schedstat` of the smbd process serving '
                 'the connection, over all its operations in the cell.')
    else:
        L.append('- Server CPU: `perf stat -e instructions` cannot count '
                 'on this machine (no hardware counters; '
                 'perf_event_paranoid = %s), so it is the CPU time of the '
                 'smbd process serving the connection, from '
                 '`/proc/PID/task/*/schedstat` (nanoseconds), over all '
                 'its operations in the cell, divided by their number.'
                 % m.get('perf_event_paranoid', '?'))
    if res.get('method_version', 1) >= 3:
        L.append('- Creates and renames in a directory queue inotify '
                 'events for every fastcase process watching it, which it '
                 'applies as changes made by another program. So that '
                 'neither configuration pays for the other\'s changes, '
                 'sensitive creates and renames in a twin of the size '
                 'directory (the same files and deep paths); the fastcase '
                 'figures include applying the events of its own creates '
                 'and renames. What other programs\' changes cost is '
                 'under "Outside changes". Each configuration\'s CPU time '
                 'is read when its own iterations end, before stock runs.')
    elif res.get('method_version', 1) >= 2:
        L.append('- Creates and renames in a shared directory queue inotify '
                 'events for every fastcase process watching it: the '
                 'fastcase figures of those cells include applying the '
                 'events of sensitive\'s creates and renames, made in the '
                 'same directory in alternation, as a server applies '
                 'changes made by other programs. Each configuration\'s '
                 'CPU time is read when its own iterations end, before '
                 'stock runs.')
    pl = res.get('placement')
    if pl:
        L.append('- Placement: while the cold samples and the cells are '
                 'measured, the bench (the client) runs on CPU %d and each '
                 'timed smbd process, every thread, on CPU %d '
                 '(`sched_setaffinity`); the concurrency phase runs '
                 'unpinned. Left to the scheduler, two smbd processes of '
                 'one configuration doing the same operations differed by '
                 'up to 28%% in median CPU time per operation, pinned by '
                 'at most 3%% (`tests/bench/process_spread.py`, '
                 '2026-12-07). `--no-pin` turns this off.'
                 % (pl['client_cpu'], pl['server_cpu']))
    elif 'placement' in res:
        L.append('- Placement: none (`--no-pin`, or one CPU): the '
                 'scheduler placed every process.')
    L.append('- Phases: %s.' % ', '.join(
        '%s %.0f s' % (k, v) for k, v in res['phase_seconds'].items()))
    L.append('')
    return '\n'.join(L)


# ---------------------------------------------------------------------------
# the plot
# ---------------------------------------------------------------------------

COLORS = {'sensitive': '#2b7bba', 'stock': '#d7301f', 'fastcase': '#1a9850'}


def log_axes(ax, values):
    """Log-log axes with plain tick labels; the y axis spans at least a
    decade, so that small differences do not look large."""
    from matplotlib.ticker import (FormatStrFormatter, LogLocator,
                                   NullFormatter)
    ax.set_xscale('log')
    ax.set_yscale('log')
    values = [v for v in values if v]
    if values:
        lo, hi = min(values), max(values)
        if hi / lo < 10:
            mid = math.sqrt(lo * hi)
            lo, hi = mid / math.sqrt(10), mid * math.sqrt(10)
        ax.set_ylim(lo / 1.3, hi * 1.3)
        if hi / lo < 100:
            ax.yaxis.set_minor_locator(LogLocator(subs=(2, 5)))
            ax.yaxis.set_minor_formatter(FormatStrFormatter('%g'))
        else:
            ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FormatStrFormatter('%g'))
    ax.grid(True, which='both', alpha=0.3)


def plot(res, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    table = op_table(res)
    sizes = res['params']['sizes']
    fig, axes = plt.subplots(2, 4, figsize=(17, 8.5))
    axes = axes.flatten()
    for ax, op in zip(axes, OPS):
        values = []
        for c in CONFIGS:
            xs, ys, ox, oy = [], [], [], []
            for n in sizes:
                s = table.get((n, op))
                if s is None or s[c]['p50'] is None:
                    continue
                xs.append(n)
                ys.append(s[c]['p50'] * 1000)
                values.append(ys[-1])
                if s[c]['over']:
                    ox.append(n)
                    oy.append(s[c]['p50'] * 1000)
            ax.plot(xs, ys, marker='o', color=COLORS[c], label=c)
            if ox:
                ax.plot(ox, oy, linestyle='none', marker='s', markersize=11,
                        markerfacecolor='none', color=COLORS[c],
                        label='%s over budget' % c)
        log_axes(ax, values)
        ax.set_title(op)
        ax.set_xlabel('directory entries')
        ax.set_ylabel('p50 latency, ms')
        ax.legend(fontsize=8)
    ax = axes[len(OPS)]
    xs, cold, rd = [], [], []
    for n in sizes:
        c = res['cold'].get(str(n))
        if not c:
            continue
        xs.append(n)
        cold.append(p50([s['seconds'] for s in c['samples']]) * 1000)
        rd.append(p50(c['readdir_ns']) / 1e6)
    ax.plot(xs, cold, marker='o', color=COLORS['fastcase'],
            label='fastcase first lookup (cold)')
    ax.plot(xs, rd, marker='o', color='gray', label='C readdir')
    log_axes(ax, cold + rd)
    ax.set_title('cold cost')
    ax.set_xlabel('directory entries')
    ax.set_ylabel('ms')
    ax.legend(fontsize=8)
    title = 'vfs_fastcase: p50 latency against directory size (%s, %s)' % (
        res['date'], 'quick run' if res['profile'] == 'quick' else
        'full run')
    fig.suptitle(title)
    fig.text(0.5, 0.005, 'sensitive: case sensitive = yes, the same '
             'operation with names in the on-disk case; stock: case '
             'sensitive = no; fastcase: case sensitive = no + vfs_fastcase. '
             'Hollow squares: over budget (p50 of the operations done).',
             ha='center', fontsize=9)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write(res, outdir):
    md = os.path.join(outdir, 'PERFORMANCE.md')
    png = os.path.join(outdir, 'performance.png')
    with open(md, 'w') as f:
        f.write(markdown(res, 'performance.png') + '\n')
    plot(res, png)
    return md, png


def main():
    import json
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip())
    with open(sys.argv[1]) as f:
        res = json.load(f)
    os.makedirs(sys.argv[2], exist_ok=True)
    for p in write(res, sys.argv[2]):
        print(p)
    return 0


if __name__ == '__main__':
    sys.exit(main())
