/*
 * vfs_fastcase unit tests: the lookup engine (modules/fastcase_engine.c)
 *
 * Real TDB, real directories, real inotify. Other smbd processes are
 * simulated by "peers": forked processes, each with its own engine on the
 * same cache file, driven over a pipe. A TDB file can be open only once
 * per process, so every peer is forked before this process opens its own
 * engine.
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
#include "lib/util/charset/charset.h"
#include "lib/util/talloc_stack.h"
#include "fastcase_build.h"
#include "fastcase_cache.h"
#include "fastcase_counters.h"
#include "fastcase_lock.h"
#include "fastcase_records.h"
#include "fastcase_usage.h"
#include "fastcase_engine.h"
#include "fastcase_legacy_path.h"

#include <dirent.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <tdb.h>

#include <setjmp.h>
#include <cmocka.h>
#include "unit_util.h"

/* How long a peer may take to answer before we call it a hang. */
#define PEER_TIMEOUT_MS 8000

static const struct fastcase_fold_rules windows_rules = {
	.mode = FASTCASE_FOLD_WINDOWS,
};

/* ---- fixture ---------------------------------------------------------- */

#define MAX_PEERS 4

struct peer {
	pid_t pid;
	int to, from;
};

struct fixture {
	TALLOC_CTX *frame;
	char *base;
	char *cache_path;
	struct peer peers[MAX_PEERS];
	int npeers;
	unsigned hash_size;	/* of the cache file: 0, the default */
};

static int setup(void **state)
{
	struct fixture *f = talloc_zero(NULL, struct fixture);

	assert_non_null(f);
	f->frame = talloc_stackframe();
	f->base = unit_tmpdir(f, "fastcase-unit-engine");
	assert_non_null(f->base);
	f->cache_path = talloc_asprintf(f, "%s/fastcase.tdb", f->base);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	int i;

	for (i = 0; i < f->npeers; i++) {
		if (f->peers[i].pid > 0) {
			kill(f->peers[i].pid, SIGKILL);
			waitpid(f->peers[i].pid, NULL, 0);
			close(f->peers[i].to);
			close(f->peers[i].from);
		}
	}
	unit_rmtree(f->base);
	TALLOC_FREE(f->frame);
	TALLOC_FREE(f);
	return 0;
}

static struct fastcase_engine_options options(struct fixture *f,
					      const struct fastcase_fold_rules
					      *rules, unsigned watch_limit)
{
	return (struct fastcase_engine_options) {
		.rules = *rules,
		.cache_path = f->cache_path,
		.cache_size = 64ULL << 20,
		.cache_hash_size = f->hash_size,
		.watch_limit = watch_limit,
		.log_name = "unit",
	};
}

static struct fastcase_engine *engine(struct fixture *f,
				      const struct fastcase_fold_rules *rules,
				      unsigned watch_limit)
{
	struct fastcase_engine_options o = options(f, rules, watch_limit);
	struct fastcase_engine *e = NULL;

	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	assert_non_null(e);
	return e;
}

static char *path_of(struct fixture *f, const char *rel)
{
	return talloc_asprintf(f, "%s/%s", f->base, rel);
}

static char *make_dir(struct fixture *f, const char *rel)
{
	char *p = path_of(f, rel);

	assert_int_equal(mkdir(p, 0755), 0);
	return p;
}

static void touch(const char *dir, const char *name)
{
	char *p = talloc_asprintf(talloc_tos(), "%s/%s", dir, name);
	int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);

	if (fd < 0) {
		fail_msg("cannot create %s: %s", p, strerror(errno));
	}
	close(fd);
}

static void rm(const char *dir, const char *name)
{
	char *p = talloc_asprintf(talloc_tos(), "%s/%s", dir, name);

	assert_int_equal(unlink(p), 0);
}

static void mv(const char *from_dir, const char *from,
	       const char *to_dir, const char *to)
{
	char *a = talloc_asprintf(talloc_tos(), "%s/%s", from_dir, from);
	char *b = talloc_asprintf(talloc_tos(), "%s/%s", to_dir, to);

	assert_int_equal(rename(a, b), 0);
}

static int open_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

static const char *result_name(enum fastcase_result r)
{
	switch (r) {
	case FASTCASE_FOUND:
		return "FOUND";
	case FASTCASE_NOT_FOUND:
		return "NOT_FOUND";
	case FASTCASE_UNKNOWN:
		return "UNKNOWN";
	}
	return "?";
}

typedef enum fastcase_result (*lookup_fn)(struct fastcase_engine *e,
					  int dirfd, const char *name,
					  TALLOC_CTX *mem_ctx, char **found);

/*
 * expect: NULL for a miss (NOT_FOUND; of a path, any answer but FOUND),
 * else the name or path FOUND must give.
 */
static void expect_answer_(lookup_fn fn, bool path, struct fastcase_engine *e,
			   int dirfd, const char *name, const char *expect,
			   const char *file, int line)
{
	TALLOC_CTX *frame = talloc_stackframe();
	const char *what = path ? "path" : "lookup";
	char *found = NULL;
	enum fastcase_result r;

	r = fn(e, dirfd, name, frame, &found);
	if (expect == NULL &&
	    (path ? r == FASTCASE_FOUND : r != FASTCASE_NOT_FOUND)) {
		fail_msg("%s:%d: %s \"%s\": %s \"%s\", expected %s", file,
			 line, what, unit_hex(name), result_name(r),
			 r == FASTCASE_FOUND ? unit_hex(found) : "",
			 path ? "no answer" : "NOT_FOUND");
	}
	if (expect != NULL &&
	    (r != FASTCASE_FOUND || strcmp(found, expect) != 0)) {
		fail_msg("%s:%d: %s \"%s\": %s \"%s\", expected FOUND "
			 "\"%s\"", file, line, what, unit_hex(name),
			 result_name(r),
			 r == FASTCASE_FOUND ? unit_hex(found) : "",
			 unit_hex(expect));
	}
	TALLOC_FREE(frame);
}
#define expect_lookup(e, fd, name, expect) \
	expect_answer_(fastcase_engine_lookup, false, e, fd, name, expect, \
		       __FILE__, __LINE__)
#define expect_path(e, fd, path, expect) \
	expect_answer_(fastcase_engine_lookup_path, true, e, fd, path, \
		       expect, __FILE__, __LINE__)

/* ---- peers: other processes with their own engine --------------------- */

enum peer_op {
	OP_LOOKUP = 1,	/* lookup name in dir: a = result, s = found */
	OP_CREATE,	/* begin, create if allowed, end: a = begin's
			   result, b = errno of the create, s = existing */
	OP_BEGIN,	/* begin only, keep the lock: a = result */
	OP_MAKE,	/* create the file of the pending begin: a = errno */
	OP_END,		/* end the pending begin, created = flag */
	OP_SLOW_CREATE,	/* begin, answer, wait flag ms, create, end,
			   answer again */
	OP_QUIT,
};

struct request {
	int32_t op;
	int32_t flag;
	uint32_t dir_len;
	uint32_t name_len;
};

struct reply {
	int32_t a;
	int32_t b;
	uint32_t len;
	char s[1024];
};

static bool write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			return false;
		}
		p += n;
		len -= n;
	}
	return true;
}

/* Read len bytes; false on EOF, error or timeout (-1: wait forever). */
static bool read_all(int fd, void *buf, size_t len, int timeout_ms)
{
	char *p = buf;

	while (len > 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int ret = poll(&pfd, 1, timeout_ms);

		if (ret < 0 && errno == EINTR) {
			continue;
		}
		if (ret != 1) {
			return false;
		}
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			return false;
		}
		p += n;
		len -= n;
	}
	return true;
}

static bool send_reply(int fd, int a, int b, const char *s)
{
	struct reply r = { .a = a, .b = b };

	if (s != NULL) {
		r.len = strlen(s);
		if (r.len >= sizeof(r.s)) {
			r.len = sizeof(r.s) - 1;
		}
		memcpy(r.s, s, r.len);
	}
	return write_all(fd, &r, offsetof(struct reply, s)) &&
	       write_all(fd, r.s, r.len);
}

static void peer_main(const struct fastcase_engine_options *opts, int in,
		      int out)
{
	struct fastcase_engine *e = NULL;
	struct fastcase_create op = { .st = NULL };
	int op_dirfd = -1;

	if (fastcase_engine_create(NULL, opts, &e) != 0) {
		_exit(20);
	}
	for (;;) {
		TALLOC_CTX *frame = talloc_stackframe();
		struct request q;
		char dir[PATH_MAX], name[512];
		char *found = NULL, *existing = NULL;
		int dirfd, ret, fd, err;

		if (!read_all(in, &q, sizeof(q), -1) ||
		    q.dir_len >= sizeof(dir) || q.name_len >= sizeof(name) ||
		    !read_all(in, dir, q.dir_len, -1) ||
		    !read_all(in, name, q.name_len, -1)) {
			_exit(21);
		}
		dir[q.dir_len] = '\0';
		name[q.name_len] = '\0';
		if (q.op == OP_QUIT) {
			TALLOC_FREE(e);
			_exit(0);
		}
		if (q.op == OP_MAKE || q.op == OP_END) {
			dirfd = op_dirfd;
		} else {
			dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		}
		switch (q.op) {
		case OP_LOOKUP:
			ret = fastcase_engine_lookup(e, dirfd, name, frame,
						     &found);
			send_reply(out, ret, 0,
				   ret == FASTCASE_FOUND ? found : NULL);
			close(dirfd);
			break;
		case OP_CREATE:
			ret = fastcase_engine_create_begin(e, dirfd, name, &op,
							   frame, &existing);
			err = 0;
			if (ret == 0) {
				fd = openat(dirfd, name,
					    O_CREAT | O_EXCL | O_WRONLY, 0644);
				err = fd < 0 ? errno : 0;
				if (fd >= 0) {
					close(fd);
				}
				fastcase_engine_create_end(e, &op, name,
							   fd >= 0);
			}
			send_reply(out, ret, err,
				   ret == EEXIST ? existing : NULL);
			close(dirfd);
			break;
		case OP_BEGIN:
			ret = fastcase_engine_create_begin(e, dirfd, name, &op,
							   frame, &existing);
			if (ret == 0) {
				op_dirfd = dirfd;
			} else {
				close(dirfd);
			}
			send_reply(out, ret, 0,
				   ret == EEXIST ? existing : NULL);
			break;
		case OP_MAKE:
			fd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY,
				    0644);
			err = fd < 0 ? errno : 0;
			if (fd >= 0) {
				close(fd);
			}
			send_reply(out, err, 0, NULL);
			break;
		case OP_END:
			fastcase_engine_create_end(e, &op, name, q.flag != 0);
			close(op_dirfd);
			op_dirfd = -1;
			send_reply(out, 0, 0, NULL);
			break;
		case OP_SLOW_CREATE:
			ret = fastcase_engine_create_begin(e, dirfd, name, &op,
							   frame, &existing);
			send_reply(out, ret, 0,
				   ret == EEXIST ? existing : NULL);
			if (ret == 0) {
				usleep(q.flag * 1000);
				fd = openat(dirfd, name,
					    O_CREAT | O_EXCL | O_WRONLY, 0644);
				if (fd >= 0) {
					close(fd);
				}
				fastcase_engine_create_end(e, &op, name,
							   fd >= 0);
			}
			send_reply(out, 0, 0, NULL);
			close(dirfd);
			break;
		default:
			_exit(22);
		}
		TALLOC_FREE(frame);
	}
}

/* Fork a peer with its own engine; before this process opens its own. */
static struct peer *peer_start(struct fixture *f,
			       const struct fastcase_fold_rules *rules,
			       unsigned watch_limit)
{
	struct fastcase_engine_options o = options(f, rules, watch_limit);
	struct peer *p;
	int to[2], from[2];

	assert_true(f->npeers < MAX_PEERS);
	p = &f->peers[f->npeers++];
	assert_int_equal(pipe(to), 0);
	assert_int_equal(pipe(from), 0);
	fflush(stdout);
	fflush(stderr);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		close(to[1]);
		close(from[0]);
		peer_main(&o, to[0], from[1]);
		_exit(23);
	}
	close(to[0]);
	close(from[1]);
	p->to = to[1];
	p->from = from[0];
	return p;
}

