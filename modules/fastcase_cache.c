/*
 * vfs_fastcase: the shared name cache
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
#include "lib/util/dlinklist.h"
#include "fastcase_cache.h"

#include <dirent.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <tdb.h>

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/*
 * Chains of about 8 records at a million names (125,000 buckets): a walk
 * of a few hundred nanoseconds once a process has the pages mapped, while
 * each chain's header (a robust mutex with TDB_MUTEX_LOCKING) costs the
 * file about 40 bytes up front. A larger hash does not make a new
 * process's first lookups cheaper: see "Where the time goes" in
 * docs/DESIGN.md.
 */
#define FASTCASE_CACHE_HASH_SIZE 16381

/*
 * A directory's names are stored in buckets, by a hash of their keys: one
 * TDB record per bucket rather than per name, so a name costs little more
 * than its bytes and a build stores a few thousand records, not a hundred
 * thousand. A build picks a power of two buckets for about
 * NAMES_PER_BUCKET names each, and records it in the low bits of the
 * generation, which every reader of the records already has. A bucket
 * that grows past BUCKET_NAMES_MAX (the directory grew many times over)
 * refuses the name; the caller then drops the records and the next lookup
 * builds them anew with more buckets.
 */
#define NAMES_PER_BUCKET 8
#define BUCKET_NAMES_MAX 256
#define GEN_BUCKET_BITS 0x1f
#define BUCKET_BITS_MAX 24

/* The layout of every key: a type byte, the scope tag, then the ids. */
#define KEY_TYPE_DIR 'D'
#define KEY_TYPE_ENTRY 'E'
#define KEY_HEADER "fastcase-format"
#define KEY_USAGE "fastcase-usage"

#define KEY_BUF (2 + 64 + 24 + sizeof(uint32_t))

/* Rough bytes a record costs beyond its key and value: TDB's header. */
#define RECORD_OVERHEAD 32

/*
 * Directory locks are OFD locks on single bytes of a lock file beside the
 * cache file ("<cache file>.lock", always empty), one byte per hash of the
 * directory's key. They are not TDB chain locks: the holder of a
 * directory's lock reads and writes records, which takes chain locks, and
 * the chain of one of its entries may be the chain of another directory's
 * key, so with chain locks two processes in two directories could each
 * wait for a chain the other holds. Nor are they locks on the TDB file
 * itself, whose every byte beyond the hash chains TDB's all-record lock
 * covers. OFD locks do not nest; the nesting is counted here.
 *
 * A process that holds a directory's lock never waits for another's: it
 * gets EWOULDBLOCK instead. Otherwise two processes, each holding one
 * directory and applying a queued event of the other's, would wait for
 * each other forever (robust mutexes and OFD locks detect no deadlock).
 */
#define DIR_LOCK_SPAN ((off_t)1 << 32)
#define DIR_LOCKS_HELD_MAX 8

/*
 * One open of the cache file per process. TDB refuses a second open of a
 * file in one process, and OFD locks of two opens would exclude each
 * other, so two shares of one smbd process that name the same file share
 * this; each keeps a handle of its own.
 */
struct cache_file {
	struct cache_file *prev, *next;
	struct tdb_context *tdb;
	char *path;
	dev_t dev;
	ino_t ino;
	pid_t pid;
	unsigned refs;
	int lock_fd;
	struct {
		uint32_t slot;
		unsigned depth;
	} held[DIR_LOCKS_HELD_MAX];
	size_t num_held;
};

struct fastcase_cache {
	struct cache_file *file;
	uint64_t max_bytes;
};

static struct cache_file *open_files;

void fastcase_scope_init(struct fastcase_scope *scope,
			 const struct fastcase_fold_rules *rules)
{
	scope->rules = *rules;
	scope->legacy = NULL;
	fastcase_fold_rules_tag(rules, scope->tag, sizeof(scope->tag));
	scope->tag_len = strlen(scope->tag);
}

void fastcase_scope_set_legacy(struct fastcase_scope *scope,
			       struct fastcase_legacy *legacy)
{
	scope->legacy = legacy;
	if (legacy != NULL) {
		snprintf(scope->tag + scope->tag_len,
			 sizeof(scope->tag) - scope->tag_len, ":l=%s",
			 fastcase_legacy_charset(legacy));
		scope->tag_len = strlen(scope->tag);
	}
}

