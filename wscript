#!/usr/bin/env python3
#
# vfs_fastcase: waf build description.
#
# Run through ./waf, which prepares the Samba source tree of the installed
# smbd version and hands over to that tree's waf (buildtools/bin/waf).
#
# Commands:
#   ./waf build      build/fastcase.so, the tools and the unit tests
#   ./waf test       build, then run every test (unit and integration)
#   ./waf demo       build, then serve a demo share on 127.0.0.1
#   ./waf install    install module, tools and man page in Debian's paths
#   ./waf bench      benchmarks (--quick for a short run)
#   ./waf torture    smbtorture, stock against fastcase, side by side

import glob
import os
import shutil
import signal
import subprocess
import sys

from waflib import Build, Context, Errors, Logs, Options

APPNAME = 'vfs_fastcase'
VERSION = '0.1.0'

top = '.'
# ./waf sets this: build for the machine's own Samba, build-V in a root
out = os.environ.get('FASTCASE_OUT', 'build')

SAMBA_INCLUDES = ['source3', 'source3/include', 'lib/replace', '.',
		  'bin/default', 'bin/default/include', 'include', 'lib']
SAMBA_DEFINES = ['_SAMBA_BUILD_=4', 'HAVE_CONFIG_H=1', '_GNU_SOURCE=1',
		 '_XOPEN_SOURCE_EXTENDED=1', '__STDC_WANT_LIB_EXT1__=1',
		 '_REENTRANT']

# the VFS glue: needs smbd's headers, built into the module only
GLUE_SOURCES = ['modules/vfs_fastcase.c', 'modules/fastcase_cluster_lock.c']

CACHE_SOURCES = ['modules/fastcase_cache.c',
		 'modules/fastcase_lock.c',
		 'modules/fastcase_records.c',
		 'modules/fastcase_build.c',
		 'modules/fastcase_usage.c',
		 'modules/fastcase_counters.c',
		 'modules/fastcase_timeless.c',
		 'modules/fastcase_dirread.c']

ENGINE_SOURCES = ['modules/fastcase_fold.c'] + CACHE_SOURCES + [
		  'modules/fastcase_watch.c',
		  'modules/fastcase_engine.c',
		  'modules/fastcase_legacy_path.c',
		  'modules/fastcase_fstype.c',
		  'modules/fastcase_params.c']

# The interpreter of the test scripts: the one running waf (./waf runs it
# with Debian's python3, which has Samba's bindings)
PYTHON = sys.executable

UNIT_TESTS = ['test_fold', 'test_params', 'test_cache', 'test_engine',
	      'test_interleave']


def options(opt):
	opt.load('compiler_c')
	opt.add_option('--quick', action='store_true', default=False,
		       help='bench: a short run for development, reported '
		       'in build/bench/ instead of docs/')
	opt.add_option('--sanitize', action='store_true', default=False,
		       help='configure: build with ASan and UBSan')
	opt.add_option('--filter', action='store', default='',
		       help='test: run only tests whose name contains this')
	opt.add_option('--unit-only', action='store_true', default=False,
		       help='test: run the unit tests only')
	opt.add_option('--cluster', action='store_true', default=False,
		       help='test: run the cluster tests only (GlusterFS, '
		       'CTDB); demo: serve the share through two nodes')


def tool(name):
	"""Absolute path of a program, on PATH or in the system directories
	(smbd is in sbin, which is not always on PATH)."""
	path = shutil.which(name, path=os.environ.get('PATH', '') +
			    ':/usr/sbin:/usr/bin:/sbin:/bin')
	if path is None:
		raise Errors.WafError('%s not found: is its package installed?'
				      % name)
	return path


def smbd_build_value(name):
	"""A path compiled into the installed smbd (smbd -b)."""
	text = subprocess.run([tool('smbd'), '-b'], capture_output=True,
			      text=True, check=True).stdout
	for line in text.splitlines():
		line = line.strip()
		if line.startswith(name + ':'):
			return line.split(':', 1)[1].strip()
	raise Errors.ConfigurationError('smbd -b does not report %s' % name)


def samba_debug_library(conf):
	"""Samba's private debug library: its suffix is the distribution's
	private library extension (samba4 in Debian 12, private-samba
	since)."""
	libs = sorted(glob.glob(os.path.join(conf.env.MODULESDIR,
					     'libsamba-debug-*.so.0')))
	if not libs:
		conf.fatal('no libsamba-debug-*.so.0 in %s: is samba '
			   'installed?' % conf.env.MODULESDIR)
	return os.path.basename(libs[0])


