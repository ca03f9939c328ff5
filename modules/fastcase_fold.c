/*
 * vfs_fastcase: folding rules
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

/*
 * The windows rule is smbd's strcasecmp_m(): two code points are equal when
 * their toupper_m() or their tolower_m() images are equal, and from the first
 * sequence smbd's decoder rejects on, the rest of both names is compared with
 * an ASCII-only strcasecmp(). That relation is not transitive, so the key
 * maps each code point to the smallest member of its equivalence class under
 * the transitive closure of "is the upper or lower image of": equal names
 * always share a key, and fastcase_fold_equal() calls strcasecmp_m() itself
 * to confirm, so the module never answers differently from smbd's scan.
 *
 * The unicode rule is libunistring's u8_casefold(), optionally with NFC.
 * Names that are not valid UTF-8 are keyed by their raw bytes there:
 * libunistring would turn every invalid byte into U+FFFD and so make
 * "a\xff" equal "a\xfe".
 */

#include "replace.h"
#include "lib/util/charset/charset.h"
#include "fastcase_fold.h"

#include <iconv.h>
#include <unicase.h>
#include <uninorm.h>
#include <unistr.h>

/* Marks where a name stops being decodable, in windows keys, and a
 * byte-exact name, in unicode keys. 0xff never occurs in UTF-8. */
#define FASTCASE_KEY_RAW_MARK 0xff

#define BMP_SIZE 0x10000

/*
 * Class representatives of the BMP under smbd's case tables. Filled once
 * per process from toupper_m()/tolower_m(), so it follows the Samba the
 * module runs in; read-only afterwards.
 */
static uint16_t windows_class_rep[BMP_SIZE];
static bool windows_class_rep_ready;

static uint32_t find_rep(uint32_t *parent, uint32_t c)
{
	while (parent[c] != c) {
		parent[c] = parent[parent[c]];
		c = parent[c];
	}
	return c;
}

static void join_class(uint32_t *parent, uint32_t a, uint32_t b)
{
	a = find_rep(parent, a);
	b = find_rep(parent, b);
	if (a < b) {
		parent[b] = a;
	} else if (b < a) {
		parent[a] = b;
	}
}

static void windows_class_rep_init(void)
{
	static uint32_t parent[BMP_SIZE];
	uint32_t c;

	if (windows_class_rep_ready) {
		return;
	}
	for (c = 0; c < BMP_SIZE; c++) {
		parent[c] = c;
	}
	for (c = 0; c < BMP_SIZE; c++) {
		codepoint_t up = toupper_m(c);
		codepoint_t low = tolower_m(c);

		if (up < BMP_SIZE) {
			join_class(parent, c, up);
		}
		if (low < BMP_SIZE) {
			join_class(parent, c, low);
		}
	}
	for (c = 0; c < BMP_SIZE; c++) {
		windows_class_rep[c] = find_rep(parent, c);
	}
	windows_class_rep_ready = true;
}

static size_t put_utf8(uint32_t c, uint8_t *out)
{
	if (c < 0x80) {
		out[0] = c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = 0xc0 | (c >> 6);
		out[1] = 0x80 | (c & 0x3f);
		return 2;
	}
	if (c < 0x10000) {
		out[0] = 0xe0 | (c >> 12);
		out[1] = 0x80 | ((c >> 6) & 0x3f);
		out[2] = 0x80 | (c & 0x3f);
		return 3;
	}
	out[0] = 0xf0 | (c >> 18);
	out[1] = 0x80 | ((c >> 12) & 0x3f);
	out[2] = 0x80 | ((c >> 6) & 0x3f);
	out[3] = 0x80 | (c & 0x3f);
	return 4;
}