static void peer_send(struct peer *p, int op, const char *dir,
		      const char *name, int flag)
{
	struct request q = {
		.op = op, .flag = flag,
		.dir_len = dir != NULL ? strlen(dir) : 0,
		.name_len = name != NULL ? strlen(name) : 0,
	};

	assert_true(write_all(p->to, &q, sizeof(q)));
	assert_true(write_all(p->to, dir, q.dir_len));
	assert_true(write_all(p->to, name, q.name_len));
}

/* false when the peer did not answer in time: it hangs */
static bool peer_wait(struct peer *p, struct reply *r, int timeout_ms)
{
	memset(r, 0, sizeof(*r));
	if (!read_all(p->from, r, offsetof(struct reply, s), timeout_ms) ||
	    r->len >= sizeof(r->s) ||
	    !read_all(p->from, r->s, r->len, timeout_ms)) {
		return false;
	}
	r->s[r->len] = '\0';
	return true;
}

static struct reply peer_call(struct peer *p, int op, const char *dir,
			      const char *name, int flag)
{
	struct reply r;

	peer_send(p, op, dir, name, flag);
	if (!peer_wait(p, &r, PEER_TIMEOUT_MS)) {
		fail_msg("peer %d gave no answer to op %d on \"%s\" within "
			 "%d ms: it hangs", (int)p->pid, op, unit_hex(name),
			 PEER_TIMEOUT_MS);
	}
	return r;
}

static void peer_expect_lookup(struct peer *p, const char *dir,
			       const char *name, const char *expect)
{
	struct reply r = peer_call(p, OP_LOOKUP, dir, name, 0);

	if (expect == NULL && r.a != FASTCASE_NOT_FOUND) {
		fail_msg("peer lookup \"%s\": %s \"%s\", expected NOT_FOUND",
			 unit_hex(name), result_name(r.a), unit_hex(r.s));
	}
	if (expect != NULL &&
	    (r.a != FASTCASE_FOUND || strcmp(r.s, expect) != 0)) {
		fail_msg("peer lookup \"%s\": %s \"%s\", expected FOUND "
			 "\"%s\"", unit_hex(name), result_name(r.a), unit_hex(r.s),
			 unit_hex(expect));
	}
}

static void peer_quit(struct peer *p)
{
	int status;

	peer_send(p, OP_QUIT, "", "", 0);
	assert_int_equal(waitpid(p->pid, &status, 0), p->pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	p->pid = 0;
	close(p->to);
	close(p->from);
}

/* ---- lookups and local changes ---------------------------------------- */

static void test_lookup_basic(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "docs");
	const struct fastcase_stats *st;
	int fd, i;

	touch(dir, "Report.docx");
	for (i = 0; i < 200; i++) {
		char n[32];

		snprintf(n, sizeof(n), "Other%03d.TXT", i);
		touch(dir, n);
	}
	fd = open_dir(dir);
	expect_lookup(e, fd, "REPORT.DOCX", "Report.docx");
	expect_lookup(e, fd, "report.docx", "Report.docx");
	expect_lookup(e, fd, "Report.docx", "Report.docx");
	expect_lookup(e, fd, "other123.txt", "Other123.TXT");
	expect_lookup(e, fd, "Missing.txt", NULL);
	expect_lookup(e, fd, "Report.doc", NULL);
	expect_lookup(e, fd, "Report.docx ", NULL);
	expect_lookup(e, fd, "Other200.txt", NULL);

	st = fastcase_engine_stats(e);
	assert_int_equal(st->lookups, 8);
	assert_int_equal(st->hits, 4);
	assert_int_equal(st->misses, 4);
	assert_int_equal(st->unknown, 0);
	assert_int_equal(st->builds, 1);
	assert_true(fastcase_engine_watch_fd(e) >= 0);
	close(fd);
}

/*
 * smbd names its share root AT_FDCWD. A lookup there is a lookup in the
 * directory the process is in at the time of the call, and the directory
 * stays known by its own fd when the process moves elsewhere.
 */
static void test_lookup_in_working_directory(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *one = make_dir(f, "cwd-one");
	char *two = make_dir(f, "cwd-two");
	const struct fastcase_stats *st = fastcase_engine_stats(e);
	char *saved = getcwd(NULL, 0);
	int fd;

	assert_non_null(saved);
	touch(one, "Alpha.txt");
	touch(two, "Beta.txt");
	assert_int_equal(chdir(one), 0);
	expect_lookup(e, AT_FDCWD, "ALPHA.TXT", "Alpha.txt");
	expect_lookup(e, AT_FDCWD, "beta.txt", NULL);
	assert_int_equal(chdir(two), 0);
	expect_lookup(e, AT_FDCWD, "BETA.TXT", "Beta.txt");
	expect_lookup(e, AT_FDCWD, "alpha.txt", NULL);
	assert_int_equal(st->builds, 2);
	/* a change in the first, seen through an fd of it */
	touch(one, "Gamma.txt");
	fd = open_dir(one);
	expect_lookup(e, fd, "gamma.TXT", "Gamma.txt");
	assert_int_equal(st->builds, 2);
	close(fd);
	assert_int_equal(chdir(saved), 0);
	free(saved);
}

/*
 * A whole path of directories in one call: each component as a lookup
 * answers it; a symlink or a file on the way is no answer.
 */
static void test_lookup_path(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *root = make_dir(f, "paths");
	char *top = make_dir(f, "paths/Top");
	int fd = open_dir(root);

	make_dir(f, "paths/Top/Mid");
	make_dir(f, "paths/Top/mid-other");
	make_dir(f, "paths/Top/Mid/Low");
	touch(top, "File.txt");
	assert_int_equal(symlink("Top", path_of(f, "paths/Link")), 0);

	expect_path(e, fd, "TOP/MID/LOW", "Top/Mid/Low");
	expect_path(e, fd, "Top/Mid/Low", "Top/Mid/Low");
	expect_path(e, fd, "top", "Top");
	expect_path(e, fd, "TOP/MID-OTHER", "Top/mid-other");
	expect_path(e, fd, "TOP/NOPE/LOW", NULL);
	expect_path(e, fd, "LINK/MID", NULL);	/* a symlink */
	expect_path(e, fd, "link", NULL);
	expect_path(e, fd, "TOP/FILE.TXT", NULL);	/* not a directory */
	expect_path(e, fd, "TOP/FILE.TXT/X", NULL);
	close(fd);
}

/*
 * A process meets the directories of a path by their stamps alone, with
 * no watch (and those on the way with no state): a change in the last of
 * them after the path's lookup, or in one on the way between two lookups,
 * is seen by the next lookup.
 */
static void test_path_met_by_stamps(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *builder = engine(f, &windows_rules, 100);
	struct fastcase_engine *e = NULL;
	char *root = make_dir(f, "met");
	char *low = NULL;
	int fd = open_dir(root), low_fd;

	make_dir(f, "met/Top");
	make_dir(f, "met/Top/Mid");
	low = make_dir(f, "met/Top/Mid/Low");
	touch(low, "Old.txt");
	expect_path(builder, fd, "TOP/MID/LOW", "Top/Mid/Low");
	low_fd = open_dir(low);
	expect_lookup(builder, low_fd, "OLD.TXT", "Old.txt");
	usleep(150 * 1000);	/* the builder's next lookups restamp */
	expect_path(builder, fd, "TOP/MID/LOW", "Top/Mid/Low");
	expect_lookup(builder, low_fd, "OLD.TXT", "Old.txt");

	e = engine(f, &windows_rules, 100);
	expect_path(e, fd, "TOP/MID/LOW", "Top/Mid/Low");
	assert_int_equal(fastcase_engine_stats(e)->builds, 0);
	touch(low, "New.txt");
	expect_lookup(e, low_fd, "NEW.TXT", "New.txt");

	/* an exact match made on the way wins over the records' "Mid" */
	make_dir(f, "met/Top/MID");
	make_dir(f, "met/Top/MID/Low");
	expect_path(e, fd, "TOP/MID/LOW", "Top/MID/Low");
	expect_path(e, fd, "TOP/Mid/LOW", "Top/Mid/Low");

	mv(path_of(f, "met/Top"), "Mid", path_of(f, "met/Top"), "Middle");
	expect_path(e, fd, "TOP/MIDDLE/LOW", "Top/Middle/Low");
	expect_path(e, fd, "TOP/Mid/LOW", "Top/MID/Low");
	expect_path(e, fd, "TOP/MIDDLE/NOPE", NULL);
	close(low_fd);
	close(fd);
}

/*
 * Changes made with plain system calls, each checked by the very next
 * lookup: no sleeps.
 */
static void change_sequence(struct fixture *f, struct fastcase_engine *e,
			    const char *tag, bool watched)
{
	char *dir = make_dir(f, tag);
	char *other = make_dir(f, talloc_asprintf(f, "%s-other", tag));
	const struct fastcase_stats *st = fastcase_engine_stats(e);
	uint64_t builds;
	char *sub, *link;
	int fd, i;

	touch(dir, "Report.docx");
	assert_int_equal(mkdir(talloc_asprintf(f, "%s/Sub", dir), 0755), 0);
	for (i = 0; i < 50; i++) {
		touch(dir, talloc_asprintf(f, "pad%02d", i));
	}
	touch(other, "Moved.txt");
	fd = open_dir(dir);

	expect_lookup(e, fd, "REPORT.DOCX", "Report.docx");
	expect_lookup(e, fd, "newfile", NULL);
	builds = st->builds;

	/* create */
	touch(dir, "NewFile");
	expect_lookup(e, fd, "NEWFILE", "NewFile");
	expect_lookup(e, fd, "NewFile", "NewFile");
	/* unlink */
	rm(dir, "NewFile");
	expect_lookup(e, fd, "newfile", NULL);
	/* rename within the directory */
	mv(dir, "Report.docx", dir, "Summary.docx");
	expect_lookup(e, fd, "REPORT.DOCX", NULL);
	expect_lookup(e, fd, "summary.DOCX", "Summary.docx");
	/* case-only rename */
	mv(dir, "Summary.docx", dir, "SUMMARY.docx");
	expect_lookup(e, fd, "summary.docx", "SUMMARY.docx");
	expect_lookup(e, fd, "Summary.docx", "SUMMARY.docx");
	/* a rename over an existing name */
	touch(dir, "tmp~");
	mv(dir, "tmp~", dir, "SUMMARY.docx");
	expect_lookup(e, fd, "TMP~", NULL);
	expect_lookup(e, fd, "summary.docx", "SUMMARY.docx");
	/* replace a subdirectory by one spelled differently */
	sub = talloc_asprintf(f, "%s/Sub", dir);
	assert_int_equal(rmdir(sub), 0);
	expect_lookup(e, fd, "sub", NULL);
	assert_int_equal(mkdir(talloc_asprintf(f, "%s/sUB", dir), 0755), 0);
	expect_lookup(e, fd, "Sub", "sUB");
	expect_lookup(e, fd, "SUB", "sUB");
	/* moved in from another directory, and out again */
	mv(other, "Moved.txt", dir, "Moved.txt");
	expect_lookup(e, fd, "MOVED.TXT", "Moved.txt");
	mv(dir, "Moved.txt", other, "Moved.txt");
	expect_lookup(e, fd, "moved.txt", NULL);
	/* a directory and a symlink */
	assert_int_equal(mkdir(talloc_asprintf(f, "%s/NewDir", dir), 0755),
			 0);
	expect_lookup(e, fd, "NEWDIR", "NewDir");
	link = talloc_asprintf(f, "%s/Link", dir);
	assert_int_equal(symlink("/nonexistent/target", link), 0);
	expect_lookup(e, fd, "link", "Link");
	assert_int_equal(unlink(link), 0);
	expect_lookup(e, fd, "LINK", NULL);
	/* many changes at once */
	for (i = 0; i < 50; i++) {
		rm(dir, talloc_asprintf(f, "pad%02d", i));
		touch(dir, talloc_asprintf(f, "PAD%02d", i));
	}
	for (i = 0; i < 50; i++) {
		expect_lookup(e, fd, talloc_asprintf(f, "pad%02d", i),
			      talloc_asprintf(f, "PAD%02d", i));
	}

	if (watched) {
		/* in sync through inotify: no rebuild was needed */
		assert_int_equal(st->builds, builds);
		assert_true(st->events > 0);
	}

	/* the whole directory replaced by a new one at the same path */
	{
		char *old = talloc_asprintf(f, "%s.old", dir);
		int nfd;

		assert_int_equal(rename(dir, old), 0);
		assert_int_equal(mkdir(dir, 0755), 0);
		touch(dir, "Fresh");
		nfd = open_dir(dir);
		expect_lookup(e, nfd, "FRESH", "Fresh");
		expect_lookup(e, nfd, "summary.docx", NULL);
		/* the old directory, still open, keeps its own names */
		expect_lookup(e, fd, "summary.docx", "SUMMARY.docx");
		expect_lookup(e, fd, "fresh", NULL);
		rm(old, "SUMMARY.docx");
		expect_lookup(e, fd, "summary.docx", NULL);
		close(nfd);
	}
	close(fd);
}

