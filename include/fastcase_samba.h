/*
 * vfs_fastcase: the differences between the Samba releases it builds for.
 *
 * One source builds against every VFS interface from 47 (Samba 4.17) to
 * 53 (4.25). Every hook and call whose shape changed in that span is
 * spelled here once, by the interface version of the headers at hand, so
 * that vfs_fastcase.c reads the same for all of them. Include it after
 * smbd/smbd.h.
 *
 *   47 (4.17)  the oldest supported: openat with vfs_open_how, fstatat,
 *              get_real_filename_at
 *   48 (4.18)  connectpath gained a dirfsp (not hooked here);
 *              g_lock_lock() gained a callback (passed NULL here)
 *   49 (4.19)  readdir lost its "sbuf" argument; 4.20 and 4.21 kept 49
 *              but smbd opens every path component through
 *              smb_vfs_openat_ci() and a per-process real-name memcache
 *   50 (4.22)  renameat gained a vfs_rename_how (VFS_RENAME_HOW_NO_REPLACE);
 *              smbd makes a directory under a temporary name and renames
 *              it into place with NO_REPLACE
 *   51 (4.23)  new fsp flags (not used here)
 *   52 (4.24)  rename_stream added, connectpath removed (neither hooked)
 *   53 (4.25)  nothing this module hooks
 */

#ifndef FASTCASE_SAMBA_H
#define FASTCASE_SAMBA_H

#define FASTCASE_OLDEST_VFS_VERSION 47
#define FASTCASE_NEWEST_VFS_VERSION 53

#if SMB_VFS_INTERFACE_VERSION < FASTCASE_OLDEST_VFS_VERSION
#error "vfs_fastcase needs SMB_VFS_INTERFACE_VERSION 47 (Samba 4.17) or newer"
#endif

/*
 * A newer interface may have changed a hook's arguments: a module built
 * from it unchecked could load and then run with the wrong layout.
 */
#if SMB_VFS_INTERFACE_VERSION > FASTCASE_NEWEST_VFS_VERSION
#define FASTCASE_STR(x) #x
#define FASTCASE_XSTR(x) FASTCASE_STR(x)
#pragma message("these Samba headers have SMB_VFS_INTERFACE_VERSION " \
		FASTCASE_XSTR(SMB_VFS_INTERFACE_VERSION))
#error "vfs_fastcase supports SMB_VFS_INTERFACE_VERSION 47 to 53 (Samba 4.17 to 4.25); these headers are newer"
#endif

/*
 * A hook's parameter list is spelled with the _PARAM macro; inside it the
 * argument is named by the plain macro (NULL where the interface has no
 * such argument), and the next module is called through FASTCASE_NEXT_*,
 * which takes every argument and passes on those the interface has.
 */

/* readdir: the stat buffer argument went away in 49 */
#if SMB_VFS_INTERFACE_VERSION >= 49
#define FASTCASE_READDIR_SBUF_PARAM
#define FASTCASE_READDIR_SBUF NULL
#define FASTCASE_NEXT_READDIR(handle, dirfsp, dirp, sbuf) \
	SMB_VFS_NEXT_READDIR(handle, dirfsp, dirp)
#else
#define FASTCASE_READDIR_SBUF_PARAM , SMB_STRUCT_STAT *sbuf
#define FASTCASE_READDIR_SBUF sbuf
#define FASTCASE_NEXT_READDIR(handle, dirfsp, dirp, sbuf) \
	SMB_VFS_NEXT_READDIR(handle, dirfsp, dirp, sbuf)
#endif

/* renameat: how to rename (no-replace) arrived in 50 */
#if SMB_VFS_INTERFACE_VERSION >= 50
#define FASTCASE_RENAME_HOW_PARAM , const struct vfs_rename_how *how
#define FASTCASE_RENAME_HOW how
#define FASTCASE_NEXT_RENAMEAT(handle, srcfsp, src, dstfsp, dst, how) \
	SMB_VFS_NEXT_RENAMEAT(handle, srcfsp, src, dstfsp, dst, how)
#else
struct vfs_rename_how;
#define FASTCASE_RENAME_HOW_PARAM
#define FASTCASE_RENAME_HOW NULL
#define FASTCASE_NEXT_RENAMEAT(handle, srcfsp, src, dstfsp, dst, how) \
	SMB_VFS_NEXT_RENAMEAT(handle, srcfsp, src, dstfsp, dst)
#endif

/* g_lock_lock: a callback run under the lock arrived in 48 */
#if SMB_VFS_INTERFACE_VERSION >= 48
#define FASTCASE_G_LOCK_LOCK(ctx, key, type, timeout) \
	g_lock_lock(ctx, key, type, timeout, NULL, NULL)
#else
#define FASTCASE_G_LOCK_LOCK(ctx, key, type, timeout) \
	g_lock_lock(ctx, key, type, timeout)
#endif

#endif /* FASTCASE_SAMBA_H */
