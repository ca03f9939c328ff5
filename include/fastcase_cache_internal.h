/*
 * vfs_fastcase: what the cache's own files share
 *
 * The cache is one TDB file and one lock file per host, split by concern
 * over fastcase_cache.c (opening the file), fastcase_lock.c (directory
 * locks), fastcase_records.c (keys and records), fastcase_build.c (reading
 * a directory into records), fastcase_usage.c (size accounting and
 * trimming) and fastcase_counters.c (per-share counters). Only those files
 * include this header.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_CACHE_INTERNAL_H_
#define _FASTCASE_CACHE_INTERNAL_H_

#include <stdint.h>
#include <sys/types.h>
#include <tdb.h>

/* Records that are not a directory's. */
#define KEY_HEADER "fastcase-format"
#define KEY_USAGE "fastcase-usage"
#define KEY_LIMIT "fastcase-limit"

#define DIR_LOCKS_HELD_MAX 8

/*
 * One open of the cache file per process. TDB refuses a second open of a
 * file in one process, and OFD locks of two opens would exclude each
 * other, so two shares of one smbd process that name the same file share
 * this; each keeps a handle of its own (struct fastcase_cache).
 */
struct cache_file {
	struct cache_file *prev, *next;
	struct tdb_context *tdb;
	char *path;
	dev_t dev;
	ino_t ino;
	pid_t pid;	/* the opener: a forked child must not use it */
	unsigned refs;
	int lock_fd;
	struct fastcase_lock_wake_word *wake;	/* the lock file's first page */
	struct {
		uint32_t slot;
		unsigned depth;
	} held[DIR_LOCKS_HELD_MAX];
	size_t num_held;
};

struct fastcase_cache {
	struct cache_file *file;
	uint64_t max_bytes;	/* this share's "fastcase:cache size" */
};

/*
 * Maps the first page of the lock file, where lock waiters sleep
 * (fastcase_lock.c); without it (file->wake NULL) they poll.
 */
void fastcase_lock_file_map_wake_page(struct cache_file *file);
void fastcase_lock_file_unmap_wake_page(struct cache_file *file);

static inline TDB_DATA cache_string_key(const char *s)
{
	return (TDB_DATA) { .dptr = (uint8_t *)(uintptr_t)s,
			    .dsize = strlen(s) };
}

#endif /* _FASTCASE_CACHE_INTERNAL_H_ */
