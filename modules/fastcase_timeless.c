/*
 * vfs_fastcase: file systems without usable directory times
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
#include "fastcase_timeless.h"

static TDB_DATA timeless_key(uint8_t *buf, uint64_t dev)
{
	memcpy(buf, FASTCASE_TIMELESS_KEY, sizeof(FASTCASE_TIMELESS_KEY));
	memcpy(buf + sizeof(FASTCASE_TIMELESS_KEY), &dev, sizeof(dev));
	return (TDB_DATA) {
		.dptr = buf,
		.dsize = sizeof(FASTCASE_TIMELESS_KEY) + sizeof(dev),
	};
}

int fastcase_cache_mark_timeless(struct fastcase_cache *cache, uint64_t dev)
{
	uint8_t buf[sizeof(FASTCASE_TIMELESS_KEY) + sizeof(dev)];
	uint8_t one = 1;
	TDB_DATA val = { .dptr = &one, .dsize = sizeof(one) };

	if (tdb_store(cache->file->tdb, timeless_key(buf, dev), val,
		      TDB_REPLACE) != 0) {
		return EIO;
	}
	return 0;
}

bool fastcase_cache_is_timeless(struct fastcase_cache *cache, uint64_t dev)
{
	uint8_t buf[sizeof(FASTCASE_TIMELESS_KEY) + sizeof(dev)];

	return tdb_exists(cache->file->tdb, timeless_key(buf, dev)) == 1;
}
