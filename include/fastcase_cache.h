/*
 * vfs_fastcase: the shared name cache
 *
 * One TDB shared by every smbd process on the host. Per directory, named
 * by (st_dev, st_ino) and the fold rules' tag:
 *
 *   "D" tag dev ino           -> struct fastcase_dir_record
 *   "E" tag dev ino gen key   -> the on-disk names with that key,
 *                                each NUL-terminated
 *
 * A directory's entries are written by one read of the directory (a
 * build) under a fresh random generation number, so records of an older
 * build are never read again; they are dropped with the whole file when it
 * outgrows its size limit.
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

#define FASTCASE_DIR_MAGIC 0x46434431 /* "FCD1" */

enum fastcase_dir_flags {
	FASTCASE_DIR_COMPLETE = 0x1,	/* every name is in the cache */
	FASTCASE_DIR_TOO_BIG = 0x2,	/* larger than the cache allows */
	/* built by a process watching the directory, which applied every
	 * change that completed before it unlocked */
	FASTCASE_DIR_WATCHED = 0x4,
};

struct fastcase_dir_id {
	uint64_t dev;
	uint64_t ino;
};

struct fastcase_dir_record {
	uint32_t magic;
	uint32_t flags;
	uint64_t gen;
	/* The directory's times when the entries were last known exact. */
	int64_t mtime_ns;
	int64_t ctime_ns;
	/* CLOCK_REALTIME when those times were read, for the racy rule. */
	int64_t stamp_time_ns;
	uint64_t entries;
	uint64_t bytes;
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
 * Serialises every change to one directory's records across processes;
 * nests. A process holding one directory's lock is not made to wait for
 * another's: that returns EWOULDBLOCK (two such waits could deadlock).
 */
int fastcase_cache_dir_lock(struct fastcase_cache *cache,
			    const struct fastcase_scope *scope,
			    const struct fastcase_dir_id *id);
void fastcase_cache_dir_unlock(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id);

/* Returns true and fills rec when a well-formed record exists. */
bool fastcase_cache_dir_get(struct fastcase_cache *cache,
			    const struct fastcase_scope *scope,
			    const struct fastcase_dir_id *id,
			    struct fastcase_dir_record *rec);
int fastcase_cache_dir_put(struct fastcase_cache *cache,
			   const struct fastcase_scope *scope,
			   const struct fastcase_dir_id *id,
			   const struct fastcase_dir_record *rec);
void fastcase_cache_dir_forget(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id);

/*
 * Call fn with the names stored under key (a NUL-separated list of
 * names_len bytes). Returns 0, ENOENT when there are none, EINVAL for a
 * malformed record.
 */
int fastcase_cache_entry_parse(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id, uint64_t gen,
			       const char *key, size_t key_len,
			       void (*fn)(const char *names, size_t names_len,
					  void *private_data),
			       void *private_data);

/* Whether an on-disk name is in the records: 1, 0, or -1 (cannot say). */
int fastcase_cache_entry_has(struct fastcase_cache *cache,
			     const struct fastcase_scope *scope,
			     const struct fastcase_dir_id *id, uint64_t gen,
			     const char *name);

/* Add or remove one on-disk name; idempotent. Caller holds the lock. */
int fastcase_cache_entry_add(struct fastcase_cache *cache,
			     const struct fastcase_scope *scope,
			     const struct fastcase_dir_id *id, uint64_t gen,
			     const char *name);
int fastcase_cache_entry_remove(struct fastcase_cache *cache,
				const struct fastcase_scope *scope,
				const struct fastcase_dir_id *id, uint64_t gen,
				const char *name);

/*
 * Read the directory open as dirfd once and store every name under a new
 * generation. st is the directory's stat taken before the read: it
 * becomes the record's stamp. Caller holds the lock. rec is filled with
 * what was stored (possibly FASTCASE_DIR_TOO_BIG).
 */
int fastcase_cache_build(struct fastcase_cache *cache,
			 const struct fastcase_scope *scope,
			 const struct fastcase_dir_id *id, int dirfd,
			 const struct stat *st, int64_t stamp_time_ns,
			 struct fastcase_dir_record *rec);

/* Drop every record when the cache is over its size limit. Does nothing
 * while this process holds a directory's lock. */
void fastcase_cache_trim(struct fastcase_cache *cache);

/* Bytes the cache file takes now. */
uint64_t fastcase_cache_file_size(struct fastcase_cache *cache);

const char *fastcase_cache_path(struct fastcase_cache *cache);

/* The open TDB, for tests that write records as a corrupt file would. */
struct tdb_context *fastcase_cache_tdb(struct fastcase_cache *cache);

/*
 * Per-share counters, kept as an array of n uint64_t under
 * "fastcase-stats" NUL share. add_counters adds delta under a lock.
 */
#define FASTCASE_STATS_KEY "fastcase-stats"
int fastcase_cache_add_counters(struct fastcase_cache *cache,
				const char *share, const uint64_t *delta,
				size_t n);

#endif /* _FASTCASE_CACHE_H_ */
