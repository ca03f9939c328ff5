/*
 * vfs_fastcase: reading a directory into the cache
 *
 * A build reads the directory once and stores every name under a fresh
 * generation, grouped in buckets by a hash of their keys: one TDB record
 * per bucket rather than per name, so a name costs little more than its
 * bytes and a build stores a few thousand records, not a hundred
 * thousand. A build picks a power of two buckets for about
 * FASTCASE_NAMES_PER_BUCKET names each and records it in the low bits of
 * the generation. A bucket that grows past FASTCASE_BUCKET_NAMES_MAX (the
 * directory grew many times over) refuses the name; the caller then drops
 * the records and the next lookup builds them anew with more buckets.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_BUILD_H_
#define _FASTCASE_BUILD_H_

#include <stdint.h>
#include <sys/stat.h>
#include "fastcase_cache.h"
#include "fastcase_records.h"

/*
 * Read the directory open as dirfd and store every name under a new
 * generation. st is the directory's stat taken before the read: it
 * becomes the record's stamp. Caller holds the lock. rec is filled with
 * what was stored (possibly FASTCASE_DIR_TOO_BIG: larger than half the
 * share's cache size, or a name that cannot be keyed). An errno when the
 * directory cannot be read or the file refuses the records: nothing is
 * then stored that anyone would trust.
 */
int fastcase_cache_build(struct fastcase_cache *cache,
			 const struct fastcase_scope *scope,
			 const struct fastcase_dir_id *id, int dirfd,
			 const struct stat *st, int64_t stamp_time_ns,
			 struct fastcase_dir_record *rec);

/* A fresh generation for about names names; never 0 above the bits. */
uint64_t fastcase_new_generation(size_t names);

#endif /* _FASTCASE_BUILD_H_ */
