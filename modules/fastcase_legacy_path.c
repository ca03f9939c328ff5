/*
 * vfs_fastcase: paths that name legacy charset entries
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
#include "fastcase_legacy_path.h"

struct dirent *fastcase_legacy_dirent(struct fastcase_engine *e, int dirfd,
				      struct dirent *de, struct dirent *buf)
{
	char decoded[NAME_MAX * 4];
	const char *spelling;

	spelling = fastcase_engine_legacy_decode(e, de->d_name, decoded,
						 sizeof(decoded));
	if (spelling == NULL || strlen(spelling) > NAME_MAX) {
		/* UTF-8, or not valid in the legacy charset either */
		return de;
	}
	if (dirfd != -1 && dirfd != AT_FDCWD &&
	    !fastcase_engine_legacy_listed(e, dirfd, de->d_name, spelling)) {
		return NULL;
	}
	*buf = *de;
	strlcpy(buf->d_name, spelling, NAME_MAX + 1);
	return buf;
}

/*
 * One component as it is on disk under dirfd: the name itself when it
 * exists, else the legacy name that decodes to it (*mapped is set), else,
 * for the last component only, the name as given. NULL when it cannot be
 * had. lstat semantics: a symlink is an entry like any other here, and is
 * never followed when the walk descends.
 */
static char *legacy_component(struct fastcase_engine *e, int dirfd,
			      const char *name, bool last, bool *mapped,
			      TALLOC_CTX *mem_ctx)
{
	struct stat st;
	char *disk = NULL;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		return talloc_strdup(mem_ctx, name);
	}
	if (errno != ENOENT) {
		return NULL;
	}
	disk = fastcase_engine_legacy_to_disk(e, dirfd, name, mem_ctx);
	if (disk != NULL) {
		*mapped = true;
		return disk;
	}
	return last ? talloc_strdup(mem_ctx, name) : NULL;
}

/* Replace the directory fd *fd by its subdirectory name; false on error. */
static bool legacy_descend(int *fd, const char *name)
{
	int sub = openat(*fd, name,
			 O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	close(*fd);
	*fd = sub;
	return sub != -1;
}

static int legacy_walk_start(int dirfd, const char *path)
{
	if (path[0] == '/') {
		return open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	return fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
}

char *fastcase_legacy_disk_path(struct fastcase_engine *e, int dirfd,
				const char *path, TALLOC_CTX *mem_ctx)
{
	TALLOC_CTX *frame = talloc_stackframe();
	char *rest = talloc_strdup(frame, path);
	char *out = talloc_strdup(frame, path[0] == '/' ? "/" : "");
	char *component = NULL, *next = NULL, *save = NULL, *disk = NULL;
	char *result = NULL;
	bool mapped = false;
	int fd = legacy_walk_start(dirfd, path);

	if (rest == NULL || out == NULL || fd == -1) {
		goto done;
	}
	component = strtok_r(rest, "/", &save);
	while (component != NULL) {
		next = strtok_r(NULL, "/", &save);
		if (strcmp(component, "..") == 0) {
			goto done;
		}
		disk = legacy_component(e, fd, component, next == NULL,
					&mapped, frame);
		if (disk == NULL) {
			goto done;
		}
		out = talloc_asprintf_append_buffer(out, "%s%s", disk,
						    next != NULL ? "/" : "");
		if (out == NULL ||
		    (next != NULL && !legacy_descend(&fd, disk))) {
			goto done;
		}
		component = next;
	}
	if (mapped) {
		result = talloc_steal(mem_ctx, out);
	}
done:
	if (fd != -1) {
		close(fd);
	}
	TALLOC_FREE(frame);
	if (result == NULL) {
		errno = ENOENT;
	}
	return result;
}
