/*
 * vfs_fastcase: invalidation through inotify
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
#include "fastcase_watch.h"

#include <sys/inotify.h>

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/* Every way a name can appear in or leave a directory. */
#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
		    IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct fastcase_watch {
	int fd;
};

static int watch_destructor(struct fastcase_watch *w)
{
	if (w->fd != -1) {
		close(w->fd);
		w->fd = -1;
	}
	return 0;
}

int fastcase_watch_create(TALLOC_CTX *mem_ctx, struct fastcase_watch **pw)
{
	struct fastcase_watch *w = talloc_zero(mem_ctx, struct fastcase_watch);
	int ret;

	if (w == NULL) {
		return ENOMEM;
	}
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd == -1) {
		ret = errno;
		TALLOC_FREE(w);
		return ret;
	}
	talloc_set_destructor(w, watch_destructor);
	*pw = w;
	return 0;
}

int fastcase_watch_fd(const struct fastcase_watch *w)
{
	return w->fd;
}

int fastcase_watch_add(struct fastcase_watch *w, int dirfd, int *wd)
{
	char path[64];
	int ret;

	/* inotify wants a path; the fd's magic link names the directory
	 * itself however it was reached, even after a rename. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", dirfd);
	ret = inotify_add_watch(w->fd, path, WATCH_MASK);
	if (ret == -1) {
		return errno;
	}
	*wd = ret;
	return 0;
}

void fastcase_watch_remove(struct fastcase_watch *w, int wd)
{
	inotify_rm_watch(w->fd, wd);
}

static void dispatch(const struct inotify_event *ev, fastcase_watch_fn fn,
		     void *private_data)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		fn(private_data, -1, FASTCASE_WATCH_OVERFLOW, NULL);
		return;
	}
	if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_UNMOUNT)) {
		fn(private_data, ev->wd, FASTCASE_WATCH_GONE, NULL);
		return;
	}
	if (ev->len > 0 && ev->name[0] != '\0') {
		fn(private_data, ev->wd,
		   (ev->mask & (IN_CREATE | IN_MOVED_TO)) ?
		   FASTCASE_WATCH_NAME_ADDED :
		   (ev->mask & (IN_DELETE | IN_MOVED_FROM)) ?
		   FASTCASE_WATCH_NAME_REMOVED : FASTCASE_WATCH_NAME,
		   ev->name);
	}
	/* IN_MOVE_SELF: same inode, same names; nothing to do */
}

#define MAX_EVENT_SIZE (sizeof(struct inotify_event) + NAME_MAX + 1)

int fastcase_watch_drain(struct fastcase_watch *w, fastcase_watch_fn fn,
			 void *private_data)
{
	char buf[16384]
		__attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t n = read(w->fd, buf, sizeof(buf));
		ssize_t off = 0;

		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				return 0;
			}
			if (errno == EINTR) {
				continue;
			}
			return errno;
		}
		while (off < n) {
			const struct inotify_event *ev =
				(const struct inotify_event *)(buf + off);

			dispatch(ev, fn, private_data);
			off += sizeof(*ev) + ev->len;
		}
		if ((size_t)n + MAX_EVENT_SIZE <= sizeof(buf)) {
			/* the kernel hands out every queued event that fits:
			 * room for the largest one left means none was left */
			return 0;
		}
	}
}

unsigned fastcase_watch_queue_limit(void)
{
	FILE *f = fopen("/proc/sys/fs/inotify/max_queued_events", "r");
	unsigned limit = 0;

	if (f == NULL) {
		return 0;
	}
	if (fscanf(f, "%u", &limit) != 1) {
		limit = 0;
	}
	fclose(f);
	return limit;
}