/*
 * Changes right after a lookup, in a tight loop: on file systems with
 * coarse timestamps a change often lands in the same tick as the stamp
 * of the records just built, and only the racy-stamp rule catches it.
 */
static void tight_loop(struct fixture *f, struct fastcase_engine *e,
		       const char *tag)
{
	char *dir = make_dir(f, tag);
	int fd = open_dir(dir), i;

	for (i = 0; i < 300; i++) {
		char up[32], low[32];

		snprintf(up, sizeof(up), "Tight%03d", i);
		snprintf(low, sizeof(low), "tight%03d", i);
		expect_lookup(e, fd, low, NULL);
		touch(dir, up);
		expect_lookup(e, fd, low, up);
		if (i % 3 == 0) {
			rm(dir, up);
			expect_lookup(e, fd, low, NULL);
		}
	}
	close(fd);
}

static void test_local_changes_inotify(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);

	change_sequence(f, e, "watched", true);
	tight_loop(f, e, "tight-watched");
}

static void test_local_changes_no_inotify(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 0);

	assert_int_equal(fastcase_engine_watch_fd(e), -1);
	change_sequence(f, e, "unwatched", false);
	tight_loop(f, e, "tight-unwatched");
}

/*
 * Without a watch, a directory that changes again right after its last
 * build is not read again for every question: within the interval the
 * lookup is handed to a scan (UNKNOWN) and a create's check is made by a
 * scan under the lock, which still refuses a case variant; after it, the
 * records are rebuilt and answer again.
 */
static void test_deferred_rebuilds(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 0);
	const struct fastcase_stats *st = NULL;
	struct fastcase_engine *e = NULL;
	struct fastcase_create op;
	char *dir = make_dir(f, "deferred"), *existing = NULL, *found = NULL;
	uint64_t builds, scans;
	int fd;

	o.rebuild_interval_ns = 200 * 1000 * 1000LL;
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	st = fastcase_engine_stats(e);
	touch(dir, "Report.docx");
	fd = open_dir(dir);
	usleep(250 * 1000);	/* the first build is not "lately" */
	expect_lookup(e, fd, "REPORT.DOCX", "Report.docx");
	builds = st->builds;

	touch(dir, "Budget.xlsx");
	assert_int_equal(fastcase_engine_lookup(e, fd, "BUDGET.XLSX", f,
						&found), FASTCASE_UNKNOWN);
	assert_int_equal(st->deferred_builds, 1);
	assert_int_equal(st->builds, builds);

	scans = st->scanned_checks;
	assert_int_equal(fastcase_engine_create_begin(e, fd, "budget.XLSX",
						      &op, f, &existing),
			 EEXIST);
	assert_string_equal(existing, "Budget.xlsx");
	assert_int_equal(st->scanned_checks, scans + 1);
	assert_int_equal(st->builds, builds);

	usleep(250 * 1000);
	expect_lookup(e, fd, "BUDGET.XLSX", "Budget.xlsx");
	assert_int_equal(st->builds, builds + 1);
	close(fd);
}

/*
 * Without a watch, and with a stamp that cannot be trusted (the directory
 * changed since), a hit the records give is answered once a stat shows
 * the name is there, without reading the directory; a name the records
 * give that is gone is not answered from them.
 */
static void test_confirmed_hits(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 0);
	const struct fastcase_stats *st = NULL;
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "confirmed"), *found = NULL, *path = NULL;
	uint64_t builds;
	int fd;

	o.rebuild_interval_ns = 200 * 1000 * 1000LL;
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	st = fastcase_engine_stats(e);
	touch(dir, "Report.docx");
	touch(dir, "Budget.xlsx");
	fd = open_dir(dir);
	expect_lookup(e, fd, "REPORT.DOCX", "Report.docx");
	builds = st->builds;

	touch(dir, "Other.txt");
	expect_lookup(e, fd, "BUDGET.XLSX", "Budget.xlsx");
	assert_int_equal(st->confirmed_hits, 1);
	assert_int_equal(st->builds, builds);
	assert_int_equal(st->deferred_builds, 0);

	path = talloc_asprintf(f, "%s/Report.docx", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_not_equal(fastcase_engine_lookup(e, fd, "REPORT.DOCX", f,
						    &found),
			     FASTCASE_FOUND);
	assert_int_equal(st->confirmed_hits, 1);
	close(fd);
}

/* More directories than the watch limit: the oldest are dropped, and
 * answers stay right. */
static void test_watch_limit_eviction(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 3);
	struct fastcase_engine *e = NULL;
	char *dirs[8];
	int fds[8], round, i;

	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	for (i = 0; i < 8; i++) {
		dirs[i] = make_dir(f, talloc_asprintf(f, "d%d", i));
		touch(dirs[i], talloc_asprintf(f, "File%d", i));
		fds[i] = open_dir(dirs[i]);
	}
	for (round = 0; round < 3; round++) {
		for (i = 0; i < 8; i++) {
			char *name = talloc_asprintf(f, "New%d-%d", i, round);

			expect_lookup(e, fds[i],
				      talloc_asprintf(f, "FILE%d", i),
				      talloc_asprintf(f, "File%d", i));
			expect_lookup(e, fds[i], name, NULL);
			touch(dirs[i], name);
			expect_lookup(e, fds[i], name, name);
		}
	}
	for (i = 0; i < 8; i++) {
		close(fds[i]);
	}
}

/* ---- the cluster's create count ---------------------------------------- */

/*
 * A stand-in for the create count kept with a directory's cluster lock
 * (fastcase_cluster_lock.h): "another node" moves it and holds the lock
 * by setting these.
 */
struct fake_cluster {
	uint64_t count;
	bool held_elsewhere;	/* another node holds the lock */
	unsigned reads;
};

static bool fake_create_count(void *private_data, int dirfd, bool held,
			      uint64_t *count)
{
	struct fake_cluster *c = private_data;

	c->reads++;
	if (!held && c->held_elsewhere) {
		return false;
	}
	*count = c->count;
	return true;
}

/* A create through the engine as the glue makes it on a cluster: checked,
 * counted, made. Returns the check's errno; *existing for EEXIST. */
static int cluster_create(struct fastcase_engine *e, struct fake_cluster *c,
			  int dirfd, const char *dir, const char *name,
			  TALLOC_CTX *mem_ctx, char **existing)
{
	struct fastcase_create op;
	int ret;

	ret = fastcase_engine_create_begin(e, dirfd, name, &op, mem_ctx,
					   existing);
	if (ret == 0) {
		c->count++;
		touch(dir, name);
		fastcase_engine_create_end(e, &op, name, true);
	}
	return ret;
}

/*
 * On a cluster a create's lookup that read the directory vouches for the
 * create right after, as long as no create began under the cluster lock
 * since the lookup had the count; otherwise the create reads again.
 */
static void test_counted_create_checks(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 0);
	struct fake_cluster c = { .count = 7 };
	const struct fastcase_stats *st = NULL;
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "counted"), *existing = NULL;
	uint64_t scanned;
	int fd;

	o.exact_create_checks = true;
	/* long enough that every rebuild after the first is put off */
	o.rebuild_interval_ns = 60 * 1000 * 1000 * 1000LL;
	o.create_count = fake_create_count;
	o.create_count_data = &c;
	o.scan_put_off_lookups = true;
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	st = fastcase_engine_stats(e);
	touch(dir, "Report.docx");
	fd = open_dir(dir);

	/* a miss read by a build, then its create: no second read */
	expect_lookup(e, fd, "New.txt", NULL);
	scanned = st->scanned_checks;
	assert_int_equal(cluster_create(e, &c, fd, dir, "New.txt", f,
					&existing), 0);
	assert_int_equal(st->counted_checks, 1);
	assert_int_equal(st->scanned_checks, scanned);

	/* the rebuild put off: the engine scans, and vouches as well */
	expect_lookup(e, fd, "Second.txt", NULL);
	assert_int_equal(cluster_create(e, &c, fd, dir, "Second.txt", f,
					&existing), 0);
	assert_int_equal(st->counted_checks, 2);

	/* another node creates a variant after the lookup: refused */
	expect_lookup(e, fd, "Third.txt", NULL);
	c.count++;
	touch(dir, "THIRD.TXT");
	assert_int_equal(cluster_create(e, &c, fd, dir, "Third.txt", f,
					&existing), EEXIST);
	assert_string_equal(existing, "THIRD.TXT");
	assert_int_equal(st->counted_checks, 2);

	/*
	 * Another node had counted its create but not made it when the
	 * lookup read: the lookup gets no count (and leaves the question to
	 * smbd's scan), so the create reads again and finds the variant.
	 */
	c.held_elsewhere = true;
	c.count++;
	assert_int_equal(fastcase_engine_lookup(e, fd, "Fourth.txt", f,
						&existing), FASTCASE_UNKNOWN);
	touch(dir, "FOURTH.TXT");
	c.held_elsewhere = false;
	assert_int_equal(cluster_create(e, &c, fd, dir, "Fourth.txt", f,
					&existing), EEXIST);
	assert_string_equal(existing, "FOURTH.TXT");

	/* a lookup vouches for its own name only */
	expect_lookup(e, fd, "Fifth.txt", NULL);
	assert_int_equal(cluster_create(e, &c, fd, dir, "Sixth.txt", f,
					&existing), 0);
	assert_int_equal(st->counted_checks, 2);

	/* and once: the next create of another spelling reads */
	expect_lookup(e, fd, "Seventh.txt", NULL);
	assert_int_equal(cluster_create(e, &c, fd, dir, "Seventh.txt", f,
					&existing), 0);
	assert_int_equal(st->counted_checks, 3);
	assert_int_equal(cluster_create(e, &c, fd, dir, "SEVENTH.txt", f,
					&existing), EEXIST);
	assert_int_equal(st->counted_checks, 3);

	/* wrong-case hits of names made meanwhile, the rebuild put off */
	expect_lookup(e, fd, "SIXTH.TXT", "Sixth.txt");
	expect_lookup(e, fd, "fourth.txt", "FOURTH.TXT");
	close(fd);
}

/*
 * With scan_put_off_lookups off (vfs_glusterfs_fuse below asks the
 * bricks), a lookup whose rebuild is put off is left to the caller, and
 * its create checks by a read; a build's miss still vouches.
 */
