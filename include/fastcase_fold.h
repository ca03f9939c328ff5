/*
 * vfs_fastcase: folding rules
 *
 * A fold rule turns a file name into a lookup key. Two names that the rule
 * calls equal always get the same key; a key may be shared by names the rule
 * does not call equal, so a lookup confirms each candidate with
 * fastcase_fold_equal().
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#ifndef _FASTCASE_FOLD_H_
#define _FASTCASE_FOLD_H_

#include <stdbool.h>
#include <stddef.h>
#include <talloc.h>

/*
 * Bump whenever the key of any name changes: it is part of every cache key,
 * so a module with other rules never reads records made under older ones.
 */
#define FASTCASE_FOLD_VERSION 1

/* Large enough for a 255-byte name folded by any rule (u8_casefold
 * expands at most threefold) plus a marker byte. */
#define FASTCASE_KEY_MAX 1024

enum fastcase_fold_mode {
	FASTCASE_FOLD_WINDOWS = 0,	/* smbd's own strcasecmp_m() rule */
	FASTCASE_FOLD_UNICODE = 1,	/* full Unicode case folding */
};

enum fastcase_normalize {
	FASTCASE_NORMALIZE_NONE = 0,
	FASTCASE_NORMALIZE_NFC = 1,	/* NFC and NFD spellings are equal */
};

struct fastcase_fold_rules {
	enum fastcase_fold_mode mode;
	enum fastcase_normalize normalize;
	char language[8];	/* ISO 639 code or "", unicode mode only */
};

/*
 * A short string naming the rules and their version, e.g. "w1" or
 * "u1:tr:nfc"; names from different rules never share a cache record.
 */
const char *fastcase_fold_rules_tag(const struct fastcase_fold_rules *rules,
				    char *buf, size_t bufsize);

/*
 * The lookup key of name (NUL-terminated). Returns 0, or ENAMETOOLONG when
 * the key does not fit key_size, or ENOMEM.
 */
int fastcase_fold_key(const struct fastcase_fold_rules *rules,
		      const char *name,
		      char *key, size_t key_size, size_t *key_len);

/* Whether the rule calls the two names the same name. */
bool fastcase_fold_equal(const struct fastcase_fold_rules *rules,
			 const char *a, const char *b);

/* True when name is not valid UTF-8 (as smbd's decoder reads it). */
bool fastcase_name_is_invalid_utf8(const char *name);

/*
 * Names written in a legacy charset ("fastcase:legacy charset"): a name
 * that is valid UTF-8 is UTF-8; one that is not is decoded with the
 * legacy charset. The bytes on disk never change.
 */
struct fastcase_legacy;

/* Returns 0, EINVAL for a charset iconv does not know, or ENOMEM. */
int fastcase_legacy_open(TALLOC_CTX *mem_ctx, const char *charset,
			 struct fastcase_legacy **plegacy);

const char *fastcase_legacy_charset(const struct fastcase_legacy *legacy);

/*
 * The UTF-8 spelling of an on-disk name that is not valid UTF-8, in buf;
 * NULL when the name is valid UTF-8 or is not valid in the legacy charset
 * either (CP1252 has holes), or does not fit.
 */
const char *fastcase_legacy_decode(struct fastcase_legacy *legacy,
				   const char *name, char *buf,
				   size_t bufsize);

#endif /* _FASTCASE_FOLD_H_ */
