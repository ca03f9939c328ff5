/*
 * vfs_fastcase unit tests: the shared name cache (modules/fastcase_cache.c)
 *
 * Real TDB files in a temporary directory, real directories to build.
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
#include "lib/util/talloc_stack.h"
#include "system/time.h"
#include "fastcase_build.h"
#include "fastcase_cache.h"
#include "fastcase_counters.h"
#include "fastcase_lock.h"
#include "fastcase_records.h"
#include "fastcase_timeless.h"
#include "fastcase_usage.h"

#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <tdb.h>

#include <setjmp.h>
#include <cmocka.h>
#include "unit_util.h"

static const struct fastcase_fold_rules windows_rules = {
	.mode = FASTCASE_FOLD_WINDOWS,
};
static const struct fastcase_fold_rules unicode_rules = {
	.mode = FASTCASE_FOLD_UNICODE,
};

/* ---- fixtures --------------------------------------------------------- */

struct fixture {
	TALLOC_CTX *frame;
	char *base;		/* the temporary directory */
	char *cache_path;
};

static int setup(void **state)
{
	struct fixture *f = talloc_zero(NULL, struct fixture);

	assert_non_null(f);
	f->frame = talloc_stackframe();
	f->base = unit_tmpdir(f, "fastcase-unit-cache");
	assert_non_null(f->base);
	f->cache_path = talloc_asprintf(f, "%s/fastcase.tdb", f->base);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	unit_rmtree(f->base);
	TALLOC_FREE(f->frame);
	TALLOC_FREE(f);
	return 0;
}

/* A directory under the fixture with n files made from fmt. */
static char *make_dir(struct fixture *f, const char *name, unsigned n,
		      const char *fmt)
{
	char *path = talloc_asprintf(f, "%s/%s", f->base, name);
	unsigned i;

	assert_int_equal(mkdir(path, 0755), 0);
	for (i = 0; i < n; i++) {
		char file[512];
		int fd;

		snprintf(file, sizeof(file), "%s/", path);
		snprintf(file + strlen(file), sizeof(file) - strlen(file),
			 fmt, i);
		fd = open(file, O_CREAT | O_EXCL | O_WRONLY, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
	return path;
}

static void touch(const char *dir, const char *name)
{
	char *path = talloc_asprintf(talloc_tos(), "%s/%s", dir, name);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);

	assert_true(fd >= 0);
	close(fd);
}

struct dir {
	int fd;
	struct stat st;
	struct fastcase_dir_id id;
};

static void open_dir(const char *path, struct dir *d)
{
	d->fd = open(path, O_RDONLY | O_DIRECTORY);
	assert_true(d->fd >= 0);
	assert_int_equal(fstat(d->fd, &d->st), 0);
	d->id.dev = d->st.st_dev;
	d->id.ino = d->st.st_ino;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void build(struct fastcase_cache *cache,
		  const struct fastcase_scope *scope, struct dir *d,
		  struct fastcase_dir_record *rec)
{
	assert_int_equal(fastcase_cache_dir_lock(cache, scope, &d->id), 0);
	assert_int_equal(fastcase_cache_build(cache, scope, &d->id, d->fd,
					      &d->st, now_ns(), rec), 0);
	fastcase_cache_dir_unlock(cache, scope, &d->id);
	assert_int_equal(rec->magic, FASTCASE_DIR_MAGIC);
	assert_true(rec->gen != 0);
}

/* The names stored under the key of name, or NULL; *ret the result. */
struct collected {
	char **names;
	size_t n;
	unsigned calls;
};

static void collect(const char *names, size_t names_len, void *private_data)
{
	struct collected *c = private_data;
	size_t off = 0;

	c->calls++;
	while (off < names_len) {
		c->names = talloc_realloc(NULL, c->names, char *, c->n + 1);
		c->names[c->n++] = talloc_strdup(c->names, names + off);
		off += strlen(names + off) + 1;
	}
}

static int lookup(struct fastcase_cache *cache,
		  const struct fastcase_scope *scope,
		  const struct fastcase_dir_id *id, uint64_t gen,
		  const char *name, struct collected *c)
{
	char key[FASTCASE_KEY_MAX];
	size_t key_len;

	TALLOC_FREE(c->names);
	c->n = 0;
	c->calls = 0;
	assert_int_equal(fastcase_scope_disk_key(scope, name, key, &key_len),
			 0);
	return fastcase_cache_entry_parse(cache, scope, id, gen, key, key_len,
					  collect, c);
}

static size_t count_name(const struct collected *c, const char *name)
{
	size_t i, n = 0;

	for (i = 0; i < c->n; i++) {
		if (strcmp(c->names[i], name) == 0) {
			n++;
		}
	}
	return n;
}

static struct fastcase_cache *open_cache(struct fixture *f, uint64_t max)
{
	struct fastcase_cache *cache = NULL;

	assert_int_equal(fastcase_cache_open(f, f->cache_path, max, &cache),
			 0);
	assert_non_null(cache);
	assert_string_equal(fastcase_cache_path(cache), f->cache_path);
	return cache;
}

/* ---- build and lookups ------------------------------------------------ */

#define NFILES 500

static void test_build_and_lookup(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *cache = open_cache(f, 64 << 20);
	struct fastcase_scope scope, other;
	struct fastcase_dir_record rec, got;
	struct fastcase_dir_id wrong_id;
	struct collected c = { 0 };
	struct dir d;
	unsigned i;

	fastcase_scope_init(&scope, &windows_rules);
	fastcase_scope_init(&other, &unicode_rules);
	open_dir(make_dir(f, "many", NFILES, "File%04u.txt"), &d);

	build(cache, &scope, &d, &rec);
	assert_int_equal(rec.flags, FASTCASE_DIR_COMPLETE);
	assert_int_equal(rec.entries, NFILES);
	assert_true(rec.bytes > 0);
	assert_int_equal(rec.mtime_ns, d.st.st_mtim.tv_sec * 1000000000LL +
			 d.st.st_mtim.tv_nsec);
	assert_int_equal(rec.ctime_ns, d.st.st_ctim.tv_sec * 1000000000LL +
			 d.st.st_ctim.tv_nsec);

	assert_true(fastcase_cache_dir_get(cache, &scope, &d.id, &got));
	assert_memory_equal(&got, &rec, sizeof(rec));
	/* another scope's records are apart */
	assert_false(fastcase_cache_dir_get(cache, &other, &d.id, &got));

	for (i = 0; i < NFILES; i++) {
		char exact[32], variant[32];

		snprintf(exact, sizeof(exact), "File%04u.txt", i);
		snprintf(variant, sizeof(variant), "fILE%04u.TXT", i);
		assert_int_equal(lookup(cache, &scope, &d.id, rec.gen,
					variant, &c), 0);
		assert_int_equal(c.calls, 1);
		assert_int_equal(c.n, 1);
		assert_string_equal(c.names[0], exact);
	}
	/* misses */
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "File9999.txt",
				&c), ENOENT);
	assert_int_equal(c.calls, 0);
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "File0001.tx",
				&c), ENOENT);
	/* the right name under another generation, scope or directory */
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen + 1,
				"File0001.txt", &c), ENOENT);
	assert_int_equal(lookup(cache, &other, &d.id, rec.gen,
				"File0001.txt", &c), ENOENT);
	wrong_id = d.id;
	wrong_id.ino++;
	assert_int_equal(lookup(cache, &scope, &wrong_id, rec.gen,
				"File0001.txt", &c), ENOENT);

	/* a rebuild gets a new generation; the old one is not reused */
	{
		struct fastcase_dir_record rec2;

		build(cache, &scope, &d, &rec2);
		assert_true(rec2.gen != rec.gen);
		assert_int_equal(lookup(cache, &scope, &d.id, rec2.gen,
					"FILE0042.TXT", &c), 0);
		assert_string_equal(c.names[0], "File0042.txt");
	}
	assert_true(fastcase_cache_file_size(cache) > 0);
	TALLOC_FREE(c.names);
	close(d.fd);
}

