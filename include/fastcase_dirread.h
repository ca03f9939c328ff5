/*
 * vfs_fastcase: reading a directory's names
 *
 * The engine reads a whole directory twice over: to build its records and
 * to scan it when it must answer without them. Both go through this, so
 * that whoever drives the engine chooses how a directory is read: by
 * default readdir(3) on a duplicate of the directory's fd.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_DIRREAD_H_
#define _FASTCASE_DIRREAD_H_

#include <talloc.h>

struct fastcase_dirread;

/* Open the directory dirfd names for reading; 0 or an errno. */
int fastcase_dirread_open(TALLOC_CTX *mem_ctx, int dirfd,
			  struct fastcase_dirread **pdr);

/*
 * The next name, never "." or "..". Returns 0 with *name set, or with
 * *name NULL at the end; an errno when the read failed.
 */
int fastcase_dirread_next(struct fastcase_dirread *dr, const char **name);

#endif /* _FASTCASE_DIRREAD_H_ */
