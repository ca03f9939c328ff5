/*
 * vfs_fastcase: opening the shared name cache
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
#include "fastcase_cache_internal.h"
#include "fastcase_usage.h"

#include <pthread.h>
#include <sys/statvfs.h>

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/* This process's opens of cache files: TDB allows one per file. */
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

static int cache_file_destructor(struct cache_file *file)
{
	DLIST_REMOVE(open_files, file);
	if (file->tdb != NULL) {
		tdb_close(file->tdb);
		file->tdb = NULL;
	}
	fastcase_lock_file_unmap_wake_page(file);
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

	found = tdb_fetch(tdb, cache_string_key(KEY_HEADER));
	if (found.dptr == NULL) {
		if (tdb_store(tdb, cache_string_key(KEY_HEADER), val,
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

/*
 * smbd forks children that never exec (the aio_fork helper, the SMB1
 * echo handler): each shares the lock file's open file description with
 * its parent, and an OFD lock lives as long as any fd of its description.
 * A child must drop its copy at once, or a lock its parent held when it
 * was killed would outlive the parent.
 */
static void forget_files_in_child(void)
{
	struct cache_file *file = NULL;

	for (file = open_files; file != NULL; file = file->next) {
		fastcase_lock_file_unmap_wake_page(file);
		if (file->lock_fd != -1) {
			close(file->lock_fd);
			file->lock_fd = -1;
		}
		file->num_held = 0;
	}
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, forget_files_in_child);
}

static int open_tdb(struct cache_file *file, unsigned hash_size)
{
	/*
	 * The cache is only ever a copy of what the directories hold:
	 * TDB_CLEAR_IF_FIRST drops it when no process has it open, so a
	 * crash or a reboot never leaves records that someone trusts.
	 */
	int flags = TDB_CLEAR_IF_FIRST | TDB_INCOMPATIBLE_HASH | TDB_NOSYNC;
	struct stat st;

	if (tdb_runtime_check_for_robust_mutexes()) {
		flags |= TDB_MUTEX_LOCKING;
	}
	file->tdb = tdb_open(file->path, hash_size != 0 ? hash_size :
			     FASTCASE_CACHE_HASH_SIZE, flags,
			     O_RDWR | O_CREAT, 0600);
	if (file->tdb == NULL) {
		return errno != 0 ? errno : EIO;
	}
	if (fstat(tdb_fd(file->tdb), &st) != 0) {
		return errno;
	}
	file->dev = st.st_dev;
	file->ino = st.st_ino;
	return check_format(file->tdb);
}

static int open_lock_file(struct cache_file *file)
{
	char *lock_path = talloc_asprintf(file, "%s.lock", file->path);

	if (lock_path == NULL) {
		return ENOMEM;
	}
	file->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	TALLOC_FREE(lock_path);
	if (file->lock_fd == -1) {
		return errno;
	}
	fastcase_lock_file_map_wake_page(file);
	return 0;
}

static int open_file(const char *path, unsigned hash_size,
		     struct cache_file **pfile)
{
	struct cache_file *file = NULL;
	int ret;

	ret = check_room(path);
	if (ret != 0) {
		return ret;
	}
	pthread_once(&atfork_once, register_atfork);
	/* long-lived, shared by the handles of this process */
	file = talloc_zero(NULL, struct cache_file);
	if (file == NULL) {
		return ENOMEM;
	}
	file->lock_fd = -1;
	file->pid = getpid();
	file->path = talloc_strdup(file, path);
	if (file->path == NULL) {
		TALLOC_FREE(file);
		return ENOMEM;
	}
	DLIST_ADD(open_files, file);
	talloc_set_destructor(file, cache_file_destructor);

	ret = open_tdb(file, hash_size);
	if (ret == 0) {
		ret = open_lock_file(file);
	}
	if (ret != 0) {
		TALLOC_FREE(file);
		return ret;
	}
	*pfile = file;
	return 0;
}

int fastcase_cache_open(TALLOC_CTX *mem_ctx, const char *path,
			uint64_t max_bytes, struct fastcase_cache **pcache)
{
	return fastcase_cache_open_hashed(mem_ctx, path, max_bytes, 0,
					  pcache);
}

int fastcase_cache_open_hashed(TALLOC_CTX *mem_ctx, const char *path,
			       uint64_t max_bytes, unsigned hash_size,
			       struct fastcase_cache **pcache)
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
		ret = open_file(path, hash_size, &file);
		if (ret != 0) {
			TALLOC_FREE(cache);
			return ret;
		}
	}
	file->refs++;
	cache->file = file;
	talloc_set_destructor(cache, cache_destructor);
	fastcase_usage_claim_limit(cache);
	*pcache = cache;
	return 0;
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

