/*
 * vfs_fastcase: file systems without usable directory times
 *
 * A process that cannot watch a directory trusts its records only while
 * the directory's mtime and ctime equal their stamp. A file system that
 * leaves a directory's times alone when its names change would make every
 * such process trust records that miss changes. The engine notices one
 * when a create it made left the times of a directory untouched, and
 * records its device here, in the cache file, for every process: on that
 * device stamps are never trusted. The mark goes with the cache file (a
 * wipe, a restart); the next create made there finds it again.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_TIMELESS_H_
#define _FASTCASE_TIMELESS_H_

#include <stdbool.h>
#include <stdint.h>
#include "fastcase_cache.h"

#define FASTCASE_TIMELESS_KEY "fastcase-timeless"

/* Returns 0 or an errno. */
int fastcase_cache_mark_timeless(struct fastcase_cache *cache, uint64_t dev);

bool fastcase_cache_is_timeless(struct fastcase_cache *cache, uint64_t dev);

#endif /* _FASTCASE_TIMELESS_H_ */