def configure(conf):
	tree = os.environ.get('FASTCASE_SAMBA_TREE')
	if not tree:
		conf.fatal('run ./waf, not the Samba waf directly: '
			   'FASTCASE_SAMBA_TREE is not set')
	conf.env.SAMBA_TREE = tree
	conf.env.SAMBA_VERSION = os.environ.get('FASTCASE_SAMBA_VERSION', '')
	conf.load('compiler_c')
	for pkg in ['talloc', 'tdb', 'tevent', 'cmocka']:
		conf.check_cfg(package=pkg, args='--cflags --libs',
			       uselib_store=pkg.upper())
	# Samba's own libraries, for its charset and debug code: the public
	# libsamba-util has no development symlink without samba-dev, and the
	# debug code lives in a private library next to the modules.
	conf.env.MODULESDIR = smbd_build_value('MODULESDIR')
	conf.env.SAMBA_DEBUG_LIB = samba_debug_library(conf)
	conf.env.LIB_SAMBA_UTIL = [':libsamba-util.so.0',
				   ':' + conf.env.SAMBA_DEBUG_LIB, 'bsd']
	conf.env.LIBPATH_SAMBA_UTIL = [conf.env.MODULESDIR]
	conf.env.RPATH_SAMBA_UTIL = [conf.env.MODULESDIR]
	conf.check(lib='unistring', header_name='unicase.h',
		   uselib_store='UNISTRING')
	conf.env.INCLUDES_SAMBA = [os.path.join(tree, d)
				   for d in SAMBA_INCLUDES]
	conf.env.DEFINES_SAMBA = SAMBA_DEFINES
	conf.env.CACHEDIR = smbd_build_value('CACHEDIR')
	conf.env.SBINDIR = smbd_build_value('SBINDIR')
	conf.env.MANDIR = '/usr/share/man'
	conf.env.BINDIR = '/usr/bin'
	conf.env.cshlib_PATTERN = '%s.so'
	conf.env.append_value('CFLAGS', ['-O2', '-g', '-Wall', '-Wextra',
					 '-Wno-unused-parameter',
					 '-Wno-sign-compare',
					 '-Wno-missing-field-initializers',
					 '-fno-strict-aliasing',
					 '-Werror=implicit-function-declaration'])
	if Options.options.sanitize:
		san = ['-fsanitize=address,undefined',
		       '-fno-omit-frame-pointer']
		conf.env.append_value('CFLAGS', san)
		conf.env.append_value('LINKFLAGS', san)
		conf.env.SANITIZE = True


def build(bld):
	uses = 'SAMBA TALLOC TDB TEVENT UNISTRING SAMBA_UTIL'
	bld.objects(source=ENGINE_SOURCES, target='fastcase_engine',
		    includes='include', cflags=['-fPIC', '-fvisibility=hidden'],
		    use=uses)
	bld.shlib(source=GLUE_SOURCES, target='fastcase',
		  includes='include', cflags=['-fvisibility=hidden'],
		  use='fastcase_engine ' + uses,
		  install_path='${MODULESDIR}/vfs')
	for tool in ['fastcase_check', 'fastcase_stat']:
		bld.program(source=['tools/%s.c' % tool],
			    target=tool.replace('_', '-'),
			    includes='include',
			    defines=['FASTCASE_DEFAULT_CACHE_DIR="%s"' %
				     bld.env.CACHEDIR],
			    use='fastcase_engine ' + uses,
			    install_path='${BINDIR}')
	for t in UNIT_TESTS:
		bld.program(source=['tests/unit/%s.c' % t,
				    'tests/unit/unit_util.c'],
			    target='tests/unit/%s' % t,
			    includes='include modules',
			    use='fastcase_engine CMOCKA ' + uses,
			    install_path=None)
	bld(rule=render_manpage,
	    source=['docs/vfs_fastcase.8.xml', 'docs/expand-smbconf.xsl'],
	    target='docs/vfs_fastcase.8')
	bld.install_files('${MANDIR}/man8', ['docs/vfs_fastcase.8'])
	if bld.cmd == 'test':
		bld.add_post_fun(run_tests)
	elif bld.cmd == 'demo':
		bld.add_post_fun(run_demo)
	elif bld.cmd == 'fuzz':
		bld.add_post_fun(run_fuzz)
	elif bld.cmd == 'stress':
		bld.add_post_fun(run_stress)
	elif bld.cmd == 'torture':
		bld.add_post_fun(run_torture)
	elif bld.cmd == 'bench':
		bld.add_post_fun(run_bench)


