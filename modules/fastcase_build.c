/*
 * vfs_fastcase: reading a directory into the cache (see fastcase_build.h)
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
#include "system/time.h"
#include "lib/util/talloc_stack.h"
#include "fastcase_build.h"
#include "fastcase_cache_internal.h"
#include "fastcase_dirread.h"
#include "fastcase_usage.h"

#include <sys/random.h>

#define BUCKET_BITS_MAX 24

/* splitmix64's finaliser: spreads a weak seed over all 64 bits */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t random_u64(void)
{
	struct timespec ts;
	uint64_t r = 0;
	int tries;

	for (tries = 0; tries < 4; tries++) {
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == sizeof(r)) {
			return r;
		}
		if (errno != EINTR) {
			break;
		}
	}
	/*
	 * No entropy yet (early boot): a generation only has to differ from
	 * the directory's earlier ones, which the clock and pid make sure of.
	 */
	clock_gettime(CLOCK_REALTIME, &ts);
	return mix64((uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec) ^
		mix64((uint64_t)getpid() << 32 | (uint64_t)(uintptr_t)&ts);
}

uint64_t fastcase_new_generation(size_t names)
{
	uint64_t high = ~(uint64_t)FASTCASE_GEN_BUCKET_BITS;
	unsigned bits = 0;
	uint64_t gen;

	while (bits < BUCKET_BITS_MAX &&
	       ((size_t)FASTCASE_NAMES_PER_BUCKET << bits) < names) {
		bits++;
	}
	gen = random_u64() & high;
	if (gen == 0) {
		gen = high & 0x100;
	}
	return gen | bits;
}

struct build_name {
	uint32_t hash;		/* of the folded key */
	uint16_t len;		/* with the NUL */
	size_t offset;		/* in build_state.names */
};

struct build_state {
	char *names;		/* every name, NUL-terminated */
	size_t names_len;
	struct build_name *list;
	size_t count;
};

static int build_add(struct build_state *b, const char *name,
		     uint32_t hash)
{
	size_t len = strlen(name) + 1;

	if (b->names_len + len > talloc_get_size(b->names)) {
		size_t size = MAX(2 * talloc_get_size(b->names), 65536);
		char *names = talloc_realloc(NULL, b->names, char, size);

		if (names == NULL) {
			return ENOMEM;
		}
		b->names = names;
	}
	if (b->count == talloc_array_length(b->list)) {
		size_t n = MAX(2 * b->count, 4096);
		struct build_name *list = talloc_realloc(
			NULL, b->list, struct build_name, n);

		if (list == NULL) {
			return ENOMEM;
		}
		b->list = list;
	}
	memcpy(b->names + b->names_len, name, len);
	b->list[b->count++] = (struct build_name) {
		.offset = b->names_len, .len = len, .hash = hash,
	};
	b->names_len += len;
	return 0;
}

/*
 * Read every name into b. EFBIG: more than budget bytes of records;
 * ENAMETOOLONG: a name that cannot be keyed, so no miss could be
 * authoritative; another errno: the directory could not be read.
 */
static int read_names(const struct fastcase_scope *scope, int dirfd,
		      uint64_t budget, struct build_state *b)
{
	TALLOC_CTX *frame = talloc_stackframe();
	struct fastcase_dirread *dr = NULL;
	char key[FASTCASE_KEY_MAX];
	const char *name = NULL;
	size_t key_len;
	int ret;

	ret = fastcase_dirread_open(frame, dirfd, &dr);
	while (ret == 0 &&
	       (ret = fastcase_dirread_next(dr, &name)) == 0 &&
	       name != NULL) {
		if (fastcase_scope_disk_key(scope, name, key,
					    &key_len) != 0) {
			ret = ENAMETOOLONG;
			break;
		}
		ret = build_add(b, name,
				fastcase_records_key_hash(key, key_len));
		/* the bytes it will take, had every name a record of its
		 * own share of the buckets */
		if (ret == 0 &&
		    b->names_len + b->count *
		    (FASTCASE_RECORD_OVERHEAD + FASTCASE_RECORD_KEY_MAX) /
		    FASTCASE_NAMES_PER_BUCKET > budget) {
			ret = EFBIG;
		}
	}
	TALLOC_FREE(frame);
	return ret;
}

/* A counting sort by bucket: order[] lists b's names bucket by bucket,
 * start[k] becomes the end of bucket k's names in it. */
