/*
 * vfs_fastcase: the lookup engine
 *
 * Answers "which on-disk name, if any, does this name fold to?" for a
 * directory open as a file descriptor, from the shared cache, and keeps
 * the cache exact: builds a directory's records on first use, applies
 * inotify events, and serialises creates so that two names that fold
 * equal are never both created through it. Knows nothing of smbd.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_ENGINE_H_
#define _FASTCASE_ENGINE_H_

#include <stdbool.h>
#include <stdint.h>
#include <talloc.h>
#include "fastcase_fold.h"
#include "fastcase_watch.h"

enum fastcase_result {
	FASTCASE_FOUND,		/* *found is the on-disk name */
	FASTCASE_NOT_FOUND,	/* authoritative: no name folds equal */
	FASTCASE_UNKNOWN,	/* cannot say: scan the directory */
};

/* Counters of one share; fastcase-stat adds them up across processes. */
struct fastcase_stats {
	uint64_t lookups;
	uint64_t hits;
	uint64_t misses;
	uint64_t unknown;
	uint64_t builds;
	uint64_t events;
	uint64_t overflows;
	uint64_t collisions;
	uint64_t too_big;
	uint64_t watch_failures;
	uint64_t fallbacks;	/* answered by a scan instead of the cache */
	/* creates and renames let through without the case-variant check
	 * under a directory lock (no usable cache file: checked by a scan
	 * only; an unreadable directory: not at all) */
	uint64_t unchecked;
	/* creates and renames checked by a scan under the lock (a directory
	 * too big for the cache, records that could not be built) */
	uint64_t scanned_checks;
	uint64_t lock_timeouts;	/* a directory's lock not had in time */
	/* a rebuild put off, the question scanned instead: the directory
	 * changed again right after its last build, and no watch here */
	uint64_t deferred_builds;
	/* hits answered from records this process could not show to be
	 * current (no watch, an untrusted stamp), each name found there
	 * confirmed by an fstatat() */
	uint64_t confirmed_hits;
	/* creates and renames checked by the lookup of their name that
	 * read the directory just before, no create having begun under
	 * the cluster lock since (clustered smbd; see create_count) */
	uint64_t counted_checks;
};

#define FASTCASE_STATS_FIELDS \
	X(lookups) X(hits) X(misses) X(unknown) X(builds) X(events) \
	X(overflows) X(collisions) X(too_big) X(watch_failures) X(fallbacks) \
	X(unchecked) X(scanned_checks) X(lock_timeouts) X(deferred_builds) \
	X(confirmed_hits) X(counted_checks)

struct fastcase_engine_options {
	struct fastcase_fold_rules rules;
	const char *cache_path;
	uint64_t cache_size;
	unsigned cache_hash_size;	/* 0: the default; tests only */
	unsigned watch_limit;	/* 0: no inotify, validate by stamps */
	const char *legacy_charset;	/* NULL: none */
	const char *log_name;	/* the share, for log messages */
	/*
	 * Several names fold equal to a lookup and none is exact: answer
	 * FASTCASE_UNKNOWN, so that smbd's own scan picks the first in
	 * directory order and a search lists them all, as stock smbd does.
	 * Otherwise the engine picks by its ranking (see choose_name()).
	 */
	bool defer_ambiguous;
	/*
	 * A process without a watch rebuilds a directory whose times moved.
	 * Where names change all the time (a busy directory seen from a
	 * process past the inotify limits, or on a file system where
	 * inotify is not trusted) that is a full read per lookup and
	 * several per create, far dearer than smbd's own scan: for this
	 * long after a directory's last build or restamp by any process,
	 * the question goes to a scan instead (0: never).
	 */
	int64_t rebuild_interval_ns;
	/*
	 * A create's check reads the directory's times from the file
	 * system itself (statx AT_STATX_FORCE_SYNC), not from this host's
	 * attribute cache: on a cluster file system, under a cluster-wide
	 * lock, a create made through another node moments ago then moves
	 * them.
	 */
	bool exact_create_checks;
	/*
	 * Make the inotify instance at the first lookup, create or change
	 * rather than now: it counts against the limits of whoever is the
	 * effective user then (smbd makes engines as root, and serves
	 * requests as the connected user), and watch_started is told its
	 * fd to poll.
	 */
	bool watch_on_first_use;
	void (*watch_started)(void *private_data, int fd);
	void *watch_started_data;
	/*
	 * Clustered smbd: the create count of the directory at dirfd, the
	 * creates and renames begun in it under its cluster-wide lock
	 * (fastcase_cluster_lock.h), read without that lock (held false:
	 * known only while nobody holds it) or by its holder. A lookup that
	 * reads the directory to find a name absent notes the count before
	 * the read; a create of that name right after, holding the lock,
	 * needs no second read if the count has not moved. NULL: no such
	 * count (every create's check reads what the records cannot vouch
	 * for).
	 */
	bool (*create_count)(void *private_data, int dirfd, bool held,
			     uint64_t *count);
	void *create_count_data;
	/*
	 * With create_count: where a rebuild is put off, scan here rather
	 * than answer FASTCASE_UNKNOWN, so that a miss can vouch for the
	 * create after it. False where the caller has a cheaper answer than
	 * a read of the directory (a VFS module below that asks the bricks).
	 */
	bool scan_put_off_lookups;
	/* Tests only (NULL in smbd): see struct fastcase_engine_probes. */
	const struct fastcase_engine_probes *probes;
};

