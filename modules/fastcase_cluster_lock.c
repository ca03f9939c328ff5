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

/*
 * The cache's directory lock is an OFD lock on a file of this host: on a
 * clustered smbd it serialises the creates of one node only, and two
 * clients creating case variants of one new name through two nodes would
 * both pass the check. Samba's g_lock is kept in g_lock.tdb, which CTDB
 * makes cluster-wide when smbd is clustered; its waiters are woken by
 * messages and a holder that dies (its process, or its whole node) is
 * noticed and its lock dropped.
 */

#include "includes.h"
#include "smbd/smbd.h"
#include "lib/global_contexts.h"
#include "lib/util/byteorder.h"
#include "g_lock.h"
#include "fastcase_samba.h"
#include "fastcase_cluster_lock.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

#define KEY_PREFIX "fastcase-dir/"
#define KEY_LEN (sizeof(KEY_PREFIX) - 1 + 3 * sizeof(uint64_t))

struct fastcase_cluster_lock {
	struct g_lock_ctx *ctx;
};

struct fastcase_cluster_lock *fastcase_cluster_lock_create(
	TALLOC_CTX *mem_ctx)
{
	struct fastcase_cluster_lock *lock = NULL;

	lock = talloc_zero(mem_ctx, struct fastcase_cluster_lock);
	if (lock == NULL) {
		return NULL;
	}
	lock->ctx = g_lock_ctx_init(lock, global_messaging_context());
	if (lock->ctx == NULL) {
		DBG_ERR("cannot open g_lock.tdb\n");
		TALLOC_FREE(lock);
	}
	return lock;
}

/* Byte order fixed, so that nodes of any architecture agree. */
static TDB_DATA dir_key(const struct file_id *id, uint8_t buf[KEY_LEN])
{
	size_t n = sizeof(KEY_PREFIX) - 1;

	memcpy(buf, KEY_PREFIX, n);
	SBVAL(buf, n, id->devid);
	SBVAL(buf, n + 8, id->inode);
	SBVAL(buf, n + 16, id->extid);
	return (TDB_DATA) { .dptr = buf, .dsize = KEY_LEN };
}

int fastcase_cluster_lock_dir(struct fastcase_cluster_lock *lock,
			      const struct file_id *id)
{
	struct timeval timeout = {
		.tv_sec = FASTCASE_CLUSTER_LOCK_TIMEOUT_S,
	};
	uint8_t buf[KEY_LEN];
	NTSTATUS status;

	status = FASTCASE_G_LOCK_LOCK(lock->ctx, dir_key(id, buf),
				      G_LOCK_WRITE, timeout);
	if (NT_STATUS_IS_OK(status)) {
		return 0;
	}
	DBG_WARNING("cluster lock of directory %s not had: %s\n",
		    file_id_str_buf(*id, &(struct file_id_buf){}),
		    nt_errstr(status));
	if (NT_STATUS_EQUAL(status, NT_STATUS_IO_TIMEOUT) ||
	    NT_STATUS_EQUAL(status, NT_STATUS_LOCK_NOT_GRANTED)) {
		return ETIMEDOUT;
	}
	return EIO;
}

void fastcase_cluster_unlock_dir(struct fastcase_cluster_lock *lock,
				 const struct file_id *id)
{
	uint8_t buf[KEY_LEN];
	NTSTATUS status;

	status = g_lock_unlock(lock->ctx, dir_key(id, buf));
	if (!NT_STATUS_IS_OK(status)) {
		/* the lock goes with this process at the latest */
		DBG_WARNING("cluster unlock of directory %s: %s\n",
			    file_id_str_buf(*id, &(struct file_id_buf){}),
			    nt_errstr(status));
	}
}

struct count_dump {
	bool held;
	bool known;
	uint64_t count;
};

static void count_parser(struct server_id exclusive, size_t num_shared,
			 const struct server_id *shared, const uint8_t *data,
			 size_t datalen, void *private_data)
{
	struct count_dump *d = private_data;

	if (!d->held && (exclusive.pid != 0 || num_shared != 0)) {
		/* a create may be under way: its name may not be there yet */
		return;
	}
	if (datalen == 0) {
		d->count = 0;
		d->known = true;
	} else if (datalen == sizeof(uint64_t)) {
		d->count = BVAL(data, 0);
		d->known = true;
	}
}

bool fastcase_cluster_read_count(struct fastcase_cluster_lock *lock,
				 const struct file_id *id, bool held,
				 uint64_t *count)
{
	struct count_dump d = { .held = held };
	uint8_t buf[KEY_LEN];
	NTSTATUS status;

	status = g_lock_dump(lock->ctx, dir_key(id, buf), count_parser, &d);
	if (NT_STATUS_EQUAL(status, NT_STATUS_NOT_FOUND)) {
		/* no record: nobody holds the lock, no create counted */
		*count = 0;
		return true;
	}
	if (!NT_STATUS_IS_OK(status) || !d.known) {
		return false;
	}
	*count = d.count;
	return true;
}

int fastcase_cluster_add_create(struct fastcase_cluster_lock *lock,
				const struct file_id *id)
{
	uint8_t buf[KEY_LEN], data[sizeof(uint64_t)];
	uint64_t count;
	NTSTATUS status;

	if (!fastcase_cluster_read_count(lock, id, true, &count)) {
		DBG_WARNING("create count of directory %s unreadable\n",
			    file_id_str_buf(*id, &(struct file_id_buf){}));
		return EIO;
	}
	SBVAL(data, 0, count + 1);
	status = g_lock_write_data(lock->ctx, dir_key(id, buf), data,
				   sizeof(data));
	if (!NT_STATUS_IS_OK(status)) {
		DBG_WARNING("create count of directory %s not written: %s\n",
			    file_id_str_buf(*id, &(struct file_id_buf){}),
			    nt_errstr(status));
		return EIO;
	}
	return 0;
}