MANPAGES_XSL = ('/usr/share/xml/docbook/stylesheet/docbook-xsl/'
		'manpages/docbook.xsl')


def render_manpage(task):
	"""Samba's DocBook -> plain DocBook -> troff, with Debian's XSL."""
	src, xsl = task.inputs
	out = task.outputs[0]
	plain = out.abspath() + '.xml'
	ret = task.exec_command(['xsltproc', '--nonet', '-o', plain,
				 xsl.abspath(), src.abspath()])
	if ret:
		return ret
	return task.exec_command(['xsltproc', '--nonet', '-o',
				  out.parent.abspath() + '/', MANPAGES_XSL,
				  plain])


FUZZERS = {
	'fuzz_fold': ['modules/fastcase_fold.c'],
	'fuzz_record': ['modules/fastcase_fold.c'] + CACHE_SOURCES,
}


def build_fuzzers(bld):
	"""libFuzzer targets, built with clang apart from the gcc build."""
	top_dir = bld.path.abspath()
	out = os.path.join(bld.bldnode.abspath(), 'fuzz')
	os.makedirs(out, exist_ok=True)
	flags = ['-g', '-O1', '-fsanitize=fuzzer,address,undefined',
		 '-I' + os.path.join(top_dir, 'include')]
	flags += ['-I' + os.path.join(bld.env.SAMBA_TREE, d)
		  for d in SAMBA_INCLUDES]
	flags += ['-D' + d for d in SAMBA_DEFINES]
	libs = ['-L' + bld.env.MODULESDIR,
		'-Wl,-rpath,' + bld.env.MODULESDIR,
		'-l:libsamba-util.so.0', '-l:' + bld.env.SAMBA_DEBUG_LIB,
		'-lbsd', '-lunistring', '-ltalloc', '-ltdb']
	targets = {}
	for name, sources in FUZZERS.items():
		target = os.path.join(out, name)
		srcs = [os.path.join(top_dir, 'tests/fuzz/%s.c' % name)]
		srcs += [os.path.join(top_dir, s) for s in sources]
		newest = max(os.path.getmtime(s) for s in srcs)
		if (not os.path.exists(target) or
		    os.path.getmtime(target) < newest):
			cmd = ['clang'] + flags + srcs + ['-o', target] + libs
			if _run(cmd) != 0:
				raise Errors.WafError('cannot build %s' % name)
		targets[name] = target
	return targets


def _asan_compile(bld, srcs, target, extra_flags, extra_libs):
	"""gcc with AddressSanitizer and UBSan; only when a source is newer."""
	top_dir = bld.path.abspath()
	flags = ['-g', '-O1', '-fsanitize=address,undefined',
		 '-fno-sanitize-recover=undefined', '-fno-omit-frame-pointer',
		 '-I' + os.path.join(top_dir, 'include')]
	flags += ['-I' + os.path.join(bld.env.SAMBA_TREE, d)
		  for d in SAMBA_INCLUDES]
	flags += ['-D' + d for d in SAMBA_DEFINES]
	flags += ['-I/usr/include/samba-4.0']
	libs = ['-L' + bld.env.MODULESDIR, '-Wl,-rpath,' + bld.env.MODULESDIR,
		'-l:libsamba-util.so.0', '-l:' + bld.env.SAMBA_DEBUG_LIB,
		'-lunistring', '-ltalloc', '-ltdb', '-ltevent', '-lbsd']
	header_dirs = set([os.path.join(top_dir, 'include')] +
			  [os.path.dirname(src) for src in srcs])
	headers = [os.path.join(d, h) for d in header_dirs
		   for h in os.listdir(d) if h.endswith('.h')]
	newest = max(os.path.getmtime(s) for s in srcs + headers)
	if os.path.exists(target) and os.path.getmtime(target) >= newest:
		return
	os.makedirs(os.path.dirname(target), exist_ok=True)
	if _run(['gcc'] + flags + extra_flags + srcs + ['-o', target] +
		libs + extra_libs) != 0:
		raise Errors.WafError('cannot build %s with ASan' % target)


