/*
 * vfs_fastcase: per-share parameters
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#include "replace.h"
#include <talloc.h>
#include "fastcase_params.h"

#include <ctype.h>

const char *const fastcase_param_names[] = {
	"fold",
	"language",
	"normalize",
	"cache file",
	"cache size",
	"watch limit",
	"trust inotify",
	"rebuild interval",
	"legacy charset",
	NULL,
};

void fastcase_config_init(struct fastcase_config *cfg)
{
	*cfg = (struct fastcase_config) {
		.rules = {
			.mode = FASTCASE_FOLD_WINDOWS,
			.normalize = FASTCASE_NORMALIZE_NONE,
		},
		.cache_file = NULL,
		.cache_size = FASTCASE_DEFAULT_CACHE_SIZE,
		.watch_limit = FASTCASE_DEFAULT_WATCH_LIMIT,
		.trust_inotify = FASTCASE_TRUST_INOTIFY_AUTO,
		.rebuild_interval_ms = FASTCASE_DEFAULT_REBUILD_INTERVAL_MS,
	};
}

/* A size such as 4096, 64K, 256M or 2G. Anything else is malformed. */
static bool parse_size(const char *value, uint64_t *size)
{
	unsigned long long n;
	char *end = NULL;
	uint64_t mult = 1;

	if (!isdigit((unsigned char)value[0])) {
		return false;
	}
	errno = 0;
	n = strtoull(value, &end, 10);
	if (errno != 0) {
		return false;
	}
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		mult = 1024;
		end++;
		break;
	case 'm': case 'M':
		mult = 1024 * 1024;
		end++;
		break;
	case 'g': case 'G':
		mult = 1024 * 1024 * 1024;
		end++;
		break;
	default:
		return false;
	}
	if (*end != '\0' || n > UINT64_MAX / mult) {
		return false;
	}
	*size = n * mult;
	return true;
}

/* ISO 639 codes are two or three lower-case letters. */
static bool valid_language(const char *value)
{
	size_t i, n = strlen(value);

	if (n < 2 || n > 3) {
		return false;
	}
	for (i = 0; i < n; i++) {
		if (value[i] < 'a' || value[i] > 'z') {
			return false;
		}
	}
	return true;
}

static int set_legacy_charset(struct fastcase_config *cfg,
			      const char *value, const char **why)
{
	struct fastcase_legacy *legacy = NULL;
	int ret;

	if (strcasecmp(value, "none") == 0 || value[0] == '\0') {
		cfg->legacy_charset = NULL;
		return 0;
	}
	if (strlen(value) > 32 || strchr(value, '/') != NULL) {
		*why = "expected an iconv charset name such as "
			"\"ISO-8859-1\" or \"none\"";
		return EINVAL;
	}
	/*
	 * Open the very conversion the engine will use, so that an unknown
	 * name is refused here, naming the parameter, and never later as an
	 * engine that cannot start.
	 */
	ret = fastcase_legacy_open(NULL, value, &legacy);
	if (ret == ENOMEM) {
		*why = "out of memory while checking it";
		return ENOMEM;
	}
	if (ret != 0) {
		*why = "unknown to iconv: expected a name from "
			"\"iconv --list\" such as \"ISO-8859-1\", or "
			"\"none\"";
		return EINVAL;
	}
	TALLOC_FREE(legacy);
	cfg->legacy_charset = value;
	return 0;
}

/* Samba's spellings of a boolean, as smb.conf takes them. */
static bool one_of(const char *value, const char *const *words)
{
	size_t i;

	for (i = 0; words[i] != NULL; i++) {
		if (strcasecmp(value, words[i]) == 0) {
			return true;
		}
	}
	return false;
}

static int set_trust_inotify(struct fastcase_config *cfg, const char *value,
			     const char **why)
{
	static const char *const yes[] = { "yes", "true", "on", "1", NULL };
	static const char *const no[] = { "no", "false", "off", "0", NULL };

	if (strcasecmp(value, "auto") == 0) {
		cfg->trust_inotify = FASTCASE_TRUST_INOTIFY_AUTO;
	} else if (one_of(value, yes)) {
		cfg->trust_inotify = FASTCASE_TRUST_INOTIFY_YES;
	} else if (one_of(value, no)) {
		cfg->trust_inotify = FASTCASE_TRUST_INOTIFY_NO;
	} else {
		*why = "expected \"auto\", \"yes\" or \"no\"";
		return EINVAL;
	}
	return 0;
}

