/*
 * vfs_fastcase: a directory lock that holds across the nodes of a cluster
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_CLUSTER_LOCK_H_
#define _FASTCASE_CLUSTER_LOCK_H_

/*
 * Part of the VFS glue (it needs smbd's messaging): include after
 * smbd/smbd.h.
 *
 * Lock order: a create takes the cluster lock of its directory first,
 * then the cache's directory lock (fastcase_lock.h), and releases them in
 * the reverse order. Nothing else is held while waiting for either.
 */

struct fastcase_cluster_lock;

/* How long a create waits for another node's create in one directory. */
#define FASTCASE_CLUSTER_LOCK_TIMEOUT_S 5

/*
 * Samba's g_lock on smbd's messaging context: cluster-wide when smbd is
 * clustered. NULL when it cannot be had (logged).
 */
struct fastcase_cluster_lock *fastcase_cluster_lock_create(
	TALLOC_CTX *mem_ctx);

/*
 * Lock the directory whose identity is id (SMB_VFS_FILE_ID_CREATE, the
 * same on every node when vfs_fileid makes it so). Returns 0, ETIMEDOUT
 * when another holder kept it past the bound, or EIO.
 */
int fastcase_cluster_lock_dir(struct fastcase_cluster_lock *lock,
			      const struct file_id *id);

void fastcase_cluster_unlock_dir(struct fastcase_cluster_lock *lock,
				 const struct file_id *id);

/*
 * The directory's create count: how many creates, directory creates and
 * renames into it began under its cluster lock, on any node, since the
 * cluster started. Kept as the data of the lock's own record, so it is
 * as clustered as the lock. The protocol (docs/DESIGN.md, "Creates
 * across nodes"):
 *
 * - a create, holding the lock, adds one *before* it makes the name, so a
 *   count that has not moved means no create began meanwhile, and a
 *   holder that dies after making its name has moved it already;
 * - a reader without the lock gets a count only when nobody holds the
 *   lock (false otherwise): every create counted in it has then finished,
 *   so a read of the directory after it sees their names.
 *
 * read_count returns true with *count (0 for a directory no create ever
 * counted in); held: this process holds the lock. add_create returns 0 or
 * EIO (logged); only the lock's holder may call it.
 */
bool fastcase_cluster_read_count(struct fastcase_cluster_lock *lock,
				 const struct file_id *id, bool held,
				 uint64_t *count);
int fastcase_cluster_add_create(struct fastcase_cluster_lock *lock,
				const struct file_id *id);

#endif /* _FASTCASE_CLUSTER_LOCK_H_ */