def build_asan_module(bld):
	"""fastcase.so with AddressSanitizer and UBSan, for a second run of the
	integration tests with the runtime preloaded into smbd."""
	top_dir = bld.path.abspath()
	out = os.path.join(bld.bldnode.abspath(), 'asan')
	srcs = [os.path.join(top_dir, s)
		for s in ENGINE_SOURCES + GLUE_SOURCES]
	_asan_compile(bld, srcs, os.path.join(out, 'fastcase.so'),
		      ['-fPIC', '-shared', '-fvisibility=hidden'], [])
	for tool in ['fastcase-stat', 'fastcase-check']:
		link = os.path.join(out, tool)
		if not os.path.lexists(link):
			os.symlink(os.path.join('..', tool), link)
	runtime = subprocess.run(['gcc', '-print-file-name=libasan.so'],
				 capture_output=True, text=True).stdout.strip()
	return out, os.path.realpath(runtime)


def build_asan_unit_tests(bld):
	"""The cmocka unit tests with AddressSanitizer and UBSan."""
	top_dir = bld.path.abspath()
	out = os.path.join(bld.bldnode.abspath(), 'asan', 'unit')
	engine = [os.path.join(top_dir, s) for s in ENGINE_SOURCES]
	targets = []
	for t in UNIT_TESTS:
		srcs = [os.path.join(top_dir, 'tests/unit', t + '.c'),
			os.path.join(top_dir, 'tests/unit/unit_util.c')] + engine
		target = os.path.join(out, t)
		_asan_compile(bld, srcs, target,
			      ['-I' + os.path.join(top_dir, 'modules')],
			      ['-lcmocka'])
		targets.append(target)
	return targets


def run_fuzzers(bld, seconds=None, runs=None):
	"""Each target over its seed corpus; 0 when none crashed."""
	import tempfile
	top_dir = bld.path.abspath()
	failed = 0
	for name, target in sorted(build_fuzzers(bld).items()):
		seeds = os.path.join(top_dir, 'tests/fuzz/corpus',
				     name.split('_', 1)[1])
		with tempfile.TemporaryDirectory() as work:
			cmd = [target, work, seeds,
			       '-artifact_prefix=%s/' % bld.bldnode.abspath()]
			if seconds:
				cmd.append('-max_total_time=%d' % seconds)
			if runs:
				cmd.append('-runs=%d' % runs)
			rc = _run(cmd)
		if rc != 0:
			Logs.error('fuzzer %s failed (exit %d)' % (name, rc))
			failed += 1
	return failed


def run_fuzz(bld):
	seconds = int(os.environ.get('FASTCASE_FUZZ_SECONDS', '600'))
	if run_fuzzers(bld, seconds=seconds):
		raise Errors.WafError('a fuzzer found a crash')


def _run(cmd, **kw):
	Logs.info('+ %s' % ' '.join(cmd))
	proc = subprocess.Popen(cmd, **kw)
	try:
		return proc.wait()
	except KeyboardInterrupt:
		_stop_gently(proc)
		raise


def _stop_gently(proc):
	"""Ctrl-C: the child (the demo, the test runner) stops its smbd by PID
	and removes its temporary directory when it gets SIGINT; killing it at
	once, as subprocess.call does, would leave both behind. A terminal's
	Ctrl-C reached it already; a SIGINT sent to waf alone did not."""
	for sig, seconds in ((None, 2), (signal.SIGINT, 60)):
		if sig is not None:
			proc.send_signal(sig)
		try:
			proc.wait(timeout=seconds)
			return
		except subprocess.TimeoutExpired:
			pass
	proc.kill()
	proc.wait()


# A suite (unit test binary, run.py, test_tools.py) whose filter selects no
# test exits with this: with --filter that suite is left out of the count;
# anywhere else (no filter, the ASan and valgrind reruns' own filters) it is
# a failure, so that a renamed test cannot turn a run into a silent pass.
NONE_SELECTED = 5


class Tally:
	"""Suites passed and failed; those a --filter left empty apart."""

	def __init__(self):
		self.passed = self.failed = 0
		self.empty = []

	def add(self, rc, what, may_be_empty=False):
		if rc == 0:
			self.passed += 1
		elif rc == NONE_SELECTED and may_be_empty:
			self.empty.append(what)
		else:
			self.failed += 1
			if rc == NONE_SELECTED:
				Logs.error('%s selected no test' % what)
			else:
				Logs.error('%s failed (exit %d)' % (what, rc))


