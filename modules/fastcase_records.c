/*
 * vfs_fastcase: the cache's keys and records (layout: fastcase_records.h)
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
#include "fastcase_records.h"
#include "fastcase_usage.h"

#define KEY_TYPE_DIR 'D'
#define KEY_TYPE_ENTRY 'E'

static size_t dir_key_into(uint8_t *buf, char type,
			   const struct fastcase_scope *scope,
			   const struct fastcase_dir_id *id)
{
	size_t len = 0;

	buf[len++] = type;
	memcpy(buf + len, scope->tag, scope->tag_len + 1);
	len += scope->tag_len + 1;
	memcpy(buf + len, &id->dev, sizeof(id->dev));
	len += sizeof(id->dev);
	memcpy(buf + len, &id->ino, sizeof(id->ino));
	len += sizeof(id->ino);
	return len;
}

TDB_DATA fastcase_records_dir_key(uint8_t *buf,
				  const struct fastcase_scope *scope,
				  const struct fastcase_dir_id *id)
{
	size_t len = dir_key_into(buf, KEY_TYPE_DIR, scope, id);

	return (TDB_DATA) { .dptr = buf, .dsize = len };
}

uint32_t fastcase_records_key_hash(const char *key, size_t key_len)
{
	TDB_DATA k = { .dptr = discard_const_p(uint8_t, key),
		       .dsize = key_len };

	return tdb_jenkins_hash(&k);
}

uint32_t fastcase_records_bucket_of_hash(uint64_t gen, uint32_t key_hash)
{
	unsigned bits = gen & FASTCASE_GEN_BUCKET_BITS;

	return key_hash & ((1U << bits) - 1);
}

uint32_t fastcase_records_bucket_of(uint64_t gen, const char *key,
				    size_t key_len)
{
	return fastcase_records_bucket_of_hash(
		gen, fastcase_records_key_hash(key, key_len));
}

TDB_DATA fastcase_records_bucket_key(uint8_t *buf,
				     const struct fastcase_scope *scope,
				     const struct fastcase_dir_id *id,
				     uint64_t gen, uint32_t bucket)
{
	size_t len = dir_key_into(buf, KEY_TYPE_ENTRY, scope, id);

	memcpy(buf + len, &gen, sizeof(gen));
	len += sizeof(gen);
	memcpy(buf + len, &bucket, sizeof(bucket));
	len += sizeof(bucket);
	return (TDB_DATA) { .dptr = buf, .dsize = len };
}

TDB_DATA fastcase_records_entry_key(uint8_t *buf,
				    const struct fastcase_scope *scope,
				    const struct fastcase_dir_id *id,
				    uint64_t gen, const char *key,
				    size_t key_len)
{
	return fastcase_records_bucket_key(
		buf, scope, id, gen,
		fastcase_records_bucket_of(gen, key, key_len));
}

uint32_t fastcase_records_lock_slot(const struct fastcase_scope *scope,
				    const struct fastcase_dir_id *id)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	TDB_DATA key = fastcase_records_dir_key(buf, scope, id);

	return tdb_jenkins_hash(&key);
}

/*
 * Every lookup checks its whole bucket: memchr() from name to name rather
 * than a test of every byte.
 */
bool fastcase_records_names_well_formed(const uint8_t *p, size_t len)
{
	const uint8_t *end = p + len;

	if (len == 0 || p[len - 1] != '\0' ||
	    memchr(p, '/', len) != NULL) {
		return false;
	}
	while (p < end) {
		if (*p == '\0') {
			return false;	/* an empty name */
		}
		/* found: the last byte is a NUL */
		p = (const uint8_t *)memchr(p, '\0', end - p) + 1;
	}
	return true;
}

/* ---- directory records ------------------------------------------------ */

struct dir_parse_state {
	struct fastcase_dir_record *rec;
	bool ok;
};

static int dir_parser(TDB_DATA key, TDB_DATA data, void *private_data)
{
	struct dir_parse_state *state = private_data;

	if (data.dsize != sizeof(*state->rec)) {
		return 0;
	}
	memcpy(state->rec, data.dptr, sizeof(*state->rec));
	state->ok = (state->rec->magic == FASTCASE_DIR_MAGIC);
	return 0;
}

