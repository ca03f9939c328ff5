/*
 * vfs_fastcase: the lookup engine
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

/*
 * When may a process trust a directory's records?
 *
 * - In sync: it holds an inotify watch on the directory that was added
 *   before it last validated or built the records, and it applies every
 *   queued event before each lookup. Every change that completed before
 *   a lookup began is then either in the records or in its queue.
 *
 * - Otherwise it compares the directory's mtime and ctime with the stamp
 *   stored beside the records. Any change to the directory's names moves
 *   both. A stamp read within RACY_MARGIN_NS of a change is "racy" (git's
 *   rule): a later change could have landed in the same timestamp tick, or
 *   a change could have moved the times before its event was queued, so a
 *   racy stamp is never trusted by a process that was not watching.
 *
 * Every change to the records of one directory is made under that
 * directory's lock (fastcase_cache_dir_lock()); lookups take no lock.
 * A lookup reads the bucket of the generation the directory record names,
 * current after the lookup began and after its queue was applied. Only a
 * bucket it finds missing makes it re-read the directory record: a
 * rebuild or a drop in between removes the old generation's buckets.
 */

#include "replace.h"
#include "system/filesys.h"
#include "lib/util/debug.h"
#include "lib/util/dlinklist.h"
#include "lib/util/talloc_stack.h"
#include "system/time.h"

#include "fastcase_build.h"
#include "fastcase_cache.h"
#include "fastcase_counters.h"
#include "fastcase_dirread.h"
#include "fastcase_engine.h"
#include "fastcase_lock.h"
#include "fastcase_records.h"
#include "fastcase_timeless.h"
#include "fastcase_usage.h"
#include "fastcase_watch.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

#define RACY_MARGIN_NS (100 * 1000 * 1000LL)
/*
 * A create that leaves a directory's times as they were proves a file
 * system without usable directory times only if those times are older
 * than any timestamp granularity (FAT's is 2 s): a change within one tick
 * of the last may leave them equal anywhere.
 */
#define TIMELESS_MIN_AGE_NS (3 * 1000 * 1000 * 1000LL)
#define STATE_BUCKETS 1024
#define UNWATCHED_STATE_LIMIT 1024
/*
 * How long a lookup's read of a directory vouches for a create of the
 * name it found absent (see absent_since_read()): smbd creates right
 * after its lookup, within the same request; a later create reads again.
 */
#define ABSENCE_TTL_NS (1000 * 1000 * 1000LL)

struct fastcase_dir_state {
	struct fastcase_dir_state *prev, *next;	/* LRU, newest first */
	struct fastcase_dir_state *id_next;	/* hash chain by id */
	struct fastcase_dir_state *wd_next;	/* hash chain by wd */
	struct fastcase_dir_state *touched_next;
	struct fastcase_dir_id id;
	int fd;		/* O_PATH duplicate, names the directory */
	int wd;
	bool in_sync;
	bool touched;
	bool watch_failed;	/* do not retry inotify_add_watch */
	/* met on the way down a path: the first check trusts the stamp
	 * alone, the second adds the watch (check_sync()) */
	bool watch_deferred;
	bool ambiguity_logged;
	uint64_t gen;
};

struct fastcase_engine {
	struct fastcase_scope scope;
	struct fastcase_cache *cache;
	struct fastcase_watch *watch;
	const char *log_name;
	unsigned state_limit;
	int64_t rebuild_interval_ns;	/* 0: never put a rebuild off */
	unsigned nstates;
	struct fastcase_dir_state *lru;
	struct fastcase_dir_state *by_id[STATE_BUCKETS];
	struct fastcase_dir_state *by_wd[STATE_BUCKETS];
	struct fastcase_dir_state *touched;
	bool watch_failure_logged;
	bool build_failure_logged;
	bool unchecked_logged;
	bool lock_timeout_logged;
	bool timeless_logged;
	uint64_t change_count;	/* see fastcase_engine_change_count() */
	const struct fastcase_engine_probes *probes;	/* tests only */
	bool watch_wanted;	/* an instance is still to be made */
	void (*watch_started)(void *private_data, int fd);
	void *watch_started_data;
	bool defer_ambiguous;
	bool exact_create_checks;
	bool (*create_count)(void *private_data, int dirfd, bool held,
			     uint64_t *count);
	void *create_count_data;
	bool scan_put_off_lookups;
	/* the last name a lookup read the directory to find absent, with
	 * the directory's create count before that read */
	struct {
		bool valid;
		struct fastcase_dir_id dir;
		uint64_t count;
		int64_t read_ns;	/* when the read ended */
		char name[NAME_MAX + 1];
	} absent;
	struct fastcase_stats stats;
	struct fastcase_stats flushed;	/* what the cache file has of ours */
};

/* Counters reach the cache file every this many lookups. */
#define STATS_FLUSH_INTERVAL 1024

/* The directory's path, for log messages only. */
static const char *dir_path(int fd, char *buf, size_t bufsize)
{
	char link[64];
	ssize_t n;

	if (fd == AT_FDCWD) {
		strlcpy(link, "/proc/self/cwd", sizeof(link));
	} else {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	}
	n = readlink(link, buf, bufsize - 1);
	if (n < 0) {
		return "(unknown directory)";
	}
	buf[n] = '\0';
	return buf;
}

static int64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t now_ns(const struct fastcase_engine *e)
{
	if (e->probes != NULL && e->probes->now_ns != NULL) {
		return e->probes->now_ns(e->probes->private_data);
	}
	return clock_now_ns();
}

static void step(const struct fastcase_engine *e, enum fastcase_step at)
{
	if (e->probes != NULL && e->probes->step != NULL) {
		e->probes->step(e->probes->private_data, at);
	}
}

