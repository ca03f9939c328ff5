/*
 * vfs_fastcase: per-share counters in the cache file
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
#include "fastcase_cache_internal.h"
#include "fastcase_counters.h"

int fastcase_cache_add_counters(struct fastcase_cache *cache,
				const char *share, const uint64_t *delta,
				size_t n)
{
	size_t klen = sizeof(FASTCASE_STATS_KEY) + strlen(share) + 1;
	uint8_t kbuf[klen];
	uint64_t sum[n];
	TDB_DATA key = { .dptr = kbuf, .dsize = klen };
	TDB_DATA val = { .dptr = (uint8_t *)sum, .dsize = sizeof(sum) };
	TDB_DATA old;
	size_t i;
	int ret;

	memcpy(kbuf, FASTCASE_STATS_KEY, sizeof(FASTCASE_STATS_KEY));
	memcpy(kbuf + sizeof(FASTCASE_STATS_KEY), share, strlen(share) + 1);

	if (tdb_chainlock(cache->file->tdb, key) != 0) {
		return EIO;
	}
	memset(sum, 0, sizeof(sum));
	old = tdb_fetch(cache->file->tdb, key);
	/* a record of another length is from a build with other counters */
	if (old.dptr != NULL && old.dsize == sizeof(sum)) {
		memcpy(sum, old.dptr, sizeof(sum));
	}
	free(old.dptr);
	for (i = 0; i < n; i++) {
		sum[i] += delta[i];
	}
	ret = tdb_store(cache->file->tdb, key, val, TDB_REPLACE);
	tdb_chainunlock(cache->file->tdb, key);
	return ret == 0 ? 0 : EIO;
}