int fastcase_scope_disk_key(const struct fastcase_scope *scope,
			    const char *name, char *key, size_t *key_len)
{
	char decoded[FASTCASE_KEY_MAX];
	const char *spelling = NULL;

	spelling = fastcase_legacy_decode(scope->legacy, name, decoded,
					  sizeof(decoded));
	return fastcase_fold_key(&scope->rules,
				 spelling != NULL ? spelling : name,
				 key, FASTCASE_KEY_MAX, key_len);
}

static size_t dir_key(uint8_t *buf, char type,
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

static uint32_t bucket_of(uint64_t gen, const char *key, size_t key_len)
{
	TDB_DATA k = { .dptr = discard_const_p(uint8_t, key),
		       .dsize = key_len };
	unsigned bits = gen & GEN_BUCKET_BITS;

	return tdb_jenkins_hash(&k) & ((1U << bits) - 1);
}

static TDB_DATA bucket_key(uint8_t *buf, const struct fastcase_scope *scope,
			   const struct fastcase_dir_id *id, uint64_t gen,
			   uint32_t bucket)
{
	size_t len = dir_key(buf, KEY_TYPE_ENTRY, scope, id);

	memcpy(buf + len, &gen, sizeof(gen));
	len += sizeof(gen);
	memcpy(buf + len, &bucket, sizeof(bucket));
	len += sizeof(bucket);
	return (TDB_DATA) { .dptr = buf, .dsize = len };
}

/* The record of the bucket that holds the names with this key. */
static TDB_DATA entry_key(uint8_t *buf, const struct fastcase_scope *scope,
			  const struct fastcase_dir_id *id, uint64_t gen,
			  const char *key, size_t key_len)
{
	return bucket_key(buf, scope, id, gen, bucket_of(gen, key, key_len));
}

static TDB_DATA string_key(const char *s)
{
	return (TDB_DATA) { .dptr = discard_const_p(uint8_t, s),
			    .dsize = strlen(s) };
}

static int cache_file_destructor(struct cache_file *file)
{
	DLIST_REMOVE(open_files, file);
	if (file->tdb != NULL) {
		tdb_close(file->tdb);
		file->tdb = NULL;
	}
	if (file->lock_fd != -1) {
		close(file->lock_fd);
		file->lock_fd = -1;
	}
	return 0;
}

static int cache_destructor(struct fastcase_cache *cache)
{
	if (cache->file != NULL && --cache->file->refs == 0) {
		TALLOC_FREE(cache->file);
	}
	return 0;
}

static int check_format(struct tdb_context *tdb)
{
	uint32_t format = FASTCASE_CACHE_FORMAT;
	TDB_DATA val = { .dptr = (uint8_t *)&format,
			 .dsize = sizeof(format) };
	TDB_DATA found;
	int ret = 0;

	found = tdb_fetch(tdb, string_key(KEY_HEADER));
	if (found.dptr == NULL) {
		if (tdb_store(tdb, string_key(KEY_HEADER), val,
			      TDB_INSERT) != 0 &&
		    tdb_error(tdb) != TDB_ERR_EXISTS) {
			return EIO;
		}
		return 0;
	}
	if (found.dsize != sizeof(format) ||
	    memcmp(found.dptr, &format, sizeof(format)) != 0) {
		ret = EPROTO;
	}
	free(found.dptr);
	return ret;
}

/*
 * This process's open of the file at path, if it has one. A child of a
 * forking process must not use its parent's: TDB's locks and the OFD
 * locks would not exclude the two.
 */
static struct cache_file *find_open_file(const char *path)
{
	struct cache_file *file = NULL;
	struct stat st;

	if (stat(path, &st) != 0) {
		return NULL;
	}
	for (file = open_files; file != NULL; file = file->next) {
		if (file->pid == getpid() && file->dev == st.st_dev &&
		    file->ino == st.st_ino) {
			return file;
		}
	}
	return NULL;
}

/*
 * TDB writes its robust mutexes into a mapped area without first making
 * sure the file system has room for it: creating the file on a full file
 * system kills the process with SIGBUS. So the cache is not opened with
 * less than this free beside it.
 */
#define CACHE_MIN_FREE (4ULL << 20)

static int check_room(const char *path)
{
	char *dir = talloc_strdup(NULL, path);
	char *slash = NULL;
	struct statvfs sv;
	int ret = 0;

	if (dir == NULL) {
		return ENOMEM;
	}
	slash = strrchr(dir, '/');
	if (slash != NULL) {
		slash[slash == dir ? 1 : 0] = '\0';
	}
	if (statvfs(slash != NULL ? dir : ".", &sv) != 0) {
		ret = errno;
	} else if ((uint64_t)sv.f_bavail * sv.f_frsize < CACHE_MIN_FREE) {
		ret = ENOSPC;
	}
	TALLOC_FREE(dir);
	return ret;
}

static int open_file(const char *path, struct cache_file **pfile)
{
	/*
	 * The cache is only ever a copy of what the directories hold:
	 * TDB_CLEAR_IF_FIRST drops it when no process has it open, so a
	 * crash or a reboot never leaves records that someone trusts.
	 */
	int flags = TDB_CLEAR_IF_FIRST | TDB_INCOMPATIBLE_HASH | TDB_NOSYNC;
	struct cache_file *file = NULL;
	char *lock_path = NULL;
	struct stat st;
	int ret;

	ret = check_room(path);
	if (ret != 0) {
		return ret;
	}
	/* long-lived, shared by the handles of this process */
	file = talloc_zero(NULL, struct cache_file);
	if (file == NULL) {
		return ENOMEM;
	}
	file->lock_fd = -1;
	file->pid = getpid();
	file->path = talloc_strdup(file, path);
	lock_path = talloc_asprintf(file, "%s.lock", path);
	if (file->path == NULL || lock_path == NULL) {
		TALLOC_FREE(file);
		return ENOMEM;
	}
	DLIST_ADD(open_files, file);
	talloc_set_destructor(file, cache_file_destructor);

	if (tdb_runtime_check_for_robust_mutexes()) {
		flags |= TDB_MUTEX_LOCKING;
	}
	file->tdb = tdb_open(path, FASTCASE_CACHE_HASH_SIZE, flags,
			     O_RDWR | O_CREAT, 0600);
	if (file->tdb == NULL) {
		ret = errno != 0 ? errno : EIO;
		TALLOC_FREE(file);
		return ret;
	}
	if (fstat(tdb_fd(file->tdb), &st) != 0) {
		ret = errno;
		TALLOC_FREE(file);
		return ret;
	}
	file->dev = st.st_dev;
	file->ino = st.st_ino;

	ret = check_format(file->tdb);
	if (ret != 0) {
		TALLOC_FREE(file);
		return ret;
	}
	file->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (file->lock_fd == -1) {
		ret = errno;
		TALLOC_FREE(file);
		return ret;
	}
	TALLOC_FREE(lock_path);
	*pfile = file;
	return 0;
}

int fastcase_cache_open(TALLOC_CTX *mem_ctx, const char *path,
			uint64_t max_bytes, struct fastcase_cache **pcache)
{
	struct fastcase_cache *cache = NULL;
	struct cache_file *file = NULL;
	int ret;

	cache = talloc_zero(mem_ctx, struct fastcase_cache);
	if (cache == NULL) {
		return ENOMEM;
	}
	cache->max_bytes = max_bytes;

	file = find_open_file(path);
	if (file == NULL) {
		ret = open_file(path, &file);
		if (ret != 0) {
			TALLOC_FREE(cache);
			return ret;
		}
	}
	file->refs++;
	cache->file = file;
	talloc_set_destructor(cache, cache_destructor);
	*pcache = cache;
	return 0;
}

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

struct tdb_context *fastcase_cache_tdb(struct fastcase_cache *cache)
{
	return cache->file->tdb;
}

const char *fastcase_cache_path(struct fastcase_cache *cache)
{
	return cache->file->path;
}

uint64_t fastcase_cache_file_size(struct fastcase_cache *cache)
{
	struct stat st;

	if (fstat(tdb_fd(cache->file->tdb), &st) != 0) {
		return 0;
	}
	return st.st_size;
}

static int ofd_lock(struct fastcase_cache *cache, short type, off_t start,
		    off_t len, bool wait)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = start,
		.l_len = len,
	};
	int ret;

	do {
		ret = fcntl(cache->file->lock_fd, wait ? F_OFD_SETLKW : F_OFD_SETLK,
			    &fl);
	} while (ret == -1 && errno == EINTR);
	if (ret == -1) {
		return (errno == EAGAIN || errno == EACCES) ? EWOULDBLOCK :
			errno;
	}
	return 0;
}