bool fastcase_cache_dir_get(struct fastcase_cache *cache,
			    const struct fastcase_scope *scope,
			    const struct fastcase_dir_id *id,
			    struct fastcase_dir_record *rec)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	TDB_DATA key = fastcase_records_dir_key(buf, scope, id);
	struct dir_parse_state state = { .rec = rec, .ok = false };

	if (tdb_parse_record(cache->file->tdb, key, dir_parser, &state) != 0) {
		return false;
	}
	return state.ok;
}

int fastcase_cache_dir_put(struct fastcase_cache *cache,
			   const struct fastcase_scope *scope,
			   const struct fastcase_dir_id *id,
			   const struct fastcase_dir_record *rec)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	TDB_DATA key = fastcase_records_dir_key(buf, scope, id);
	TDB_DATA val = { .dptr = discard_const_p(uint8_t, rec),
			 .dsize = sizeof(*rec) };

	return tdb_store(cache->file->tdb, key, val, TDB_REPLACE) == 0 ? 0 : EIO;
}

int fastcase_cache_dir_forget(struct fastcase_cache *cache,
			      const struct fastcase_scope *scope,
			      const struct fastcase_dir_id *id)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	TDB_DATA key = fastcase_records_dir_key(buf, scope, id);
	struct fastcase_dir_record untrusted = {
		.magic = FASTCASE_DIR_MAGIC,	/* flags 0: not usable */
	};

	if (tdb_delete(cache->file->tdb, key) == 0 ||
	    tdb_error(cache->file->tdb) == TDB_ERR_NOEXIST) {
		return 0;
	}
	/* a delete can fail where an overwrite in place still works */
	return fastcase_cache_dir_put(cache, scope, id, &untrusted);
}

/* ---- entries ----------------------------------------------------------- */

struct entry_parse_state {
	const struct fastcase_scope *scope;
	const char *key;
	size_t key_len;
	void (*fn)(const char *names, size_t names_len, void *private_data);
	void *private_data;
	int ret;
};

/* Pass on the names of the bucket whose key is the one asked for. */
static int entry_parser(TDB_DATA key, TDB_DATA data, void *private_data)
{
	struct entry_parse_state *state = private_data;
	char name_key[FASTCASE_KEY_MAX];
	size_t off = 0, len = 0, name_key_len;
	char *match = NULL;

	if (!fastcase_records_names_well_formed(data.dptr, data.dsize)) {
		state->ret = EINVAL;
		return 0;
	}
	match = malloc(data.dsize);
	if (match == NULL) {
		state->ret = ENOMEM;
		return 0;
	}
	while (off < data.dsize) {
		const char *name = (const char *)data.dptr + off;
		size_t n = strlen(name) + 1;

		off += n;
		if (fastcase_scope_disk_key(state->scope, name, name_key,
					    &name_key_len) != 0 ||
		    name_key_len != state->key_len ||
		    memcmp(name_key, state->key, name_key_len) != 0) {
			continue;
		}
		memcpy(match + len, name, n);
		len += n;
	}
	if (len > 0) {
		state->fn(match, len, state->private_data);
		state->ret = 0;
	}
	free(match);
	return 0;
}

int fastcase_cache_entry_parse(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id, uint64_t gen,
			       const char *key, size_t key_len,
			       void (*fn)(const char *names, size_t names_len,
					  void *private_data),
			       void *private_data)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	struct entry_parse_state state = {
		.scope = scope, .key = key, .key_len = key_len,
		.fn = fn, .private_data = private_data, .ret = ENOENT,
	};
	TDB_DATA k = fastcase_records_entry_key(buf, scope, id, gen, key,
						key_len);

	if (tdb_parse_record(cache->file->tdb, k, entry_parser, &state) != 0) {
		return ENOENT;
	}
	return state.ret;
}

static size_t names_count(const uint8_t *p, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		n += (p[i] == '\0');
	}
	return n;
}

/* Offset of name in a well-formed names list, or -1. */
static ssize_t names_find(const uint8_t *p, size_t len, const char *name)
{
	size_t off = 0;

	while (off < len) {
		size_t n = strnlen((const char *)p + off, len - off);

		if (strcmp((const char *)p + off, name) == 0) {
			return off;
		}
		off += n + 1;
	}
	return -1;
}

