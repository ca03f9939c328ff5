/*
 * vfs_fastcase: the shared name cache
 *
 * One TDB shared by every smbd process on the host, and a lock file beside
 * it. This unit opens them (one open per process, shared by its shares)
 * and names a share's records (its scope). The records themselves:
 * fastcase_records.h; directory locks: fastcase_lock.h; builds:
 * fastcase_build.h; size: fastcase_usage.h; counters:
 * fastcase_counters.h.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_CACHE_H_
#define _FASTCASE_CACHE_H_

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <talloc.h>
#include "fastcase_fold.h"

/* Version of the record layout, kept in the file's header record. */
#define FASTCASE_CACHE_FORMAT 2

/*
 * Chains of about 8 records at a million names (125,000 buckets): a walk
 * of a few hundred nanoseconds once a process has the pages mapped, while
 * each chain's header (a robust mutex with TDB_MUTEX_LOCKING) costs the
 * file about 40 bytes up front. A larger hash does not make a new
 * process's first lookups cheaper: see "Where the time goes" in
 * docs/DESIGN.md.
 */
#define FASTCASE_CACHE_HASH_SIZE 16381

struct fastcase_dir_id {
	uint64_t dev;
	uint64_t ino;
};

struct fastcase_cache;

/* Scope of one share's records: the rules and their tag. */
struct fastcase_scope {
	struct fastcase_fold_rules rules;
	struct fastcase_legacy *legacy;	/* NULL: no legacy charset */
	char tag[64];
	size_t tag_len;
};

void fastcase_scope_init(struct fastcase_scope *scope,
			 const struct fastcase_fold_rules *rules);

/* Key on-disk names that are not UTF-8 by their legacy decoding. */
void fastcase_scope_set_legacy(struct fastcase_scope *scope,
			       struct fastcase_legacy *legacy);

/* The key of an on-disk name under the scope's rules. */
int fastcase_scope_disk_key(const struct fastcase_scope *scope,
			    const char *name, char *key, size_t *key_len);

/*
 * Open (or create) the cache file, and its lock file path + ".lock" (an
 * empty file; directory locks are byte-range locks on it). A file that
 * cannot be opened, is corrupt or has another format is never trusted:
 * the caller goes on uncached. Returns 0 or an errno.
 */
int fastcase_cache_open(TALLOC_CTX *mem_ctx, const char *path,
			uint64_t max_bytes, struct fastcase_cache **pcache);

/*
 * The same, creating a new file with hash_size chains (0: the default).
 * Tests use 1 chain to make every record share one.
 */
int fastcase_cache_open_hashed(TALLOC_CTX *mem_ctx, const char *path,
			       uint64_t max_bytes, unsigned hash_size,
			       struct fastcase_cache **pcache);

/* Bytes the cache file takes now. */
uint64_t fastcase_cache_file_size(struct fastcase_cache *cache);

const char *fastcase_cache_path(struct fastcase_cache *cache);

/* The open TDB, for tests that write records as a corrupt file would. */
struct tdb_context *fastcase_cache_tdb(struct fastcase_cache *cache);

#endif /* _FASTCASE_CACHE_H_ */
