/*
 * vfs_fastcase: the cache's keys and records
 *
 * Per directory, named by (st_dev, st_ino) and the scope's tag:
 *
 *   'D' tag NUL dev ino                -> struct fastcase_dir_record
 *   'E' tag NUL dev ino gen bucket     -> the on-disk names whose keys
 *                                         hash to bucket, each
 *                                         NUL-terminated
 *
 * The low GEN_BUCKET_BITS of a generation are log2 of its bucket count.
 * Entries of a generation other than the directory record's are never
 * read again. Everything that builds a key, tests and fuzzers included,
 * goes through the functions below: the layout is written only here.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_RECORDS_H_
#define _FASTCASE_RECORDS_H_

#include <stdbool.h>
#include <stdint.h>
#include <tdb.h>
#include "fastcase_cache.h"

#define FASTCASE_DIR_MAGIC 0x46434431 /* "FCD1" */

enum fastcase_dir_flags {
	FASTCASE_DIR_COMPLETE = 0x1,	/* every name is in the cache */
	FASTCASE_DIR_TOO_BIG = 0x2,	/* larger than the cache allows */
	/* built by a process watching the directory, which applied every
	 * change that completed before it unlocked */
	FASTCASE_DIR_WATCHED = 0x4,
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

/*
 * Names per bucket a build aims at, and the most a bucket may hold. A
 * TDB store costs mostly the same whatever its size, so fewer, larger
 * buckets make a cold build cheaper; a lookup pays for folding the
 * names of its bucket (docs/DESIGN.md, "cold build").
 */
#define FASTCASE_NAMES_PER_BUCKET 16
#define FASTCASE_BUCKET_NAMES_MAX 256
#define FASTCASE_GEN_BUCKET_BITS 0x1f

/* Room for any key below. */
#define FASTCASE_RECORD_KEY_MAX (2 + 64 + 24 + sizeof(uint32_t))

TDB_DATA fastcase_records_dir_key(uint8_t *buf,
				  const struct fastcase_scope *scope,
				  const struct fastcase_dir_id *id);
uint32_t fastcase_records_bucket_of(uint64_t gen, const char *key,
				    size_t key_len);
/* The same in two steps: the hash does not depend on the generation, so
 * a build hashes each name's key once, before it knows the count. */
uint32_t fastcase_records_key_hash(const char *key, size_t key_len);
uint32_t fastcase_records_bucket_of_hash(uint64_t gen, uint32_t key_hash);
TDB_DATA fastcase_records_bucket_key(uint8_t *buf,
				     const struct fastcase_scope *scope,
				     const struct fastcase_dir_id *id,
				     uint64_t gen, uint32_t bucket);
/* The record of the bucket that holds the names with this folded key. */
TDB_DATA fastcase_records_entry_key(uint8_t *buf,
				    const struct fastcase_scope *scope,
				    const struct fastcase_dir_id *id,
				    uint64_t gen, const char *key,
				    size_t key_len);
/* The byte of the lock file that is this directory's lock. */
uint32_t fastcase_records_lock_slot(const struct fastcase_scope *scope,
				    const struct fastcase_dir_id *id);

/* A bucket's value: one or more non-empty names without '/', each
 * NUL-terminated. Anything else is malformed and never trusted. */
bool fastcase_records_names_well_formed(const uint8_t *p, size_t len);

/* Returns true and fills rec when a well-formed record exists. */
bool fastcase_cache_dir_get(struct fastcase_cache *cache,
			    const struct fastcase_scope *scope,
			    const struct fastcase_dir_id *id,
			    struct fastcase_dir_record *rec);
int fastcase_cache_dir_put(struct fastcase_cache *cache,
			   const struct fastcase_scope *scope,
			   const struct fastcase_dir_id *id,
			   const struct fastcase_dir_record *rec);
/*
 * Make sure nobody trusts the directory's records again: delete the
 * record, else overwrite it with one that is neither complete nor too
 * big. Returns 0, or EIO when the file took neither. Caller holds the
 * directory's lock.
 */
int fastcase_cache_dir_forget(struct fastcase_cache *cache,
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

/*
 * Add or remove one on-disk name; idempotent. Caller holds the lock.
 * EINVAL: the bucket is malformed and was left alone (the caller must
 * forget the directory: the records may be short of names); EFBIG: the
 * bucket is full; EIO: the file refused the write.
 */
int fastcase_cache_entry_add(struct fastcase_cache *cache,
			     const struct fastcase_scope *scope,
			     const struct fastcase_dir_id *id, uint64_t gen,
			     const char *name);
int fastcase_cache_entry_remove(struct fastcase_cache *cache,
				const struct fastcase_scope *scope,
				const struct fastcase_dir_id *id, uint64_t gen,
				const char *name);

#endif /* _FASTCASE_RECORDS_H_ */
