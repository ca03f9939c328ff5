/*
 * vfs_fastcase: may inotify be trusted under a share?
 *
 * inotify reports changes made through the local kernel only. On a
 * network or cluster file system, and under a clustered smbd, names also
 * change through other machines, which queue no event here: the module
 * then validates every lookup by the directory's timestamps instead.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_FSTYPE_H_
#define _FASTCASE_FSTYPE_H_

#include <stdbool.h>
#include <stdint.h>

enum fastcase_trust_inotify {
	FASTCASE_TRUST_INOTIFY_AUTO,	/* decided by the checks below */
	FASTCASE_TRUST_INOTIFY_YES,
	FASTCASE_TRUST_INOTIFY_NO,
};

/*
 * The name of a file system whose names may change through another
 * machine (statfs f_type: NFS, SMB, FUSE, Ceph, GPFS, ...), or NULL.
 */
const char *fastcase_fstype_shared(int64_t f_type);

/*
 * Whether inotify may be trusted. *why (static) says why not, or why an
 * explicit setting overrode the detection; NULL when nothing was
 * detected.
 */
bool fastcase_trusts_inotify(enum fastcase_trust_inotify setting,
			     bool clustering, int64_t f_type,
			     const char **why);

#endif /* _FASTCASE_FSTYPE_H_ */