static void test_put_off_lookup_left_to_the_caller(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 0);
	struct fake_cluster c = { .count = 3 };
	const struct fastcase_stats *st = NULL;
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "left"), *found = NULL;
	uint64_t fallbacks, scanned;
	int fd;

	o.exact_create_checks = true;
	o.rebuild_interval_ns = 60 * 1000 * 1000 * 1000LL;
	o.create_count = fake_create_count;
	o.create_count_data = &c;
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	st = fastcase_engine_stats(e);
	touch(dir, "Report.docx");
	fd = open_dir(dir);

	expect_lookup(e, fd, "New.txt", NULL);
	assert_int_equal(cluster_create(e, &c, fd, dir, "New.txt", f,
					&found), 0);
	assert_int_equal(st->counted_checks, 1);

	fallbacks = st->fallbacks;
	scanned = st->scanned_checks;
	assert_int_equal(fastcase_engine_lookup(e, fd, "Second.txt", f,
						&found), FASTCASE_UNKNOWN);
	assert_int_equal(st->fallbacks, fallbacks);
	assert_int_equal(cluster_create(e, &c, fd, dir, "Second.txt", f,
					&found), 0);
	assert_int_equal(st->counted_checks, 1);
	assert_int_equal(st->scanned_checks, scanned + 1);
	close(fd);
}

/* ---- two engines ------------------------------------------------------ */

static void two_engines(struct fixture *f, unsigned watch_limit)
{
	struct peer *p = peer_start(f, &windows_rules, watch_limit);
	struct fastcase_engine *e = engine(f, &windows_rules, watch_limit);
	char *dir = make_dir(f, talloc_asprintf(f, "shared%u", watch_limit));
	struct fastcase_create op;
	struct reply r;
	char *existing = NULL;
	int fd, nfd;

	touch(dir, "Report.docx");
	fd = open_dir(dir);

	/* both know the directory */
	expect_lookup(e, fd, "REPORT.DOCX", "Report.docx");
	peer_expect_lookup(p, dir, "report.DOCX", "Report.docx");

	/* a case variant of an existing name is refused */
	assert_int_equal(fastcase_engine_create_begin(e, fd, "REPORT.DOCX",
						      &op, f, &existing),
			 EEXIST);
	assert_string_equal(existing, "Report.docx");
	/* the exact name is left to the kernel */
	assert_int_equal(fastcase_engine_create_begin(e, fd, "Report.docx",
						      &op, f, &existing), 0);
	fastcase_engine_create_end(e, &op, "Report.docx", false);

	/* we create, the peer sees it at once */
	existing = NULL;
	assert_int_equal(fastcase_engine_create_begin(e, fd, "NewDoc.txt",
						      &op, f, &existing), 0);
	assert_null(existing);
	nfd = openat(fd, "NewDoc.txt", O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(nfd >= 0);
	close(nfd);
	fastcase_engine_create_end(e, &op, "NewDoc.txt", true);
	r = peer_call(p, OP_CREATE, dir, "NEWDOC.TXT", 0);
	assert_int_equal(r.a, EEXIST);
	assert_string_equal(r.s, "NewDoc.txt");
	peer_expect_lookup(p, dir, "newdoc.txt", "NewDoc.txt");

	/* the peer creates, we see it at once */
	r = peer_call(p, OP_CREATE, dir, "Other.txt", 0);
	assert_int_equal(r.a, 0);
	assert_int_equal(r.b, 0);
	expect_lookup(e, fd, "OTHER.TXT", "Other.txt");
	existing = NULL;
	assert_int_equal(fastcase_engine_create_begin(e, fd, "other.TXT",
						      &op, f, &existing),
			 EEXIST);
	assert_string_equal(existing, "Other.txt");

	/* a failed create leaves nothing behind */
	assert_int_equal(fastcase_engine_create_begin(e, fd, "Ghost.txt",
						      &op, f, &existing), 0);
	fastcase_engine_create_end(e, &op, "Ghost.txt", false);
	r = peer_call(p, OP_CREATE, dir, "GHOST.TXT", 0);
	assert_int_equal(r.a, 0);
	expect_lookup(e, fd, "ghost.txt", "GHOST.TXT");

	/* the peer holds the directory's lock while it creates: our begin
	 * waits for it, and then sees the new name */
	peer_send(p, OP_SLOW_CREATE, dir, "Held.txt", 300);
	assert_true(peer_wait(p, &r, PEER_TIMEOUT_MS));
	assert_int_equal(r.a, 0);
	existing = NULL;
	assert_int_equal(fastcase_engine_create_begin(e, fd, "HELD.TXT", &op,
						      f, &existing), EEXIST);
	assert_string_equal(existing, "Held.txt");
	assert_true(peer_wait(p, &r, PEER_TIMEOUT_MS));

	/* renames are checked like creates; a case-only rename is fine */
	existing = NULL;
	assert_int_equal(fastcase_engine_rename_begin(e, fd, "held.TXT", fd,
						      "Other.txt", &op, f,
						      &existing), EEXIST);
	assert_string_equal(existing, "Held.txt");
	assert_int_equal(fastcase_engine_rename_begin(e, fd, "OTHER.txt", fd,
						      "Other.txt", &op, f,
						      &existing), 0);
	assert_int_equal(renameat(fd, "Other.txt", fd, "OTHER.txt"), 0);
	fastcase_engine_create_end(e, &op, "OTHER.txt", true);
	fastcase_engine_name_changed(e, fd, "Other.txt");
	expect_lookup(e, fd, "other.txt", "OTHER.txt");
	peer_expect_lookup(p, dir, "other.txt", "OTHER.txt");

	/* plain unlinks, by us, seen by the peer */
	assert_int_equal(unlinkat(fd, "OTHER.txt", 0), 0);
	fastcase_engine_name_changed(e, fd, "OTHER.txt");
	peer_expect_lookup(p, dir, "other.txt", NULL);
	expect_lookup(e, fd, "other.txt", NULL);

	peer_quit(p);
	close(fd);
}

static void test_two_engines_inotify(void **state)
{
	two_engines(*state, 100);
}

static void test_two_engines_no_inotify(void **state)
{
	two_engines(*state, 0);
}

/* Count the names in dir that strcasecmp_m() calls equal to name. */
static int count_folding(const char *dir, const char *name)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (strcasecmp_m(de->d_name, name) == 0) {
			n++;
		}
	}
	closedir(d);
	return n;
}

#define RACE_ROUNDS 50

static void test_create_race(void **state)
{
	struct fixture *f = *state;
	struct peer *p = peer_start(f, &windows_rules, 100);
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "race");
	int fd = open_dir(dir), round, ours = 0, theirs = 0;

	touch(dir, "seed");
	expect_lookup(e, fd, "SEED", "seed");
	peer_expect_lookup(p, dir, "Seed", "seed");

	for (round = 0; round < RACE_ROUNDS; round++) {
		char mine[32], peer_name[32];
		struct fastcase_create op;
		char *existing = NULL;
		struct reply r;
		bool created = false;
		int ret, nfd;

		snprintf(mine, sizeof(mine), "ROUND%02d.TXT", round);
		snprintf(peer_name, sizeof(peer_name), "round%02d.txt", round);
		/* the peer starts as soon as it reads this; we start at
		 * once or a little later, so that either may win */
		peer_send(p, OP_CREATE, dir, peer_name, 0);
		if (round % 2 == 1) {
			usleep((round * 37) % 300);
		}
		ret = fastcase_engine_create_begin(e, fd, mine, &op, f,
						   &existing);
		if (ret == 0) {
			nfd = openat(fd, mine, O_CREAT | O_EXCL | O_WRONLY,
				     0644);
			created = nfd >= 0;
			if (nfd >= 0) {
				close(nfd);
			}
			fastcase_engine_create_end(e, &op, mine, created);
		} else {
			assert_int_equal(ret, EEXIST);
			assert_string_equal(existing, peer_name);
		}
		if (!peer_wait(p, &r, PEER_TIMEOUT_MS)) {
			fail_msg("round %d: the peer hangs", round);
		}
		if (r.a == EEXIST) {
			assert_string_equal(r.s, mine);
		} else {
			assert_int_equal(r.a, 0);
			assert_int_equal(r.b, 0);
		}
		/* exactly one of the two made a file */
		if (created == (r.a == 0)) {
			fail_msg("round %d: we %s, the peer %s", round,
				 created ? "created" : "did not create",
				 r.a == 0 ? "created" : "did not create");
		}
		if (count_folding(dir, mine) != 1) {
			fail_msg("round %d: %d names fold equal to %s", round,
				 count_folding(dir, mine), mine);
		}
		if (created) {
			ours++;
		} else {
			theirs++;
		}
	}
	print_message("create race: %d rounds won here, %d by the peer\n",
		      ours, theirs);
	peer_quit(p);
	close(fd);
}

/*
 * Two processes each inside a create bracket in a different directory,
 * each with a queued event for the other's directory: ending the bracket
 * must not wait for the other process's directory lock (which it holds
 * until its own end): both would wait forever.
 */
static void test_cross_directory_brackets(void **state)
{
	struct fixture *f = *state;
	struct peer *a = peer_start(f, &windows_rules, 100);
	struct peer *b = peer_start(f, &windows_rules, 100);
	char *x = make_dir(f, "X");
	char *y = make_dir(f, "Y");
	struct reply r;
	int round;

	for (round = 0; round < 5; round++) {
		char na[32], nb[32];

		snprintf(na, sizeof(na), "a%d", round);
		snprintf(nb, sizeof(nb), "b%d", round);
		/* both watch both directories */
		peer_expect_lookup(a, x, na, NULL);
		peer_expect_lookup(a, y, nb, NULL);
		peer_expect_lookup(b, x, na, NULL);
		peer_expect_lookup(b, y, nb, NULL);

		r = peer_call(a, OP_BEGIN, x, na, 0);
		assert_int_equal(r.a, 0);
		r = peer_call(b, OP_BEGIN, y, nb, 0);
		assert_int_equal(r.a, 0);
		r = peer_call(a, OP_MAKE, x, na, 0);
		assert_int_equal(r.a, 0);
		r = peer_call(b, OP_MAKE, y, nb, 0);
		assert_int_equal(r.a, 0);
		/* both end at once */
		peer_send(a, OP_END, x, na, 1);
		peer_send(b, OP_END, y, nb, 1);
		if (!peer_wait(a, &r, PEER_TIMEOUT_MS) ||
		    !peer_wait(b, &r, PEER_TIMEOUT_MS)) {
			fail_msg("round %d: the create brackets deadlocked",
				 round);
		}
		/* and both still answer right, about both directories */
		peer_expect_lookup(a, x, na, na);
		peer_expect_lookup(a, y, nb, nb);
		peer_expect_lookup(b, x, na, na);
		peer_expect_lookup(b, y, nb, nb);
	}
	peer_quit(a);
	peer_quit(b);
}

/*
 * Names whose entry records hash to the TDB chain of the other
 * directory's record: a process in a create bracket in X then reads and
 * writes the chain of Y's directory key and the other way round. Were the
 * directory locks TDB chain locks, the two brackets would deadlock. The
 * keys come from the cache's own key functions, never a copy of the
 * layout, so that the test follows the layout when it changes.
 */

/* TDB's chain of a key: its hash modulo the open file's hash size. */
static unsigned tdb_chain(struct tdb_context *tdb, TDB_DATA key)
{
	return tdb_jenkins_hash(&key) % tdb_hash_size(tdb);
}

static unsigned dir_chain(struct tdb_context *tdb,
			  const struct fastcase_scope *scope,
			  const struct fastcase_dir_id *id)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];

	return tdb_chain(tdb, fastcase_records_dir_key(buf, scope, id));
}

static unsigned name_chain(struct tdb_context *tdb,
			   const struct fastcase_scope *scope,
			   const struct fastcase_dir_id *id, uint64_t gen,
			   const char *name)
{
	uint8_t buf[FASTCASE_RECORD_KEY_MAX];
	char key[FASTCASE_KEY_MAX];
	size_t klen;

	assert_int_equal(fastcase_scope_disk_key(scope, name, key, &klen), 0);
	return tdb_chain(tdb, fastcase_records_entry_key(buf, scope, id, gen,
							 key, klen));
}

static void name_in_chain(struct tdb_context *tdb,
			  const struct fastcase_scope *scope,
			  const struct fastcase_dir_id *id, uint64_t gen,
			  unsigned chain, const char *prefix, char *out)
{
	unsigned i;

	for (i = 0; i < 50000000; i++) {
		snprintf(out, 64, "%s%u", prefix, i);
		if (name_chain(tdb, scope, id, gen, out) == chain) {
			return;
		}
	}
	fail_msg("no name found in chain %u", chain);
}

