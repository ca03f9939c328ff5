/*
 * vfs_fastcase: the cache file's size
 *
 * A usage counter in the file adds up the bytes every build and every
 * added name stored since the last trim; it is updated under its record's
 * chain lock, so concurrent processes never lose each other's additions.
 * The cache cannot drop one directory's entries without reading them all,
 * so a file over its limit is wiped whole: every process then finds its
 * directory records gone and rebuilds what it uses. A wrong answer is
 * never possible, only a rebuild.
 *
 * Shares that name one cache file share its limit: the largest
 * "fastcase:cache size" of any share that opened it (kept in the file), so
 * a share with a small limit never wipes the records of one with a large
 * limit. Each share's own limit still bounds its directories (a directory
 * may take at most half of it).
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_USAGE_H_
#define _FASTCASE_USAGE_H_

#include <stdint.h>
#include "fastcase_cache.h"

/* Rough bytes a record costs beyond its key and value: TDB's header. */
#define FASTCASE_RECORD_OVERHEAD 32

void fastcase_usage_add(struct fastcase_cache *cache, uint64_t bytes);
uint64_t fastcase_usage_get(struct fastcase_cache *cache);

/* Raise the file's limit to this handle's, if larger. */
int fastcase_usage_claim_limit(struct fastcase_cache *cache);
uint64_t fastcase_usage_limit(struct fastcase_cache *cache);

/* Wipe every record when usage is over the file's limit. Does nothing
 * while this process holds a directory's lock, or when another process
 * keeps a directory locked for longer than FASTCASE_TRIM_WAIT_MS. */
void fastcase_cache_trim(struct fastcase_cache *cache);

#endif /* _FASTCASE_USAGE_H_ */
