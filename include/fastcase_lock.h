/*
 * vfs_fastcase: directory locks
 *
 * The lock hierarchy, the one place it is written (tests/unit/test_cache.c,
 * test_dir_locks, checks each rule):
 *
 * 1. A directory's lock serialises every change to that directory's
 *    records (a build, a name added or removed, a stamp refreshed) and
 *    every create or rename into it through the module, across processes.
 *    It is an OFD lock on one byte of "<cache file>.lock", the byte a hash
 *    of the directory's key names. Lookups take no lock.
 * 2. A process that holds no directory lock waits for one at most
 *    FASTCASE_LOCK_WAIT_MS. A process that already holds one only tries
 *    (EWOULDBLOCK at once): two processes that each held one directory and
 *    waited for the other's would wait forever, and neither robust mutexes
 *    nor OFD locks detect that. Nesting of one directory's lock is counted.
 * 3. Trimming takes every directory's lock at once (the whole byte range),
 *    only while holding none, and only tries for TRIM_WAIT_MS: it is never
 *    worth stalling a client for.
 * 4. TDB's own locks (chain locks, the counters' and usage record's
 *    chainlock) are taken and released inside one call, after the
 *    directory locks; nothing waits for a directory lock while holding
 *    one of TDB's.
 *
 * Every wait is bounded, because it happens in smbd's main loop: a slow
 * file system under one holder must not stall every client. A lookup whose
 * wait expires hands the question back to smbd; a create is refused.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_LOCK_H_
#define _FASTCASE_LOCK_H_

#include <stdbool.h>
#include <stdint.h>
#include "fastcase_cache.h"

#define FASTCASE_LOCK_WAIT_MS 5000
#define FASTCASE_TRIM_WAIT_MS 50

/*
 * The lock file's first page: where waiters for a directory's lock sleep
 * (a futex on seq) until an unlock wakes them; the lock itself is the
 * OFD lock. A directory's slot uses word slot % FASTCASE_LOCK_WAKE_WORDS.
 */
#define FASTCASE_LOCK_WAKE_WORDS 512

struct fastcase_lock_wake_word {
	uint32_t seq;		/* bumped by every unlock of its slots */
	uint32_t sleepers;	/* waiters asleep on seq: skip the wake */
};

/*
 * Returns 0; ETIMEDOUT when the wait expired; EWOULDBLOCK when another
 * directory's lock is held and this one is busy; EDEADLK when too many
 * are held; EBADF in a forked child of the opener; another errno from
 * fcntl().
 */
int fastcase_cache_dir_lock(struct fastcase_cache *cache,
			    const struct fastcase_scope *scope,
			    const struct fastcase_dir_id *id);
/* The same without waiting: EWOULDBLOCK when it is busy. */
int fastcase_cache_dir_trylock(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id);
void fastcase_cache_dir_unlock(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id);

/* Whether this process holds any directory's lock. */
bool fastcase_cache_holds_locks(const struct fastcase_cache *cache);

/* Every directory's lock, tried for at most wait_ms; 0 or an errno. */
int fastcase_cache_lock_all(struct fastcase_cache *cache, unsigned wait_ms);
void fastcase_cache_unlock_all(struct fastcase_cache *cache);

#endif /* _FASTCASE_LOCK_H_ */