static void test_names_sharing_a_key(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *cache = open_cache(f, 64 << 20);
	struct fastcase_scope scope, uscope;
	struct fastcase_dir_record rec;
	struct collected c = { 0 };
	char *path = make_dir(f, "dups", 0, "");
	struct dir d;

	touch(path, "abc");
	touch(path, "ABC");
	touch(path, "Abc");
	touch(path, "Stra\xc3\x9f" "e");
	touch(path, "STRASSE");
	touch(path, "caf\xe9");
	open_dir(path, &d);
	fastcase_scope_init(&scope, &windows_rules);
	fastcase_scope_init(&uscope, &unicode_rules);

	build(cache, &scope, &d, &rec);
	assert_int_equal(rec.entries, 6);
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "aBC", &c), 0);
	assert_int_equal(c.n, 3);
	assert_int_equal(count_name(&c, "abc"), 1);
	assert_int_equal(count_name(&c, "ABC"), 1);
	assert_int_equal(count_name(&c, "Abc"), 1);
	/* windows: ß is not ss */
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "strasse",
				&c), 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.names[0], "STRASSE");
	/* an invalid name is stored and found under its own key */
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "CAF\xe9", &c),
			 0);
	assert_int_equal(count_name(&c, "caf\xe9"), 1);

	/* unicode: ß is ss */
	build(cache, &uscope, &d, &rec);
	assert_int_equal(lookup(cache, &uscope, &d.id, rec.gen, "strasse",
				&c), 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(count_name(&c, "STRASSE"), 1);
	assert_int_equal(count_name(&c, "Stra\xc3\x9f" "e"), 1);
	assert_int_equal(lookup(cache, &uscope, &d.id, rec.gen, "caf\xe9",
				&c), 0);
	assert_int_equal(lookup(cache, &uscope, &d.id, rec.gen, "CAF\xe9",
				&c), ENOENT);
	TALLOC_FREE(c.names);
	close(d.fd);
}

static void test_entry_add_remove(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *cache = open_cache(f, 64 << 20);
	struct fastcase_scope scope;
	struct fastcase_dir_record rec;
	struct collected c = { 0 };
	char *path = make_dir(f, "addrm", 3, "f%u");
	struct dir d;
	int i;

	open_dir(path, &d);
	fastcase_scope_init(&scope, &windows_rules);
	build(cache, &scope, &d, &rec);
	assert_int_equal(fastcase_cache_dir_lock(cache, &scope, &d.id), 0);

	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "new.txt", &c),
			 ENOENT);
	for (i = 0; i < 3; i++) {
		assert_int_equal(fastcase_cache_entry_add(cache, &scope, &d.id,
							  rec.gen, "New.txt"),
				 0);
	}
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "NEW.TXT", &c),
			 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.names[0], "New.txt");

	/* a second name with the same key joins the list, once */
	for (i = 0; i < 2; i++) {
		assert_int_equal(fastcase_cache_entry_add(cache, &scope, &d.id,
							  rec.gen, "NEW.txt"),
				 0);
	}
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "new.txt", &c),
			 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(count_name(&c, "New.txt"), 1);
	assert_int_equal(count_name(&c, "NEW.txt"), 1);

	/* remove is idempotent too, and leaves the other name */
	for (i = 0; i < 3; i++) {
		assert_int_equal(fastcase_cache_entry_remove(cache, &scope,
							     &d.id, rec.gen,
							     "New.txt"), 0);
	}
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "new.txt", &c),
			 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.names[0], "NEW.txt");
	assert_int_equal(fastcase_cache_entry_remove(cache, &scope, &d.id,
						     rec.gen, "NEW.txt"), 0);
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "new.txt", &c),
			 ENOENT);
	/* removing what was never there */
	assert_int_equal(fastcase_cache_entry_remove(cache, &scope, &d.id,
						     rec.gen, "never"), 0);
	assert_int_equal(fastcase_cache_entry_remove(cache, &scope, &d.id,
						     rec.gen, "F1"), 0);
	/* "F1" is not "f1": f1 stays */
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "F1", &c), 0);
	assert_string_equal(c.names[0], "f1");

	fastcase_cache_dir_unlock(cache, &scope, &d.id);
	TALLOC_FREE(c.names);
	close(d.fd);
}

/* ---- records as a corrupt file would have them ------------------------ */

struct find_state {
	TDB_DATA want;		/* value to find, or .dptr NULL */
	char type;		/* first key byte, or 0 */
	TDB_DATA key;		/* found (malloc'd copy) */
	unsigned found;
};

static int find_fn(struct tdb_context *tdb, TDB_DATA key, TDB_DATA val,
		   void *private_data)
{
	struct find_state *s = private_data;

	if (s->type != 0 && (key.dsize == 0 || key.dptr[0] != s->type)) {
		return 0;
	}
	if (s->want.dptr != NULL &&
	    (val.dsize != s->want.dsize ||
	     memcmp(val.dptr, s->want.dptr, val.dsize) != 0)) {
		return 0;
	}
	s->found++;
	free(s->key.dptr);
	s->key.dptr = malloc(key.dsize);
	memcpy(s->key.dptr, key.dptr, key.dsize);
	s->key.dsize = key.dsize;
	return 0;
}

