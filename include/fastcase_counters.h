/*
 * vfs_fastcase: per-share counters in the cache file
 *
 * Kept as an array of uint64_t under "fastcase-stats" NUL share, added to
 * by every process (fastcase_engine_flush_stats()) and read by
 * fastcase-stat.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_COUNTERS_H_
#define _FASTCASE_COUNTERS_H_

#include <stddef.h>
#include <stdint.h>
#include "fastcase_cache.h"

#define FASTCASE_STATS_KEY "fastcase-stats"

/* Add delta[0..n) to the share's counters as one step. */
int fastcase_cache_add_counters(struct fastcase_cache *cache,
				const char *share, const uint64_t *delta,
				size_t n);

#endif /* _FASTCASE_COUNTERS_H_ */