static int windows_key(const char *name, char *key, size_t key_size,
		       size_t *key_len)
{
	const char *p = name;
	size_t len = 0;

	windows_class_rep_init();

	while (*p != '\0') {
		size_t size = 0;
		codepoint_t c;

		/* next_codepoint() returns a byte below 0x80 as that code
		 * point; done here without the call, since a build folds
		 * every name of a directory */
		if ((unsigned char)*p < 0x80 &&
		    windows_class_rep[(unsigned char)*p] < 0x80) {
			if (len + 4 > key_size) {
				return ENAMETOOLONG;
			}
			key[len++] = (char)windows_class_rep[(unsigned char)*p];
			p++;
			continue;
		}
		c = next_codepoint(p, &size);
		if (c == INVALID_CODEPOINT) {
			/* strcasecmp_m() compares the rest with strcasecmp() */
			if (len + 1 + strlen(p) > key_size) {
				return ENAMETOOLONG;
			}
			key[len++] = (char)FASTCASE_KEY_RAW_MARK;
			for (; *p != '\0'; p++) {
				key[len++] = (*p >= 'A' && *p <= 'Z') ?
					*p + ('a' - 'A') : *p;
			}
			break;
		}
		if (c < BMP_SIZE) {
			c = windows_class_rep[c];
		}
		if (len + 4 > key_size) {
			return ENAMETOOLONG;
		}
		len += put_utf8(c, (uint8_t *)key + len);
		p += size;
	}
	*key_len = len;
	return 0;
}

bool fastcase_name_is_invalid_utf8(const char *name)
{
	const char *p = name;

	while (*p != '\0') {
		size_t size = 0;

		if (next_codepoint(p, &size) == INVALID_CODEPOINT) {
			return true;
		}
		p += size;
	}
	return false;
}

static int raw_key(const char *name, char *key, size_t key_size,
		   size_t *key_len)
{
	size_t n = strlen(name);

	if (n + 1 > key_size) {
		return ENAMETOOLONG;
	}
	key[0] = (char)FASTCASE_KEY_RAW_MARK;
	memcpy(key + 1, name, n);
	*key_len = n + 1;
	return 0;
}

static int unicode_key(const struct fastcase_fold_rules *rules,
		       const char *name, char *key, size_t key_size,
		       size_t *key_len)
{
	const uint8_t *s = (const uint8_t *)name;
	size_t n = strlen(name);
	size_t len = key_size;
	uninorm_t nf = NULL;
	const char *lang = NULL;
	uint8_t *folded;

	if (u8_check(s, n) != NULL) {
		return raw_key(name, key, key_size, key_len);
	}
	if (rules->normalize == FASTCASE_NORMALIZE_NFC) {
		nf = UNINORM_NFC;
	}
	if (rules->language[0] != '\0') {
		lang = rules->language;
	}
	folded = u8_casefold(s, n, lang, nf, (uint8_t *)key, &len);
	if (folded == NULL) {
		return errno == ENOMEM ? ENOMEM : EINVAL;
	}
	if (folded != (uint8_t *)key) {
		/* did not fit the caller's buffer */
		free(folded);
		return ENAMETOOLONG;
	}
	*key_len = len;
	return 0;
}

/* NFC-normalize a valid UTF-8 name into buf for the windows+nfc rule. */
static const char *nfc_name(const char *name, char *buf, size_t bufsize)
{
	const uint8_t *s = (const uint8_t *)name;
	size_t n = strlen(name);
	size_t len = bufsize - 1;
	uint8_t *r;

	if (u8_check(s, n) != NULL) {
		return name;
	}
	r = u8_normalize(UNINORM_NFC, s, n, (uint8_t *)buf, &len);
	if (r == NULL) {
		return name;
	}
	if (r != (uint8_t *)buf) {
		free(r);
		return name;
	}
	buf[len] = '\0';
	return buf;
}

int fastcase_fold_key(const struct fastcase_fold_rules *rules,
		      const char *name,
		      char *key, size_t key_size, size_t *key_len)
{
	char nfc[FASTCASE_KEY_MAX];

	if (rules->mode == FASTCASE_FOLD_UNICODE) {
		return unicode_key(rules, name, key, key_size, key_len);
	}
	if (rules->normalize == FASTCASE_NORMALIZE_NFC) {
		name = nfc_name(name, nfc, sizeof(nfc));
	}
	return windows_key(name, key, key_size, key_len);
}