static void test_brackets_sharing_chains(void **state)
{
	struct fixture *f = *state;
	/*
	 * A directory's names are few buckets, so a default file offers a
	 * name few chains to land in: one chain puts every record in the
	 * other directory's chain.
	 */
	unsigned hash_size = (f->hash_size = 1);
	struct peer *a = peer_start(f, &windows_rules, 100);
	struct peer *b = peer_start(f, &windows_rules, 100);
	char *x = make_dir(f, "X");
	char *y = make_dir(f, "Y");
	struct fastcase_cache *cache = NULL;
	struct fastcase_scope scope;
	struct fastcase_dir_record rx, ry;
	struct fastcase_dir_id ix, iy;
	struct tdb_context *tdb = NULL;
	char na[64], nb[64];
	struct stat sb;
	struct reply r;
	bool b_began;

	/* each builds one directory; neither watches the other's */
	peer_expect_lookup(a, x, "nothing", NULL);
	peer_expect_lookup(b, y, "nothing", NULL);

	/* read the generations with a third handle */
	assert_int_equal(fastcase_cache_open(f, f->cache_path, 64 << 20,
					     &cache), 0);
	fastcase_scope_init(&scope, &windows_rules);
	assert_int_equal(stat(x, &sb), 0);
	ix = (struct fastcase_dir_id) { .dev = sb.st_dev, .ino = sb.st_ino };
	assert_int_equal(stat(y, &sb), 0);
	iy = (struct fastcase_dir_id) { .dev = sb.st_dev, .ino = sb.st_ino };
	assert_true(fastcase_cache_dir_get(cache, &scope, &ix, &rx));
	assert_true(fastcase_cache_dir_get(cache, &scope, &iy, &ry));
	tdb = fastcase_cache_tdb(cache);
	name_in_chain(tdb, &scope, &ix, rx.gen, dir_chain(tdb, &scope, &iy),
		      "a", na);
	name_in_chain(tdb, &scope, &iy, ry.gen, dir_chain(tdb, &scope, &ix),
		      "b", nb);
	/* the precondition of the deadlock this test is about, in the
	 * file the peers have open */
	assert_int_equal(tdb_hash_size(tdb), hash_size);
	assert_int_equal(name_chain(tdb, &scope, &ix, rx.gen, na),
			 dir_chain(tdb, &scope, &iy));
	assert_int_equal(name_chain(tdb, &scope, &iy, ry.gen, nb),
			 dir_chain(tdb, &scope, &ix));
	TALLOC_FREE(cache);

	r = peer_call(a, OP_BEGIN, x, na, 0);
	assert_int_equal(r.a, 0);
	peer_send(b, OP_BEGIN, y, nb, 0);
	b_began = peer_wait(b, &r, 1000);
	if (b_began) {
		assert_int_equal(r.a, 0);
	} else {
		/* b waits for a chain a holds: fine if a can finish */
		print_message("the second bracket waits for the first\n");
	}
	r = peer_call(a, OP_MAKE, x, na, 0);
	assert_int_equal(r.a, 0);
	peer_send(a, OP_END, x, na, 1);
	if (!peer_wait(a, &r, PEER_TIMEOUT_MS)) {
		fail_msg("create brackets in two directories deadlocked "
			 "on TDB chains");
	}
	if (!b_began) {
		if (!peer_wait(b, &r, PEER_TIMEOUT_MS)) {
			fail_msg("the second bracket never began");
		}
		assert_int_equal(r.a, 0);
	}
	r = peer_call(b, OP_MAKE, y, nb, 0);
	assert_int_equal(r.a, 0);
	r = peer_call(b, OP_END, y, nb, 1);
	peer_expect_lookup(a, x, na, na);
	peer_expect_lookup(b, y, nb, nb);
	peer_quit(a);
	peer_quit(b);
}

/* ---- which name wins -------------------------------------------------- */

static void expect_scan(struct fastcase_engine *e, int fd, const char *name,
			const char *expect)
{
	TALLOC_CTX *frame = talloc_stackframe();
	char *found = NULL;
	enum fastcase_result r = fastcase_engine_scan(e, fd, name, frame,
						      &found);

	if (expect == NULL ? r != FASTCASE_NOT_FOUND :
	    (r != FASTCASE_FOUND || strcmp(found, expect) != 0)) {
		fail_msg("scan \"%s\": %s \"%s\", expected %s", unit_hex(name),
			 result_name(r), r == FASTCASE_FOUND ? unit_hex(found) : "",
			 expect != NULL ? unit_hex(expect) : "NOT_FOUND");
	}
	TALLOC_FREE(frame);
}

static void test_several_names_fold_equal(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "dups");
	const char *queries[][2] = {
		{ "abc", "abc" },
		{ "ABC", "ABC" },
		{ "Abc", "Abc" },
		{ "aBC", "ABC" },
		{ "abC", "ABC" },
		{ "ABc", "ABC" },
	};
	int fd;
	size_t i;

	/* created in an order unlike byte order */
	touch(dir, "abc");
	touch(dir, "Abc");
	touch(dir, "ABC");
	fd = open_dir(dir);
	for (i = 0; i < ARRAY_SIZE(queries); i++) {
		expect_lookup(e, fd, queries[i][0], queries[i][1]);
		expect_scan(e, fd, queries[i][0], queries[i][1]);
	}
	rm(dir, "ABC");
	expect_lookup(e, fd, "aBC", "Abc");
	expect_scan(e, fd, "aBC", "Abc");
	expect_lookup(e, fd, "ABC", "Abc");
	rm(dir, "Abc");
	expect_lookup(e, fd, "ABC", "abc");
	rm(dir, "abc");
	expect_lookup(e, fd, "ABC", NULL);
	expect_scan(e, fd, "ABC", NULL);
	close(fd);
}

/*
 * Deferring, as the glue does for smbd's own rule: with several names
 * folding equal and none exact, the lookup is smbd's to answer (it picks
 * the first in directory order, and a search lists them all).
 */
static void test_several_names_fold_equal_deferred(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "dups");
	char *found = NULL;
	int fd;

	o.defer_ambiguous = true;
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	touch(dir, "abc");
	touch(dir, "ABC");
	fd = open_dir(dir);
	assert_int_equal(fastcase_engine_lookup(e, fd, "aBC", f, &found),
			 FASTCASE_UNKNOWN);
	assert_null(found);
	expect_lookup(e, fd, "ABC", "ABC");
	expect_lookup(e, fd, "missing", NULL);
	rm(dir, "ABC");
	expect_lookup(e, fd, "aBC", "abc");
	close(fd);
}

/*
 * A directory that grows far past the size it was built at: its buckets
 * overflow, the records are dropped and built anew with more buckets, and
 * every answer stays right throughout.
 */
static void test_directory_grows(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "grows");
	char name[32], upper[32];
	int fd, i, j;

	touch(dir, "Seed.txt");
	fd = open_dir(dir);
	expect_lookup(e, fd, "SEED.TXT", "Seed.txt");
	for (i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "Grown_%04d.txt", i);
		touch(dir, name);
		if (i % 500 != 499) {
			continue;
		}
		for (j = 0; j <= i; j += 97) {
			snprintf(name, sizeof(name), "Grown_%04d.txt", j);
			snprintf(upper, sizeof(upper), "GROWN_%04d.TXT", j);
			expect_lookup(e, fd, upper, name);
		}
		expect_lookup(e, fd, "grown_9999.txt", NULL);
	}
	assert_true(fastcase_engine_stats(e)->builds >= 2);
	close(fd);
}

static void test_invalid_utf8_on_disk(void **state)
{
	struct fixture *f = *state;
	const struct fastcase_fold_rules unicode = {
		.mode = FASTCASE_FOLD_UNICODE,
	};
	struct fastcase_engine *w = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "latin1");
	const char *queries[] = {
		"caf\xe9", "CAF\xe9", "Caf\xe9", "caf\xc9", "caf\xc3\xa9",
		"CAF\xc3\x89", "a\xff", "A\xff", "a\xfe", "\xc0\xaf",
		"report.txt", "REPORT.TXT", "other", "x\xc3",
	};
	int fd;
	size_t i;

	touch(dir, "caf\xe9");
	touch(dir, "a\xff");
	touch(dir, "\xc0\xaf");
	touch(dir, "Report.txt");
	touch(dir, "x\xc3");
	fd = open_dir(dir);

	/* windows: exactly what strcasecmp_m says about each on-disk name */
	for (i = 0; i < ARRAY_SIZE(queries); i++) {
		const char *disk[] = {
			"caf\xe9", "a\xff", "\xc0\xaf", "Report.txt", "x\xc3",
		};
		const char *expect = NULL;
		size_t j;

		for (j = 0; j < ARRAY_SIZE(disk); j++) {
			if (strcmp(queries[i], disk[j]) == 0) {
				expect = disk[j];
				break;
			}
			if (expect == NULL &&
			    strcasecmp_m(queries[i], disk[j]) == 0) {
				expect = disk[j];
			}
		}
		expect_lookup(w, fd, queries[i], expect);
		expect_scan(w, fd, queries[i], expect);
	}
	/* spelled out */
	expect_lookup(w, fd, "caf\xe9", "caf\xe9");
	expect_lookup(w, fd, "REPORT.TXT", "Report.txt");
	expect_lookup(w, fd, "caf\xc3\xa9", NULL);
	TALLOC_FREE(w);

	/* unicode: invalid names match byte for byte only */
	{
		struct fastcase_engine *u = engine(f, &unicode, 100);

		expect_lookup(u, fd, "caf\xe9", "caf\xe9");
		expect_lookup(u, fd, "CAF\xe9", NULL);
		expect_lookup(u, fd, "a\xff", "a\xff");
		expect_lookup(u, fd, "A\xff", NULL);
		expect_lookup(u, fd, "a\xfe", NULL);
		expect_lookup(u, fd, "report.TXT", "Report.txt");
		expect_lookup(u, fd, "caf\xc3\xa9", NULL);
		expect_scan(u, fd, "CAF\xe9", NULL);
		expect_scan(u, fd, "caf\xe9", "caf\xe9");
	}
	close(fd);
}

/* ---- the scan agrees with the cache ----------------------------------- */

static void compare_scan_and_lookup(struct fastcase_engine *e, int fd,
				    const char *rules_name,
				    const char *const *queries, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		TALLOC_CTX *frame = talloc_stackframe();
		char *by_lookup = NULL, *by_scan = NULL;
		enum fastcase_result rl, rs;

		rl = fastcase_engine_lookup(e, fd, queries[i], frame,
					    &by_lookup);
		rs = fastcase_engine_scan(e, fd, queries[i], frame, &by_scan);
		if (rl != rs ||
		    (rl == FASTCASE_FOUND && strcmp(by_lookup, by_scan) != 0)) {
			fail_msg("%s, \"%s\": lookup %s \"%s\", scan %s \"%s\"",
				 rules_name, unit_hex(queries[i]), result_name(rl),
				 rl == FASTCASE_FOUND ? unit_hex(by_lookup) : "",
				 result_name(rs),
				 rs == FASTCASE_FOUND ? unit_hex(by_scan) : "");
		}
		assert_int_not_equal(rl, FASTCASE_UNKNOWN);
		TALLOC_FREE(frame);
	}
}