static int64_t ts_ns(const struct timespec *ts)
{
	return ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static unsigned id_bucket(const struct fastcase_dir_id *id)
{
	uint64_t h = id->ino * 0x9E3779B97F4A7C15ULL ^ id->dev;

	return (h >> 32) % STATE_BUCKETS;
}

static struct fastcase_dir_state *state_by_wd(struct fastcase_engine *e,
					      int wd)
{
	struct fastcase_dir_state *st = e->by_wd[wd % STATE_BUCKETS];

	while (st != NULL && st->wd != wd) {
		st = st->wd_next;
	}
	return st;
}

static void wd_unlink(struct fastcase_engine *e, struct fastcase_dir_state *st)
{
	struct fastcase_dir_state **pp;

	if (st->wd < 0) {
		return;
	}
	for (pp = &e->by_wd[st->wd % STATE_BUCKETS]; *pp != NULL;
	     pp = &(*pp)->wd_next) {
		if (*pp == st) {
			*pp = st->wd_next;
			break;
		}
	}
	st->wd = -1;
	st->in_sync = false;
}

static void state_free(struct fastcase_engine *e, struct fastcase_dir_state *st)
{
	struct fastcase_dir_state **pp;

	if (st->wd >= 0 && e->watch != NULL) {
		fastcase_watch_remove(e->watch, st->wd);
	}
	wd_unlink(e, st);
	for (pp = &e->by_id[id_bucket(&st->id)]; *pp != NULL;
	     pp = &(*pp)->id_next) {
		if (*pp == st) {
			*pp = st->id_next;
			break;
		}
	}
	if (st->touched) {
		for (pp = &e->touched; *pp != NULL; pp = &(*pp)->touched_next) {
			if (*pp == st) {
				*pp = st->touched_next;
				break;
			}
		}
	}
	DLIST_REMOVE(e->lru, st);
	if (st->fd != -1) {
		close(st->fd);
	}
	e->nstates--;
	TALLOC_FREE(st);
}

void fastcase_engine_flush_stats(struct fastcase_engine *e)
{
	uint64_t delta[] = {
#define X(f) e->stats.f - e->flushed.f,
		FASTCASE_STATS_FIELDS
#undef X
	};

	if (e->cache == NULL ||
	    fastcase_cache_add_counters(e->cache, e->log_name, delta,
					ARRAY_SIZE(delta)) != 0) {
		return;
	}
	e->flushed = e->stats;
}

static void maybe_flush_stats(struct fastcase_engine *e)
{
	if (e->stats.lookups - e->flushed.lookups >= STATS_FLUSH_INTERVAL) {
		fastcase_engine_flush_stats(e);
	}
}

static int engine_destructor(struct fastcase_engine *e)
{
	fastcase_engine_flush_stats(e);
	while (e->lru != NULL) {
		state_free(e, e->lru);
	}
	return 0;
}

static void add_watch(struct fastcase_engine *e, struct fastcase_dir_state *st)
{
	int ret;

	if (e->watch == NULL || st->wd >= 0 || st->watch_failed) {
		return;
	}
	ret = fastcase_watch_add(e->watch, st->fd, &st->wd);
	if (ret != 0) {
		st->wd = -1;
		st->watch_failed = true;
		e->stats.watch_failures++;
		if (!e->watch_failure_logged) {
			char path[PATH_MAX];

			DBG_WARNING("share [%s]: cannot watch directory %s "
				    "(%s); validating it by its timestamps "
				    "instead\n", e->log_name,
				    dir_path(st->fd, path, sizeof(path)),
				    strerror(ret));
			e->watch_failure_logged = true;
		}
		return;
	}
	st->wd_next = e->by_wd[st->wd % STATE_BUCKETS];
	e->by_wd[st->wd % STATE_BUCKETS] = st;
}

static struct fastcase_dir_state *state_find(struct fastcase_engine *e,
					     const struct fastcase_dir_id *id)
{
	struct fastcase_dir_state *st = e->by_id[id_bucket(id)];

	while (st != NULL &&
	       (st->id.dev != id->dev || st->id.ino != id->ino)) {
		st = st->id_next;
	}
	return st;
}

/* A new state of the directory id, taking over own_fd (closed on error). */
static struct fastcase_dir_state *state_new(struct fastcase_engine *e,
					    const struct fastcase_dir_id *id,
					    int own_fd)
{
	unsigned b = id_bucket(id);
	struct fastcase_dir_state *st = NULL;

	if (e->nstates >= e->state_limit && e->lru != NULL) {
		state_free(e, DLIST_TAIL(e->lru));
	}
	st = talloc_zero(e, struct fastcase_dir_state);
	if (st == NULL) {
		close(own_fd);
		return NULL;
	}
	st->fd = own_fd;
	st->id = *id;
	st->wd = -1;
	st->id_next = e->by_id[b];
	e->by_id[b] = st;
	DLIST_ADD(e->lru, st);
	e->nstates++;
	return st;
}

/* A known state, in use again: the newest in the LRU. */
static struct fastcase_dir_state *state_touch(struct fastcase_engine *e,
					      struct fastcase_dir_state *st)
{
	if (st != e->lru) {
		DLIST_PROMOTE(e->lru, st);
	}
	return st;
}

static struct fastcase_dir_state *state_get(struct fastcase_engine *e,
					    const struct fastcase_dir_id *id,
					    int dirfd)
{
	struct fastcase_dir_state *st = state_find(e, id);
	int fd;

	if (st != NULL) {
		return state_touch(e, st);
	}
	fd = (dirfd == AT_FDCWD) ?
		open(".", O_PATH | O_DIRECTORY | O_CLOEXEC) :
		fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (fd == -1) {
		return NULL;
	}
	st = state_new(e, id, fd);
	if (st != NULL) {
		add_watch(e, st);
	}
	return st;
}

static bool stamp_matches(const struct fastcase_dir_record *rec,
			  const struct stat *cur)
{
	return rec->ctime_ns == ts_ns(&cur->st_ctim) &&
	       rec->mtime_ns == ts_ns(&cur->st_mtim);
}

static bool stamp_racy(const struct fastcase_dir_record *rec)
{
	return rec->ctime_ns + RACY_MARGIN_NS > rec->stamp_time_ns ||
	       rec->mtime_ns + RACY_MARGIN_NS > rec->stamp_time_ns;
}

/*
 * Whether a process that is not in sync may trust the records: their
 * stamp equals the directory's times, was not read within the racy
 * window, and the file system moves a directory's times at all.
 */
static bool stamp_trusted(struct fastcase_engine *e,
			  const struct fastcase_dir_id *id,
			  const struct fastcase_dir_record *rec,
			  const struct stat *cur)
{
	return stamp_matches(rec, cur) && !stamp_racy(rec) &&
		!fastcase_cache_is_timeless(e->cache, id->dev);
}

/*
 * Built or restamped by any process within the rebuild interval: for a
 * process without a watch, a directory that changes all the time would
 * otherwise be read for nearly every question, which costs more than the
 * scan it is then handed to (docs/DESIGN.md, rule 3).
 */
static bool rebuilt_lately(const struct fastcase_engine *e,
			   const struct fastcase_dir_record *rec, int64_t now)
{
	return e->rebuild_interval_ns > 0 && now >= rec->stamp_time_ns &&
	       now - rec->stamp_time_ns < e->rebuild_interval_ns;
}

static bool record_usable(const struct fastcase_dir_record *rec)
{
	return (rec->flags & (FASTCASE_DIR_COMPLETE |
			      FASTCASE_DIR_TOO_BIG)) != 0;
}

/* The directory id's usable records, when cur (its times) vouches. */
static bool records_by_stamp(struct fastcase_engine *e,
			     const struct fastcase_dir_id *id,
			     const struct stat *cur,
			     struct fastcase_dir_record *rec)
{
	return fastcase_cache_dir_get(e->cache, &e->scope, id, rec) &&
	       record_usable(rec) && stamp_trusted(e, id, rec, cur);
}

/* A test's probes retry a busy lock in their own time. */
static int take_dir_lock(struct fastcase_engine *e,
			 struct fastcase_dir_state *st)
{
	const struct fastcase_engine_probes *p = e->probes;
	int ret;

	if (p == NULL || p->lock_busy == NULL) {
		return fastcase_cache_dir_lock(e->cache, &e->scope, &st->id);
	}
	for (;;) {
		ret = fastcase_cache_dir_trylock(e->cache, &e->scope,
						 &st->id);
		if (ret != EWOULDBLOCK ||
		    fastcase_cache_holds_locks(e->cache)) {
			return ret;
		}
		if (!p->lock_busy(p->private_data)) {
			return ETIMEDOUT;
		}
	}
}

/*
 * The directory's lock (the rules: fastcase_lock.h). A wait that expired
 * is counted and logged once: every caller then falls back.
 */
static int lock_dir(struct fastcase_engine *e, struct fastcase_dir_state *st)
{
	int ret;

	step(e, FASTCASE_STEP_LOCK);
	ret = take_dir_lock(e, st);

	if (ret == ETIMEDOUT) {
		char path[PATH_MAX];

		e->stats.lock_timeouts++;
		if (!e->lock_timeout_logged) {
			DBG_WARNING("share [%s]: directory %s stayed locked "
				    "for over %d ms; its lookups go to smbd's "
				    "scan and its creates are refused until "
				    "it is free (logged once)\n", e->log_name,
				    dir_path(st->fd, path, sizeof(path)),
				    FASTCASE_LOCK_WAIT_MS);
			e->lock_timeout_logged = true;
		}
	}
	return ret;
}

/*
 * Make sure no process trusts the directory's records again. Caller holds
 * the directory's lock. A file that takes neither a delete nor an
 * overwrite is broken beyond what a rebuild mends: say so loudly.
 */
static void forget_dir(struct fastcase_engine *e,
		       struct fastcase_dir_state *st)
{
	char path[PATH_MAX];

	st->in_sync = false;
	if (fastcase_cache_dir_forget(e->cache, &e->scope, &st->id) == 0) {
		return;
	}
	DBG_ERR("share [%s]: cannot drop the cache records of directory %s "
		"from %s; other processes may answer from them: remove the "
		"file\n", e->log_name, dir_path(st->fd, path, sizeof(path)),
		fastcase_cache_path(e->cache));
}

/*
 * Whether the records already agree with the disk about name. Every
 * process watching the directory gets the event of a change and the one
 * that made it (or the first to see it) has usually applied it: checking
 * without the lock keeps the others from queueing on it. A disagreement
 * seen here is settled under the lock; a change after the check sends an
 * event of its own.
 *
 * An event that says which way the name went (how) needs no look at the
 * disk when the records show it gone that way: they then agree with the
 * disk as it stood after that change, and any later change to the name
 * is a later event in the queue. The last event for a name leaves the
 * records as the disk is.
 */
static bool records_agree(struct fastcase_engine *e,
			  struct fastcase_dir_state *st, const char *name,
			  enum fastcase_watch_kind how)
{
	struct fastcase_dir_record rec;
	struct stat sb;
	int has;

	if (!fastcase_cache_dir_get(e->cache, &e->scope, &st->id, &rec) ||
	    !(rec.flags & FASTCASE_DIR_COMPLETE)) {
		/* nobody trusts these records: nothing to keep exact */
		return true;
	}
	has = fastcase_cache_entry_has(e->cache, &e->scope, &st->id, rec.gen,
				       name);
	if (has < 0) {
		return false;
	}
	if ((how == FASTCASE_WATCH_NAME_ADDED && has == 1) ||
	    (how == FASTCASE_WATCH_NAME_REMOVED && has == 0)) {
		return true;
	}
	if (fstatat(st->fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		return has == 1;
	}
	return (errno == ENOENT || errno == ENOTDIR) && has == 0;
}

/*
 * Under the directory's lock: bring the directory's on-disk state for one
 * name into the records.
 */
static void revalidate_locked(struct fastcase_engine *e,
			      struct fastcase_dir_state *st, const char *name)
{
	struct fastcase_dir_record rec;
	struct stat sb;
	int ret;

	if (!fastcase_cache_dir_get(e->cache, &e->scope, &st->id, &rec) ||
	    !(rec.flags & FASTCASE_DIR_COMPLETE)) {
		return;
	}
	if (fstatat(st->fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		ret = fastcase_cache_entry_add(e->cache, &e->scope, &st->id,
					       rec.gen, name);
	} else if (errno == ENOENT || errno == ENOTDIR) {
		ret = fastcase_cache_entry_remove(e->cache, &e->scope,
						  &st->id, rec.gen, name);
	} else {
		ret = errno;
	}
	if (ret != 0) {
		/* cannot tell, cannot store it, or a malformed bucket: nobody
		 * may trust these records; the next lookup rebuilds them */
		forget_dir(e, st);
	}
	if (!st->touched) {
		st->touched = true;
		st->touched_next = e->touched;
		e->touched = st;
	}
}

/*
 * Bring the directory's on-disk state for one name into the records; how:
 * the way the name went, when an event says so (records_agree()).
 */
static void revalidate_name(struct fastcase_engine *e,
			    struct fastcase_dir_state *st, const char *name,
			    enum fastcase_watch_kind how)
{
	if (records_agree(e, st, name, how)) {
		return;
	}
	if (lock_dir(e, st) != 0) {
		/* this change may be missing from the records: revalidate
		 * the directory before trusting them again */
		st->in_sync = false;
		return;
	}
	revalidate_locked(e, st, name);
	fastcase_cache_dir_unlock(e->cache, &e->scope, &st->id);
}

static void apply_event(void *private_data, int wd,
			enum fastcase_watch_kind kind, const char *name)
{
	struct fastcase_engine *e = private_data;
	const struct fastcase_engine_probes *p = e->probes;
	struct fastcase_dir_state *st;

	if (p != NULL && p->event != NULL &&
	    !p->event(p->private_data, &kind)) {
		return;
	}
	e->stats.events++;
	e->change_count++;
	switch (kind) {
	case FASTCASE_WATCH_OVERFLOW:
		e->stats.overflows++;
		DBG_NOTICE("share [%s]: inotify queue overflowed; "
			   "revalidating every directory\n", e->log_name);
		for (st = e->lru; st != NULL; st = st->next) {
			st->in_sync = false;
		}
		break;
	case FASTCASE_WATCH_GONE:
		st = state_by_wd(e, wd);
		if (st != NULL) {
			wd_unlink(e, st);
		}
		break;
	case FASTCASE_WATCH_NAME:
	case FASTCASE_WATCH_NAME_ADDED:
	case FASTCASE_WATCH_NAME_REMOVED:
		st = state_by_wd(e, wd);
		if (st != NULL) {
			revalidate_name(e, st, name, kind);
		}
		break;
	}
}

/* Apply every queued event; an unreadable queue counts as lost events. */
static void apply_queue(struct fastcase_engine *e)
{
	step(e, FASTCASE_STEP_DRAIN);
	if (fastcase_watch_drain(e->watch, apply_event, e) != 0) {
		apply_event(e, -1, FASTCASE_WATCH_OVERFLOW, NULL);
	}
}

/*
 * The records of a directory whose events were all applied are exact as
 * of now: store the directory's current times as their stamp, so that a
 * process that attaches later need not rebuild. Under the directory's
 * lock, and in this order: the times first, then every event queued up to
 * now, so that each change those times show is in the records. A change
 * after the fstat moves the times past the stamp (or, within one clock
 * tick, makes the stamp racy).
 */
static void refresh_stamp(struct fastcase_engine *e,
			  struct fastcase_dir_state *st)
{
	struct fastcase_dir_record rec;
	int64_t stamp_time = now_ns(e);
	struct stat cur;

	if (!st->in_sync || fstat(st->fd, &cur) != 0) {
		return;
	}
	step(e, FASTCASE_STEP_RESTAMP);
	apply_queue(e);
	if (!st->in_sync ||
	    !fastcase_cache_dir_get(e->cache, &e->scope, &st->id, &rec) ||
	    !(rec.flags & FASTCASE_DIR_COMPLETE) || rec.gen != st->gen) {
		return;
	}
	rec.ctime_ns = ts_ns(&cur.st_ctim);
	rec.mtime_ns = ts_ns(&cur.st_mtim);
	rec.stamp_time_ns = stamp_time;
	fastcase_cache_dir_put(e->cache, &e->scope, &st->id, &rec);
}

/*
 * The inotify instance, made once. It counts against the limits of the
 * effective user of the moment (fs.inotify.max_user_instances).
 */
static void start_watch(struct fastcase_engine *e)
{
	int ret;

	if (!e->watch_wanted) {
		return;
	}
	e->watch_wanted = false;
	ret = fastcase_watch_create(e, &e->watch);
	if (ret != 0) {
		DBG_WARNING("share [%s]: no inotify instance (%s); "
			    "validating directories by their timestamps "
			    "instead\n", e->log_name, strerror(ret));
		e->watch = NULL;
		return;
	}
	if (e->watch_started != NULL) {
		e->watch_started(e->watch_started_data,
				 fastcase_watch_fd(e->watch));
	}
}

/* Apply queued events, then restamp the directories they touched. */
/*
 * Whether the stamp of a directory that just changed through this process
 * may stay as it is: a racy stamp is trusted by no process, and the first
 * lookup after it has aged stamps again (age_stamp()). A directory that
 * changes all the time then costs one stamp per RACY_MARGIN_NS, not one
 * per change. A stamp that is not racy is made so now: it no longer
 * matches the directory's times, and a stamp that is neither racy nor
 * current would never be refreshed, so that every process that attached
 * later would read the directory again.
 */
static bool stamp_left_racy(struct fastcase_engine *e,
			    const struct fastcase_dir_state *st)
{
	struct fastcase_dir_record rec;

	return fastcase_cache_dir_get(e->cache, &e->scope, &st->id, &rec) &&
	       (rec.flags & FASTCASE_DIR_COMPLETE) && rec.gen == st->gen &&
	       stamp_racy(&rec);
}

static void drain(struct fastcase_engine *e)
{
	struct fastcase_dir_state *st;

	start_watch(e);
	if (e->watch == NULL || e->cache == NULL) {
		return;
	}
	apply_queue(e);
	while ((st = e->touched) != NULL) {
		e->touched = st->touched_next;
		st->touched = false;
		if (stamp_left_racy(e, st)) {
			continue;
		}
		if (lock_dir(e, st) == 0) {
			refresh_stamp(e, st);
			fastcase_cache_dir_unlock(e->cache, &e->scope,
						  &st->id);
		}
	}
}

void fastcase_engine_process_events(struct fastcase_engine *e)
{
	drain(e);
}

/*
 * Under the directory's lock, before a build: whether the records rec
 * (when usable) can be used as they are (0), the build is to be put off
 * (EBUSY), or made (ENOENT). cur: the directory's times, read at
 * stamp_time.
 */
static int build_needed(struct fastcase_engine *e,
			const struct fastcase_dir_state *st, uint64_t seen_gen,
			const struct fastcase_dir_record *rec,
			const struct stat *cur, int64_t stamp_time)
{
	if (stamp_trusted(e, &st->id, rec, cur)) {
		/* built by another process while we waited */
		return 0;
	}
	/*
	 * Built while we waited, after our watch was added: the builder
	 * applied every change that completed before it unlocked, and
	 * each change after our watch was added is in our queue. Under
	 * constant changes stamps are always racy; without this every
	 * waiting process would rebuild.
	 */
	if (st->wd >= 0 && rec->gen != seen_gen &&
	    (rec->flags & FASTCASE_DIR_WATCHED)) {
		return 0;
	}
	if (st->wd < 0 && rebuilt_lately(e, rec, stamp_time)) {
		return EBUSY;
	}
	return ENOENT;
}

/*
 * Called under the directory's lock. seen_gen: the generation of the
 * records (0: none) when we looked after adding our watch.
 */
static int build(struct fastcase_engine *e, struct fastcase_dir_state *st,
		 uint64_t seen_gen, struct fastcase_dir_record *rec)
{
	char path[PATH_MAX];
	struct stat cur;
	int64_t stamp_time;
	int ret;

	if (fstat(st->fd, &cur) != 0) {
		return errno;
	}
	stamp_time = now_ns(e);
	step(e, FASTCASE_STEP_BUILD);
	if (fastcase_cache_dir_get(e->cache, &e->scope, &st->id, rec) &&
	    record_usable(rec)) {
		ret = build_needed(e, st, seen_gen, rec, &cur, stamp_time);
		if (ret == EBUSY) {
			e->stats.deferred_builds++;
		}
		if (ret != ENOENT) {
			return ret;
		}
	}
	ret = fastcase_cache_build(e->cache, &e->scope, &st->id, st->fd,
				   &cur, stamp_time, rec);
	if (ret != 0) {
		if (!e->build_failure_logged) {
			DBG_WARNING("share [%s]: cannot cache directory %s "
				    "(%s); asking smbd to scan it (logged "
				    "once)\n", e->log_name,
				    dir_path(st->fd, path, sizeof(path)),
				    strerror(ret));
			e->build_failure_logged = true;
		}
		return ret;
	}
	e->stats.builds++;
	if (rec->flags & FASTCASE_DIR_TOO_BIG) {
		e->stats.too_big++;
		DBG_WARNING("share [%s]: directory %s of %" PRIu64 "+ "
			    "entries exceeds the cache's share of "
			    "\"fastcase:cache size\"; smbd scans it\n",
			    e->log_name, dir_path(st->fd, path, sizeof(path)),
			    rec->entries);
	}
	return 0;
}

/*
 * Build st's records under the directory's lock, unless another process
 * built them while we waited, and mark them built by a watcher when we
 * are one.
 */
static int build_locked(struct fastcase_engine *e,
			struct fastcase_dir_state *st, uint64_t seen_gen,
			struct fastcase_dir_record *rec)
{
	int ret;

	ret = lock_dir(e, st);
	if (ret != 0) {
		return ret;
	}
	ret = build(e, st, seen_gen, rec);
	if (ret == 0) {
		st->gen = rec->gen;
		st->in_sync = (st->wd >= 0);
		/* changes made while we read are in our queue */
		drain(e);
		if (st->in_sync && !(rec->flags & FASTCASE_DIR_WATCHED) &&
		    fastcase_cache_dir_get(e->cache, &e->scope, &st->id,
					   rec) &&
		    rec->gen == st->gen) {
			rec->flags |= FASTCASE_DIR_WATCHED;
			fastcase_cache_dir_put(e->cache, &e->scope, &st->id,
					       rec);
		}
	}
	fastcase_cache_dir_unlock(e->cache, &e->scope, &st->id);
	fastcase_cache_trim(e->cache);
	return ret;
}

/*
 * A directory met on the way down a path, checked for the first time:
 * whether its records are current by their stamp alone, without a watch.
 * lookup_times: the directory's times as this lookup read them, or NULL.
 */
static bool deferred_stamp_trusted(struct fastcase_engine *e,
				   struct fastcase_dir_state *st,
				   const struct stat *lookup_times,
				   struct fastcase_dir_record *rec)
{
	struct stat cur;

	st->watch_deferred = false;
	if (lookup_times == NULL) {
		if (fstat(st->fd, &cur) != 0) {
			return false;
		}
		lookup_times = &cur;
	}
	return records_by_stamp(e, &st->id, lookup_times, rec);
}

/*
 * Whether st's records may be trusted as they stand: 0 with rec the
 * directory's record; ESTALE when they must be built first (*seen_gen:
 * the generation of usable records seen after adding our watch, and rec
 * those records; 0 when there were none); or an errno. lookup_times (or
 * NULL): the directory's times as the lookup asking read them.
 */
static int check_sync(struct fastcase_engine *e,
		      struct fastcase_dir_state *st,
		      const struct stat *lookup_times,
		      struct fastcase_dir_record *rec, uint64_t *seen_gen)
{
	struct stat cur;

	*seen_gen = 0;
	if (st->in_sync &&
	    fastcase_cache_dir_get(e->cache, &e->scope, &st->id, rec) &&
	    record_usable(rec)) {
		/* rebuilt by another process, which applied the events of
		 * its build; ours follow in our queue */
		st->gen = rec->gen;
		return 0;
	}
	st->in_sync = false;

	if (st->watch_deferred &&
	    deferred_stamp_trusted(e, st, lookup_times, rec)) {
		st->gen = rec->gen;
		return 0;
	}

	/* the watch first: a change after the stat below is then in our
	 * queue, one before it moved the times the stat reads */
	add_watch(e, st);
	step(e, FASTCASE_STEP_STAT);
	if (fstat(st->fd, &cur) != 0) {
		return errno;
	}
	if (fastcase_cache_dir_get(e->cache, &e->scope, &st->id, rec) &&
	    record_usable(rec)) {
		if (stamp_trusted(e, &st->id, rec, &cur)) {
			st->gen = rec->gen;
			st->in_sync = (st->wd >= 0);
			return 0;
		}
		*seen_gen = rec->gen;
	}
	return ESTALE;
}

/* Build st's records after check_sync() said they must be. */
static int rebuild(struct fastcase_engine *e, struct fastcase_dir_state *st,
		   uint64_t seen_gen, struct fastcase_dir_record *rec)
{
	if (st->wd < 0 && fastcase_cache_is_timeless(e->cache, st->id.dev)) {
		/* nothing would tell this process of the next change */
		return EBUSY;
	}
	return build_locked(e, st, seen_gen, rec);
}

/*
 * Make st's view of the records trustworthy, building them when needed.
 * On success rec is the directory's record.
 */
static int ensure_sync(struct fastcase_engine *e,
		       struct fastcase_dir_state *st,
		       struct fastcase_dir_record *rec)
{
	uint64_t seen_gen;
	int ret = check_sync(e, st, NULL, rec, &seen_gen);

	if (ret == ESTALE) {
		ret = rebuild(e, st, seen_gen, rec);
	}
	return ret;
}

struct choose_state {
	const struct fastcase_scope *scope;
	const char *name;
	const char *exact;
	const char *best;
	bool best_is_legacy;
	size_t matches;
	/* copies: the names handed to choose_name() do not outlive it */
	char exact_buf[NAME_MAX + 1];
	char best_buf[NAME_MAX + 1];
};

/*
 * Rank the candidates of one key: an exact byte match wins; then names
 * stored in UTF-8 over names decoded from the legacy charset; then the
 * smallest in byte order, whatever order readdir returned them in.
 */
static void choose_name(const char *names, size_t names_len,
			void *private_data)
{
	struct choose_state *cs = private_data;
	size_t off = 0;

	while (off < names_len) {
		const char *cand = names + off;
		char decoded[FASTCASE_KEY_MAX];
		const char *spelling;
		bool legacy;

		off += strlen(cand) + 1;
		if (strcmp(cand, cs->name) == 0) {
			strlcpy(cs->exact_buf, cand, sizeof(cs->exact_buf));
			cs->exact = cs->exact_buf;
			cs->matches++;
			continue;
		}
		spelling = fastcase_legacy_decode(cs->scope->legacy, cand,
						  decoded, sizeof(decoded));
		legacy = (spelling != NULL);
		if (!fastcase_fold_equal(&cs->scope->rules, cs->name,
					 legacy ? spelling : cand)) {
			continue;
		}
		cs->matches++;
		if (cs->best == NULL ||
		    (cs->best_is_legacy && !legacy) ||
		    (cs->best_is_legacy == legacy &&
		     strcmp(cand, cs->best) < 0)) {
			strlcpy(cs->best_buf, cand, sizeof(cs->best_buf));
			cs->best = cs->best_buf;
			cs->best_is_legacy = legacy;
		}
	}
}

/*
 * Rank the names of generation gen's bucket for key (cs names the name
 * asked): *pick the one a lookup answers, or NULL. 0, ENOENT when there
 * is no such bucket, or another errno.
 */
static int bucket_pick(struct fastcase_engine *e,
		       const struct fastcase_dir_id *id, uint64_t gen,
		       const char *key, size_t key_len,
		       struct choose_state *cs, const char **pick)
{
	int ret = fastcase_cache_entry_parse(e->cache, &e->scope, id, gen,
					     key, key_len, choose_name, cs);

	*pick = NULL;
	if (ret == 0) {
		*pick = cs->exact != NULL ? cs->exact : cs->best;
	}
	return ret;
}

/*
 * Look the key up in the current generation and copy the chosen name.
 * Returns 0 with *found set or NULL, ENOENT when generation gen has no
 * bucket for the key, or another errno.
 */
static int find_in_records(struct fastcase_engine *e,
			   struct fastcase_dir_state *st, uint64_t gen,
			   const char *name, const char *key, size_t key_len,
			   TALLOC_CTX *mem_ctx, char **found, bool *ambiguous)
{
	struct choose_state cs = { .scope = &e->scope, .name = name };
	const char *pick = NULL;
	int ret;

	*found = NULL;
	*ambiguous = false;
	ret = bucket_pick(e, &st->id, gen, key, key_len, &cs, &pick);
	if (ret != 0) {
		return ret;
	}
	if (pick == NULL) {
		return 0;
	}
	*ambiguous = (cs.exact == NULL && cs.matches > 1);
	if (cs.matches > 1 && !st->ambiguity_logged) {
		char path[PATH_MAX];

		DBG_WARNING("share [%s]: %zu names in directory %s fold "
			    "equal to \"%s\"; %s\n",
			    e->log_name, cs.matches,
			    dir_path(st->fd, path, sizeof(path)), name,
			    e->defer_ambiguous ?
			    "smbd's scan answers for such names" :
			    "answering the exact match, else the smallest "
			    "in byte order");
		st->ambiguity_logged = true;
	}
	*found = talloc_strdup(mem_ctx, pick);
	return *found != NULL ? 0 : ENOMEM;
}

static int dir_id_of(int dirfd, struct stat *cur, struct fastcase_dir_id *id)
{
	/* AT_EMPTY_PATH: dirfd may be AT_FDCWD */
	if (fstatat(dirfd, "", cur, AT_EMPTY_PATH) != 0) {
		return errno;
	}
	id->dev = cur->st_dev;
	id->ino = cur->st_ino;
	return 0;
}

/* An in-sync process refreshes a racy stamp once it has aged. */
static void age_stamp(struct fastcase_engine *e,
		      struct fastcase_dir_state *st,
		      const struct fastcase_dir_record *rec)
{
	int64_t now;

	if (!st->in_sync || !stamp_racy(rec)) {
		return;
	}
	now = now_ns(e);
	if (rec->ctime_ns + RACY_MARGIN_NS > now ||
	    rec->mtime_ns + RACY_MARGIN_NS > now) {
		return;
	}
	if (lock_dir(e, st) == 0) {
		refresh_stamp(e, st);
		fastcase_cache_dir_unlock(e->cache, &e->scope, &st->id);
	}
}

static enum fastcase_result lookup_disk_name(struct fastcase_engine *e,
					     int dirfd, const char *name,
					     TALLOC_CTX *mem_ctx,
					     char **found);

/*
 * smbd gets a legacy name under its UTF-8 spelling: it stores names in
 * share mode records and sends them to clients, which needs UTF-8. Path
 * calls in that spelling are translated back by the glue.
 */
static enum fastcase_result to_client_spelling(struct fastcase_engine *e,
					       enum fastcase_result res,
					       TALLOC_CTX *mem_ctx,
					       char **found)
{
	char decoded[FASTCASE_KEY_MAX];
	const char *spelling;

	if (res != FASTCASE_FOUND || e->scope.legacy == NULL) {
		return res;
	}
	spelling = fastcase_legacy_decode(e->scope.legacy, *found, decoded,
					  sizeof(decoded));
	if (spelling != NULL) {
		TALLOC_FREE(*found);
		*found = talloc_strdup(mem_ctx, spelling);
		if (*found == NULL) {
			return FASTCASE_UNKNOWN;
		}
	}
	return res;
}

enum fastcase_result fastcase_engine_lookup(struct fastcase_engine *e,
					    int dirfd, const char *name,
					    TALLOC_CTX *mem_ctx,
					    char **found)
{
	return to_client_spelling(
		e, lookup_disk_name(e, dirfd, name, mem_ctx, found),
		mem_ctx, found);
}

/* A malformed bucket: nobody may trust the directory's records. */
static void forget_malformed(struct fastcase_engine *e,
			     struct fastcase_dir_state *st)
{
	char path[PATH_MAX];

	DBG_WARNING("share [%s]: malformed cache record for directory %s; "
		    "rebuilding its records\n", e->log_name,
		    dir_path(st->fd, path, sizeof(path)));
	st->in_sync = false;
	if (lock_dir(e, st) == 0) {
		forget_dir(e, st);
		fastcase_cache_dir_unlock(e->cache, &e->scope, &st->id);
	}
}

/*
 * What the records of generation gen answer for key: FASTCASE_FOUND with
 * *found, FASTCASE_NOT_FOUND, or FASTCASE_UNKNOWN (a bucket that cannot be
 * read, or names that fold equal where smbd's scan is to choose). A
 * malformed bucket is forgotten for every process, and *malformed says
 * so: the caller reads again. *no_bucket: NOT_FOUND as the generation
 * has no bucket for the key (it may have been dropped meanwhile).
 */
static enum fastcase_result answer_from_records(struct fastcase_engine *e,
						struct fastcase_dir_state *st,
						uint64_t gen, const char *name,
						const char *key, size_t key_len,
						TALLOC_CTX *mem_ctx,
						char **found, bool *malformed,
						bool *no_bucket)
{
	bool ambiguous = false;
	int ret;

	*malformed = false;
	step(e, FASTCASE_STEP_READ);
	ret = find_in_records(e, st, gen, name, key, key_len, mem_ctx, found,
			      &ambiguous);
	*no_bucket = (ret == ENOENT);
	if (ret == ENOENT) {
		return FASTCASE_NOT_FOUND;
	}
	if (ret == EINVAL) {
		forget_malformed(e, st);
		*malformed = true;
	}
	if (ret != 0) {
		return FASTCASE_UNKNOWN;
	}
	if (*found != NULL && ambiguous && e->defer_ambiguous) {
		TALLOC_FREE(*found);
		return FASTCASE_UNKNOWN;
	}
	return *found != NULL ? FASTCASE_FOUND : FASTCASE_NOT_FOUND;
}

/*
 * A process that cannot show the records to be current (no watch on the
 * directory, and a stamp it cannot trust: the names change all the time,
 * or they change through other machines) still answers a hit from them
 * when the name they give exists now: that is the directory as it stands
 * at the fstatat(), within the lookup. Any name that folds equal is an
 * answer stock smbd's scan could give. A miss cannot be shown this way
 * and goes on to a build or to smbd's scan; so does a name the records
 * no longer match.
 */
static bool confirmed_hit(struct fastcase_engine *e,
			  struct fastcase_dir_state *st,
			  const struct fastcase_dir_record *rec,
			  const char *name, const char *key, size_t key_len,
			  TALLOC_CTX *mem_ctx, char **found)
{
	bool malformed, no_bucket;
	struct stat sb;

	if (st->wd >= 0 || !(rec->flags & FASTCASE_DIR_COMPLETE)) {
		/* a watching process builds once and is then in sync */
		return false;
	}
	if (answer_from_records(e, st, rec->gen, name, key, key_len,
				mem_ctx, found, &malformed,
				&no_bucket) != FASTCASE_FOUND) {
		return false;
	}
	if (fstatat(st->fd, *found, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
		TALLOC_FREE(*found);
		return false;
	}
	e->stats.confirmed_hits++;
	return true;
}

/* What a lookup read of the directory itself, for a create right after. */
struct lookup_read {
	bool counted;	/* the create count was had before any read */
	uint64_t count;
	bool built;	/* this lookup built the records: read them */
};

/*
 * Build st's records for a lookup. On a cluster the directory's create
 * count is had first, so that a miss read here can vouch for a create of
 * the name right after (absent_since_read()).
 */
static int rebuild_for_lookup(struct fastcase_engine *e,
			      struct fastcase_dir_state *st,
			      uint64_t seen_gen,
			      struct fastcase_dir_record *rec,
			      struct lookup_read *rd)
{
	uint64_t builds = e->stats.builds;
	int ret;

	rd->counted = e->create_count != NULL &&
		e->create_count(e->create_count_data, st->fd, false,
				&rd->count);
	ret = rebuild(e, st, seen_gen, rec);
	rd->built = (e->stats.builds != builds);
	return ret;
}

/*
 * One read of the records: FASTCASE_UNKNOWN to read again (EAGAIN in
 * *retry) or give up. *rd: what this read of them read of the directory.
 */
static enum fastcase_result read_records(struct fastcase_engine *e,
					 struct fastcase_dir_state *st,
					 const struct stat *lookup_times,
					 const char *name, const char *key,
					 size_t key_len, TALLOC_CTX *mem_ctx,
					 char **found, int *retry,
					 struct lookup_read *rd)
{
	struct fastcase_dir_record rec, again;
	enum fastcase_result res;
	uint64_t seen_gen;
	bool malformed, no_bucket;
	int ret;

	*retry = 0;
	*rd = (struct lookup_read) { .counted = false };
	ret = check_sync(e, st, lookup_times, &rec, &seen_gen);
	if (ret == ESTALE && seen_gen != 0 &&
	    confirmed_hit(e, st, &rec, name, key, key_len, mem_ctx, found)) {
		return FASTCASE_FOUND;
	}
	if (ret == ESTALE) {
		ret = rebuild_for_lookup(e, st, seen_gen, &rec, rd);
	}
	if (ret != 0 || !(rec.flags & FASTCASE_DIR_COMPLETE)) {
		return FASTCASE_UNKNOWN;
	}
	age_stamp(e, st, &rec);
	res = answer_from_records(e, st, rec.gen, name, key, key_len,
				  mem_ctx, found, &malformed, &no_bucket);
	if (malformed) {
		*retry = EAGAIN;
		return FASTCASE_UNKNOWN;
	}
	if (!no_bucket) {
		/*
		 * The bucket read is generation rec.gen's, which check_sync()
		 * saw current after this lookup began and after every change
		 * completed before it was applied: it holds them. Only a
		 * bucket that is not there may be one a rebuild or a drop of
		 * the generation removed meanwhile.
		 */
		return res;
	}
	if (!fastcase_cache_dir_get(e->cache, &e->scope, &st->id, &again) ||
	    again.gen != rec.gen) {
		/* rebuilt or dropped while we read: read again */
		TALLOC_FREE(*found);
		*retry = EAGAIN;
		return FASTCASE_UNKNOWN;
	}
	return res;
}

/*
 * This process's state of the directory open as dirfd, or NULL; cur: the
 * directory's fstat() that found it.
 */
static struct fastcase_dir_state *dir_state(struct fastcase_engine *e,
					    int dirfd, struct stat *cur)
{
	struct fastcase_dir_id id;

	if (dir_id_of(dirfd, cur, &id) != 0) {
		return NULL;
	}
	return state_get(e, &id, dirfd);
}

static int scan_disk_name(struct fastcase_engine *e, int dirfd,
			  const char *name, TALLOC_CTX *mem_ctx, char **found,
			  bool *ambiguous);

/*
 * On a cluster, after a lookup that had the directory's create count
 * before it could read the directory: note a name that read found absent,
 * for a create of it right after (absent_since_read()). Where the read
 * was put off (a rebuild within the rebuild interval) the engine scans
 * here itself rather than leave the scan to smbd, so that it knows what
 * the read found (unless scan_put_off_lookups is off).
 */
static enum fastcase_result absent_by_read(struct fastcase_engine *e,
					   const struct fastcase_dir_state *st,
					   const char *name,
					   enum fastcase_result res,
					   const struct lookup_read *rd,
					   TALLOC_CTX *mem_ctx, char **found)
{
	bool ambiguous = false;

	if (res == FASTCASE_UNKNOWN && !e->scan_put_off_lookups) {
		return res;
	}
	if (res == FASTCASE_UNKNOWN) {
		if (scan_disk_name(e, st->fd, name, mem_ctx, found,
				   &ambiguous) != 0) {
			return FASTCASE_UNKNOWN;
		}
		e->stats.fallbacks++;
		if (*found != NULL && ambiguous && e->defer_ambiguous) {
			/* smbd's own scan picks, as it would */
			TALLOC_FREE(*found);
			return FASTCASE_UNKNOWN;
		}
		if (*found != NULL) {
			return FASTCASE_FOUND;
		}
	} else if (res != FASTCASE_NOT_FOUND || !rd->built) {
		return res;
	}
	e->absent.valid = strlen(name) < sizeof(e->absent.name);
	if (e->absent.valid) {
		e->absent.dir = st->id;
		e->absent.count = rd->count;
		e->absent.read_ns = now_ns(e);
		strlcpy(e->absent.name, name, sizeof(e->absent.name));
	}
	return FASTCASE_NOT_FOUND;
}

/*
 * The on-disk name that name folds equal to in st's directory;
 * lookup_times: its times as this lookup read them (or NULL).
 */
static enum fastcase_result lookup_in_dir(struct fastcase_engine *e,
					  struct fastcase_dir_state *st,
					  const struct stat *lookup_times,
					  const char *name,
					  TALLOC_CTX *mem_ctx, char **found)
{
	enum fastcase_result res = FASTCASE_UNKNOWN;
	char key[FASTCASE_KEY_MAX];
	struct lookup_read rd = { .counted = false };
	size_t key_len;
	int attempt, retry = EAGAIN;

	e->stats.lookups++;
	maybe_flush_stats(e);
	*found = NULL;
	if (fastcase_fold_key(&e->scope.rules, name, key, sizeof(key),
			      &key_len) != 0) {
		st = NULL;
	}
	for (attempt = 0; st != NULL && retry != 0 && attempt < 3;
	     attempt++) {
		res = read_records(e, st, lookup_times, name, key, key_len,
				   mem_ctx, found, &retry, &rd);
	}
	if (st != NULL && rd.counted) {
		res = absent_by_read(e, st, name, res, &rd, mem_ctx, found);
	}
	switch (res) {
	case FASTCASE_FOUND:
		e->stats.hits++;
		break;
	case FASTCASE_NOT_FOUND:
		e->stats.misses++;
		break;
	case FASTCASE_UNKNOWN:
		e->stats.unknown++;
		break;
	}
	return res;
}

static enum fastcase_result lookup_disk_name(struct fastcase_engine *e,
					     int dirfd, const char *name,
					     TALLOC_CTX *mem_ctx,
					     char **found)
{
	struct fastcase_dir_state *st = NULL;
	struct stat dir_times;

	if (e->cache != NULL) {
		drain(e);
		st = dir_state(e, dirfd, &dir_times);
	}
	return lookup_in_dir(e, st, &dir_times, name, mem_ctx, found);
}

/*
 * A state of the directory at rel below base, met on the way down a path
 * (its first check trusts its stamp alone: check_sync()); *cur: its times.
 */
static struct fastcase_dir_state *met_dir_state(struct fastcase_engine *e,
						struct fastcase_dir_state *base,
						const char *rel,
						struct stat *cur)
{
	struct fastcase_dir_state *st = NULL;
	struct fastcase_dir_id id;
	int fd;

	fd = openat(base->fd, rel,
		    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		return NULL;
	}
	/* the fd's own id: the name may be another directory by now */
	if (dir_id_of(fd, cur, &id) != 0) {
		close(fd);
		return NULL;
	}
	st = state_find(e, &id);
	if (st != NULL) {
		close(fd);
		return state_touch(e, st);
	}
	st = state_new(e, &id, fd);
	if (st != NULL) {
		st->watch_deferred = true;
	}
	return st;
}

/*
 * A directory on a path that this process keeps no state of, met by an
 * fstatat() (cur) within this lookup: its records answer name when their
 * stamp equals cur and is not racy (docs/DESIGN.md, Consistency, point
 * 3). Most directories of a deep path are passed once by a process, so
 * they get no fd, no watch and no state. FASTCASE_UNKNOWN for anything
 * else (the caller then takes the ordinary way, which sorts it out).
 */
static enum fastcase_result answer_by_stamp(struct fastcase_engine *e,
					    const struct fastcase_dir_id *id,
					    const struct stat *cur,
					    const char *name,
					    TALLOC_CTX *mem_ctx, char **found)
{
	struct choose_state cs = { .scope = &e->scope, .name = name };
	struct fastcase_dir_record rec;
	char key[FASTCASE_KEY_MAX];
	const char *pick = NULL;
	size_t key_len;

	*found = NULL;
	if (fastcase_fold_key(&e->scope.rules, name, key, sizeof(key),
			      &key_len) != 0 ||
	    !records_by_stamp(e, id, cur, &rec) ||
	    !(rec.flags & FASTCASE_DIR_COMPLETE) ||
	    bucket_pick(e, id, rec.gen, key, key_len, &cs, &pick) != 0 ||
	    pick == NULL || (cs.exact == NULL && cs.matches > 1)) {
		/* the ordinary way answers, logs or reads */
		return FASTCASE_UNKNOWN;
	}
	*found = talloc_strdup(mem_ctx, pick);
	if (*found == NULL) {
		return FASTCASE_UNKNOWN;
	}
	e->stats.lookups++;
	e->stats.hits++;
	return FASTCASE_FOUND;
}

/*
 * Where a path's lookup stands: the directory its next component is
 * looked up in. Either st, or one this process keeps no state of: rel
 * (its on-disk path below base, the nearest state above it) with the id
 * and times of the fstatat() that met it.
 */
struct path_cursor {
	TALLOC_CTX *mem_ctx;
	struct fastcase_dir_state *st;
	struct fastcase_dir_state *base;
	char *rel;
	struct fastcase_dir_id id;
	struct stat cur;
};

static enum fastcase_result cursor_lookup(struct fastcase_engine *e,
					  struct path_cursor *c,
					  const char *name, char **disk)
{
	enum fastcase_result res;

	if (c->st == NULL) {
		res = answer_by_stamp(e, &c->id, &c->cur, name, c->mem_ctx,
				      disk);
		if (res == FASTCASE_FOUND) {
			return res;
		}
		c->st = met_dir_state(e, c->base, c->rel, &c->cur);
		if (c->st == NULL) {
			return FASTCASE_UNKNOWN;
		}
		return lookup_in_dir(e, c->st, &c->cur, name, c->mem_ctx,
				     disk);
	}
	return lookup_in_dir(e, c->st, NULL, name, c->mem_ctx, disk);
}

/*
 * path with "/" and name appended, in place where talloc can: no format
 * to parse, as a deep path appends twice per component. NULL when out of
 * memory.
 */
static char *path_append(char *path, const char *name)
{
	size_t len = strlen(path), sep = (len != 0), add = strlen(name);
	char *longer = talloc_realloc(NULL, path, char, len + sep + add + 1);

	if (longer == NULL) {
		return NULL;
	}
	if (sep) {
		longer[len] = '/';
	}
	memcpy(longer + len + sep, name, add + 1);
	return longer;
}

/*
 * Move the cursor into its directory's subdirectory disk (false: not a
 * directory, or gone). The last directory of a path gets a state: smbd
 * looks up a name in it next.
 */
static bool cursor_descend(struct fastcase_engine *e, struct path_cursor *c,
			   const char *disk, bool last)
{
	if (c->st != NULL) {
		c->base = c->st;
		c->rel = talloc_strdup(c->mem_ctx, disk);
	} else {
		c->rel = path_append(c->rel, disk);
	}
	if (c->rel == NULL ||
	    fstatat(c->base->fd, c->rel, &c->cur, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISDIR(c->cur.st_mode)) {
		c->st = NULL;
		return false;
	}
	c->id = (struct fastcase_dir_id) { .dev = c->cur.st_dev,
					   .ino = c->cur.st_ino };
	c->st = state_find(e, &c->id);
	if (c->st != NULL) {
		state_touch(e, c->st);
	} else if (last) {
		c->st = met_dir_state(e, c->base, c->rel, &c->cur);
	}
	return c->st != NULL || !last;
}

enum fastcase_result fastcase_engine_lookup_path(struct fastcase_engine *e,
						 int dirfd, const char *path,
						 TALLOC_CTX *mem_ctx,
						 char **found)
{
	TALLOC_CTX *frame = talloc_stackframe();
	enum fastcase_result res = FASTCASE_UNKNOWN;
	struct path_cursor c = { .mem_ctx = frame };
	char *rest = talloc_strdup(frame, path), *name = NULL;
	char *disk = NULL, *out = talloc_strdup(frame, "");

	*found = NULL;
	if (e->cache != NULL && e->scope.legacy == NULL && rest != NULL &&
	    out != NULL) {
		drain(e);
		c.st = dir_state(e, dirfd, &c.cur);
	}
	while ((c.st != NULL || c.base != NULL) &&
	       (name = strsep(&rest, "/")) != NULL) {
		res = cursor_lookup(e, &c, name, &disk);
		if (res != FASTCASE_FOUND) {
			break;
		}
		out = path_append(out, disk);
		if (out == NULL || !cursor_descend(e, &c, disk, rest == NULL)) {
			res = FASTCASE_UNKNOWN;
			break;
		}
	}
	if (res == FASTCASE_FOUND) {
		*found = talloc_move(mem_ctx, &out);
	}
	TALLOC_FREE(frame);
	return res;
}

/*
 * Read the whole directory and rank every name as a lookup of name would:
 * the on-disk name in *found, or NULL; *ambiguous (if not NULL): several
 * fold equal and none is exact. Returns 0 or an errno.
 */
static int scan_disk_name(struct fastcase_engine *e, int dirfd,
			  const char *name, TALLOC_CTX *mem_ctx, char **found,
			  bool *ambiguous)
{
	TALLOC_CTX *frame = talloc_stackframe();
	struct choose_state cs = { .scope = &e->scope, .name = name };
	struct fastcase_dirread *dr = NULL;
	const char *entry = NULL;
	int ret;

	*found = NULL;
	ret = fastcase_dirread_open(frame, dirfd, &dr);
	while (ret == 0 && cs.exact == NULL &&
	       (ret = fastcase_dirread_next(dr, &entry)) == 0 &&
	       entry != NULL) {
		choose_name(entry, strlen(entry) + 1, &cs);
	}
	if (ret == 0 && (cs.exact != NULL || cs.best != NULL)) {
		*found = talloc_strdup(mem_ctx, cs.exact != NULL ?
				       cs.exact : cs.best);
		ret = *found != NULL ? 0 : ENOMEM;
	}
	if (ambiguous != NULL) {
		*ambiguous = (cs.exact == NULL && cs.matches > 1);
	}
	TALLOC_FREE(frame);
	return ret;
}

enum fastcase_result fastcase_engine_scan(struct fastcase_engine *e,
					  int dirfd, const char *name,
					  TALLOC_CTX *mem_ctx, char **found)
{
	e->stats.fallbacks++;
	if (scan_disk_name(e, dirfd, name, mem_ctx, found, NULL) != 0) {
		return FASTCASE_UNKNOWN;
	}
	return to_client_spelling(e, *found != NULL ? FASTCASE_FOUND :
				  FASTCASE_NOT_FOUND, mem_ctx, found);
}

/*
 * A create or rename that goes ahead without the full check for case
 * variants (one under the directory's lock). It is never silent: counted,
 * and logged (loudly the first time).
 */
static void note_unchecked(struct fastcase_engine *e, int dirfd,
			   const char *name, const char *why, int err)
{
	char path[PATH_MAX];
	int level = e->unchecked_logged ? DBGLVL_INFO : DBGLVL_WARNING;

	e->stats.unchecked++;
	DBG_PREFIX(level, ("share [%s]: \"%s\" in %s is created without the "
			   "full check for case variants: %s (%s); unless "
			   "smbd is clustered (its cluster lock serialises "
			   "them), two clients may create names that differ "
			   "only in case at the same instant, as with stock "
			   "smbd\n", e->log_name, name,
			   dir_path(dirfd, path, sizeof(path)), why,
			   err != 0 ? strerror(err) : "-"));
	e->unchecked_logged = true;
}

/*
 * Make the kernel fetch fd's attributes from the file system (a network or
 * cluster file system's client otherwise answers a stat from its cache for
 * a while), so that the fstat()s of the check that follows see every
 * change made through other machines before we took the lock. Local file
 * systems ignore the flag.
 */
static void refresh_attributes(int fd)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC,
		  STATX_MTIME | STATX_CTIME, &stx) != 0) {
		DBG_DEBUG("statx: %s\n", strerror(errno));
	}
}

/*
 * Under the directory's lock: the on-disk name that folds equal to name,
 * from the records, else (a directory too big for the cache, records
 * that cannot be built or read) from a scan, which the lock makes as
 * race-free as the records. Returns 0 or the errno of a failed scan.
 */
static int find_variant_locked(struct fastcase_engine *e,
			       struct fastcase_dir_state *st,
			       const char *name, TALLOC_CTX *mem_ctx,
			       char **found)
{
	struct fastcase_dir_record rec;
	char key[FASTCASE_KEY_MAX];
	size_t key_len;
	bool ambiguous;
	int ret = ENOENT;

	*found = NULL;
	drain(e);
	if (e->exact_create_checks) {
		refresh_attributes(st->fd);
	}
	if (fastcase_fold_key(&e->scope.rules, name, key, sizeof(key),
			      &key_len) == 0 &&
	    ensure_sync(e, st, &rec) == 0 &&
	    (rec.flags & FASTCASE_DIR_COMPLETE)) {
		ret = find_in_records(e, st, rec.gen, name, key, key_len,
				      mem_ctx, found, &ambiguous);
		if (ret == ENOENT) {
			ret = 0;
		}
		if (ret == EINVAL) {
			forget_dir(e, st);
		}
	}
	if (ret == 0) {
		return 0;
	}
	e->stats.scanned_checks++;
	return scan_disk_name(e, st->fd, name, mem_ctx, found, NULL);
}

/*
 * The directory's times before the create, for check_times_moved(): those
 * read as the directory was found, before its lock. A change in between
 * only moves them, which proves nothing there, as a change would.
 */
static void note_times_before(const struct stat *dir_times,
			      struct fastcase_create *op)
{
	op->times_known = true;
	op->mtime_ns = ts_ns(&dir_times->st_mtim);
	op->ctime_ns = ts_ns(&dir_times->st_ctim);
}

/*
 * After a create through us: a directory whose times did not move, though
 * they were old enough that any change must move them, is on a file
 * system without usable directory times. Mark its device for every
 * process (stamps are not trusted there again) and say so once.
 */
static void check_times_moved(struct fastcase_engine *e,
			      struct fastcase_dir_state *st,
			      const struct fastcase_create *op)
{
	int64_t now = clock_now_ns();
	char path[PATH_MAX];
	struct stat cur;

	/* times that recent prove nothing: no fstat in a busy directory */
	if (!op->times_known ||
	    now - MAX(op->mtime_ns, op->ctime_ns) < TIMELESS_MIN_AGE_NS ||
	    fstat(st->fd, &cur) != 0 ||
	    ts_ns(&cur.st_mtim) != op->mtime_ns ||
	    ts_ns(&cur.st_ctim) != op->ctime_ns ||
	    fastcase_cache_is_timeless(e->cache, st->id.dev)) {
		return;
	}
	fastcase_cache_mark_timeless(e->cache, st->id.dev);
	if (!e->timeless_logged) {
		DBG_ERR("share [%s]: a create in %s left the directory's "
			"modification and change times as they were: this "
			"file system gives no usable directory times; where "
			"inotify cannot tell of changes, smbd's scan answers "
			"every lookup in it (logged once)\n", e->log_name,
			dir_path(st->fd, path, sizeof(path)));
		e->timeless_logged = true;
	}
}

/* Whether the on-disk name found refuses a create of name. */
static bool refuses(const char *found, const char *name, const char *allowed)
{
	/* the exact name exists: the kernel says EEXIST itself */
	return found != NULL && strcmp(found, name) != 0 &&
		(allowed == NULL || strcmp(found, allowed) != 0);
}

/*
 * No usable cache file, and so no directory lock: check by a scan. A
 * cluster-wide lock held by the caller (clustered smbd) still makes it
 * exact; otherwise a create of a case variant through another process at
 * the same instant is not excluded, which is counted and logged.
 */
static int check_without_cache(struct fastcase_engine *e, int dirfd,
			       const char *name, const char *allowed,
			       TALLOC_CTX *mem_ctx, char **existing)
{
	char *found = NULL;
	int ret;

	ret = scan_disk_name(e, dirfd, name, mem_ctx, &found, NULL);
	if (ret != 0) {
		note_unchecked(e, dirfd, name, "no usable cache file, and the "
			       "directory cannot be read", ret);
		return 0;
	}
	e->stats.scanned_checks++;
	if (refuses(found, name, allowed)) {
		e->stats.collisions++;
		*existing = found;
		return EEXIST;
	}
	TALLOC_FREE(found);
	note_unchecked(e, dirfd, name, "no usable cache file, so no "
		       "directory lock; a scan found no variant", 0);
	return 0;
}

/*
 * Under the directory's locks (the cluster's too): whether this process's
 * last lookup read the directory and found name absent, less than
 * ABSENCE_TTL_NS ago, and no create or rename into it has begun under the
 * cluster lock since that lookup had the create count. Every create
 * through smbd on any node that began before is then finished and was in
 * that read, and none began after, so no case variant of name was made
 * through smbd; a name made by another program meanwhile is the race
 * stock smbd has between its own lookup and create. Used once.
 */
static bool absent_since_read(struct fastcase_engine *e,
			      const struct fastcase_dir_state *st,
			      const char *name)
{
	uint64_t count;
	bool vouches;

	vouches = e->absent.valid &&
		e->absent.dir.dev == st->id.dev &&
		e->absent.dir.ino == st->id.ino &&
		strcmp(e->absent.name, name) == 0 &&
		now_ns(e) - e->absent.read_ns < ABSENCE_TTL_NS &&
		e->create_count(e->create_count_data, st->fd, true, &count) &&
		count == e->absent.count;
	e->absent.valid = false;
	return vouches;
}

/*
 * Lock dirfd's records and refuse name when another name that folds equal
 * exists, other than allowed (a rename's source in the same directory, so
 * that a case-only rename works). The rules for when the check cannot be
 * made: docs/DESIGN.md, "Creates".
 */
static int begin_new_name(struct fastcase_engine *e, int dirfd,
			  const char *name, const char *allowed,
			  struct fastcase_create *op,
			  TALLOC_CTX *mem_ctx, char **existing)
{
	struct fastcase_dir_state *st;
	struct stat dir_times;
	char *found = NULL;
	int ret;

	*op = (struct fastcase_create) { .st = NULL };
	if (e->cache == NULL) {
		return check_without_cache(e, dirfd, name, allowed, mem_ctx,
					   existing);
	}
	drain(e);
	st = dir_state(e, dirfd, &dir_times);
	if (st == NULL) {
		note_unchecked(e, dirfd, name, "cannot open the directory",
			       errno);
		return 0;
	}
	ret = lock_dir(e, st);
	if (ret != 0) {
		/* without the lock the check would race: refuse */
		return ret == EWOULDBLOCK ? ETIMEDOUT : ret;
	}
	op->st = st;
	op->locked = true;
	if (absent_since_read(e, st, name)) {
		e->stats.counted_checks++;
		note_times_before(&dir_times, op);
		return 0;
	}

	/* Under the lock: everything other processes created is either in
	 * the records or in our queue. */
	ret = find_variant_locked(e, st, name, mem_ctx, &found);
	if (ret != 0) {
		note_unchecked(e, dirfd, name, "cannot read the directory",
			       ret);
		return 0;
	}
	if (!refuses(found, name, allowed)) {
		TALLOC_FREE(found);
		note_times_before(&dir_times, op);
		return 0;
	}
	e->stats.collisions++;
	*existing = found;
	fastcase_engine_create_end(e, op, name, false);
	return EEXIST;
}

int fastcase_engine_create_begin(struct fastcase_engine *e, int dirfd,
				 const char *name,
				 struct fastcase_create *op,
				 TALLOC_CTX *mem_ctx, char **existing)
{
	return begin_new_name(e, dirfd, name, NULL, op, mem_ctx, existing);
}

int fastcase_engine_rename_begin(struct fastcase_engine *e, int dirfd,
				 const char *name, int src_dirfd,
				 const char *src_name,
				 struct fastcase_create *op,
				 TALLOC_CTX *mem_ctx, char **existing)
{
	struct stat dst_st, src_st;
	bool same_dir;
	int ret;

	same_dir = dirfd == src_dirfd ||
		(fstat(dirfd, &dst_st) == 0 &&
		 fstat(src_dirfd, &src_st) == 0 &&
		 dst_st.st_dev == src_st.st_dev &&
		 dst_st.st_ino == src_st.st_ino);
	ret = begin_new_name(e, dirfd, name, same_dir ? src_name : NULL,
			     op, mem_ctx, existing);
	if (ret == 0 && same_dir) {
		op->moved_from = src_name;
	}
	return ret;
}

/*
 * Under the lock taken by begin: bring the names the call changed into
 * the records, then apply the queue. The events of the call itself then
 * find the records showing each name gone the way it went, and cost no
 * look at the disk (records_agree()). They are not skipped outright: a
 * rename between two links of one file changes nothing and queues none,
 * and the next event for such a name is another process's.
 */
static void end_new_name(struct fastcase_engine *e,
			 struct fastcase_create *op, const char *name,
			 bool changed)
{
	struct fastcase_dir_state *st = op->st;

	if (changed) {
		check_times_moved(e, st, op);
		/* under our lock, the records cannot agree yet: no check */
		revalidate_locked(e, st, name);
		if (op->moved_from != NULL) {
			revalidate_locked(e, st, op->moved_from);
		}
		drain(e);
	}
	fastcase_cache_dir_unlock(e->cache, &e->scope, &st->id);
	op->locked = false;
	op->st = NULL;
	fastcase_cache_trim(e->cache);
}

void fastcase_engine_create_end(struct fastcase_engine *e,
				struct fastcase_create *op,
				const char *name, bool created)
{
	if (op->st != NULL && op->locked) {
		end_new_name(e, op, name, created);
	}
}

bool fastcase_engine_rename_end(struct fastcase_engine *e,
				struct fastcase_create *op,
				const char *name, bool renamed)
{
	bool source_noted = renamed && op->moved_from != NULL &&
		op->st != NULL && op->locked;

	fastcase_engine_create_end(e, op, name, renamed);
	return source_noted;
}

uint64_t fastcase_engine_change_count(struct fastcase_engine *e)
{
	drain(e);
	if (e->watch == NULL || e->cache == NULL ||
	    e->stats.watch_failures > 0) {
		/* changes may pass unseen: every question may be new */
		e->change_count++;
	}
	return e->change_count;
}

void fastcase_engine_name_changed(struct fastcase_engine *e, int dirfd,
				  const char *name)
{
	struct fastcase_dir_state *st;
	struct fastcase_dir_id id = { 0 };
	struct stat cur;

	e->change_count++;
	if (e->cache == NULL || dir_id_of(dirfd, &cur, &id) != 0) {
		return;
	}
	st = state_find(e, &id);
	if (st == NULL) {
		/* Not cached here. Processes that cache it watch it or
		 * check its stamp, and the stamp just moved. */
		return;
	}
	revalidate_name(e, st, name, FASTCASE_WATCH_NAME);
	drain(e);
}

const struct fastcase_stats *fastcase_engine_stats(
	const struct fastcase_engine *e)
{
	return &e->stats;
}

const char *fastcase_engine_legacy_decode(struct fastcase_engine *e,
					  const char *name, char *buf,
					  size_t bufsize)
{
	return fastcase_legacy_decode(e->scope.legacy, name, buf, bufsize);
}

bool fastcase_engine_legacy_listed(struct fastcase_engine *e, int dirfd,
				   const char *disk_name,
				   const char *decoded)
{
	TALLOC_CTX *frame = talloc_stackframe();
	char *found = NULL;
	bool listed;

	switch (lookup_disk_name(e, dirfd, decoded, frame, &found)) {
	case FASTCASE_FOUND:
		listed = (strcmp(found, disk_name) == 0);
		if (!listed) {
			DBG_NOTICE("share [%s]: legacy name \"%s\" is hidden "
				   "by \"%s\", which folds equal\n",
				   e->log_name, decoded, found);
		}
		break;
	default:
		/* cannot tell: show it, as the bytes exist */
		listed = true;
		break;
	}
	TALLOC_FREE(frame);
	return listed;
}

char *fastcase_engine_legacy_to_disk(struct fastcase_engine *e, int dirfd,
				     const char *name, TALLOC_CTX *mem_ctx)
{
	char decoded[FASTCASE_KEY_MAX];
	const char *spelling;
	char *found = NULL;

	if (e->scope.legacy == NULL || fastcase_name_is_invalid_utf8(name) ||
	    lookup_disk_name(e, dirfd, name, mem_ctx, &found) !=
	    FASTCASE_FOUND) {
		return NULL;
	}
	spelling = fastcase_legacy_decode(e->scope.legacy, found, decoded,
					  sizeof(decoded));
	if (spelling == NULL || strcmp(spelling, name) != 0) {
		TALLOC_FREE(found);
		return NULL;
	}
	return found;
}

int fastcase_engine_watch_fd(const struct fastcase_engine *e)
{
	return e->watch != NULL ? fastcase_watch_fd(e->watch) : -1;
}

int fastcase_engine_create(TALLOC_CTX *mem_ctx,
			   const struct fastcase_engine_options *opts,
			   struct fastcase_engine **pe)
{
	struct fastcase_engine *e = talloc_zero(mem_ctx,
						struct fastcase_engine);
	int ret;

	if (e == NULL) {
		return ENOMEM;
	}
	fastcase_scope_init(&e->scope, &opts->rules);
	e->log_name = talloc_strdup(e, opts->log_name != NULL ?
				    opts->log_name : "");
	if (e->log_name == NULL) {
		TALLOC_FREE(e);
		return ENOMEM;
	}
	if (opts->legacy_charset != NULL) {
		struct fastcase_legacy *legacy = NULL;

		ret = fastcase_legacy_open(e, opts->legacy_charset, &legacy);
		if (ret != 0) {
			TALLOC_FREE(e);
			return ret;
		}
		fastcase_scope_set_legacy(&e->scope, legacy);
	}
	e->defer_ambiguous = opts->defer_ambiguous;
	e->exact_create_checks = opts->exact_create_checks;
	e->rebuild_interval_ns = opts->rebuild_interval_ns;
	e->probes = opts->probes;
	e->state_limit = opts->watch_limit != 0 ? opts->watch_limit :
		UNWATCHED_STATE_LIMIT;
	talloc_set_destructor(e, engine_destructor);

	ret = fastcase_cache_open_hashed(e, opts->cache_path, opts->cache_size,
					 opts->cache_hash_size, &e->cache);
	if (ret != 0) {
		DBG_ERR("share [%s]: cannot use the cache file %s (%s); "
			"falling back to smbd's directory scans\n",
			e->log_name, opts->cache_path, strerror(ret));
		e->cache = NULL;
	}
	e->watch_wanted = (e->cache != NULL && opts->watch_limit != 0);
	e->watch_started = opts->watch_started;
	e->watch_started_data = opts->watch_started_data;
	e->create_count = opts->create_count;
	e->create_count_data = opts->create_count_data;
	e->scan_put_off_lookups = opts->scan_put_off_lookups;
	if (!opts->watch_on_first_use) {
		start_watch(e);
	}
	*pe = e;
	return 0;
}