static int sort_by_bucket(const struct build_state *b, uint64_t gen,
			  uint32_t *start, uint32_t *order)
{
	uint32_t nbuckets = 1U << (gen & FASTCASE_GEN_BUCKET_BITS);
	uint32_t bucket;
	size_t i;

	for (i = 0; i < b->count; i++) {
		start[fastcase_records_bucket_of_hash(
			gen, b->list[i].hash) + 1]++;
	}
	for (bucket = 0; bucket < nbuckets; bucket++) {
		if (start[bucket + 1] > FASTCASE_BUCKET_NAMES_MAX) {
			/* only very many names of one key get here */
			return EFBIG;
		}
		start[bucket + 1] += start[bucket];
	}
	for (i = 0; i < b->count; i++) {
		/* start[] moves up by one bucket as names are placed */
		bucket = fastcase_records_bucket_of_hash(gen,
							 b->list[i].hash);
		order[start[bucket]++] = i;
	}
	return 0;
}

static int store_buckets(struct fastcase_cache *cache,
			 const struct fastcase_scope *scope,
			 const struct fastcase_dir_id *id, uint64_t gen,
			 const struct build_state *b, const uint32_t *start,
			 const uint32_t *order, char *val, size_t *stored)
{
	uint32_t nbuckets = 1U << (gen & FASTCASE_GEN_BUCKET_BITS);
	uint8_t kbuf[FASTCASE_RECORD_KEY_MAX];
	uint32_t bucket;
	size_t i = 0;

	for (bucket = 0; bucket < nbuckets; bucket++) {
		size_t val_len = 0;
		TDB_DATA k, v;

		if (i == start[bucket]) {
			continue;
		}
		for (; i < start[bucket]; i++) {
			const struct build_name *n = &b->list[order[i]];

			memcpy(val + val_len, b->names + n->offset, n->len);
			val_len += n->len;
		}
		k = fastcase_records_bucket_key(kbuf, scope, id, gen, bucket);
		v = (TDB_DATA) { .dptr = (uint8_t *)val, .dsize = val_len };
		if (tdb_store(cache->file->tdb, k, v, TDB_INSERT) != 0) {
			return EIO;
		}
		*stored += k.dsize + v.dsize + FASTCASE_RECORD_OVERHEAD;
	}
	return 0;
}

/* Store b's names, grouped by bucket; *stored: the bytes it took. */
static int build_store(struct fastcase_cache *cache,
		       const struct fastcase_scope *scope,
		       const struct fastcase_dir_id *id, uint64_t gen,
		       const struct build_state *b, size_t *stored)
{
	uint32_t nbuckets = 1U << (gen & FASTCASE_GEN_BUCKET_BITS);
	uint32_t *start = NULL;
	uint32_t *order = NULL;
	char *val = NULL;
	int ret;

	start = talloc_zero_array(NULL, uint32_t, nbuckets + 1);
	order = talloc_array(start, uint32_t, MAX(b->count, 1));
	val = talloc_size(start, FASTCASE_BUCKET_NAMES_MAX * (NAME_MAX + 1));
	if (start == NULL || order == NULL || val == NULL) {
		TALLOC_FREE(start);
		return ENOMEM;
	}
	ret = sort_by_bucket(b, gen, start, order);
	if (ret == 0) {
		ret = store_buckets(cache, scope, id, gen, b, start, order,
				    val, stored);
	}
	TALLOC_FREE(start);
	return ret;
}

int fastcase_cache_build(struct fastcase_cache *cache,
			 const struct fastcase_scope *scope,
			 const struct fastcase_dir_id *id, int dirfd,
			 const struct stat *st, int64_t stamp_time_ns,
			 struct fastcase_dir_record *rec)
{
	/* A directory may take at most half of its share's cache. */
	uint64_t budget = cache->max_bytes / 2;
	struct build_state b = { .names = NULL };
	size_t stored = 0;
	int ret;

	*rec = (struct fastcase_dir_record) {
		.magic = FASTCASE_DIR_MAGIC,
		.mtime_ns = st->st_mtim.tv_sec * 1000000000LL +
			st->st_mtim.tv_nsec,
		.ctime_ns = st->st_ctim.tv_sec * 1000000000LL +
			st->st_ctim.tv_nsec,
		.stamp_time_ns = stamp_time_ns,
	};
	ret = read_names(scope, dirfd, budget, &b);
	rec->gen = fastcase_new_generation(ret == 0 ? b.count : 0);
	if (ret == 0) {
		ret = build_store(cache, scope, id, rec->gen, &b, &stored);
	}
	rec->entries = b.count;
	rec->bytes = stored;
	TALLOC_FREE(b.names);
	TALLOC_FREE(b.list);
	fastcase_usage_add(cache, stored);
	if (ret == EFBIG || ret == ENAMETOOLONG) {
		rec->flags = FASTCASE_DIR_TOO_BIG;
	} else if (ret != 0) {
		return ret;
	} else {
		rec->flags = FASTCASE_DIR_COMPLETE;
	}
	return fastcase_cache_dir_put(cache, scope, id, rec);
}