/* The one record key whose value is value, or of type with any value. */
static TDB_DATA find_record(struct tdb_context *tdb, char type,
			    const void *value, size_t len)
{
	struct find_state s = {
		.want = { .dptr = discard_const_p(uint8_t, value),
			  .dsize = len },
		.type = type,
	};

	assert_true(tdb_traverse(tdb, find_fn, &s) >= 0);
	assert_int_equal(s.found, 1);
	return s.key;
}

static void store(struct tdb_context *tdb, TDB_DATA key, const void *val,
		  size_t len)
{
	TDB_DATA v = { .dptr = discard_const_p(uint8_t, val), .dsize = len };

	assert_int_equal(tdb_store(tdb, key, v, TDB_REPLACE), 0);
}

/* A device marked without usable directory times stays marked, alone. */
static void test_timeless_devices(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *cache = open_cache(f, 64 << 20);

	assert_false(fastcase_cache_is_timeless(cache, 77));
	assert_int_equal(fastcase_cache_mark_timeless(cache, 77), 0);
	assert_true(fastcase_cache_is_timeless(cache, 77));
	assert_false(fastcase_cache_is_timeless(cache, 78));
	assert_int_equal(fastcase_cache_mark_timeless(cache, 77), 0);
	assert_true(fastcase_cache_is_timeless(cache, 77));
}

static void test_dir_record(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *cache = open_cache(f, 64 << 20);
	struct tdb_context *tdb = fastcase_cache_tdb(cache);
	struct fastcase_scope scope;
	struct fastcase_dir_record rec, got;
	struct fastcase_dir_id id = { .dev = 77, .ino = 4242 };
	uint8_t garbage[sizeof(rec) + 8];
	TDB_DATA key;

	fastcase_scope_init(&scope, &windows_rules);
	assert_false(fastcase_cache_dir_get(cache, &scope, &id, &got));

	rec = (struct fastcase_dir_record) {
		.magic = FASTCASE_DIR_MAGIC,
		.flags = FASTCASE_DIR_COMPLETE,
		.gen = 0x1122334455667788ULL,
		.mtime_ns = 1000, .ctime_ns = 2000, .stamp_time_ns = 3000,
		.entries = 12, .bytes = 345,
	};
	assert_int_equal(fastcase_cache_dir_put(cache, &scope, &id, &rec), 0);
	memset(&got, 0, sizeof(got));
	assert_true(fastcase_cache_dir_get(cache, &scope, &id, &got));
	assert_memory_equal(&got, &rec, sizeof(rec));

	/* the same bytes with a wrong magic */
	rec.magic ^= 1;
	assert_int_equal(fastcase_cache_dir_put(cache, &scope, &id, &rec), 0);
	assert_false(fastcase_cache_dir_get(cache, &scope, &id, &got));
	rec.magic ^= 1;
	assert_int_equal(fastcase_cache_dir_put(cache, &scope, &id, &rec), 0);
	assert_true(fastcase_cache_dir_get(cache, &scope, &id, &got));

	/* values of the wrong size, written straight into the TDB */
	key = find_record(tdb, 'D', NULL, 0);
	memset(garbage, 0x5a, sizeof(garbage));
	memcpy(garbage, &rec, sizeof(rec));
	store(tdb, key, garbage, sizeof(rec) - 1);
	assert_false(fastcase_cache_dir_get(cache, &scope, &id, &got));
	store(tdb, key, garbage, sizeof(rec) + 8);
	assert_false(fastcase_cache_dir_get(cache, &scope, &id, &got));
	store(tdb, key, garbage, 0);
	assert_false(fastcase_cache_dir_get(cache, &scope, &id, &got));
	store(tdb, key, "junk", 4);
	assert_false(fastcase_cache_dir_get(cache, &scope, &id, &got));
	store(tdb, key, garbage, sizeof(rec));
	assert_true(fastcase_cache_dir_get(cache, &scope, &id, &got));

	fastcase_cache_dir_forget(cache, &scope, &id);
	assert_false(fastcase_cache_dir_get(cache, &scope, &id, &got));
	fastcase_cache_dir_forget(cache, &scope, &id);
	free(key.dptr);
}

/* What a bucket's value may be: non-empty names without '/', each ended. */
static void test_names_well_formed(void **state)
{
	static const struct {
		const char *bytes;
		size_t len;
		bool ok;
	} cases[] = {
		{ "a\0", 2, true },
		{ "a\0bc\0d.txt\0", 11, true },
		{ "", 0, false },
		{ "\0", 1, false },
		{ "a", 1, false },
		{ "a\0b", 3, false },
		{ "\0a\0", 3, false },
		{ "a\0\0b\0", 5, false },
		{ "a\0b\0\0", 5, false },
		{ "a/b\0", 4, false },
		{ "ab\0c/\0", 6, false },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_int_equal(fastcase_records_names_well_formed(
				 (const uint8_t *)cases[i].bytes, cases[i].len),
				 cases[i].ok);
	}
}

