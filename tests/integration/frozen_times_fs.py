"""
A FUSE file system whose directories never change their times: a pass-
through of a backing directory (python3-fusepy) that reports every
directory's mtime and ctime as FROZEN. What a file system without usable
directory change times looks like to the module (docs/DESIGN.md, "Failure
handling"). Run as: frozen_times_fs.py BACKING MOUNTPOINT (foreground; stop
it by its PID, then unmount).
"""

import errno
import os
import stat
import sys

from fusepy import FUSE, FuseOSError, Operations

FROZEN = 1000000000     # 2001-09-09


class FrozenTimes(Operations):
    def __init__(self, root):
        self.root = root

    def _path(self, path):
        return os.path.join(self.root, path.lstrip('/'))

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except OSError as e:
            raise FuseOSError(e.errno or errno.EIO)

    def getattr(self, path, fh=None):
        st = self._call(os.lstat, self._path(path))
        attrs = {k: getattr(st, k) for k in (
            'st_mode', 'st_nlink', 'st_uid', 'st_gid', 'st_size',
            'st_atime', 'st_mtime', 'st_ctime')}
        if stat.S_ISDIR(st.st_mode):
            attrs['st_mtime'] = attrs['st_ctime'] = FROZEN
        return attrs

    def readdir(self, path, fh):
        return ['.', '..'] + self._call(os.listdir, self._path(path))

    def access(self, path, mode):
        if not os.access(self._path(path), mode):
            raise FuseOSError(errno.EACCES)

    def statfs(self, path):
        sv = self._call(os.statvfs, self._path(path))
        return {k: getattr(sv, k) for k in (
            'f_bavail', 'f_bfree', 'f_blocks', 'f_bsize', 'f_favail',
            'f_ffree', 'f_files', 'f_flag', 'f_frsize', 'f_namemax')}

    def chmod(self, path, mode):
        self._call(os.chmod, self._path(path), mode)

    def chown(self, path, uid, gid):
        self._call(os.lchown, self._path(path), uid, gid)

    def utimens(self, path, times=None):
        self._call(os.utime, self._path(path), times)

    def mkdir(self, path, mode):
        self._call(os.mkdir, self._path(path), mode)

    def rmdir(self, path):
        self._call(os.rmdir, self._path(path))

    def unlink(self, path):
        self._call(os.unlink, self._path(path))

    def rename(self, old, new):
        self._call(os.rename, self._path(old), self._path(new))

    def truncate(self, path, length, fh=None):
        self._call(os.truncate, self._path(path), length)

    def open(self, path, flags):
        return self._call(os.open, self._path(path), flags)

    def create(self, path, mode, fi=None):
        return self._call(os.open, self._path(path),
                          os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

    def read(self, path, length, offset, fh):
        return self._call(os.pread, fh, length, offset)

    def write(self, path, data, offset, fh):
        return self._call(os.pwrite, fh, data, offset)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        self._call(os.fsync, fh)

    def release(self, path, fh):
        self._call(os.close, fh)


def main():
    backing, mountpoint = sys.argv[1:3]
    FUSE(FrozenTimes(os.path.abspath(backing)), mountpoint, foreground=True,
         allow_other=True, default_permissions=True)


if __name__ == '__main__':
    main()
