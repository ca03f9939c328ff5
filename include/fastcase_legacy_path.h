/*
 * vfs_fastcase: paths that name legacy charset entries
 *
 * With "fastcase:legacy charset", smbd sees a name that is not UTF-8 only
 * under its decoding: listings show that spelling and smbd then uses it
 * in path-based calls, which find nothing on disk. These map a listed
 * entry to the spelling smbd is shown, and a path back to the bytes on
 * disk, component by component. Knows nothing of smbd.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_LEGACY_PATH_H_
#define _FASTCASE_LEGACY_PATH_H_

#include <dirent.h>
#include <talloc.h>
#include "fastcase_engine.h"

/*
 * The entry de of the directory dirfd (-1 when it has no fd of its own)
 * as smbd is to see it: de itself for a UTF-8 name (or one the legacy
 * charset cannot decode either), buf holding the decoded spelling, or
 * NULL when a UTF-8 name of the directory folds equal to that spelling and
 * hides it.
 */
struct dirent *fastcase_legacy_dirent(struct fastcase_engine *e, int dirfd,
				      struct dirent *de, struct dirent *buf);

/*
 * The on-disk spelling of path, relative to dirfd, in which every
 * component that does not exist as given is the legacy name that decodes
 * to it. NULL with errno ENOENT when no component needed mapping, when a
 * component has no legacy match, or when the path leaves dirfd's tree
 * ("..") or passes through a symlink, which smbd resolves itself under the
 * share's symlink rules. A missing last component is kept as given (a
 * name being created in a legacy directory).
 */
char *fastcase_legacy_disk_path(struct fastcase_engine *e, int dirfd,
				const char *path, TALLOC_CTX *mem_ctx);

#endif /* _FASTCASE_LEGACY_PATH_H_ */