static void test_corrupt_entries(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *cache = open_cache(f, 64 << 20);
	struct tdb_context *tdb = fastcase_cache_tdb(cache);
	struct fastcase_scope scope;
	struct fastcase_dir_record rec;
	struct collected c = { 0 };
	char *path = make_dir(f, "corrupt", 0, "");
	char *other_path = make_dir(f, "corrupt-other", 0, "");
	struct fastcase_dir_record other_rec;
	struct dir other;
	static const struct {
		const char *val;
		size_t len;
	} bad[] = {
		{ "Target", 6 },		/* no terminating NUL */
		{ "", 0 },			/* empty */
		{ "\0", 1 },			/* an empty name */
		{ "\0Target\0", 8 },		/* leading empty name */
		{ "Target\0\0", 8 },		/* empty name between */
		{ "Tar/get\0", 8 },		/* not a name */
		{ "Target\0Other", 12 },	/* unterminated tail */
	};
	struct dir d;
	TDB_DATA key;
	size_t i;

	touch(path, "Target");
	touch(other_path, "Other");
	open_dir(path, &d);
	open_dir(other_path, &other);
	fastcase_scope_init(&scope, &windows_rules);
	build(cache, &scope, &other, &other_rec);
	build(cache, &scope, &d, &rec);
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "TARGET", &c),
			 0);
	key = find_record(tdb, 'E', "Target", 7);

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		store(tdb, key, bad[i].val, bad[i].len);
		if (lookup(cache, &scope, &d.id, rec.gen, "TARGET", &c) !=
		    EINVAL) {
			fail_msg("malformed value %zu accepted", i);
		}
		assert_int_equal(c.calls, 0);
	}
	/* another directory's records are untouched */
	assert_int_equal(lookup(cache, &scope, &other.id, other_rec.gen,
				"other", &c), 0);
	assert_string_equal(c.names[0], "Other");

	/*
	 * Neither an add nor a remove papers over a malformed bucket: it
	 * may have held other names, so the caller must forget the whole
	 * directory. The bucket is left as it was.
	 */
	assert_int_equal(fastcase_cache_dir_lock(cache, &scope, &d.id), 0);
	store(tdb, key, "Target\0\0", 8);
	assert_int_equal(fastcase_cache_entry_add(cache, &scope, &d.id,
						  rec.gen, "Target"), EINVAL);
	assert_int_equal(fastcase_cache_entry_remove(cache, &scope, &d.id,
						     rec.gen, "Target"),
			 EINVAL);
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "TARGET", &c),
			 EINVAL);
	assert_int_equal(fastcase_cache_entry_has(cache, &scope, &d.id,
						  rec.gen, "Target"), -1);
	/* forgetting the directory: nobody finds a usable record */
	assert_int_equal(fastcase_cache_dir_forget(cache, &scope, &d.id), 0);
	assert_false(fastcase_cache_dir_get(cache, &scope, &d.id, &rec));
	fastcase_cache_dir_unlock(cache, &scope, &d.id);

	free(key.dptr);
	TALLOC_FREE(c.names);
	close(d.fd);
	close(other.fd);
}

/* ---- the file itself -------------------------------------------------- */

static void write_byte(int fd)
{
	assert_int_equal(write(fd, "x", 1), 1);
}

static bool read_byte(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	if (poll(&p, 1, timeout_ms) != 1) {
		return false;
	}
	return read(fd, &c, 1) == 1;
}

static int cache_tdb_flags(void)
{
	int flags = TDB_CLEAR_IF_FIRST | TDB_INCOMPATIBLE_HASH | TDB_NOSYNC;

	if (tdb_runtime_check_for_robust_mutexes()) {
		flags |= TDB_MUTEX_LOCKING;
	}
	return flags;
}

/*
 * A child keeps the file open with a header of another format, so that
 * TDB_CLEAR_IF_FIRST does not wipe it when we open it. Returns the
 * child; it exits when a byte arrives on *release.
 */
static pid_t hold_file_with_header(const char *path, const void *hdr,
				   size_t hdr_len, int *release)
{
	int ready[2], go[2];
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct tdb_context *tdb;
		TDB_DATA k = { .dptr = (uint8_t *)"fastcase-format",
			       .dsize = strlen("fastcase-format") };
		TDB_DATA v = { .dptr = discard_const_p(uint8_t, hdr),
			       .dsize = hdr_len };
		char c;

		close(ready[0]);
		close(go[1]);
		tdb = tdb_open(path, 65521, cache_tdb_flags(),
			       O_RDWR | O_CREAT, 0600);
		if (tdb == NULL || tdb_store(tdb, k, v, TDB_REPLACE) != 0) {
			_exit(2);
		}
		if (write(ready[1], "x", 1) != 1) {
			_exit(3);
		}
		if (read(go[0], &c, 1) < 0) {
			_exit(4);
		}
		tdb_close(tdb);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	assert_true(read_byte(ready[0], 10000));
	close(ready[0]);
	*release = go[1];
	return pid;
}