/*
 * The steps of the sync protocol at which another process, or a local
 * writer, can change what this one is about to read. A test that stops
 * an engine at each (tests/unit/test_interleave.c) can run several
 * engines, each in its own process, through every order of their steps.
 */
enum fastcase_step {
	FASTCASE_STEP_DRAIN,	/* about to read the inotify queue */
	FASTCASE_STEP_STAT,	/* about to read the directory's times */
	FASTCASE_STEP_LOCK,	/* about to take a directory's lock */
	FASTCASE_STEP_BUILD,	/* about to read the directory, locked */
	FASTCASE_STEP_RESTAMP,	/* read the times to restamp, locked */
	FASTCASE_STEP_READ,	/* about to read the records */
};

/*
 * Tests only: what the engine otherwise takes from its surroundings (the
 * clock, waits for locks, inotify's events), so that a test can control
 * it, and a call at every step. Every member may be NULL.
 */
struct fastcase_engine_probes {
	/* the clock stamps are judged by (NULL: CLOCK_REALTIME) */
	int64_t (*now_ns)(void *private_data);
	void (*step)(void *private_data, enum fastcase_step step);
	/*
	 * A directory's lock is busy and this process holds none: instead
	 * of the bounded wait, ask whether to try again (true) or give up
	 * as if the wait had expired (false). A test runs the holder
	 * meanwhile.
	 */
	bool (*lock_busy)(void *private_data);
	/*
	 * Each inotify event before it is applied: may change its kind
	 * (to an overflow, say) or drop it (return false).
	 */
	bool (*event)(void *private_data, enum fastcase_watch_kind *kind);
	void *private_data;
};

struct fastcase_engine;

/*
 * Never fails for a broken cache file or exhausted inotify limits: the
 * engine then answers FASTCASE_UNKNOWN or validates by stamps, and logs
 * once. Returns ENOMEM only.
 */
int fastcase_engine_create(TALLOC_CTX *mem_ctx,
			   const struct fastcase_engine_options *opts,
			   struct fastcase_engine **pe);

/* The inotify fd to poll in the event loop, or -1 (none, or not yet:
 * see watch_on_first_use). */
int fastcase_engine_watch_fd(const struct fastcase_engine *e);

/* Apply queued inotify events; cheap when there are none. */
void fastcase_engine_process_events(struct fastcase_engine *e);

/*
 * The name on disk that name folds equal to in the directory at dirfd
 * (AT_FDCWD: the working directory, as smbd passes its share root).
 */
enum fastcase_result fastcase_engine_lookup(struct fastcase_engine *e,
					    int dirfd, const char *name,
					    TALLOC_CTX *mem_ctx,
					    char **found);

/*
 * The on-disk spelling of path, a directory and its subdirectories below
 * dirfd ("a/b/c"), each component answered as fastcase_engine_lookup()
 * answers a name, after one application of the queued events. Every
 * component must be a directory (no symlink). FASTCASE_FOUND with the
 * whole path in *found; otherwise the caller resolves it component by
 * component. A share with a legacy charset is always FASTCASE_UNKNOWN.
 */
