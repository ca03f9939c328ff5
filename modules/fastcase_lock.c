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
#include "lib/util/debug.h"
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/futex.h>
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

/*
 * A waiter sleeps on a futex in the lock file's first page rather than
 * polling: each unlock bumps its slot's word and wakes one sleeper, so a
 * lock that comes free is taken at once, with one sleep and one wake-up
 * instead of several (docs/DESIGN.md, "The cache"). The OFD lock stays
 * the lock: the word only says "try again now". A wake-up that never
 * comes (a holder that died, a process of an older module, two slots
 * that share a word, the word's page overwritten) costs at most one
 * sleep of POLL_MAX_US, so every wait keeps its deadline.
 */
#define WAKE_WORDS FASTCASE_LOCK_WAKE_WORDS
#define WAKE_PAGE_SIZE (WAKE_WORDS * sizeof(struct fastcase_lock_wake_word))

static int64_t monotonic_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/*
 * The page's block is allocated before it is mapped: a write through a
 * shared mapping of a hole on a full file system would raise SIGBUS.
 */
void fastcase_lock_file_map_wake_page(struct cache_file *file)
{
	void *page;
	int ret;

	file->wake = NULL;
	ret = posix_fallocate(file->lock_fd, 0, WAKE_PAGE_SIZE);
	if (ret != 0) {
		DBG_NOTICE("%s.lock: no wake-up page (%s); lock waits poll\n",
			   file->path, strerror(ret));
		return;
	}
	page = mmap(NULL, WAKE_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		    file->lock_fd, 0);
	if (page == MAP_FAILED) {
		DBG_NOTICE("%s.lock: cannot map its wake-up page (%s); lock "
			   "waits poll\n", file->path, strerror(errno));
		return;
	}
	file->wake = page;
}

void fastcase_lock_file_unmap_wake_page(struct cache_file *file)
{
	if (file->wake != NULL) {
		munmap(file->wake, WAKE_PAGE_SIZE);
		file->wake = NULL;
	}
}

static struct fastcase_lock_wake_word *wake_word(const struct cache_file *file,
					uint32_t slot)
{
	return file->wake == NULL ? NULL : &file->wake[slot % WAKE_WORDS];
}

/*
 * Sleeps until w's seq is no longer seq, a wake-up or us pass. The
 * sleeper is counted before the futex reads seq and the waker bumps seq
 * before it reads the count (both sequentially consistent), so a waker
 * that sees no sleeper has bumped seq before the sleeper's futex read it,
 * and the futex returns at once.
 */
static void wake_word_sleep(struct fastcase_lock_wake_word *w, uint32_t seq,
			    int64_t us)
{
	struct timespec ts = {
		.tv_sec = us / 1000000,
		.tv_nsec = (us % 1000000) * 1000,
	};

	__atomic_add_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &w->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
	__atomic_sub_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
}

static void wake_word_wake(struct fastcase_lock_wake_word *w, int sleepers)
{
	if (w == NULL) {
		return;
	}
	__atomic_add_fetch(&w->seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->sleepers, __ATOMIC_SEQ_CST) != 0) {
		syscall(SYS_futex, &w->seq, FUTEX_WAKE, sleepers, NULL, NULL,
			0);
	}
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
 * and smbd owns its signals: sleep on w until an unlock, or without one
 * poll, backing off, so a free lock costs one fcntl() and a busy one at
 * most a few per millisecond.
 */
static int ofd_lock_within(int fd, off_t start, off_t len, unsigned wait_ms,
			   struct fastcase_lock_wake_word *w)
{
	int64_t deadline = monotonic_us() + (int64_t)wait_ms * 1000;
	int64_t pause_us = POLL_FIRST_US, left_us;
	uint32_t seq = 0;
	int ret;

	for (;;) {
		if (w != NULL) {
			seq = __atomic_load_n(&w->seq, __ATOMIC_SEQ_CST);
		}
		ret = ofd_try(fd, F_WRLCK, start, len);
		if (ret != EWOULDBLOCK) {
			return ret;
		}
		left_us = deadline - monotonic_us();
		if (left_us <= 0) {
			return wait_ms == 0 ? EWOULDBLOCK : ETIMEDOUT;
		}
		if (w != NULL) {
			wake_word_sleep(w, seq, MIN(left_us, POLL_MAX_US));
		} else {
			usleep(MIN(left_us, pause_us));
			pause_us = MIN(pause_us * 2, POLL_MAX_US);
		}
	}
}

/*
 * A forked child has no lock fd (forget_files_in_child(), run by fork()
 * itself): no getpid() per lock needed to tell it from its parent.
 */
static bool is_opener(const struct fastcase_cache *cache)
{
	return cache->file->lock_fd != -1;
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
			      file->num_held == 0 ? wait_ms : 0,
			      wake_word(file, slot));
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
			wake_word_wake(wake_word(file, slot), 1);
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
	/* rare and short: it polls */
	return ofd_lock_within(cache->file->lock_fd, 0, DIR_LOCK_SPAN,
			       wait_ms, NULL);
}

void fastcase_cache_unlock_all(struct fastcase_cache *cache)
{
	uint32_t i;

	ofd_try(cache->file->lock_fd, F_UNLCK, 0, DIR_LOCK_SPAN);
	for (i = 0; i < WAKE_WORDS; i++) {
		wake_word_wake(wake_word(cache->file, i), INT_MAX);
	}
}