static void release_child(pid_t pid, int release)
{
	int status;

	write_byte(release);
	close(release);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_format_refused(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *cache = NULL;
	uint32_t older = FASTCASE_CACHE_FORMAT + 1;
	uint32_t current = FASTCASE_CACHE_FORMAT;
	uint64_t wide = FASTCASE_CACHE_FORMAT;
	int release;
	pid_t pid;

	/* another format number, while another process has it open */
	pid = hold_file_with_header(f->cache_path, &older, sizeof(older),
				    &release);
	assert_int_equal(fastcase_cache_open(f, f->cache_path, 64 << 20,
					     &cache), EPROTO);
	release_child(pid, release);

	/* the right number in a value of the wrong size */
	unlink(f->cache_path);
	pid = hold_file_with_header(f->cache_path, &wide, sizeof(wide),
				    &release);
	assert_int_equal(fastcase_cache_open(f, f->cache_path, 64 << 20,
					     &cache), EPROTO);
	release_child(pid, release);

	/* control: the current format, held the same way, is taken */
	unlink(f->cache_path);
	pid = hold_file_with_header(f->cache_path, &current, sizeof(current),
				    &release);
	assert_int_equal(fastcase_cache_open(f, f->cache_path, 64 << 20,
					     &cache), 0);
	TALLOC_FREE(cache);
	release_child(pid, release);

	/* an old file nobody has open is wiped and reused */
	unlink(f->cache_path);
	older = FASTCASE_CACHE_FORMAT + 1;
	pid = hold_file_with_header(f->cache_path, &older, sizeof(older),
				    &release);
	release_child(pid, release);
	assert_int_equal(fastcase_cache_open(f, f->cache_path, 64 << 20,
					     &cache), 0);
	{
		TDB_DATA k = { .dptr = (uint8_t *)"fastcase-format",
			       .dsize = strlen("fastcase-format") };
		TDB_DATA v = tdb_fetch(fastcase_cache_tdb(cache), k);

		assert_non_null(v.dptr);
		assert_int_equal(v.dsize, sizeof(current));
		assert_memory_equal(v.dptr, &current, sizeof(current));
		free(v.dptr);
	}
	TALLOC_FREE(cache);
}

/* A cache that opened must work: build and look up a small directory. */
static void check_usable(struct fixture *f, struct fastcase_cache *cache,
			 const char *dirname)
{
	struct fastcase_scope scope;
	struct fastcase_dir_record rec;
	struct collected c = { 0 };
	struct dir d;

	fastcase_scope_init(&scope, &windows_rules);
	open_dir(make_dir(f, dirname, 20, "Name%u"), &d);
	build(cache, &scope, &d, &rec);
	assert_int_equal(rec.flags, FASTCASE_DIR_COMPLETE);
	assert_int_equal(lookup(cache, &scope, &d.id, rec.gen, "NAME7", &c),
			 0);
	assert_string_equal(c.names[0], "Name7");
	TALLOC_FREE(c.names);
	close(d.fd);
}

static void test_garbage_files(void **state)
{
	struct fixture *f = *state;
	uint8_t junk[65536];
	size_t sizes[] = { 0, 1, 37, 512, 4096, 65536 };
	unsigned seed = 12345;
	size_t s, i;
	int variant;

	for (i = 0; i < sizeof(junk); i++) {
		seed = seed * 1103515245 + 12345;
		junk[i] = seed >> 16;
	}
	for (variant = 0; variant < 3; variant++) {
		for (s = 0; s < ARRAY_SIZE(sizes); s++) {
			struct fastcase_cache *cache = NULL;
			char dirname[32];
			int fd, ret;

			unlink(f->cache_path);
			fd = open(f->cache_path, O_CREAT | O_WRONLY, 0600);
			assert_true(fd >= 0);
			if (variant == 1 && sizes[s] >= 32) {
				/* TDB's magic, then junk */
				memcpy(junk, "TDB file\n", 9);
			} else if (variant == 2) {
				memset(junk, 0, sizes[s]);
			}
			assert_int_equal(write(fd, junk, sizes[s]),
					 (ssize_t)sizes[s]);
			close(fd);

			ret = fastcase_cache_open(f, f->cache_path, 64 << 20,
						  &cache);
			print_message("garbage variant %d, %zu bytes: %s\n",
				      variant, sizes[s],
				      ret == 0 ? "usable" : strerror(ret));
			if (ret != 0) {
				continue;
			}
			snprintf(dirname, sizeof(dirname), "g%d-%zu", variant,
				 sizes[s]);
			check_usable(f, cache, dirname);
			TALLOC_FREE(cache);
		}
	}

	/* a real cache file cut short */
	{
		struct fastcase_cache *cache;
		int ret;

		unlink(f->cache_path);
		cache = open_cache(f, 64 << 20);
		check_usable(f, cache, "before-cut");
		TALLOC_FREE(cache);
		assert_int_equal(truncate(f->cache_path, 300), 0);
		ret = fastcase_cache_open(f, f->cache_path, 64 << 20, &cache);
		print_message("truncated cache file: %s\n",
			      ret == 0 ? "usable" : strerror(ret));
		if (ret == 0) {
			check_usable(f, cache, "after-cut");
			TALLOC_FREE(cache);
		}
	}

	/* a file another process has open, overwritten with junk */
	{
		struct fastcase_cache *cache = NULL;
		uint32_t current = FASTCASE_CACHE_FORMAT;
		int release, fd, ret;
		pid_t pid;

		for (i = 0; i < 4096; i++) {
			seed = seed * 1103515245 + 12345;
			junk[i] = seed >> 16;
		}
		unlink(f->cache_path);
		pid = hold_file_with_header(f->cache_path, &current,
					    sizeof(current), &release);
		fd = open(f->cache_path, O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, junk, 4096), 4096);
		close(fd);
		ret = fastcase_cache_open(f, f->cache_path, 64 << 20, &cache);
		print_message("junk in a file held open: %s\n",
			      ret == 0 ? "usable" : strerror(ret));
		if (ret == 0) {
			check_usable(f, cache, "held-junk");
			TALLOC_FREE(cache);
		}
		release_child(pid, release);
	}

	/* paths that cannot be a cache file */
	{
		struct fastcase_cache *cache = NULL;
		char *sub = talloc_asprintf(f, "%s/adir", f->base);
		char *missing = talloc_asprintf(f, "%s/no/such/dir/x.tdb",
						f->base);

		assert_int_equal(mkdir(sub, 0755), 0);
		assert_int_not_equal(fastcase_cache_open(f, sub, 64 << 20,
							 &cache), 0);
		assert_null(cache);
		assert_int_not_equal(fastcase_cache_open(f, missing, 64 << 20,
							 &cache), 0);
		assert_null(cache);
	}
}

/* ---- size limit ------------------------------------------------------- */

static void test_size_limit(void **state)
{
	struct fixture *f = *state;
	const uint64_t max = 8192;
	struct fastcase_cache *cache = open_cache(f, max);
	struct fastcase_scope scope;
	struct fastcase_dir_record rec, small_rec, got;
	struct collected c = { 0 };
	struct dir big, small, medium;
	int builds;

	fastcase_scope_init(&scope, &windows_rules);
	open_dir(make_dir(f, "small", 5, "s%u"), &small);
	open_dir(make_dir(f, "medium", 60, "medium-name-%05u"), &medium);
	open_dir(make_dir(f, "big", 2000, "a-rather-long-file-name-%05u.dat"),
		 &big);

	build(cache, &scope, &small, &small_rec);
	assert_int_equal(small_rec.flags, FASTCASE_DIR_COMPLETE);

	build(cache, &scope, &big, &rec);
	assert_int_equal(rec.flags, FASTCASE_DIR_TOO_BIG);
	assert_true(rec.entries < 2000);
	assert_true(fastcase_cache_dir_get(cache, &scope, &big.id, &got));
	assert_int_equal(got.flags, FASTCASE_DIR_TOO_BIG);

	/* one build stays within half the limit: nothing is dropped yet */
	fastcase_cache_trim(cache);
	assert_true(fastcase_cache_dir_get(cache, &scope, &small.id, &got));
	assert_int_equal(lookup(cache, &scope, &small.id, small_rec.gen, "S3",
				&c), 0);

	/* a directory too big stores no names: no rebuild of it fills the
	 * file */
	build(cache, &scope, &big, &rec);
	fastcase_cache_trim(cache);
	assert_true(fastcase_cache_dir_get(cache, &scope, &small.id, &got));

	/* rebuilding one that fits again and again leaves the records of
	 * old generations behind, grows the file past the limit, and then
	 * a trim drops every record */
	for (builds = 0; builds < 20; builds++) {
		build(cache, &scope, &medium, &rec);
		assert_int_equal(rec.flags, FASTCASE_DIR_COMPLETE);
		fastcase_cache_trim(cache);
		if (!fastcase_cache_dir_get(cache, &scope, &medium.id,
					    &got)) {
			break;
		}
	}
	assert_true(builds < 20);
	assert_false(fastcase_cache_dir_get(cache, &scope, &small.id, &got));
	assert_int_equal(lookup(cache, &scope, &small.id, small_rec.gen, "S3",
				&c), ENOENT);

	/* still a good cache afterwards */
	build(cache, &scope, &small, &small_rec);
	assert_int_equal(small_rec.flags, FASTCASE_DIR_COMPLETE);
	assert_int_equal(lookup(cache, &scope, &small.id, small_rec.gen, "S3",
				&c), 0);
	assert_string_equal(c.names[0], "s3");
	fastcase_cache_trim(cache);
	assert_true(fastcase_cache_dir_get(cache, &scope, &small.id, &got));

	/* the same directory fits a cache of ordinary size */
	{
		struct fastcase_cache *roomy;
		struct fastcase_scope uscope;

		TALLOC_FREE(cache);
		unlink(f->cache_path);
		roomy = open_cache(f, 64 << 20);
		fastcase_scope_init(&uscope, &unicode_rules);
		build(roomy, &uscope, &big, &rec);
		assert_int_equal(rec.flags, FASTCASE_DIR_COMPLETE);
		assert_int_equal(rec.entries, 2000);
		TALLOC_FREE(roomy);
	}
	TALLOC_FREE(c.names);
	close(big.fd);
	close(medium.fd);
	close(small.fd);
}