def run_unit_tests(bld, tally, filt):
	out_dir = bld.bldnode.abspath()
	for t in UNIT_TESTS:
		cmd = [os.path.join(out_dir, 'tests/unit', t)]
		if filt:
			cmd += ['--filter', filt]
		tally.add(_run(cmd), 'unit test %s' % t, bool(filt))
	if not filt:
		# the interleavings once more, within one preemption: at two
		# they take minutes under ASan for every Samba version
		env = dict(os.environ, FASTCASE_INTERLEAVE_BOUND='1')
		for target in build_asan_unit_tests(bld):
			tally.add(_run([target], env=env),
				  'unit test %s under ASan/UBSan' % target)


def run_integration(bld, tally, filt):
	top_dir = bld.path.abspath()
	out_dir = bld.bldnode.abspath()
	run_py = os.path.join(top_dir, 'tests/integration/run.py')
	cmd = [PYTHON, os.path.join(top_dir, 'tests/tools/test_tools.py'),
	       '--build', out_dir]
	if filt:
		cmd += ['--filter', filt]
	tally.add(_run(cmd), 'tool and package tests', bool(filt))
	cmd = [PYTHON, run_py, '--build', out_dir]
	if filt:
		cmd += ['--filter', filt]
	tally.add(_run(cmd), 'integration tests', bool(filt))
	if filt:
		return
	asan_dir, runtime = build_asan_module(bld)
	env = dict(os.environ, FASTCASE_SMBD_PRELOAD=runtime)
	for suite in ['test_engine', 'test_reliability', 'test_hostile']:
		tally.add(_run([PYTHON, run_py, '--build', asan_dir,
				'--filter', suite], env=env),
			  '%s under ASan/UBSan' % suite)
	# once under valgrind's memcheck: slow, so one class
	env = dict(os.environ, FASTCASE_SMBD_VALGRIND='1')
	tally.add(_run([PYTHON, run_py, '--build', out_dir,
			'--filter', 'test_engine.WrongCaseOperations'], env=env),
		  'integration tests under valgrind')


# the integration tests of a cluster (./waf test --cluster)
CLUSTER_TESTS = 'test_cluster.'


def run_cluster_tests(bld):
	tally = Tally()
	run_integration(bld, tally, CLUSTER_TESTS)
	print('suites: %d passed, %d failed' % (tally.passed, tally.failed))
	if tally.failed or tally.passed == 0:
		raise Errors.WafError('cluster tests failed (or none ran)')


def run_tests(bld):
	if Options.options.cluster:
		run_cluster_tests(bld)
		return
	filt = Options.options.filter
	tally = Tally()
	run_unit_tests(bld, tally, filt)
	if not filt or 'fuzz' in filt:
		tally.add(0 if run_fuzzers(bld, runs=100000) == 0 else 1,
			  'fuzzers')
	if not Options.options.unit_only:
		run_integration(bld, tally, filt)
	if tally.empty:
		Logs.info('--filter %r selects no test in: %s'
			  % (filt, ', '.join(tally.empty)))
	print('suites: %d passed, %d failed' % (tally.passed, tally.failed))
	if tally.failed:
		raise Errors.WafError('%d test suite(s) failed' % tally.failed)
	if tally.passed == 0:
		raise Errors.WafError('--filter %r selects no test at all'
				      % filt)


def run_demo(bld):
	script = os.path.join(bld.path.abspath(), 'tests/integration/demo.py')
	cmd = [PYTHON, script, '--build', bld.bldnode.abspath()]
	if Options.options.cluster:
		cmd.append('--cluster')
	rc = _run(cmd)
	if rc:
		raise Errors.WafError('demo exited with %d' % rc)


class TestContext(Build.BuildContext):
	'''build, then run every test'''
	cmd = 'test'
	fun = 'build'


def run_stress(bld):
	env = dict(os.environ)
	env.setdefault('FASTCASE_STRESS_SECONDS', '300')
	rc = _run([PYTHON,
		   os.path.join(bld.path.abspath(), 'tests/integration/run.py'),
		   '--build', bld.bldnode.abspath(),
		   '--filter', 'test_reliability.Storm'], env=env)
	if rc:
		raise Errors.WafError('stress run failed')


class StressContext(Build.BuildContext):
	'''build, then run the concurrency storm for minutes'''
	cmd = 'stress'
	fun = 'build'


class FuzzContext(Build.BuildContext):
	'''build, then run every libFuzzer target for a long time'''
	cmd = 'fuzz'
	fun = 'build'


