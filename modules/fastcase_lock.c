/*
 * vfs_fastcase: directory locks (the rules: include/fastcase_lock.h)
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#include "replace.h"
#include "system/filesys.h"
#include "system/time.h"
#include "fastcase_cache_internal.h"
#include "fastcase_lock.h"
#include "fastcase_records.h"

/*
 * Why OFD locks on a separate file and not TDB chain locks: the holder of
 * a directory's lock reads and writes entry records, which takes chain
 * locks, and the chain of one of its entries may be the chain of another
 * directory's key; with chain locks two processes in two directories
 * could each wait for a chain the other holds. Nor locks on the TDB file
 * itself, whose every byte beyond the hash chains TDB's all-record lock
 * covers. OFD locks do not nest; the nesting is counted here.
 */
#define DIR_LOCK_SPAN ((off_t)1 << 32)

/* Polling a busy lock: first after this, then twice as long each time. */
#define POLL_FIRST_US 20
#define POLL_MAX_US 2000

static int64_t monotonic_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static int ofd_try(int fd, short type, off_t start, off_t len)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = start,
		.l_len = len,
	};
	int ret;

	do {
		ret = fcntl(fd, F_OFD_SETLK, &fl);
	} while (ret == -1 && errno == EINTR);
	if (ret == -1) {
		return (errno == EAGAIN || errno == EACCES) ? EWOULDBLOCK :
			errno;
	}
	return 0;
}

/*
 * A blocking F_OFD_SETLKW cannot be given a deadline without a signal,
 * and smbd owns its signals: poll instead, backing off, so a free lock
 * costs one fcntl() and a busy one at most a few per millisecond.
 */
static int ofd_lock_within(int fd, off_t start, off_t len, unsigned wait_ms)
{
	int64_t deadline = monotonic_us() + (int64_t)wait_ms * 1000;
	unsigned pause_us = POLL_FIRST_US;
	int ret;

	for (;;) {
		ret = ofd_try(fd, F_WRLCK, start, len);
		if (ret != EWOULDBLOCK) {
			return ret;
		}
		if (monotonic_us() >= deadline) {
			return wait_ms == 0 ? EWOULDBLOCK : ETIMEDOUT;
		}
		usleep(pause_us);
		pause_us = MIN(pause_us * 2, POLL_MAX_US);
	}
}

static bool is_opener(const struct fastcase_cache *cache)
{
	return cache->file->lock_fd != -1 && cache->file->pid == getpid();
}

static int dir_lock_within(struct fastcase_cache *cache,
			   const struct fastcase_scope *scope,
			   const struct fastcase_dir_id *id, unsigned wait_ms)
{
	struct cache_file *file = cache->file;
	uint32_t slot = fastcase_records_lock_slot(scope, id);
	size_t i;
	int ret;

	if (!is_opener(cache)) {
		return EBADF;
	}
	for (i = 0; i < file->num_held; i++) {
		if (file->held[i].slot == slot) {
			file->held[i].depth++;
			return 0;
		}
	}
	if (file->num_held == DIR_LOCKS_HELD_MAX) {
		return EDEADLK;
	}
	ret = ofd_lock_within(file->lock_fd, slot, 1,
			      file->num_held == 0 ? wait_ms : 0);
	if (ret != 0) {
		return ret;
	}
	file->held[file->num_held].slot = slot;
	file->held[file->num_held].depth = 1;
	file->num_held++;
	return 0;
}

int fastcase_cache_dir_lock(struct fastcase_cache *cache,
			    const struct fastcase_scope *scope,
			    const struct fastcase_dir_id *id)
{
	return dir_lock_within(cache, scope, id, FASTCASE_LOCK_WAIT_MS);
}

int fastcase_cache_dir_trylock(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id)
{
	return dir_lock_within(cache, scope, id, 0);
}

void fastcase_cache_dir_unlock(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id)
{
	struct cache_file *file = cache->file;
	uint32_t slot = fastcase_records_lock_slot(scope, id);
	size_t i;

	for (i = 0; i < file->num_held; i++) {
		if (file->held[i].slot != slot) {
			continue;
		}
		if (--file->held[i].depth == 0) {
			ofd_try(file->lock_fd, F_UNLCK, slot, 1);
			file->held[i] = file->held[--file->num_held];
		}
		return;
	}
}

bool fastcase_cache_holds_locks(const struct fastcase_cache *cache)
{
	return cache->file->num_held > 0;
}

int fastcase_cache_lock_all(struct fastcase_cache *cache, unsigned wait_ms)
{
	if (!is_opener(cache)) {
		return EBADF;
	}
	if (cache->file->num_held > 0) {
		return EWOULDBLOCK;
	}
	return ofd_lock_within(cache->file->lock_fd, 0, DIR_LOCK_SPAN,
			       wait_ms);
}

void fastcase_cache_unlock_all(struct fastcase_cache *cache)
{
	ofd_try(cache->file->lock_fd, F_UNLCK, 0, DIR_LOCK_SPAN);
}