bool fastcase_fold_equal(const struct fastcase_fold_rules *rules,
			 const char *a, const char *b)
{
	char ka[FASTCASE_KEY_MAX], kb[FASTCASE_KEY_MAX];
	size_t la, lb;

	if (strcmp(a, b) == 0) {
		return true;
	}
	if (rules->mode == FASTCASE_FOLD_WINDOWS) {
		char na[FASTCASE_KEY_MAX], nb[FASTCASE_KEY_MAX];

		if (rules->normalize == FASTCASE_NORMALIZE_NFC) {
			a = nfc_name(a, na, sizeof(na));
			b = nfc_name(b, nb, sizeof(nb));
		}
		return strcasecmp_m(a, b) == 0;
	}
	if (fastcase_fold_key(rules, a, ka, sizeof(ka), &la) != 0 ||
	    fastcase_fold_key(rules, b, kb, sizeof(kb), &lb) != 0) {
		return false;
	}
	return la == lb && memcmp(ka, kb, la) == 0;
}

const char *fastcase_fold_rules_tag(const struct fastcase_fold_rules *rules,
				    char *buf, size_t bufsize)
{
	snprintf(buf, bufsize, "%c%d%s%s%s",
		 rules->mode == FASTCASE_FOLD_UNICODE ? 'u' : 'w',
		 FASTCASE_FOLD_VERSION,
		 rules->language[0] != '\0' ? ":" : "",
		 rules->language,
		 rules->normalize == FASTCASE_NORMALIZE_NFC ? ":nfc" : "");
	return buf;
}

struct fastcase_legacy {
	iconv_t cd;
	char *charset;
};

static int legacy_destructor(struct fastcase_legacy *legacy)
{
	iconv_close(legacy->cd);
	return 0;
}

int fastcase_legacy_open(TALLOC_CTX *mem_ctx, const char *charset,
			 struct fastcase_legacy **plegacy)
{
	struct fastcase_legacy *legacy = talloc_zero(mem_ctx,
						     struct fastcase_legacy);

	if (legacy == NULL) {
		return ENOMEM;
	}
	legacy->charset = talloc_strdup(legacy, charset);
	if (legacy->charset == NULL) {
		TALLOC_FREE(legacy);
		return ENOMEM;
	}
	legacy->cd = iconv_open("UTF-8", charset);
	if (legacy->cd == (iconv_t)-1) {
		TALLOC_FREE(legacy);
		return EINVAL;
	}
	talloc_set_destructor(legacy, legacy_destructor);
	*plegacy = legacy;
	return 0;
}

const char *fastcase_legacy_charset(const struct fastcase_legacy *legacy)
{
	return legacy->charset;
}

static bool all_ascii(const char *name)
{
	const unsigned char *p = (const unsigned char *)name;

	for (; *p != '\0'; p++) {
		if (*p >= 0x80) {
			return false;
		}
	}
	return true;
}

const char *fastcase_legacy_decode(struct fastcase_legacy *legacy,
				   const char *name, char *buf,
				   size_t bufsize)
{
	char *in = discard_const_p(char, name);
	size_t inleft = strlen(name);
	char *out = buf;
	size_t outleft = bufsize - 1;

	/* the common case, and the cost directories without legacy names
	 * pay: one pass over bytes below 0x80 */
	if (legacy == NULL || all_ascii(name) ||
	    !fastcase_name_is_invalid_utf8(name)) {
		return NULL;
	}
	iconv(legacy->cd, NULL, NULL, NULL, NULL);
	if (iconv(legacy->cd, &in, &inleft, &out, &outleft) == (size_t)-1 ||
	    inleft != 0) {
		return NULL;
	}
	*out = '\0';
	/* a decoded name must be a name: no '/', and one smbd can read */
	if (strchr(buf, '/') != NULL || fastcase_name_is_invalid_utf8(buf) ||
	    (size_t)(out - buf) > 255) {
		return NULL;
	}
	return buf;
}
