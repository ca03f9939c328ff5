/*
 * vfs_fastcase: invalidation through inotify
 *
 * One inotify instance per share's engine: a process serving two fastcase
 * shares holds two, each counted against the creating user's
 * fs.inotify.max_user_instances. A change to a watched directory is
 * queued by the kernel before the system call that made it returns, so
 * draining the queue before a lookup makes the lookup see every change
 * that completed before it began.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_WATCH_H_
#define _FASTCASE_WATCH_H_

#include <stdint.h>
#include <talloc.h>

struct fastcase_watch;

enum fastcase_watch_kind {
	FASTCASE_WATCH_NAME,		/* a name in the directory changed */
	FASTCASE_WATCH_NAME_ADDED,	/* ... by appearing (create, move) */
	FASTCASE_WATCH_NAME_REMOVED,	/* ... by leaving (delete, move) */
	FASTCASE_WATCH_GONE,		/* the directory went away */
	FASTCASE_WATCH_OVERFLOW,	/* events were lost: trust nothing */
};

typedef void (*fastcase_watch_fn)(void *private_data, int wd,
				  enum fastcase_watch_kind kind,
				  const char *name);

/* Returns 0, or the errno of inotify_init1 (EMFILE at the user limit). */
int fastcase_watch_create(TALLOC_CTX *mem_ctx, struct fastcase_watch **pw);

int fastcase_watch_fd(const struct fastcase_watch *w);

/* Watch the directory open as dirfd (any kind of fd, O_PATH too). */
int fastcase_watch_add(struct fastcase_watch *w, int dirfd, int *wd);
void fastcase_watch_remove(struct fastcase_watch *w, int wd);

/*
 * Read every queued event without blocking and call fn for each.
 * Returns 0, or an errno when the queue could not be read (the caller
 * then treats it as an overflow).
 */
int fastcase_watch_drain(struct fastcase_watch *w, fastcase_watch_fn fn,
			 void *private_data);

/*
 * How many events the kernel queues per instance before it drops them
 * (fs.inotify.max_queued_events); 0 when it cannot be read.
 */
unsigned fastcase_watch_queue_limit(void);

#endif /* _FASTCASE_WATCH_H_ */