static void test_scan_matches_lookup(void **state)
{
	struct fixture *f = *state;
	static const char *const on_disk[] = {
		"Stra\xc3\x9f" "e.txt", "STRASSE.TXT", "\xe2\x84\xaa" "elvin",
		"e\xcc\x81t\xc3\xa9", "\xc4\xb0stanbul", "D\xc4\xb1yar",
		"abc", "ABC", "Abc", "caf\xe9", "\xc3\x9cn\xc3\xaf" "c\xc3\xb6"
		"d\xc3\xa9", "\xce\xa3\xcf\x8d\xce\xb3\xce\xba\xcf\x81\xce\xb9"
		"\xcf\x83\xce\xb7", "\xef\xac\x81le", "MIXED.case",
	};
	static const char *const queries[] = {
		"strasse.txt", "STRASSE.TXT", "stra\xc3\x9f" "e.TXT",
		"Stra\xc3\x9f" "e.txt", "kelvin", "KELVIN", "\xe2\x84\xaa"
		"ELVIN", "\xc3\xa9t\xc3\xa9", "\xc3\x89T\xc3\x89",
		"e\xcc\x81t\xc3\xa9", "istanbul", "ISTANBUL",
		"\xc4\xb0STANBUL", "i\xcc\x87stanbul", "d\xc4\xb1yar", "DIYAR",
		"diyar", "D\xc4\xb0YAR", "abc", "aBc", "ABC", "Abc",
		"caf\xe9", "CAF\xe9", "caf\xc3\xa9", "\xc3\xbcn\xc3\xaf" "c\xc3\xb6"
		"d\xc3\xa9", "\xc3\x9cN\xc3\x8f" "C\xc3\x96" "D\xc3\x89",
		"\xcf\x83\xcf\x8d\xce\xb3\xce\xba\xcf\x81\xce\xb9\xcf\x83\xce"
		"\xb7", "\xce\xa3\xce\xa5\xce\x93\xce\x9a\xce\xa1\xce\x99\xce"
		"\xa3\xce\x97", "FILE", "file", "mixed.CASE", "missing",
		"\xc0\xaf", "x\xff",
	};
	const struct {
		const char *name;
		struct fastcase_fold_rules rules;
	} rules[] = {
		{ "unicode", { .mode = FASTCASE_FOLD_UNICODE } },
		{ "unicode nfc", { .mode = FASTCASE_FOLD_UNICODE,
				   .normalize = FASTCASE_NORMALIZE_NFC } },
		{ "unicode tr", { .mode = FASTCASE_FOLD_UNICODE,
				  .language = "tr" } },
		{ "unicode tr nfc", { .mode = FASTCASE_FOLD_UNICODE,
				      .normalize = FASTCASE_NORMALIZE_NFC,
				      .language = "tr" } },
		{ "windows", { .mode = FASTCASE_FOLD_WINDOWS } },
		{ "windows nfc", { .mode = FASTCASE_FOLD_WINDOWS,
				   .normalize = FASTCASE_NORMALIZE_NFC } },
	};
	char *dir = make_dir(f, "scan");
	size_t i;
	int fd;

	for (i = 0; i < ARRAY_SIZE(on_disk); i++) {
		touch(dir, on_disk[i]);
	}
	fd = open_dir(dir);
	for (i = 0; i < ARRAY_SIZE(rules); i++) {
		struct fastcase_engine *e = engine(f, &rules[i].rules, 100);

		compare_scan_and_lookup(e, fd, rules[i].name, queries,
					ARRAY_SIZE(queries));
		/* and once more after changes */
		touch(dir, talloc_asprintf(f, "File%zu", i));
		compare_scan_and_lookup(e, fd, rules[i].name, queries,
					ARRAY_SIZE(queries));
		TALLOC_FREE(e);
	}
	/* spot checks of what the unicode answers are */
	{
		const struct fastcase_fold_rules u = {
			.mode = FASTCASE_FOLD_UNICODE,
		};
		struct fastcase_engine *e = engine(f, &u, 100);

		expect_lookup(e, fd, "strasse.txt", "STRASSE.TXT");
		expect_lookup(e, fd, "stra\xc3\x9f" "e.TXT", "STRASSE.TXT");
		expect_lookup(e, fd, "Stra\xc3\x9f" "e.txt",
			      "Stra\xc3\x9f" "e.txt");
		expect_lookup(e, fd, "KELVIN", "\xe2\x84\xaa" "elvin");
		expect_lookup(e, fd, "\xc3\xa9t\xc3\xa9", NULL);
		TALLOC_FREE(e);
	}
	close(fd);
}

/*
 * With a legacy charset, names stored in UTF-8 outrank decoded legacy
 * names; the scan must rank them the same way. The queries are UTF-8, as
 * smbd sends them (a raw legacy spelling as the query is not keyed by its
 * decoding in lookups, so the two differ there; smbd never asks that).
 */
static void test_scan_matches_lookup_legacy(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "legacy");
	static const char *const queries[] = {
		"Caf\xc3\xa9", "CAF\xc3\x89", "caf\xc3\xa9", "na\xc3\xafve",
		"NA\xc3\x8fVE", "Na\xc3\xafVe", "plain", "PLAIN", "caf",
	};
	int fd;

	/* "CAFÉ" in ISO-8859-1 sorts before "café" in UTF-8 */
	touch(dir, "CAF\xc9");
	touch(dir, "caf\xc3\xa9");
	touch(dir, "na\xefve");
	touch(dir, "Plain");
	fd = open_dir(dir);
	o.legacy_charset = "ISO-8859-1";
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	compare_scan_and_lookup(e, fd, "windows, ISO-8859-1", queries,
				ARRAY_SIZE(queries));
	expect_lookup(e, fd, "Caf\xc3\xa9", "caf\xc3\xa9");
	expect_scan(e, fd, "Caf\xc3\xa9", "caf\xc3\xa9");
	/* a legacy name is given under its UTF-8 spelling */
	expect_lookup(e, fd, "NA\xc3\x8fVE", "na\xc3\xafve");
	close(fd);
}

/*
 * A path through legacy-named directories maps back to the bytes on disk
 * component by component; a path that needs no mapping, leaves the tree
 * or passes a symlink gets NULL (smbd answers it itself).
 */
static void test_legacy_disk_path(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "legacy-path");
	char *sub = talloc_asprintf(f, "%s/D\xe9j\xe0", dir);
	char *deep = talloc_asprintf(f, "%s/R\xe9p", sub);
	char *path = NULL;
	int fd;

	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(mkdir(deep, 0755), 0);
	touch(deep, "Fichier.txt");
	touch(deep, "caf\xe9.txt");
	assert_int_equal(symlink("D\xe9j\xe0",
				 talloc_asprintf(f, "%s/Link", dir)), 0);
	fd = open_dir(dir);
	o.legacy_charset = "ISO-8859-1";
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);

	path = fastcase_legacy_disk_path(e, fd, "D\xc3\xa9j\xc3\xa0/R\xc3\xa9p"
					 "/caf\xc3\xa9.txt", f);
	assert_string_equal(path, "D\xe9j\xe0/R\xe9p/caf\xe9.txt");
	/* a UTF-8 last component, and one to be created, stay as given */
	path = fastcase_legacy_disk_path(e, fd, "D\xc3\xa9j\xc3\xa0/R\xc3\xa9p"
					 "/Fichier.txt", f);
	assert_string_equal(path, "D\xe9j\xe0/R\xe9p/Fichier.txt");
	path = fastcase_legacy_disk_path(e, fd, "D\xc3\xa9j\xc3\xa0/New.txt",
					 f);
	assert_string_equal(path, "D\xe9j\xe0/New.txt");
	/* nothing to map, no such directory, "..", a symlink on the way */
	assert_null(fastcase_legacy_disk_path(e, fd, "D\xe9j\xe0/R\xe9p", f));
	assert_int_equal(errno, ENOENT);
	assert_null(fastcase_legacy_disk_path(e, fd, "Nowhere/caf\xc3\xa9.txt",
					      f));
	assert_null(fastcase_legacy_disk_path(
		e, fd, "D\xc3\xa9j\xc3\xa0/../D\xc3\xa9j\xc3\xa0", f));
	assert_null(fastcase_legacy_disk_path(e, fd, "Link/R\xc3\xa9p", f));
	close(fd);
}

static void test_legacy_dirent(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "legacy-dirent");
	struct dirent de = { .d_type = DT_REG }, buf = { 0 };
	int fd;

	touch(dir, "caf\xe9");
	touch(dir, "na\xefve");
	touch(dir, "NA\xc3\x8fVE");
	fd = open_dir(dir);
	o.legacy_charset = "ISO-8859-1";
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);

	strlcpy(de.d_name, "Plain", sizeof(de.d_name));
	assert_ptr_equal(fastcase_legacy_dirent(e, fd, &de, &buf), &de);
	strlcpy(de.d_name, "caf\xe9", sizeof(de.d_name));
	assert_ptr_equal(fastcase_legacy_dirent(e, fd, &de, &buf), &buf);
	assert_string_equal(buf.d_name, "caf\xc3\xa9");
	assert_int_equal(buf.d_type, DT_REG);
	/* the UTF-8 name that folds equal hides the legacy one */
	strlcpy(de.d_name, "na\xefve", sizeof(de.d_name));
	assert_null(fastcase_legacy_dirent(e, fd, &de, &buf));
	close(fd);
}

/* ---- broken caches ---------------------------------------------------- */

struct find_state {
	const char *value;
	TDB_DATA key;
	unsigned found;
};

static int find_fn(struct tdb_context *tdb, TDB_DATA key, TDB_DATA val,
		   void *private_data)
{
	struct find_state *s = private_data;

	/* the bucket that holds the name, among others */
	if (key.dsize > 0 && key.dptr[0] == 'E' &&
	    memmem(val.dptr, val.dsize, s->value,
		   strlen(s->value) + 1) != NULL) {
		s->found++;
		s->key.dptr = malloc(key.dsize);
		memcpy(s->key.dptr, key.dptr, key.dsize);
		s->key.dsize = key.dsize;
	}
	return 0;
}

/*
 * A process that writes garbage over the bucket holding a name when told
 * which. It is forked before the test opens the cache: TDB refuses a
 * second open of one file in a process, and a child forked later would
 * inherit the first.
 */
struct corrupter {
	pid_t pid;
	int go;
};

static void corrupt_bucket(struct fixture *f, int go)
{
	struct fastcase_cache *cache = NULL;
	struct find_state s = { 0 };
	TDB_DATA junk = { .dptr = (uint8_t *)"\0junk", .dsize = 5 };
	char value[NAME_MAX + 1] = { 0 };

	s.value = value;
	if (read(go, value, sizeof(value) - 1) <= 0 ||
	    fastcase_cache_open(NULL, f->cache_path, 64 << 20, &cache) != 0 ||
	    tdb_traverse(fastcase_cache_tdb(cache), find_fn, &s) < 0 ||
	    s.found != 1 ||
	    tdb_store(fastcase_cache_tdb(cache), s.key, junk,
		      TDB_REPLACE) != 0) {
		_exit(1);
	}
	TALLOC_FREE(cache);
	_exit(0);
}

static struct corrupter corrupter_start(struct fixture *f)
{
	struct corrupter c;
	int go[2];

	assert_int_equal(pipe(go), 0);
	fflush(stdout);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		close(go[1]);
		corrupt_bucket(f, go[0]);
	}
	close(go[0]);
	c.go = go[1];
	return c;
}

static void corrupter_run(struct corrupter *c, const char *value)
{
	int status;

	assert_int_equal(write(c->go, value, strlen(value)),
			 (ssize_t)strlen(value));
	close(c->go);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_corrupt_record_from_another_process(void **state)
{
	struct fixture *f = *state;
	struct corrupter c = corrupter_start(f);
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "corrupt");
	int fd;

	touch(dir, "Report.docx");
	touch(dir, "Other.txt");
	fd = open_dir(dir);
	expect_lookup(e, fd, "REPORT.DOCX", "Report.docx");
	corrupter_run(&c, "Report.docx");
	/* the malformed record is dropped and the directory rebuilt */
	expect_lookup(e, fd, "report.docx", "Report.docx");
	expect_lookup(e, fd, "OTHER.TXT", "Other.txt");
	expect_lookup(e, fd, "missing", NULL);
	close(fd);
}

/*
 * A process without a watch meets a malformed bucket where it would
 * confirm a hit: no answer from it, the records are built again, and
 * the answer comes from those.
 */