class DemoContext(Build.BuildContext):
	'''build, then serve a demo share on 127.0.0.1 (foreground)'''
	cmd = 'demo'
	fun = 'build'


def run_torture(bld):
	"""smbtorture on a stock and a fastcase share, side by side (the full
	list; tests/torture/run_torture.py)."""
	top_dir = bld.path.abspath()
	cmd = [PYTHON, os.path.join(top_dir, 'tests/torture/run_torture.py'),
	       '--build', bld.bldnode.abspath()]
	version = os.environ.get('FASTCASE_IN_ROOT')
	if version:
		cmd += ['--docs', docs_dir(top_dir),
			'--command', './waf torture --samba ' + version]
	rc = _run(cmd)
	update_version_sections(top_dir)
	if rc:
		raise Errors.WafError('smbtorture: fastcase differs from stock '
				      '(or the run failed): see the table')


class TortureContext(Build.BuildContext):
	'''build, then smbtorture: stock against fastcase, side by side'''
	cmd = 'torture'
	fun = 'build'


def docs_dir(top_dir):
	"""Where a full report goes: docs/ for the machine's own Samba,
	docs/samba-V/ for the Samba of a root (./waf --samba V)."""
	version = os.environ.get('FASTCASE_IN_ROOT')
	if not version:
		return os.path.join(top_dir, 'docs')
	path = os.path.join(top_dir, 'docs', 'samba-' + version)
	os.makedirs(path, exist_ok=True)
	return path


def update_version_sections(top_dir):
	"""The 'Other Samba versions' sections of docs/PERFORMANCE.md and
	docs/CONFORMANCE.md, from the reports in docs/samba-V/."""
	_run([PYTHON, os.path.join(top_dir, 'tests/bench/version_sections.py'),
	      os.path.join(top_dir, 'docs')])


def run_bench(bld):
	"""The three configurations side by side (tests/bench/bench.py). The
	full run writes docs/PERFORMANCE.md and docs/performance.png (in a
	root, docs/samba-V/), --quick
	writes them to build/bench/; the raw results go to build/bench/ either
	way. FASTCASE_BENCH_ARGS adds options of bench.py (--sizes, ...)."""
	top_dir = bld.path.abspath()
	out_dir = bld.bldnode.abspath()
	if Options.options.cluster:
		run_cluster_bench(top_dir, out_dir)
		return
	cmd = [PYTHON, os.path.join(top_dir, 'tests/bench/bench.py'),
	       '--build', out_dir]
	command = './waf bench'
	if os.environ.get('FASTCASE_IN_ROOT'):
		command += ' --samba ' + os.environ['FASTCASE_IN_ROOT']
	if Options.options.quick:
		cmd += ['--quick', '--out', os.path.join(out_dir, 'bench')]
		command += ' --quick'
	else:
		cmd += ['--out', docs_dir(top_dir)]
	extra = os.environ.get('FASTCASE_BENCH_ARGS', '').split()
	if extra:
		command = 'FASTCASE_BENCH_ARGS="%s" %s' % (' '.join(extra), command)
	cmd += extra + ['--command', command]
	if _run(cmd):
		raise Errors.WafError('bench run failed')
	if not Options.options.quick:
		update_version_sections(top_dir)


def run_cluster_bench(top_dir, out_dir):
	"""Four configurations on a two-node CTDB cluster over GlusterFS
	(tests/bench/bench_cluster.py): docs/cluster/, and the section
	"Cluster" of docs/PERFORMANCE.md; --quick: build/bench/cluster/."""
	cmd = [PYTHON, os.path.join(top_dir, 'tests/bench/bench_cluster.py'),
	       '--build', out_dir]
	command = './waf bench --cluster'
	if Options.options.quick:
		cmd += ['--out', os.path.join(out_dir, 'bench', 'cluster'),
			'--sizes', '10000', '--iterations', '20',
			'--budget', '2']
		command += ' --quick'
	extra = os.environ.get('FASTCASE_BENCH_ARGS', '').split()
	if extra:
		command = 'FASTCASE_BENCH_ARGS="%s" %s' % (' '.join(extra), command)
	if _run(cmd + extra + ['--command', command]):
		raise Errors.WafError('cluster bench run failed')
	if not Options.options.quick:
		update_version_sections(top_dir)


class BenchContext(Build.BuildContext):
	'''build, then benchmark stock, fastcase and case sensitive = yes'''
	cmd = 'bench'
	fun = 'build'
