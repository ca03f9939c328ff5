/*
 * vfs_fastcase: the cache file's size (see fastcase_usage.h)
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
#include "lib/util/debug.h"
#include "fastcase_cache_internal.h"
#include "fastcase_lock.h"
#include "fastcase_usage.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

static uint64_t read_u64(struct tdb_context *tdb, const char *name)
{
	TDB_DATA v = tdb_fetch(tdb, cache_string_key(name));
	uint64_t value = 0;

	if (v.dptr != NULL && v.dsize == sizeof(value)) {
		memcpy(&value, v.dptr, sizeof(value));
	}
	free(v.dptr);
	return value;
}

static int write_u64(struct tdb_context *tdb, const char *name,
		     uint64_t value)
{
	TDB_DATA v = { .dptr = (uint8_t *)&value, .dsize = sizeof(value) };

	return tdb_store(tdb, cache_string_key(name), v, TDB_REPLACE) == 0 ?
		0 : EIO;
}

/* Read, change and write one counter record as one step. */
static int update_u64(struct tdb_context *tdb, const char *name,
		      uint64_t (*change)(uint64_t old, uint64_t arg),
		      uint64_t arg)
{
	TDB_DATA key = cache_string_key(name);
	int ret;

	if (tdb_chainlock(tdb, key) != 0) {
		return EIO;
	}
	ret = write_u64(tdb, name, change(read_u64(tdb, name), arg));
	tdb_chainunlock(tdb, key);
	return ret;
}

static uint64_t plus(uint64_t old, uint64_t arg)
{
	return old + arg;
}

static uint64_t max_of(uint64_t old, uint64_t arg)
{
	return MAX(old, arg);
}

void fastcase_usage_add(struct fastcase_cache *cache, uint64_t bytes)
{
	if (bytes > 0) {
		update_u64(cache->file->tdb, KEY_USAGE, plus, bytes);
	}
}

uint64_t fastcase_usage_get(struct fastcase_cache *cache)
{
	return read_u64(cache->file->tdb, KEY_USAGE);
}

int fastcase_usage_claim_limit(struct fastcase_cache *cache)
{
	return update_u64(cache->file->tdb, KEY_LIMIT, max_of,
			  cache->max_bytes);
}

uint64_t fastcase_usage_limit(struct fastcase_cache *cache)
{
	uint64_t limit = read_u64(cache->file->tdb, KEY_LIMIT);

	/* a file wiped by an older build, or a record lost: our own */
	return limit != 0 ? limit : cache->max_bytes;
}

/* The records that survive a wipe: the format and the limit. */
static int wipe(struct cache_file *file, uint64_t limit)
{
	uint32_t format = FASTCASE_CACHE_FORMAT;
	TDB_DATA hdr = { .dptr = (uint8_t *)&format,
			 .dsize = sizeof(format) };

	if (tdb_wipe_all(file->tdb) != 0 ||
	    tdb_store(file->tdb, cache_string_key(KEY_HEADER), hdr,
		      TDB_REPLACE) != 0) {
		return EIO;
	}
	return write_u64(file->tdb, KEY_LIMIT, limit);
}

void fastcase_cache_trim(struct fastcase_cache *cache)
{
	uint64_t limit = fastcase_usage_limit(cache);
	uint64_t usage = fastcase_usage_get(cache);

	if (usage <= limit || fastcase_cache_holds_locks(cache)) {
		return;
	}
	/* every directory's lock: no build or change is half done */
	if (fastcase_cache_lock_all(cache, FASTCASE_TRIM_WAIT_MS) != 0) {
		DBG_INFO("cache %s: over its limit, but directories are "
			 "locked; trimming later\n", cache->file->path);
		return;
	}
	usage = fastcase_usage_get(cache);
	if (usage > limit) {
		DBG_NOTICE("cache %s holds ~%" PRIu64 " bytes, limit %" PRIu64
			   ": dropping every record\n",
			   cache->file->path, usage, limit);
		if (wipe(cache->file, limit) != 0) {
			DBG_WARNING("cache %s: wipe failed: %s\n",
				    cache->file->path,
				    tdb_errorstr(cache->file->tdb));
		}
	}
	fastcase_cache_unlock_all(cache);
}