static void test_confirmed_hit_meets_a_malformed_bucket(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 0);
	const struct fastcase_stats *st = NULL;
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "confirmed-malformed");
	struct corrupter c = corrupter_start(f);
	uint64_t builds;
	int fd;

	o.rebuild_interval_ns = 0;
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	st = fastcase_engine_stats(e);
	touch(dir, "Report.docx");
	touch(dir, "Budget.xlsx");
	fd = open_dir(dir);
	expect_lookup(e, fd, "REPORT.DOCX", "Report.docx");
	builds = st->builds;

	corrupter_run(&c, "Budget.xlsx");
	touch(dir, "Other.txt");
	expect_lookup(e, fd, "BUDGET.XLSX", "Budget.xlsx");
	assert_int_equal(st->confirmed_hits, 0);
	assert_int_equal(st->builds, builds + 1);
	expect_lookup(e, fd, "other.TXT", "Other.txt");
	close(fd);
}

static void test_unusable_cache(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	struct fastcase_engine *e = NULL;
	struct fastcase_create op;
	char *dir = make_dir(f, "nocache");
	char *existing = NULL, *found = NULL;
	int fd;

	/* a directory where the cache file should be */
	o.cache_path = make_dir(f, "not-a-file");
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	touch(dir, "Report.docx");
	fd = open_dir(dir);
	assert_int_equal(fastcase_engine_lookup(e, fd, "REPORT.DOCX", f,
						&found), FASTCASE_UNKNOWN);
	/* without a lock file, checked by a scan: a variant is refused */
	assert_int_equal(fastcase_engine_create_begin(e, fd, "report.docx",
						      &op, f, &existing),
			 EEXIST);
	assert_string_equal(existing, "Report.docx");
	/* a new name goes ahead, not under a lock, and never silently */
	assert_int_equal(fastcase_engine_create_begin(e, fd, "new.docx",
						      &op, f, &existing), 0);
	fastcase_engine_create_end(e, &op, "new.docx", false);
	assert_int_equal(fastcase_engine_stats(e)->unchecked, 1);
	assert_int_equal(fastcase_engine_stats(e)->scanned_checks, 2);
	/* the scan needs no cache */
	expect_scan(e, fd, "REPORT.DOCX", "Report.docx");
	assert_int_equal(fastcase_engine_watch_fd(e), -1);
	close(fd);
}

/*
 * A second engine on the same cache file in the same process (one smbd
 * serving two shares): TDB refuses a second open of one file in a process,
 * so the engines share the open file and both answer from the cache, also
 * after the first is gone.
 */
/*
 * A directory too big for the cache still gets the case-variant check on
 * a create: by a scan under the directory's lock, not by letting the
 * create through unchecked.
 */
static void test_create_checked_when_too_big(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	struct fastcase_engine *e = NULL;
	struct fastcase_create op;
	char *dir = make_dir(f, "big");
	char *existing = NULL;
	char name[32];
	int fd, i;

	o.cache_size = 4096;	/* a directory may take 2 KiB */
	for (i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "file-%03d.txt", i);
		touch(dir, name);
	}
	touch(dir, "Report.docx");
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	fd = open_dir(dir);
	/* lookups in it are smbd's */
	assert_int_equal(fastcase_engine_lookup(e, fd, "REPORT.DOCX", f,
						&existing), FASTCASE_UNKNOWN);
	assert_int_equal(fastcase_engine_stats(e)->too_big, 1);

	assert_int_equal(fastcase_engine_create_begin(e, fd, "REPORT.DOCX",
						      &op, f, &existing),
			 EEXIST);
	assert_string_equal(existing, "Report.docx");
	assert_int_equal(fastcase_engine_create_begin(e, fd, "new.txt", &op,
						      f, &existing), 0);
	assert_true(op.locked);
	fastcase_engine_create_end(e, &op, "new.txt", false);
	assert_int_equal(fastcase_engine_stats(e)->scanned_checks, 2);
	assert_int_equal(fastcase_engine_stats(e)->unchecked, 0);
	close(fd);
}

/*
 * A create whose directory another process keeps locked past the bound
 * is refused (the check would race), counted, and the wait is bounded.
 */
static void test_create_refused_when_locked(void **state)
{
	struct fixture *f = *state;
	struct peer *b = peer_start(f, &windows_rules, 100);
	char *dir = make_dir(f, "held");
	struct fastcase_engine *e = NULL;
	struct fastcase_create op;
	struct timespec t0, t1;
	char *existing = NULL;
	int64_t waited_ms;
	struct reply r;
	int fd;

	touch(dir, "Report.docx");
	r = peer_call(b, OP_BEGIN, dir, "other.txt", 0);
	assert_int_equal(r.a, 0);
	e = engine(f, &windows_rules, 100);
	fd = open_dir(dir);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fastcase_engine_create_begin(e, fd, "new.txt", &op,
						      f, &existing),
			 ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_false(op.locked);
	waited_ms = (t1.tv_sec - t0.tv_sec) * 1000 +
		(t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(waited_ms >= FASTCASE_LOCK_WAIT_MS);
	assert_true(waited_ms < FASTCASE_LOCK_WAIT_MS + 2000);
	assert_int_equal(fastcase_engine_stats(e)->lock_timeouts, 1);

	/* once the lock is free, the create goes ahead, checked */
	r = peer_call(b, OP_END, dir, "other.txt", 0);
	assert_int_equal(fastcase_engine_create_begin(e, fd, "REPORT.docx",
						      &op, f, &existing),
			 EEXIST);
	peer_quit(b);
	close(fd);
}

/*
 * A malformed bucket is never patched over: a name added to it would
 * replace the names it held while the directory stays complete. The
 * directory is forgotten and rebuilt instead.
 */
static void test_malformed_bucket_forgotten(void **state)
{
	struct fixture *f = *state;
	struct peer *a = peer_start(f, &windows_rules, 100);
	char *dir = make_dir(f, "bucket");
	struct fastcase_cache *cache = NULL;
	struct fastcase_scope scope;
	struct fastcase_dir_record rec;
	struct fastcase_dir_id id;
	uint8_t kbuf[FASTCASE_RECORD_KEY_MAX];
	char key[FASTCASE_KEY_MAX];
	TDB_DATA bad = { .dptr = (uint8_t *)"Alpha\0Beta\0\0", .dsize = 12 };
	size_t key_len;
	struct stat sb;

	touch(dir, "Alpha");
	touch(dir, "Beta");
	peer_expect_lookup(a, dir, "ALPHA", "Alpha");	/* one bucket */

	assert_int_equal(fastcase_cache_open(f, f->cache_path, 64 << 20,
					     &cache), 0);
	fastcase_scope_init(&scope, &windows_rules);
	assert_int_equal(stat(dir, &sb), 0);
	id = (struct fastcase_dir_id) { .dev = sb.st_dev, .ino = sb.st_ino };
	assert_true(fastcase_cache_dir_get(cache, &scope, &id, &rec));
	assert_int_equal(rec.gen & FASTCASE_GEN_BUCKET_BITS, 0);
	assert_int_equal(fastcase_scope_disk_key(&scope, "Gamma", key,
						 &key_len), 0);
	assert_int_equal(tdb_store(fastcase_cache_tdb(cache),
				   fastcase_records_entry_key(kbuf, &scope,
							      &id, rec.gen,
							      key, key_len),
				   bad, TDB_REPLACE), 0);
	TALLOC_FREE(cache);

	/* the peer applies this create's event to the malformed bucket */
	touch(dir, "Gamma");
	peer_expect_lookup(a, dir, "BETA", "Beta");
	peer_expect_lookup(a, dir, "GAMMA", "Gamma");
	peer_expect_lookup(a, dir, "ALPHA", "Alpha");
	peer_quit(a);
}

/*
 * The change count tells a caller with answers of its own (smbd's
 * real-name memcache) when to drop them: it moves with every change seen
 * and, without inotify, at every call.
 */
static void test_change_count(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "changes");
	uint64_t c0, c1;
	int fd;

	touch(dir, "Foo.txt");
	fd = open_dir(dir);
	expect_lookup(e, fd, "FOO.TXT", "Foo.txt");
	c0 = fastcase_engine_change_count(e);
	assert_int_equal(fastcase_engine_change_count(e), c0);
	touch(dir, "Bar.txt");
	c1 = fastcase_engine_change_count(e);
	assert_true(c1 != c0);
	assert_int_equal(fastcase_engine_change_count(e), c1);
	fastcase_engine_name_changed(e, fd, "Bar.txt");
	assert_true(fastcase_engine_change_count(e) != c1);
	close(fd);
	TALLOC_FREE(e);

	e = engine(f, &windows_rules, 0);	/* no inotify */
	c0 = fastcase_engine_change_count(e);
	assert_true(fastcase_engine_change_count(e) != c0);
}

/*
 * A change that lands while a process waits for a directory's lock to
 * restamp it: the new stamp must not vouch for records that lack it, or a
 * process validating by stamps (no inotify) trusts them and misses it.
 */
struct change_while_waiting {
	const char *dir;
	int calls;
	int fire_at;
};

static void change_while_waiting(void *private_data, enum fastcase_step at)
{
	struct change_while_waiting *c = private_data;

	if (at != FASTCASE_STEP_LOCK || ++c->calls != c->fire_at) {
		return;
	}
	touch(c->dir, "New.txt");
	/* older than the racy margin when the stamp is read */
	usleep(150 * 1000);
}

static void test_restamp_after_waiting(void **state)
{
	struct fixture *f = *state;
	char *dir = make_dir(f, "restamp");
	struct change_while_waiting hook = { .dir = dir };
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	const struct fastcase_engine_probes probes = {
		.step = change_while_waiting,
		.private_data = &hook,
	};
	struct fastcase_engine *watcher = NULL, *stamps = NULL;
	int fd;

	o.probes = &probes;
	assert_int_equal(fastcase_engine_create(f, &o, &watcher), 0);
	stamps = engine(f, &windows_rules, 0);	/* no inotify */
	touch(dir, "Old.txt");
	fd = open_dir(dir);
	expect_lookup(watcher, fd, "OLD.TXT", "Old.txt");
	usleep(150 * 1000);
	/*
	 * The watcher applies T1's event under the lock (first wait), then
	 * waits again to restamp the directory: New.txt lands then.
	 */
	touch(dir, "T1.txt");
	hook.calls = 0;
	hook.fire_at = 2;
	expect_lookup(watcher, fd, "T1.TXT", "T1.txt");
	assert_true(hook.calls >= 2);
	expect_lookup(stamps, fd, "NEW.TXT", "New.txt");
	close(fd);
}

static void count_restamps(void *private_data, enum fastcase_step at)
{
	int *restamps = private_data;

	if (at == FASTCASE_STEP_RESTAMP) {
		(*restamps)++;
	}
}