/* ---- two processes ---------------------------------------------------- */

/*
 * Every case variant of a few 8-letter words: all variants of one word
 * share one key, so every add is a read-modify-write of the same record.
 * The parent adds the variants of even spelling masks, the child those
 * of odd ones.
 */
static const char *const race_words[] = {
	"abcdefgh", "lockword", "samename", "racecase",
};
#define RACE_VARIANTS 32

static void race_name(size_t w, unsigned mask, char *name)
{
	size_t i;

	for (i = 0; i < 8; i++) {
		char ch = race_words[w][i];

		name[i] = (mask & (1u << i)) ? ch - ('a' - 'A') : ch;
	}
	name[8] = '\0';
}

static int race_adds(struct fastcase_cache *cache,
		     const struct fastcase_scope *scope,
		     const struct fastcase_dir_id *id, uint64_t gen,
		     unsigned parity)
{
	unsigned mask;
	size_t w;

	for (mask = parity; mask < RACE_VARIANTS; mask += 2) {
		for (w = 0; w < ARRAY_SIZE(race_words); w++) {
			char name[16];
			int ret;

			race_name(w, mask, name);
			ret = fastcase_cache_dir_lock(cache, scope, id);
			if (ret != 0) {
				return ret;
			}
			ret = fastcase_cache_entry_add(cache, scope, id, gen,
						       name);
			fastcase_cache_dir_unlock(cache, scope, id);
			if (ret != 0) {
				return ret;
			}
		}
	}
	return 0;
}

static void test_two_process_race(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *cache;
	struct fastcase_scope scope;
	struct fastcase_dir_record rec;
	struct collected c = { 0 };
	int ready[2], go[2], status;
	struct dir d;
	unsigned mask;
	size_t w;
	pid_t pid;

	fastcase_scope_init(&scope, &windows_rules);
	open_dir(make_dir(f, "race", 0, ""), &d);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);

	/* fork before opening: each process must have its own TDB handle */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct fastcase_cache *mine = NULL;
		struct fastcase_dir_record r;
		char ch;

		if (read(go[0], &ch, 1) != 1) {
			_exit(10);
		}
		if (fastcase_cache_open(NULL, f->cache_path, 64 << 20,
					&mine) != 0) {
			_exit(11);
		}
		if (!fastcase_cache_dir_get(mine, &scope, &d.id, &r)) {
			_exit(12);
		}
		if (write(ready[1], "x", 1) != 1 ||
		    read(go[0], &ch, 1) != 1) {
			_exit(13);
		}
		_exit(race_adds(mine, &scope, &d.id, r.gen, 1) == 0 ? 0 : 14);
	}
	cache = open_cache(f, 64 << 20);
	build(cache, &scope, &d, &rec);
	write_byte(go[1]);
	assert_true(read_byte(ready[0], 10000));
	/* both start together */
	write_byte(go[1]);
	assert_int_equal(race_adds(cache, &scope, &d.id, rec.gen, 0), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	for (w = 0; w < ARRAY_SIZE(race_words); w++) {
		size_t missing = 0;

		assert_int_equal(lookup(cache, &scope, &d.id, rec.gen,
					race_words[w], &c), 0);
		for (mask = 0; mask < RACE_VARIANTS; mask++) {
			char name[16];

			race_name(w, mask, name);
			if (count_name(&c, name) != 1) {
				missing++;
			}
		}
		if (missing != 0 || c.n != RACE_VARIANTS) {
			fail_msg("key of %s holds %zu names, %zu of the %d "
				 "variants missing or repeated",
				 race_words[w], c.n, missing, RACE_VARIANTS);
		}
	}
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	TALLOC_FREE(c.names);
	close(d.fd);
}

/*
 * Directory locks: they nest; a process holding one never waits for
 * another (it gets EWOULDBLOCK); a trim waits for every other process's
 * directory lock and does nothing while its own process holds one.
 */