static int set_fold(struct fastcase_config *cfg, const char *value,
		    const char **why)
{
	if (strcasecmp(value, "windows") == 0) {
		cfg->rules.mode = FASTCASE_FOLD_WINDOWS;
	} else if (strcasecmp(value, "unicode") == 0) {
		cfg->rules.mode = FASTCASE_FOLD_UNICODE;
	} else {
		*why = "expected \"windows\" or \"unicode\"";
		return EINVAL;
	}
	return 0;
}

static int set_language(struct fastcase_config *cfg, const char *value,
			const char **why)
{
	if (value[0] != '\0' && !valid_language(value)) {
		*why = "expected an ISO 639 code such as \"tr\"";
		return EINVAL;
	}
	strlcpy(cfg->rules.language, value, sizeof(cfg->rules.language));
	return 0;
}

static int set_normalize(struct fastcase_config *cfg, const char *value,
			 const char **why)
{
	if (strcasecmp(value, "none") == 0) {
		cfg->rules.normalize = FASTCASE_NORMALIZE_NONE;
	} else if (strcasecmp(value, "nfc") == 0) {
		cfg->rules.normalize = FASTCASE_NORMALIZE_NFC;
	} else {
		*why = "expected \"none\" or \"nfc\"";
		return EINVAL;
	}
	return 0;
}

static int set_cache_file(struct fastcase_config *cfg, const char *value,
			  const char **why)
{
	if (value[0] != '/') {
		*why = "expected an absolute path";
		return EINVAL;
	}
	cfg->cache_file = value;
	return 0;
}

static int set_cache_size(struct fastcase_config *cfg, const char *value,
			  const char **why)
{
	uint64_t n;

	if (!parse_size(value, &n) || n < 1024 * 1024) {
		*why = "expected a size of at least 1M, such as 256M";
		return EINVAL;
	}
	cfg->cache_size = n;
	return 0;
}

static int set_watch_limit(struct fastcase_config *cfg, const char *value,
			   const char **why)
{
	uint64_t n;

	if (!parse_size(value, &n) || n > 1000000) {
		*why = "expected a number of directories, 0 to 1000000";
		return EINVAL;
	}
	cfg->watch_limit = n;
	return 0;
}

static int set_rebuild_interval(struct fastcase_config *cfg,
				const char *value, const char **why)
{
	unsigned long n;
	char *end = NULL;

	errno = 0;
	n = isdigit((unsigned char)value[0]) ?
		strtoul(value, &end, 10) : ULONG_MAX;
	if (errno != 0 || end == NULL || *end != '\0' ||
	    n > FASTCASE_MAX_REBUILD_INTERVAL_MS) {
		*why = "expected milliseconds, 0 to 60000";
		return EINVAL;
	}
	cfg->rebuild_interval_ms = n;
	return 0;
}

static const struct {
	const char *name;
	int (*set)(struct fastcase_config *cfg, const char *value,
		   const char **why);
} fastcase_params[] = {
	{ "fold", set_fold },
	{ "language", set_language },
	{ "normalize", set_normalize },
	{ "cache file", set_cache_file },
	{ "cache size", set_cache_size },
	{ "watch limit", set_watch_limit },
	{ "trust inotify", set_trust_inotify },
	{ "rebuild interval", set_rebuild_interval },
	{ "legacy charset", set_legacy_charset },
};

int fastcase_param_set(struct fastcase_config *cfg, const char *name,
		       const char *value, const char **why)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(fastcase_params); i++) {
		if (strcasecmp(name, fastcase_params[i].name) == 0) {
			return fastcase_params[i].set(cfg, value, why);
		}
	}
	*why = "unknown parameter";
	return ENOENT;
}

int fastcase_config_check(const struct fastcase_config *cfg,
			  const char **bad_param, const char **why)
{
	if (cfg->rules.language[0] != '\0' &&
	    cfg->rules.mode != FASTCASE_FOLD_UNICODE) {
		*bad_param = "language";
		*why = "needs fastcase:fold = unicode";
		return EINVAL;
	}
	return 0;
}