enum fastcase_result fastcase_engine_lookup_path(struct fastcase_engine *e,
						 int dirfd, const char *path,
						 TALLOC_CTX *mem_ctx,
						 char **found);

/*
 * Read the whole directory and compare every name by the share's rule,
 * without the cache: the authoritative fallback of the non-default rules,
 * whose answers smbd's own scan would not give. Never FASTCASE_UNKNOWN
 * unless the directory cannot be read.
 */
enum fastcase_result fastcase_engine_scan(struct fastcase_engine *e,
					  int dirfd, const char *name,
					  TALLOC_CTX *mem_ctx, char **found);

/*
 * Bracket a create of name in dirfd. begin returns 0 holding the
 * directory's lock until end (op->locked), having checked under it that
 * no other name folds equal; EEXIST with the on-disk name in *existing
 * when one does; ETIMEDOUT (or another errno) when the lock could not be
 * had: the create must then be refused, as the check would race. Without
 * a usable cache file there is no lock: begin checks by a scan (EEXIST for
 * a variant), else returns 0 not locked; without a readable directory it
 * returns 0 unchecked. Either is counted and logged.
 */
struct fastcase_create {
	struct fastcase_dir_state *st;
	bool locked;
	/* the directory's times before the create, to see that it moved
	 * them (a file system that does not is handed back to smbd) */
	bool times_known;
	int64_t mtime_ns, ctime_ns;
	/* a rename's source in the same directory */
	const char *moved_from;
};

int fastcase_engine_create_begin(struct fastcase_engine *e, int dirfd,
				 const char *name,
				 struct fastcase_create *op,
				 TALLOC_CTX *mem_ctx, char **existing);
/*
 * The same for a rename of src_name in src_dirfd to name in dirfd: a
 * name that folds equal to the target refuses it, unless it is the
 * source itself (a case-only rename). End it with rename_end.
 */
int fastcase_engine_rename_begin(struct fastcase_engine *e, int dirfd,
				 const char *name, int src_dirfd,
				 const char *src_name,
				 struct fastcase_create *op,
				 TALLOC_CTX *mem_ctx, char **existing);

void fastcase_engine_create_end(struct fastcase_engine *e,
				struct fastcase_create *op,
				const char *name, bool created);

/*
 * True when the rename was made and its source, in the same directory,
 * is in the records as it now stands: the caller need not report the
 * source's removal (fastcase_engine_name_changed()).
 */
bool fastcase_engine_rename_end(struct fastcase_engine *e,
				struct fastcase_create *op,
				const char *name, bool renamed);

/*
 * A number that moves whenever this process saw a change to a name in a
 * directory it caches, or may have missed one (no inotify, a directory it
 * cannot watch, a lost event). Whoever keeps answers of its own (smbd's
 * real-name memcache) drops them when it moves. Applies queued events
 * first.
 */
uint64_t fastcase_engine_change_count(struct fastcase_engine *e);

/* A name in dirfd appeared or disappeared through this process. */
void fastcase_engine_name_changed(struct fastcase_engine *e, int dirfd,
				  const char *name);

const struct fastcase_stats *fastcase_engine_stats(
	const struct fastcase_engine *e);

/*
 * Legacy charset support. decode: the UTF-8 spelling of an on-disk name
 * that is not UTF-8, or NULL. listed: whether a legacy name is shown under
 * its decoded spelling (not when a UTF-8 name in the directory folds equal
 * to it: the UTF-8 name wins). to_disk: the on-disk bytes of a legacy
 * name given by its exact decoded spelling, or NULL.
 */
const char *fastcase_engine_legacy_decode(struct fastcase_engine *e,
					  const char *name, char *buf,
					  size_t bufsize);
bool fastcase_engine_legacy_listed(struct fastcase_engine *e, int dirfd,
				   const char *disk_name,
				   const char *decoded);
char *fastcase_engine_legacy_to_disk(struct fastcase_engine *e, int dirfd,
				     const char *name, TALLOC_CTX *mem_ctx);

/* Add this process's counters since the last flush to the cache file. */
void fastcase_engine_flush_stats(struct fastcase_engine *e);

#endif /* _FASTCASE_ENGINE_H_ */