static void test_dir_locks(void **state)
{
	struct fixture *f = *state;
	struct fastcase_dir_id x = { .dev = 1, .ino = 100 };
	struct fastcase_dir_id y = { .dev = 1, .ino = 200 };
	struct fastcase_dir_id z = { .dev = 1, .ino = 300 };
	TDB_DATA marker = { .dptr = (uint8_t *)"child-marker",
			    .dsize = strlen("child-marker") };
	struct fastcase_cache *cache;
	struct fastcase_scope scope;
	struct fastcase_dir_record rec, got;
	int to_child[2], to_parent[2], status;
	struct dir big;
	int i;
	pid_t pid;
	char c;

	fastcase_scope_init(&scope, &windows_rules);
	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct fastcase_cache *mine = NULL;
		TDB_DATA v = { .dptr = (uint8_t *)"x", .dsize = 1 };

		/* a parent that fails an assertion gives us EOF, not a hang */
		close(to_child[1]);
		close(to_parent[0]);
#define STEP(cond, code) do { if (!(cond)) _exit(code); } while (0)
		STEP(read(to_child[0], &c, 1) == 1, 30);
		/* the parent's limit: the file's is the largest of its users' */
		STEP(fastcase_cache_open(NULL, f->cache_path, 4096,
					 &mine) == 0, 31);
		/* holding y, x is not waited for: the parent holds it */
		STEP(fastcase_cache_dir_lock(mine, &scope, &y) == 0, 32);
		STEP(fastcase_cache_dir_lock(mine, &scope, &x) == EWOULDBLOCK,
		     33);
		STEP(write(to_parent[1], "1", 1) == 1, 34);
		STEP(read(to_child[0], &c, 1) == 1, 35);
		/* the parent let go of x */
		STEP(fastcase_cache_dir_lock(mine, &scope, &x) == 0, 36);
		fastcase_cache_dir_unlock(mine, &scope, &x);
		fastcase_cache_dir_unlock(mine, &scope, &y);
		STEP(write(to_parent[1], "2", 1) == 1, 37);
		/* hold z while the parent tries to trim */
		STEP(read(to_child[0], &c, 1) == 1, 38);
		STEP(fastcase_cache_dir_lock(mine, &scope, &z) == 0, 39);
		STEP(tdb_store(fastcase_cache_tdb(mine), marker, v,
			       TDB_REPLACE) == 0, 40);
		STEP(write(to_parent[1], "3", 1) == 1, 41);
		STEP(read(to_child[0], &c, 1) == 1, 42);
		fastcase_cache_dir_unlock(mine, &scope, &z);
		STEP(write(to_parent[1], "4", 1) == 1, 43);
		TALLOC_FREE(mine);
		_exit(0);
#undef STEP
	}
	cache = open_cache(f, 4096);

	/* nested: held after one of two unlocks */
	assert_int_equal(fastcase_cache_dir_lock(cache, &scope, &x), 0);
	assert_int_equal(fastcase_cache_dir_lock(cache, &scope, &x), 0);
	fastcase_cache_dir_unlock(cache, &scope, &x);
	write_byte(to_child[1]);
	assert_true(read_byte(to_parent[0], 10000));
	fastcase_cache_dir_unlock(cache, &scope, &x);
	write_byte(to_child[1]);
	assert_true(read_byte(to_parent[0], 10000));

	/* over the limit: the records of old generations add up */
	open_dir(make_dir(f, "big", 20, "a-long-enough-file-name-%05u"),
		 &big);
	for (i = 0; i < 8; i++) {
		build(cache, &scope, &big, &rec);
		assert_int_equal(rec.flags, FASTCASE_DIR_COMPLETE);
	}
	/* no trim while holding a directory's lock */
	assert_int_equal(fastcase_cache_dir_lock(cache, &scope, &x), 0);
	fastcase_cache_trim(cache);
	assert_true(fastcase_cache_dir_get(cache, &scope, &big.id, &got));
	fastcase_cache_dir_unlock(cache, &scope, &x);

	/*
	 * While the child holds z, a trim gives up after its bounded wait
	 * and wipes nothing; once the child lets go, a trim wipes the child's
	 * record with the rest.
	 */
	write_byte(to_child[1]);
	assert_true(read_byte(to_parent[0], 10000));
	{
		struct timespec t0, t1;
		int64_t waited_ms;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		fastcase_cache_trim(cache);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		waited_ms = (t1.tv_sec - t0.tv_sec) * 1000 +
			(t1.tv_nsec - t0.tv_nsec) / 1000000;
		assert_true(waited_ms >= FASTCASE_TRIM_WAIT_MS);
		assert_true(waited_ms < 10 * FASTCASE_TRIM_WAIT_MS + 1000);
	}
	assert_true(fastcase_cache_dir_get(cache, &scope, &big.id, &got));
	write_byte(to_child[1]);
	assert_true(read_byte(to_parent[0], 10000));
	fastcase_cache_trim(cache);
	assert_false(fastcase_cache_dir_get(cache, &scope, &big.id, &got));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	{
		TDB_DATA v = tdb_fetch(fastcase_cache_tdb(cache), marker);

		if (v.dptr != NULL) {
			free(v.dptr);
			fail_msg("the trim left the other process's record");
		}
	}
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
	close(big.fd);
}

/*
 * Every added name counts toward the file's size, and concurrent
 * processes never lose each other's additions to the usage counter.
 */
static void test_usage_counts_every_name(void **state)
{
	struct fixture *f = *state;
	struct fastcase_scope scope;
	struct fastcase_cache *cache = NULL;
	/* entries of a generation of 4096 buckets: no bucket fills up */
	const uint64_t gen = 0x4200 | 12;
	const struct fastcase_dir_id id = { .dev = 7, .ino = 7 };
	const int names = 2000;
	uint64_t before, after;
	int go[2], i, p, status;
	pid_t pids[2];

	fastcase_scope_init(&scope, &windows_rules);
	assert_int_equal(pipe(go), 0);
	fflush(stdout);
	/* forked before this process opens the file: one open each */
	for (p = 0; p < 2; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			struct fastcase_cache *mine = NULL;
			char name[32];

			close(go[1]);
			if (read(go[0], name, 1) != 0 ||
			    fastcase_cache_open(NULL, f->cache_path,
						1ULL << 30, &mine) != 0) {
				_exit(1);
			}
			for (i = 0; i < names; i++) {
				snprintf(name, sizeof(name), "p%d-%05d", p, i);
				/* no directory lock: only the counter is
				 * under test */
				if (fastcase_cache_entry_add(mine, &scope,
							     &id, gen,
							     name) != 0) {
					_exit(2);
				}
			}
			_exit(0);
		}
	}
	/* open first and stay open: the children must not clear it */
	cache = open_cache(f, 1ULL << 30);
	before = fastcase_usage_get(cache);
	close(go[0]);
	close(go[1]);	/* EOF: go */
	for (p = 0; p < 2; p++) {
		assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	after = fastcase_usage_get(cache);
	/* each name costs at least its bytes ("pN-NNNNN" and its NUL) */
	if (after - before < 2ULL * names * 9) {
		fail_msg("usage grew by %" PRIu64 " for %d names of 9 bytes",
			 after - before, 2 * names);
	}
}

static void test_smaller_share_limit_wipes_nothing(void **state)
{
	struct fixture *f = *state;
	struct fastcase_cache *large = open_cache(f, 64ULL << 20);
	struct fastcase_cache *small = open_cache(f, 4096);
	struct fastcase_scope scope;
	struct fastcase_dir_record rec, got;
	struct dir d;

	fastcase_scope_init(&scope, &windows_rules);
	open_dir(make_dir(f, "shared", 400, "name-%05u"), &d);
	build(large, &scope, &d, &rec);
	assert_int_equal(rec.flags, FASTCASE_DIR_COMPLETE);
	assert_true(fastcase_usage_get(small) > 4096);
	assert_int_equal(fastcase_usage_limit(small), 64ULL << 20);
	fastcase_cache_trim(small);
	assert_true(fastcase_cache_dir_get(small, &scope, &d.id, &got));
	close(d.fd);
}