/* The bucket record of an on-disk name, and its current value. */
static int fetch_bucket(struct fastcase_cache *cache,
			const struct fastcase_scope *scope,
			const struct fastcase_dir_id *id, uint64_t gen,
			const char *name, uint8_t *buf, TDB_DATA *k,
			TDB_DATA *old)
{
	char key[FASTCASE_KEY_MAX];
	size_t key_len;
	int ret;

	ret = fastcase_scope_disk_key(scope, name, key, &key_len);
	if (ret != 0) {
		return ret;
	}
	*k = fastcase_records_entry_key(buf, scope, id, gen, key, key_len);
	*old = tdb_fetch(cache->file->tdb, *k);
	if (old->dptr != NULL &&
	    !fastcase_records_names_well_formed(old->dptr, old->dsize)) {
		free(old->dptr);
		old->dptr = NULL;
		return EINVAL;
	}
	return 0;
}

struct entry_has_state {
	const char *name;
	int has;
};

static int entry_has_parser(TDB_DATA key, TDB_DATA data, void *private_data)
{
	struct entry_has_state *state = private_data;

	if (!fastcase_records_names_well_formed(data.dptr, data.dsize)) {
		state->has = -1;
		return 0;
	}
	state->has = names_find(data.dptr, data.dsize, state->name) >= 0;
	return 0;
}

int fastcase_cache_entry_has(struct fastcase_cache *cache,
			     const struct fastcase_scope *scope,
			     const struct fastcase_dir_id *id, uint64_t gen,
			     const char *name)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	char key[FASTCASE_KEY_MAX];
	struct entry_has_state state = { .name = name, .has = 0 };
	size_t key_len;
	TDB_DATA k;

	if (fastcase_scope_disk_key(scope, name, key, &key_len) != 0) {
		return -1;
	}
	k = fastcase_records_entry_key(buf, scope, id, gen, key, key_len);
	if (tdb_parse_record(cache->file->tdb, k, entry_has_parser,
			     &state) != 0) {
		return tdb_error(cache->file->tdb) == TDB_ERR_NOEXIST ? 0 : -1;
	}
	return state.has;
}

int fastcase_cache_entry_add(struct fastcase_cache *cache,
			     const struct fastcase_scope *scope,
			     const struct fastcase_dir_id *id, uint64_t gen,
			     const char *name)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	size_t name_len = strlen(name) + 1;
	TDB_DATA k, old, val;
	int ret;

	ret = fetch_bucket(cache, scope, id, gen, name, buf, &k, &old);
	if (ret != 0) {
		return ret;
	}
	if (old.dptr != NULL && names_find(old.dptr, old.dsize, name) >= 0) {
		free(old.dptr);
		return 0;
	}
	if (old.dptr != NULL &&
	    names_count(old.dptr, old.dsize) >= FASTCASE_BUCKET_NAMES_MAX) {
		free(old.dptr);
		return EFBIG;
	}
	val.dsize = old.dsize + name_len;
	val.dptr = malloc(val.dsize);
	if (val.dptr == NULL) {
		free(old.dptr);
		return ENOMEM;
	}
	if (old.dptr != NULL) {
		memcpy(val.dptr, old.dptr, old.dsize);
	}
	memcpy(val.dptr + old.dsize, name, name_len);
	ret = tdb_store(cache->file->tdb, k, val, TDB_REPLACE);
	free(val.dptr);
	if (ret != 0) {
		free(old.dptr);
		return EIO;
	}
	fastcase_usage_add(cache, old.dptr == NULL ?
			   k.dsize + name_len + FASTCASE_RECORD_OVERHEAD :
			   name_len);
	free(old.dptr);
	return 0;
}

int fastcase_cache_entry_remove(struct fastcase_cache *cache,
				const struct fastcase_scope *scope,
				const struct fastcase_dir_id *id, uint64_t gen,
				const char *name)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	size_t name_len = strlen(name) + 1;
	TDB_DATA k, old;
	ssize_t off;
	int ret;

	ret = fetch_bucket(cache, scope, id, gen, name, buf, &k, &old);
	if (ret != 0 || old.dptr == NULL) {
		return ret;
	}
	off = names_find(old.dptr, old.dsize, name);
	if (off < 0) {
		free(old.dptr);
		return 0;
	}
	if (old.dsize == name_len) {
		free(old.dptr);
		return tdb_delete(cache->file->tdb, k) == 0 ? 0 : EIO;
	}
	memmove(old.dptr + off, old.dptr + off + name_len,
		old.dsize - off - name_len);
	old.dsize -= name_len;
	ret = tdb_store(cache->file->tdb, k, old, TDB_REPLACE);
	free(old.dptr);
	return ret == 0 ? 0 : EIO;
}
