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

#endif /* _FASTCASE_CLUSTER_LOCK_H_ */