/*
 * The lock file's wake-up page: the child maps it the way every process
 * does, at the word of x's slot.
 */
static struct fastcase_lock_wake_word *map_wake_word(struct fixture *f,
					    const struct fastcase_scope *scope,
					    const struct fastcase_dir_id *id)
{
	char *path = talloc_asprintf(f, "%s.lock", f->cache_path);
	uint32_t slot = fastcase_records_lock_slot(scope, id);
	struct fastcase_lock_wake_word *page;
	int fd;

	fd = open(path, O_RDWR);
	if (fd == -1) {
		return NULL;
	}
	page = mmap(NULL, FASTCASE_LOCK_WAKE_WORDS * sizeof(*page),
		    PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return page == MAP_FAILED ? NULL :
		&page[slot % FASTCASE_LOCK_WAKE_WORDS];
}

static uint32_t sleepers(const struct fastcase_lock_wake_word *w)
{
	return __atomic_load_n(&w->sleepers, __ATOMIC_SEQ_CST);
}

/*
 * A process waiting for a directory's lock sleeps on the lock file's
 * wake-up page, one sleeper counted on its slot's word, and takes the
 * lock once the holder lets go, while the holder still lives. A lock
 * file left short and full of garbage by someone else still serves: its
 * words only ever say "try again".
 */
static void test_lock_waiter_sleeps_until_unlock(void **state)
{
	struct fixture *f = *state;
	struct fastcase_dir_id x = { .dev = 1, .ino = 4242 };
	char *lock_path = talloc_asprintf(f, "%s.lock", f->cache_path);
	struct fastcase_cache *cache;
	struct fastcase_scope scope;
	struct fastcase_lock_wake_word *w;
	char garbage[1000];
	int to_child[2], to_parent[2], status, fd;
	uint32_t before;
	pid_t pid;
	char c;

	fastcase_scope_init(&scope, &windows_rules);
	memset(garbage, 0x7f, sizeof(garbage));
	fd = open(lock_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, garbage, sizeof(garbage)),
			 sizeof(garbage));
	close(fd);
	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	fflush(stdout);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct fastcase_cache *mine = NULL;
		bool saw_sleeper = false;
		int i;

		close(to_child[1]);
		close(to_parent[0]);
		if (fastcase_cache_open(NULL, f->cache_path, 4096,
					&mine) != 0 ||
		    fastcase_cache_dir_lock(mine, &scope, &x) != 0 ||
		    (w = map_wake_word(f, &scope, &x)) == NULL) {
			_exit(1);
		}
		before = sleepers(w);
		if (write(to_parent[1], "1", 1) != 1) {
			_exit(2);
		}
		for (i = 0; i < 10000 && !saw_sleeper; i++) {
			saw_sleeper = sleepers(w) == before + 1;
			usleep(1000);
		}
		fastcase_cache_dir_unlock(mine, &scope, &x);
		(void)write(to_parent[1], saw_sleeper ? "y" : "n", 1);
		(void)read(to_child[0], &c, 1);
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	assert_true(read_byte(to_parent[0], 10000));
	cache = open_cache(f, 4096);
	w = map_wake_word(f, &scope, &x);
	assert_non_null(w);
	before = sleepers(w);
	assert_int_equal(fastcase_cache_dir_lock(cache, &scope, &x), 0);
	assert_int_equal(read(to_parent[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(sleepers(w), before);
	fastcase_cache_dir_unlock(cache, &scope, &x);
	write_byte(to_child[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(to_child[1]);
	close(to_parent[0]);
	TALLOC_FREE(cache);
}

/*
 * smbd forks children that never exec. A child shares the lock file's
 * open file description; were it kept, a lock held by a parent that was
 * then killed would live on in the child.
 */
static void test_forked_child_drops_locks(void **state)
{
	struct fixture *f = *state;
	struct fastcase_scope scope;
	struct fastcase_dir_id x = { .dev = 1, .ino = 42 };
	struct fastcase_cache *cache = NULL;
	int ready[2], release[2], status;
	pid_t holder, child = 0;
	char c;

	fastcase_scope_init(&scope, &windows_rules);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(release), 0);
	fflush(stdout);
	holder = fork();
	assert_true(holder >= 0);
	if (holder == 0) {
		struct fastcase_cache *mine = NULL;

		if (fastcase_cache_open(NULL, f->cache_path, 64 << 20,
					&mine) != 0 ||
		    fastcase_cache_dir_lock(mine, &scope, &x) != 0) {
			_exit(1);
		}
		child = fork();
		if (child == 0) {
			/*
			 * The forked helper outlives its parent and waits
			 * on its own pipe: reading the one its parent
			 * reports on could take a byte of the report.
			 */
			close(ready[0]);
			close(ready[1]);
			close(release[1]);
			(void)read(release[0], &c, 1);
			_exit(0);
		}
		(void)write(ready[1], &child, sizeof(child));
		pause();
		_exit(0);
	}
	assert_int_equal(read(ready[0], &child, sizeof(child)),
			 sizeof(child));
	assert_int_equal(kill(holder, SIGKILL), 0);
	assert_int_equal(waitpid(holder, &status, 0), holder);

	cache = open_cache(f, 64 << 20);
	assert_int_equal(fastcase_cache_dir_lock(cache, &scope, &x), 0);
	fastcase_cache_dir_unlock(cache, &scope, &x);
	close(release[1]);	/* the orphaned child sees EOF and exits */
	close(release[0]);
	close(ready[1]);
	close(ready[0]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_build_and_lookup,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_names_sharing_a_key,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_entry_add_remove,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeless_devices,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_record,
						setup, teardown),
		cmocka_unit_test(test_names_well_formed),
		cmocka_unit_test_setup_teardown(test_corrupt_entries,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_format_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage_files,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_size_limit,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_process_race,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_locks,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_usage_counts_every_name,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_smaller_share_limit_wipes_nothing, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_forked_child_drops_locks,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lock_waiter_sleeps_until_unlock, setup,
			teardown),
	};

	return unit_run(tests, ARRAY_SIZE(tests), argc, argv);
}
