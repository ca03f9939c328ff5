/*
 * vfs_fastcase: per-share parameters
 *
 * Parsing is kept apart from smbd's loadparm so that it can be unit tested:
 * the VFS glue collects the raw "fastcase:" strings of a share and this
 * file turns them into a config, or names the parameter that is wrong.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_PARAMS_H_
#define _FASTCASE_PARAMS_H_

#include <stdbool.h>
#include <stdint.h>
#include "fastcase_fold.h"
#include "fastcase_fstype.h"

#define FASTCASE_PARAM_PREFIX "fastcase"

#define FASTCASE_DEFAULT_CACHE_SIZE (256ULL * 1024 * 1024)
#define FASTCASE_DEFAULT_WATCH_LIMIT 4096
/*
 * How long after a directory's last build a process that cannot trust a
 * watch on it scans rather than reads the directory again (see
 * rule 3 of "Why it holds" in docs/DESIGN.md).
 */
#define FASTCASE_DEFAULT_REBUILD_INTERVAL_MS 250
#define FASTCASE_MAX_REBUILD_INTERVAL_MS 60000

struct fastcase_config {
	struct fastcase_fold_rules rules;
	const char *cache_file;		/* NULL: Samba's cache dir */
	uint64_t cache_size;		/* bytes the cache file may grow to */
	unsigned watch_limit;		/* watched directories per process */
	enum fastcase_trust_inotify trust_inotify;
	unsigned rebuild_interval_ms;	/* 0: rebuild at once */
	const char *legacy_charset;	/* NULL: names are UTF-8 or hidden */
};

/* The names of every parameter, NULL-terminated. */
extern const char *const fastcase_param_names[];

/*
 * Parse one parameter value into cfg. Returns 0, or EINVAL for a malformed
 * value (with *why set to a static explanation; a legacy charset iconv
 * does not know is malformed), or ENOENT for a name that is not a fastcase
 * parameter, or ENOMEM.
 */
int fastcase_param_set(struct fastcase_config *cfg, const char *name,
		       const char *value, const char **why);

/* The defaults. */
void fastcase_config_init(struct fastcase_config *cfg);

/* Cross-parameter checks after every value is set. */
int fastcase_config_check(const struct fastcase_config *cfg,
			  const char **bad_param, const char **why);

#endif /* _FASTCASE_PARAMS_H_ */