static uint32_t dir_lock_slot(const struct fastcase_scope *scope,
			      const struct fastcase_dir_id *id)
{
	uint8_t buf[KEY_BUF];
	TDB_DATA key = { .dptr = buf };

	key.dsize = dir_key(buf, KEY_TYPE_DIR, scope, id);
	return tdb_jenkins_hash(&key);
}

int fastcase_cache_dir_lock(struct fastcase_cache *cache,
			    const struct fastcase_scope *scope,
			    const struct fastcase_dir_id *id)
{
	uint32_t slot = dir_lock_slot(scope, id);
	size_t i;
	int ret;

	for (i = 0; i < cache->file->num_held; i++) {
		if (cache->file->held[i].slot == slot) {
			cache->file->held[i].depth++;
			return 0;
		}
	}
	if (cache->file->num_held == DIR_LOCKS_HELD_MAX) {
		return EDEADLK;
	}
	/* wait only when holding no other directory's lock */
	ret = ofd_lock(cache, F_WRLCK, slot, 1, cache->file->num_held == 0);
	if (ret != 0) {
		return ret;
	}
	cache->file->held[cache->file->num_held].slot = slot;
	cache->file->held[cache->file->num_held].depth = 1;
	cache->file->num_held++;
	return 0;
}

void fastcase_cache_dir_unlock(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id)
{
	uint32_t slot = dir_lock_slot(scope, id);
	size_t i;

	for (i = 0; i < cache->file->num_held; i++) {
		if (cache->file->held[i].slot != slot) {
			continue;
		}
		if (--cache->file->held[i].depth == 0) {
			ofd_lock(cache, F_UNLCK, slot, 1, false);
			cache->file->held[i] = cache->file->held[--cache->file->num_held];
		}
		return;
	}
}

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
	uint8_t buf[KEY_BUF];
	TDB_DATA key = { .dptr = buf };
	struct dir_parse_state state = { .rec = rec, .ok = false };

	key.dsize = dir_key(buf, KEY_TYPE_DIR, scope, id);
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
	uint8_t buf[KEY_BUF];
	TDB_DATA key = { .dptr = buf };
	TDB_DATA val = { .dptr = discard_const_p(uint8_t, rec),
			 .dsize = sizeof(*rec) };

	key.dsize = dir_key(buf, KEY_TYPE_DIR, scope, id);
	return tdb_store(cache->file->tdb, key, val, TDB_REPLACE) == 0 ? 0 : EIO;
}