static void create_through(struct fastcase_engine *e, int fd,
			   const char *name)
{
	struct fastcase_create op;
	char *existing = NULL;
	int nfd;

	assert_int_equal(fastcase_engine_create_begin(e, fd, name, &op, NULL,
						      &existing), 0);
	nfd = openat(fd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(nfd >= 0);
	close(nfd);
	fastcase_engine_create_end(e, &op, name, true);
}

/*
 * Creates in a busy directory restamp it once, not once each: the stamp
 * left racy by the first is trusted by nobody, so a process without a
 * watch reads the directory again and sees every name; once the stamp
 * has aged, the next lookup stamps again and such a process trusts the
 * records as they are.
 */
static void test_racy_stamp_kept_until_aged(void **state)
{
	struct fixture *f = *state;
	char *dir = make_dir(f, "busy");
	int restamps = 0;
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	const struct fastcase_engine_probes probes = {
		.step = count_restamps,
		.private_data = &restamps,
	};
	struct fastcase_engine *watcher = NULL, *stamps = NULL;
	int fd;

	o.probes = &probes;
	assert_int_equal(fastcase_engine_create(f, &o, &watcher), 0);
	touch(dir, "Old.txt");
	fd = open_dir(dir);
	expect_lookup(watcher, fd, "OLD.TXT", "Old.txt");
	usleep(150 * 1000);
	expect_lookup(watcher, fd, "old.txt", "Old.txt");
	assert_int_equal(restamps, 1);	/* the build's racy stamp aged */

	create_through(watcher, fd, "First.txt");
	assert_int_equal(restamps, 2);
	create_through(watcher, fd, "Second.txt");
	create_through(watcher, fd, "Third.txt");
	assert_int_equal(restamps, 2);

	stamps = engine(f, &windows_rules, 0);	/* no inotify */
	expect_lookup(stamps, fd, "THIRD.TXT", "Third.txt");
	expect_lookup(stamps, fd, "nope.txt", NULL);	/* must read */
	assert_int_equal(fastcase_engine_stats(stamps)->builds, 1);
	TALLOC_FREE(stamps);

	usleep(150 * 1000);
	expect_lookup(watcher, fd, "second.TXT", "Second.txt");
	assert_int_equal(restamps, 3);
	stamps = engine(f, &windows_rules, 0);
	expect_lookup(stamps, fd, "THIRD.txt", "Third.txt");
	expect_lookup(stamps, fd, "first.txt", "First.txt");
	expect_lookup(stamps, fd, "nope.txt", NULL);
	assert_int_equal(fastcase_engine_stats(stamps)->builds, 0);
	close(fd);
}

/*
 * Events after a create through the engine: its own finds the records
 * already showing the name; another program's delete of the name and its
 * create of a case variant, before the creator drained its queue, and a
 * delete between the create and its end are all seen.
 */
static void test_events_after_own_create(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "own");
	struct fastcase_create op;
	char *existing = NULL;
	int fd, nfd;

	touch(dir, "Old.txt");
	fd = open_dir(dir);
	expect_lookup(e, fd, "OLD.TXT", "Old.txt");

	create_through(e, fd, "Mine.txt");
	rm(dir, "Mine.txt");
	touch(dir, "MINE.txt");
	expect_lookup(e, fd, "mine.TXT", "MINE.txt");
	expect_lookup(e, fd, "Mine.txt", "MINE.txt");

	/* deleted between the create and its end */
	assert_int_equal(fastcase_engine_create_begin(e, fd, "Gone.txt", &op,
						      NULL, &existing), 0);
	nfd = openat(fd, "Gone.txt", O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(nfd >= 0);
	close(nfd);
	rm(dir, "Gone.txt");
	fastcase_engine_create_end(e, &op, "Gone.txt", true);
	expect_lookup(e, fd, "GONE.TXT", NULL);
	touch(dir, "gone.TXT");
	expect_lookup(e, fd, "GONE.TXT", "gone.TXT");
	close(fd);
}

/*
 * More events than one read of the queue returns (about 22 KiB of them):
 * the lookup after them sees every change, from the records.
 */
static void test_events_beyond_one_read(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "many-events");
	char name[NAME_MAX + 1], upper[NAME_MAX + 1];
	uint64_t builds;
	int fd, i;

	for (i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "Seed_%04d", i);
		touch(dir, name);
	}
	fd = open_dir(dir);
	expect_lookup(e, fd, "SEED_0001", "Seed_0001");
	builds = fastcase_engine_stats(e)->builds;
	for (i = 0; i < 100; i++) {
		/* 224 bytes an event */
		snprintf(name, sizeof(name), "Outside_%04d_%0190d", i, 0);
		touch(dir, name);
	}
	for (i = 99; i >= 0; i -= 9) {
		/* the first lookup finds the name of the last event */
		snprintf(name, sizeof(name), "Outside_%04d_%0190d", i, 0);
		snprintf(upper, sizeof(upper), "OUTSIDE_%04d_%0190d", i, 0);
		expect_lookup(e, fd, upper, name);
	}
	assert_int_equal(fastcase_engine_stats(e)->builds, builds);
	close(fd);
}

static bool rename_through(struct fastcase_engine *e, int dirfd,
			   const char *name, int src_dirfd,
			   const char *src_name)
{
	struct fastcase_create op;
	char *existing = NULL;

	assert_int_equal(fastcase_engine_rename_begin(e, dirfd, name,
						      src_dirfd, src_name,
						      &op, NULL, &existing), 0);
	assert_int_equal(renameat(src_dirfd, src_name, dirfd, name), 0);
	return fastcase_engine_rename_end(e, &op, name, true);
}

/*
 * A rename within one directory brings both names into the records under
 * the directory's lock: a process that cannot watch (it trusts a stamp or
 * reads the directory) sees the source gone and the target there, and the
 * caller is told it need not report the source. Across directories it is.
 */
static void test_rename_end_notes_source(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e = engine(f, &windows_rules, 100);
	struct fastcase_engine *stamps = NULL;
	char *dir = make_dir(f, "ren");
	char *other = make_dir(f, "ren-other");
	int fd, ofd;

	touch(dir, "Before.txt");
	touch(dir, "Second.txt");
	touch(other, "Away.txt");
	fd = open_dir(dir);
	ofd = open_dir(other);
	expect_lookup(e, fd, "BEFORE.TXT", "Before.txt");
	expect_lookup(e, ofd, "AWAY.TXT", "Away.txt");

	assert_true(rename_through(e, fd, "After.txt", fd, "Before.txt"));
	assert_true(rename_through(e, fd, "SECOND.txt", fd, "Second.txt"));
	assert_false(rename_through(e, fd, "Moved.txt", ofd, "Away.txt"));
	expect_lookup(e, fd, "before.txt", NULL);
	expect_lookup(e, fd, "AFTER.TXT", "After.txt");
	expect_lookup(e, fd, "second.txt", "SECOND.txt");
	expect_lookup(e, fd, "moved.TXT", "Moved.txt");
	expect_lookup(e, ofd, "away.txt", NULL);

	stamps = engine(f, &windows_rules, 0);	/* no inotify */
	expect_lookup(stamps, fd, "BEFORE.txt", NULL);
	expect_lookup(stamps, fd, "after.TXT", "After.txt");
	expect_lookup(stamps, fd, "Second.TXT", "SECOND.txt");
	close(fd);
	close(ofd);
}

struct unlink_at_drain {
	const char *dir;
	const char *name;
	bool armed;
};

static void unlink_at_drain(void *private_data, enum fastcase_step at)
{
	struct unlink_at_drain *u = private_data;

	if (u->armed && at == FASTCASE_STEP_DRAIN) {
		u->armed = false;
		rm(u->dir, u->name);
	}
}

/*
 * A rename between two links of one file succeeds and changes nothing,
 * so it queues no event: the next event for its names is another
 * program's, here a delete of the source just before the rename's end
 * drains the queue. It must be applied.
 */
static void test_rename_between_links_then_delete(void **state)
{
	struct fixture *f = *state;
	char *dir = make_dir(f, "links");
	struct unlink_at_drain hook = { .dir = dir, .name = "x.txt" };
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	const struct fastcase_engine_probes probes = {
		.step = unlink_at_drain,
		.private_data = &hook,
	};
	struct fastcase_engine *e = NULL;
	struct fastcase_create op;
	char *existing = NULL;
	int fd;

	o.probes = &probes;
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	touch(dir, "x.txt");
	assert_int_equal(link(talloc_asprintf(f, "%s/x.txt", dir),
			      talloc_asprintf(f, "%s/y.txt", dir)), 0);
	fd = open_dir(dir);
	expect_lookup(e, fd, "X.TXT", "x.txt");
	assert_int_equal(fastcase_engine_rename_begin(e, fd, "y.txt", fd,
						      "x.txt", &op, NULL,
						      &existing), 0);
	assert_int_equal(renameat(fd, "x.txt", fd, "y.txt"), 0);
	hook.armed = true;
	fastcase_engine_rename_end(e, &op, "y.txt", true);
	assert_false(hook.armed);
	expect_lookup(e, fd, "X.TXT", NULL);
	expect_lookup(e, fd, "Y.TXT", "y.txt");
	close(fd);
}

static void note_watch_started(void *private_data, int fd)
{
	int *started_fd = private_data;

	*started_fd = fd;
}

/*
 * With watch_on_first_use the inotify instance is made by the first
 * lookup (in smbd: as the connected user), and the caller is told its fd.
 */
static void test_watch_made_on_first_use(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine_options o = options(f, &windows_rules, 100);
	struct fastcase_engine *e = NULL;
	char *dir = make_dir(f, "firstuse");
	int started_fd = -1;
	int fd;

	o.watch_on_first_use = true;
	o.watch_started = note_watch_started;
	o.watch_started_data = &started_fd;
	assert_int_equal(fastcase_engine_create(f, &o, &e), 0);
	assert_int_equal(fastcase_engine_watch_fd(e), -1);
	assert_int_equal(started_fd, -1);
	touch(dir, "Old.txt");
	fd = open_dir(dir);
	expect_lookup(e, fd, "OLD.TXT", "Old.txt");
	assert_true(started_fd >= 0);
	assert_int_equal(fastcase_engine_watch_fd(e), started_fd);
	/* and it watches: a change is seen at once, without a rebuild */
	touch(dir, "New.txt");
	expect_lookup(e, fd, "NEW.TXT", "New.txt");
	assert_int_equal(fastcase_engine_stats(e)->builds, 1);
	assert_true(fastcase_engine_stats(e)->events >= 1);
	close(fd);
}

static void test_second_engine_same_process(void **state)
{
	struct fixture *f = *state;
	struct fastcase_engine *e1 = engine(f, &windows_rules, 100);
	struct fastcase_engine *e2 = engine(f, &windows_rules, 100);
	char *dir = make_dir(f, "twice");
	const char *queries[][2] = {
		{ "REPORT.DOCX", "Report.docx" },
		{ "missing", NULL },
	};
	size_t i;
	int fd;

	touch(dir, "Report.docx");
	fd = open_dir(dir);
	expect_lookup(e1, fd, "REPORT.DOCX", "Report.docx");
	/* two shares of one smbd process share the file, not give it up */
	for (i = 0; i < ARRAY_SIZE(queries); i++) {
		char *found = NULL;
		enum fastcase_result r = fastcase_engine_lookup(
			e2, fd, queries[i][0], f, &found);

		if (queries[i][1] == NULL) {
			assert_int_equal(r, FASTCASE_NOT_FOUND);
		} else {
			assert_int_equal(r, FASTCASE_FOUND);
			assert_string_equal(found, queries[i][1]);
		}
	}
	TALLOC_FREE(e1);
	expect_lookup(e2, fd, "report.docx", "Report.docx");
	close(fd);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_lookup_basic),
		T(test_lookup_in_working_directory),
		T(test_local_changes_inotify),
		T(test_local_changes_no_inotify),
		T(test_deferred_rebuilds),
		T(test_confirmed_hits),
		T(test_watch_limit_eviction),
		T(test_two_engines_inotify),
		T(test_two_engines_no_inotify),
		T(test_create_race),
		T(test_cross_directory_brackets),
		T(test_brackets_sharing_chains),
		T(test_several_names_fold_equal),
		T(test_several_names_fold_equal_deferred),
		T(test_directory_grows),
		T(test_invalid_utf8_on_disk),
		T(test_scan_matches_lookup),
		T(test_scan_matches_lookup_legacy),
		T(test_legacy_disk_path),
		T(test_legacy_dirent),
		T(test_corrupt_record_from_another_process),
		T(test_confirmed_hit_meets_a_malformed_bucket),
		T(test_counted_create_checks),
		T(test_put_off_lookup_left_to_the_caller),
		T(test_unusable_cache),
		T(test_second_engine_same_process),
		T(test_watch_made_on_first_use),
		T(test_create_checked_when_too_big),
		T(test_create_refused_when_locked),
		T(test_malformed_bucket_forgotten),
		T(test_change_count),
		T(test_restamp_after_waiting),
		T(test_racy_stamp_kept_until_aged),
		T(test_events_after_own_create),
		T(test_events_beyond_one_read),
		T(test_rename_end_notes_source),
		T(test_rename_between_links_then_delete),
		T(test_lookup_path),
		T(test_path_met_by_stamps),
#undef T
	};

	/* a peer that dies must not kill us through a closed pipe */
	signal(SIGPIPE, SIG_IGN);
	return unit_run(tests, ARRAY_SIZE(tests), argc, argv);
}
