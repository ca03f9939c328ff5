/*
 * vfs_fastcase: reading a directory's names
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
#include "fastcase_dirread.h"

#include <dirent.h>

struct fastcase_dirread {
	DIR *dir;
};

static int dirread_destructor(struct fastcase_dirread *dr)
{
	if (dr->dir != NULL) {
		closedir(dr->dir);
	}
	return 0;
}

int fastcase_dirread_open(TALLOC_CTX *mem_ctx, int dirfd,
			  struct fastcase_dirread **pdr)
{
	struct fastcase_dirread *dr = NULL;
	int fd, ret;

	dr = talloc_zero(mem_ctx, struct fastcase_dirread);
	if (dr == NULL) {
		return ENOMEM;
	}
	/* a fresh open: dirfd may be O_PATH, and its offset is not ours */
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1) {
		ret = errno;
		TALLOC_FREE(dr);
		return ret;
	}
	dr->dir = fdopendir(fd);
	if (dr->dir == NULL) {
		ret = errno;
		close(fd);
		TALLOC_FREE(dr);
		return ret;
	}
	talloc_set_destructor(dr, dirread_destructor);
	*pdr = dr;
	return 0;
}

int fastcase_dirread_next(struct fastcase_dirread *dr, const char **name)
{
	struct dirent *de = NULL;

	for (;;) {
		errno = 0;
		de = readdir(dr->dir);
		if (de == NULL) {
			*name = NULL;
			return errno;
		}
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0) {
			*name = de->d_name;
			return 0;
		}
	}
}