void fastcase_cache_dir_forget(struct fastcase_cache *cache,
			       const struct fastcase_scope *scope,
			       const struct fastcase_dir_id *id)
{
	uint8_t buf[KEY_BUF];
	TDB_DATA key = { .dptr = buf };

	key.dsize = dir_key(buf, KEY_TYPE_DIR, scope, id);
	tdb_delete(cache->file->tdb, key);
}

/* A value is one or more non-empty names, each NUL-terminated. */
static bool names_well_formed(const uint8_t *p, size_t len)
{
	size_t i;

	if (len == 0 || p[len - 1] != '\0' || p[0] == '\0') {
		return false;
	}
	for (i = 0; i < len; i++) {
		if (p[i] == '/') {
			return false;
		}
		if (i > 0 && p[i] == '\0' && p[i - 1] == '\0') {
			return false;
		}
	}
	return true;
}

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

	if (!names_well_formed(data.dptr, data.dsize)) {
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
	uint8_t buf[KEY_BUF];
	struct entry_parse_state state = {
		.scope = scope, .key = key, .key_len = key_len,
		.fn = fn, .private_data = private_data, .ret = ENOENT,
	};
	TDB_DATA k = entry_key(buf, scope, id, gen, key, key_len);

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

/* Offset of name in a names list, or -1. */
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

static int fold_name(const struct fastcase_scope *scope, const char *name,
		     char *key, size_t *key_len)
{
	return fastcase_scope_disk_key(scope, name, key, key_len);
}

struct entry_has_state {
	const char *name;
	int has;
};

static int entry_has_parser(TDB_DATA key, TDB_DATA data, void *private_data)
{
	struct entry_has_state *state = private_data;

	if (!names_well_formed(data.dptr, data.dsize)) {
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
	uint8_t buf[KEY_BUF];
	char key[FASTCASE_KEY_MAX];
	struct entry_has_state state = { .name = name, .has = 0 };
	size_t key_len;
	TDB_DATA k;

	if (fold_name(scope, name, key, &key_len) != 0) {
		return -1;
	}
	k = entry_key(buf, scope, id, gen, key, key_len);
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
	uint8_t buf[KEY_BUF];
	char key[FASTCASE_KEY_MAX];
	size_t key_len, name_len = strlen(name) + 1;
	TDB_DATA k, old, val;
	int ret;

	ret = fold_name(scope, name, key, &key_len);
	if (ret != 0) {
		return ret;
	}
	k = entry_key(buf, scope, id, gen, key, key_len);
	old = tdb_fetch(cache->file->tdb, k);
	if (old.dptr != NULL && names_well_formed(old.dptr, old.dsize) &&
	    names_find(old.dptr, old.dsize, name) >= 0) {
		free(old.dptr);
		return 0;
	}
	if (old.dptr == NULL || !names_well_formed(old.dptr, old.dsize)) {
		free(old.dptr);
		val = (TDB_DATA) { .dptr = discard_const_p(uint8_t, name),
				   .dsize = name_len };
		ret = tdb_store(cache->file->tdb, k, val, TDB_REPLACE);
		return ret == 0 ? 0 : EIO;
	}
	if (names_count(old.dptr, old.dsize) >= BUCKET_NAMES_MAX) {
		free(old.dptr);
		return EFBIG;
	}
	val.dsize = old.dsize + name_len;
	val.dptr = malloc(val.dsize);
	if (val.dptr == NULL) {
		free(old.dptr);
		return ENOMEM;
	}
	memcpy(val.dptr, old.dptr, old.dsize);
	memcpy(val.dptr + old.dsize, name, name_len);
	free(old.dptr);
	ret = tdb_store(cache->file->tdb, k, val, TDB_REPLACE);
	free(val.dptr);
	return ret == 0 ? 0 : EIO;
}

int fastcase_cache_entry_remove(struct fastcase_cache *cache,
				const struct fastcase_scope *scope,
				const struct fastcase_dir_id *id, uint64_t gen,
				const char *name)
{
	uint8_t buf[KEY_BUF];
	char key[FASTCASE_KEY_MAX];
	size_t key_len, name_len = strlen(name) + 1;
	TDB_DATA k, old;
	ssize_t off;
	int ret;

	ret = fold_name(scope, name, key, &key_len);
	if (ret != 0) {
		return ret;
	}
	k = entry_key(buf, scope, id, gen, key, key_len);
	old = tdb_fetch(cache->file->tdb, k);
	if (old.dptr == NULL) {
		return 0;
	}
	if (!names_well_formed(old.dptr, old.dsize)) {
		free(old.dptr);
		return tdb_delete(cache->file->tdb, k) == 0 ? 0 : EIO;
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

static uint64_t usage_get(struct fastcase_cache *cache)
{
	TDB_DATA v = tdb_fetch(cache->file->tdb, string_key(KEY_USAGE));
	uint64_t usage = 0;

	if (v.dptr != NULL && v.dsize == sizeof(usage)) {
		memcpy(&usage, v.dptr, sizeof(usage));
	}
	free(v.dptr);
	return usage;
}

static void usage_set(struct fastcase_cache *cache, uint64_t usage)
{
	TDB_DATA v = { .dptr = (uint8_t *)&usage, .dsize = sizeof(usage) };

	tdb_store(cache->file->tdb, string_key(KEY_USAGE), v, TDB_REPLACE);
}

static void usage_add(struct fastcase_cache *cache, uint64_t bytes)
{
	usage_set(cache, usage_get(cache) + bytes);
}

/*
 * The cache cannot drop one directory's entries without reading them all,
 * so when it is over its limit it drops everything: every process then
 * finds its directory records gone and rebuilds what it uses. A wrong
 * answer is never possible, only a rebuild. It takes every directory's
 * lock first, so does nothing while this process holds one.
 */
void fastcase_cache_trim(struct fastcase_cache *cache)
{
	uint64_t usage = usage_get(cache);
	uint32_t format = FASTCASE_CACHE_FORMAT;
	TDB_DATA hdr = { .dptr = (uint8_t *)&format,
			 .dsize = sizeof(format) };

	if (usage <= cache->max_bytes || cache->file->num_held > 0) {
		/* never wait for every directory while holding one */
		return;
	}
	/* every directory's lock: no build or change is half done */
	if (ofd_lock(cache, F_WRLCK, 0, DIR_LOCK_SPAN, true) != 0) {
		return;
	}
	usage = usage_get(cache);
	if (usage <= cache->max_bytes) {
		/* another process trimmed it while we waited */
		goto done;
	}
	DBG_NOTICE("cache %s holds ~%" PRIu64 " bytes, limit %" PRIu64
		   ": dropping every record\n",
		   cache->file->path, usage, cache->max_bytes);
	if (tdb_wipe_all(cache->file->tdb) != 0) {
		DBG_WARNING("cache %s: wipe failed: %s\n", cache->file->path,
			    tdb_errorstr(cache->file->tdb));
		goto done;
	}
	tdb_store(cache->file->tdb, string_key(KEY_HEADER), hdr, TDB_REPLACE);
	usage_set(cache, 0);
done:
	ofd_lock(cache, F_UNLCK, 0, DIR_LOCK_SPAN, false);
}

static uint64_t new_generation(size_t names)
{
	unsigned bits = 0;
	uint64_t gen = 0;

	while (bits < BUCKET_BITS_MAX &&
	       ((size_t)NAMES_PER_BUCKET << bits) < names) {
		bits++;
	}
	while (getrandom(&gen, sizeof(gen), 0) != sizeof(gen) ||
	       (gen & ~(uint64_t)GEN_BUCKET_BITS) == 0) {
		/* getrandom() of 8 bytes only fails on EINTR */
	}
	return (gen & ~(uint64_t)GEN_BUCKET_BITS) | bits;
}

struct build_name {
	uint32_t bucket;
	uint32_t offset;	/* in build_state.names */
	uint16_t len;		/* with the NUL */
};

struct build_state {
	char *names;		/* every name, NUL-terminated */
	size_t names_len;
	struct build_name *list;
	size_t count;
	size_t budget;
};

static int build_add(struct build_state *b, const char *name)
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
		.offset = b->names_len, .len = len,
	};
	b->names_len += len;
	return 0;
}

/* Store b's names, grouped by bucket; *stored: the bytes it took. */
static int build_store(struct fastcase_cache *cache,
		       const struct fastcase_scope *scope,
		       const struct fastcase_dir_id *id, uint64_t gen,
		       struct build_state *b, size_t *stored)
{
	uint32_t nbuckets = 1U << (gen & GEN_BUCKET_BITS);
	uint8_t kbuf[KEY_BUF];
	char key[FASTCASE_KEY_MAX];
	uint32_t *start = NULL;	/* of each bucket's names in order[] */
	uint32_t *order = NULL;
	char *val = NULL;
	size_t i, key_len, val_len;
	uint32_t bucket;
	int ret = 0;

	for (i = 0; i < b->count; i++) {
		ret = fold_name(scope, b->names + b->list[i].offset, key,
				&key_len);
		if (ret != 0) {
			return ret;
		}
		b->list[i].bucket = bucket_of(gen, key, key_len);
	}

	/* a counting sort by bucket: two passes, whatever the count */
	start = talloc_zero_array(NULL, uint32_t, nbuckets + 1);
	order = talloc_array(start, uint32_t, MAX(b->count, 1));
	val = talloc_size(start, BUCKET_NAMES_MAX * (NAME_MAX + 1));
	if (start == NULL || order == NULL || val == NULL) {
		TALLOC_FREE(start);
		return ENOMEM;
	}
	for (i = 0; i < b->count; i++) {
		start[b->list[i].bucket + 1]++;
	}
	for (bucket = 0; bucket < nbuckets; bucket++) {
		if (start[bucket + 1] > BUCKET_NAMES_MAX) {
			/* only very many names of one key get here */
			TALLOC_FREE(start);
			return EFBIG;
		}
		start[bucket + 1] += start[bucket];
	}
	for (i = 0; i < b->count; i++) {
		/* start[] moves up by one bucket as names are placed */
		order[start[b->list[i].bucket]++] = i;
	}

	for (bucket = 0, i = 0; bucket < nbuckets; bucket++) {
		TDB_DATA k, v;

		/* start[bucket] is now the end of this bucket's names */
		if (i == start[bucket]) {
			continue;
		}
		val_len = 0;
		for (; i < start[bucket]; i++) {
			const struct build_name *n = &b->list[order[i]];

			memcpy(val + val_len, b->names + n->offset, n->len);
			val_len += n->len;
		}
		k = bucket_key(kbuf, scope, id, gen, bucket);
		v = (TDB_DATA) { .dptr = (uint8_t *)val, .dsize = val_len };
		if (tdb_store(cache->file->tdb, k, v, TDB_INSERT) != 0) {
			ret = EIO;
			break;
		}
		*stored += k.dsize + v.dsize + RECORD_OVERHEAD;
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
	/* A directory may take at most half the cache. */
	uint64_t budget = cache->max_bytes / 2;
	struct build_state b = { .names = NULL };
	struct dirent *de = NULL;
	char key[FASTCASE_KEY_MAX];
	size_t key_len, stored = 0;
	uint64_t entries = 0;
	DIR *dir = NULL;
	int fd, ret = 0;

	*rec = (struct fastcase_dir_record) {
		.magic = FASTCASE_DIR_MAGIC,
		.mtime_ns = st->st_mtim.tv_sec * 1000000000LL +
			st->st_mtim.tv_nsec,
		.ctime_ns = st->st_ctim.tv_sec * 1000000000LL +
			st->st_ctim.tv_nsec,
		.stamp_time_ns = stamp_time_ns,
	};

	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1) {
		return errno;
	}
	dir = fdopendir(fd);
	if (dir == NULL) {
		ret = errno;
		close(fd);
		return ret;
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0) {
			continue;
		}
		/* a name that cannot be keyed: no miss may be authoritative */
		if (fold_name(scope, de->d_name, key, &key_len) != 0) {
			ret = ENAMETOOLONG;
			break;
		}
		ret = build_add(&b, de->d_name);
		if (ret != 0) {
			break;
		}
		entries++;
		/* the bytes it will take, had every name a record of its
		 * own share of the buckets */
		if (b.names_len + entries * (RECORD_OVERHEAD + KEY_BUF) /
		    NAMES_PER_BUCKET > budget) {
			ret = EFBIG;
			break;
		}
	}
	closedir(dir);

	rec->gen = new_generation(ret == 0 ? entries : 0);
	if (ret == 0) {
		ret = build_store(cache, scope, id, rec->gen, &b, &stored);
	}
	TALLOC_FREE(b.names);
	TALLOC_FREE(b.list);
	rec->entries = entries;
	rec->bytes = stored;
	if (ret == 0) {
		rec->flags = FASTCASE_DIR_COMPLETE;
	} else if (ret == EFBIG || ret == ENAMETOOLONG) {
		rec->flags = FASTCASE_DIR_TOO_BIG;
		ret = 0;
	} else {
		usage_add(cache, stored);
		return ret;
	}
	usage_add(cache, stored);
	return fastcase_cache_dir_put(cache, scope, id, rec);
}
