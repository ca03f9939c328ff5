/*
 * vfs_fastcase: may inotify be trusted under a share?
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#include "replace.h"
#include "fastcase_fstype.h"

/*
 * statfs magic numbers (linux/magic.h and the file systems' own sources,
 * which do not all export them) of file systems shared between machines.
 * GlusterFS, MooseFS, BeeGFS through FUSE, and every other FUSE file
 * system, report FUSE: a local one then validates by timestamps too,
 * which is slower, never wrong.
 */
static const struct {
	int64_t magic;
	const char *name;
} shared_fs[] = {
	{ 0x6969, "NFS" },
	{ 0xFF534D42, "CIFS" },
	{ 0xFE534D42, "SMB2" },
	{ 0x517B, "SMB" },
	{ 0x65735546, "FUSE" },
	{ 0x00C36400, "Ceph" },
	{ 0x47504653, "GPFS" },
	{ 0x7461636F, "OCFS2" },
	{ 0x01161970, "GFS2" },
	{ 0x0BD00BD0, "Lustre" },
	{ 0x5346414F, "AFS" },
	{ 0x6B414653, "kAFS" },
	{ 0x01021997, "9P" },
	{ 0x20030528, "OrangeFS" },
	{ 0x19830326, "BeeGFS" },
};

const char *fastcase_fstype_shared(int64_t f_type)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(shared_fs); i++) {
		if (shared_fs[i].magic == (f_type & 0xFFFFFFFF)) {
			return shared_fs[i].name;
		}
	}
	return NULL;
}

bool fastcase_trusts_inotify(enum fastcase_trust_inotify setting,
			     bool clustering, int64_t f_type,
			     const char **why)
{
	const char *fs = fastcase_fstype_shared(f_type);

	*why = NULL;
	if (clustering) {
		*why = "clustering = yes";
	} else if (fs != NULL) {
		*why = fs;
	}
	switch (setting) {
	case FASTCASE_TRUST_INOTIFY_YES:
		return true;
	case FASTCASE_TRUST_INOTIFY_NO:
		*why = "fastcase:trust inotify = no";
		return false;
	case FASTCASE_TRUST_INOTIFY_AUTO:
		break;
	}
	return *why == NULL;
}
