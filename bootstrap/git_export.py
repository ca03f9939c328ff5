#!/usr/bin/python3
"""Write the tree of a commit of a git mirror into a directory.

Used by ./waf for a Samba release whose source Debian's archive does not
serve. The mirrors this project meets may lack some large blobs (test
data); `git archive` stops at the first, so this writes every blob the
mirror has, names those it lacks, and fails if any of them is one a
build reads (anything but test data).

usage: git_export.py GIT_DIR COMMIT DEST
"""

import os
import subprocess
import sys

# Blobs a module build never reads: their absence is reported, not fatal.
NOT_NEEDED = ('source4/selftest/provisions/', 'testdata/',
	      'source4/torture/', 'third_party/heimdal/lib/wind/',
	      'third_party/heimdal/lib/hx509/data/',
	      'third_party/heimdal/lib/sqlite/', 'python/samba/tests/')


def tree_entries(git, commit):
	out = subprocess.run(['git', '--git-dir', git, 'ls-tree', '-r', '-z',
			      commit], check=True, capture_output=True).stdout
	for rec in out.split(b'\0'):
		if not rec:
			continue
		meta, path = rec.split(b'\t', 1)
		mode, kind, sha = meta.split()
		if kind == b'blob':
			yield mode.decode(), sha.decode(), path.decode()


def main():
	git, commit, dest = sys.argv[1:4]
	entries = list(tree_entries(git, commit))
	cat = subprocess.Popen(['git', '--git-dir', git, 'cat-file', '--batch'],
			       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
	missing = []
	for mode, sha, path in entries:
		cat.stdin.write(sha.encode() + b'\n')
		cat.stdin.flush()
		header = cat.stdout.readline().split()
		if header[-1] == b'missing':
			missing.append(path)
			continue
		data = cat.stdout.read(int(header[2]))
		cat.stdout.read(1)
		target = os.path.join(dest, path)
		os.makedirs(os.path.dirname(target), exist_ok=True)
		if mode == '120000':
			os.symlink(data, target)
			continue
		with open(target, 'wb') as f:
			f.write(data)
		if mode == '100755':
			os.chmod(target, 0o755)
	cat.stdin.close()
	cat.wait()
	needed = [p for p in missing if not p.startswith(NOT_NEEDED)]
	for p in missing:
		print('git_export: the mirror lacks %s' % p, file=sys.stderr)
	if needed:
		print('git_export: %d of the missing files are needed' %
		      len(needed), file=sys.stderr)
		return 1
	return 0


if __name__ == '__main__':
	sys.exit(main())
