/*
 * vfs_fastcase unit tests: the fold rules (modules/fastcase_fold.c)
 *
 * The windows rule must agree with smbd's own strcasecmp_m() for every
 * pair of names, and two names it calls equal must share a key: the
 * parity table below checks that for every BMP code point against Samba's
 * own case tables (toupper_m/tolower_m), not against a copy of them.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#include "replace.h"
#include "lib/util/charset/charset.h"
#include "lib/util/talloc_stack.h"
#include "fastcase_fold.h"

#include <setjmp.h>
#include <cmocka.h>
#include "unit_util.h"
#include <uninorm.h>
#include <unistr.h>

#define BMP 0x10000

static const struct fastcase_fold_rules windows_rules = {
	.mode = FASTCASE_FOLD_WINDOWS,
};
static const struct fastcase_fold_rules windows_nfc_rules = {
	.mode = FASTCASE_FOLD_WINDOWS,
	.normalize = FASTCASE_NORMALIZE_NFC,
};
static const struct fastcase_fold_rules unicode_rules = {
	.mode = FASTCASE_FOLD_UNICODE,
};
static const struct fastcase_fold_rules unicode_nfc_rules = {
	.mode = FASTCASE_FOLD_UNICODE,
	.normalize = FASTCASE_NORMALIZE_NFC,
};
static const struct fastcase_fold_rules unicode_tr_rules = {
	.mode = FASTCASE_FOLD_UNICODE,
	.language = "tr",
};
static const struct fastcase_fold_rules unicode_az_rules = {
	.mode = FASTCASE_FOLD_UNICODE,
	.language = "az",
};
static const struct fastcase_fold_rules unicode_lt_rules = {
	.mode = FASTCASE_FOLD_UNICODE,
	.language = "lt",
};

/* ---- helpers ---------------------------------------------------------- */

static size_t utf8_put(uint32_t c, char *out)
{
	uint8_t *o = (uint8_t *)out;

	if (c < 0x80) {
		o[0] = c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = 0xc0 | (c >> 6);
		o[1] = 0x80 | (c & 0x3f);
		return 2;
	}
	if (c < 0x10000) {
		o[0] = 0xe0 | (c >> 12);
		o[1] = 0x80 | ((c >> 6) & 0x3f);
		o[2] = 0x80 | (c & 0x3f);
		return 3;
	}
	o[0] = 0xf0 | (c >> 18);
	o[1] = 0x80 | ((c >> 12) & 0x3f);
	o[2] = 0x80 | ((c >> 6) & 0x3f);
	o[3] = 0x80 | (c & 0x3f);
	return 4;
}

/* "x" + utf8(c) + "y" */
static void xy_name(uint32_t c, char *buf)
{
	size_t n = 0;

	buf[n++] = 'x';
	n += utf8_put(c, buf + n);
	buf[n++] = 'y';
	buf[n] = '\0';
}

struct key {
	char buf[FASTCASE_KEY_MAX];
	size_t len;
};

static void must_key(const struct fastcase_fold_rules *rules,
		     const char *name, struct key *k)
{
	int ret;

	k->len = 0;
	ret = fastcase_fold_key(rules, name, k->buf, sizeof(k->buf), &k->len);
	assert_int_equal(ret, 0);
	assert_true(k->len > 0);
	assert_true(k->len <= sizeof(k->buf));
}

static bool keys_equal(const struct key *a, const struct key *b)
{
	return a->len == b->len && memcmp(a->buf, b->buf, a->len) == 0;
}

static bool smbd_equal(const char *a, const char *b)
{
	return strcasecmp_m(a, b) == 0;
}

/* NFC of a valid UTF-8 name, done here with libunistring; else a copy. */
static void ref_nfc(const char *name, char *buf, size_t bufsize)
{
	size_t n = strlen(name), len = bufsize - 1;
	uint8_t *r;

	strlcpy(buf, name, bufsize);
	if (u8_check((const uint8_t *)name, n) != NULL) {
		return;
	}
	r = u8_normalize(UNINORM_NFC, (const uint8_t *)name, n,
			 (uint8_t *)buf, &len);
	assert_non_null(r);
	assert_ptr_equal(r, buf);
	buf[len] = '\0';
}

/* What smbd's rule says, after NFC when the rules ask for it. */
static bool ref_equal(const struct fastcase_fold_rules *rules,
		      const char *a, const char *b)
{
	char na[1024], nb[1024];

	if (rules->normalize == FASTCASE_NORMALIZE_NONE) {
		return smbd_equal(a, b);
	}
	ref_nfc(a, na, sizeof(na));
	ref_nfc(b, nb, sizeof(nb));
	return smbd_equal(na, nb);
}

/*
 * The windows contract for one pair: fold_equal is exactly
 * strcasecmp_m() == 0, and names it calls equal share a key.
 */
static void check_windows_pair(const struct fastcase_fold_rules *rules,
			       const char *a, const char *b,
			       bool keys_must_match)
{
	struct key ka, kb;
	bool eq = fastcase_fold_equal(rules, a, b);
	bool eq_rev = fastcase_fold_equal(rules, b, a);

	must_key(rules, a, &ka);
	must_key(rules, b, &kb);
	if (eq != ref_equal(rules, a, b)) {
		fail_msg("fold_equal(\"%s\", \"%s\") = %d but strcasecmp_m "
			 "says %d%s", unit_hex(a), unit_hex(b), eq,
			 ref_equal(rules, a, b),
			 rules->normalize ? " (after NFC)" : "");
	}
	if (eq != eq_rev) {
		fail_msg("fold_equal not symmetric for \"%s\", \"%s\"",
			 unit_hex(a), unit_hex(b));
	}
	if ((eq || keys_must_match) && !keys_equal(&ka, &kb)) {
		fail_msg("\"%s\" and \"%s\" %s but get different keys",
			 unit_hex(a), unit_hex(b),
			 eq ? "fold equal" : "are in one case class");
	}
}

/* ---- windows rule ----------------------------------------------------- */

static void test_windows_ascii(void **state)
{
	struct key a, b, c;

	assert_true(fastcase_fold_equal(&windows_rules, "Report.docx",
					"REPORT.DOCX"));
	assert_true(fastcase_fold_equal(&windows_rules, "report.docx",
					"rEpOrT.dOcX"));
	assert_false(fastcase_fold_equal(&windows_rules, "Report.docx",
					 "Report.doc"));
	assert_false(fastcase_fold_equal(&windows_rules, "a", "b"));
	/* not letters: '[' and '{' differ by 0x20 but are not a case pair */
	assert_false(fastcase_fold_equal(&windows_rules, "[", "{"));
	assert_false(fastcase_fold_equal(&windows_rules, "@", "`"));
	must_key(&windows_rules, "Report.docx", &a);
	must_key(&windows_rules, "rEPORT.DOCx", &b);
	must_key(&windows_rules, "Report.doc", &c);
	assert_true(keys_equal(&a, &b));
	assert_false(keys_equal(&a, &c));
	check_windows_pair(&windows_rules, "[", "{", false);
}

static void test_windows_sharp_s(void **state)
{
	/* Samba's table leaves ß alone: it never becomes "ss" */
	const char *pairs[][2] = {
		{ "stra\xc3\x9f" "e", "STRASSE" },
		{ "stra\xc3\x9f" "e", "strasse" },
		{ "\xc3\x9f", "ss" },
		{ "\xc3\x9f", "\xe1\xba\x9e" },	/* ß vs ẞ */
		{ "stra\xc3\x9f" "e", "STRA\xc3\x9f" "E" },
	};
	size_t i;

	assert_false(fastcase_fold_equal(&windows_rules, "\xc3\x9f", "ss"));
	assert_false(fastcase_fold_equal(&windows_rules, "stra\xc3\x9f" "e",
					 "STRASSE"));
	/* only the ASCII letters around it differ */
	assert_true(fastcase_fold_equal(&windows_rules, "stra\xc3\x9f" "e",
					"STRA\xc3\x9f" "E"));
	assert_int_equal(toupper_m(0xdf), 0xdf);
	for (i = 0; i < ARRAY_SIZE(pairs); i++) {
		check_windows_pair(&windows_rules, pairs[i][0], pairs[i][1],
				   false);
	}
}

static void test_windows_sigma(void **state)
{
	const char *sigma[] = {
		"\xce\xa3",	/* Σ U+03A3 */
		"\xcf\x83",	/* σ U+03C3 */
		"\xcf\x82",	/* ς U+03C2 */
	};
	size_t i, j;

	for (i = 0; i < ARRAY_SIZE(sigma); i++) {
		for (j = 0; j < ARRAY_SIZE(sigma); j++) {
			char a[16], b[16];

			snprintf(a, sizeof(a), "x%sy", sigma[i]);
			snprintf(b, sizeof(b), "X%sY", sigma[j]);
			check_windows_pair(&windows_rules, a, b, true);
		}
	}
	/* what Samba 4.17's table says: σ and ς both upper-case to Σ */
	assert_true(smbd_equal("\xce\xa3", "\xcf\x83"));
	assert_true(fastcase_fold_equal(&windows_rules, "\xce\xa3",
					"\xcf\x83"));
	assert_int_equal(fastcase_fold_equal(&windows_rules, "\xcf\x83",
					     "\xcf\x82"),
			 smbd_equal("\xcf\x83", "\xcf\x82"));
	assert_int_equal(fastcase_fold_equal(&windows_rules, "\xce\xa3",
					     "\xcf\x82"),
			 smbd_equal("\xce\xa3", "\xcf\x82"));
}

static void test_windows_dotted_i(void **state)
{
	const char *is[] = {
		"I", "i",
		"\xc4\xb0",	/* İ U+0130 */
		"\xc4\xb1",	/* ı U+0131 */
	};
	size_t i, j;

	for (i = 0; i < ARRAY_SIZE(is); i++) {
		for (j = 0; j < ARRAY_SIZE(is); j++) {
			char a[16], b[16];

			snprintf(a, sizeof(a), "D%sYARBAKIR", is[i]);
			snprintf(b, sizeof(b), "d%syarbakir", is[j]);
			check_windows_pair(&windows_rules, a, b, false);
			check_windows_pair(&windows_rules, is[i], is[j],
					   false);
		}
	}
	assert_true(fastcase_fold_equal(&windows_rules, "I", "i"));
	/* Samba 4.17's table maps İ and ı to themselves */
	assert_int_equal(fastcase_fold_equal(&windows_rules, "\xc4\xb0", "i"),
			 smbd_equal("\xc4\xb0", "i"));
	assert_int_equal(fastcase_fold_equal(&windows_rules, "\xc4\xb1", "I"),
			 smbd_equal("\xc4\xb1", "I"));
	assert_int_equal(fastcase_fold_equal(&windows_rules,
					     "D\xc4\xb0YARBAKIR",
					     "diyarbak\xc4\xb1r"),
			 smbd_equal("D\xc4\xb0YARBAKIR",
				    "diyarbak\xc4\xb1r"));
}

static void test_windows_nfc(void **state)
{
	const char *nfd = "caf" "e\xcc\x81";	/* e + U+0301 */
	const char *nfc = "caf" "\xc3\xa9";	/* U+00E9 */
	const char *nfd_upper = "CAF" "E\xcc\x81";
	struct key a, b, c;

	assert_false(fastcase_fold_equal(&windows_rules, nfd, nfc));
	assert_false(smbd_equal(nfd, nfc));
	must_key(&windows_rules, nfd, &a);
	must_key(&windows_rules, nfc, &b);
	assert_false(keys_equal(&a, &b));

	assert_true(fastcase_fold_equal(&windows_nfc_rules, nfd, nfc));
	assert_true(fastcase_fold_equal(&windows_nfc_rules, nfc, nfd));
	assert_true(fastcase_fold_equal(&windows_nfc_rules, nfd_upper, nfc));
	assert_false(fastcase_fold_equal(&windows_nfc_rules, nfd, "cafe"));
	must_key(&windows_nfc_rules, nfd, &a);
	must_key(&windows_nfc_rules, nfc, &b);
	must_key(&windows_nfc_rules, nfd_upper, &c);
	assert_true(keys_equal(&a, &b));
	assert_true(keys_equal(&a, &c));
	/* still smbd's case rule after normalizing: no ß == ss */
	assert_false(fastcase_fold_equal(&windows_nfc_rules, "\xc3\x9f",
					 "ss"));
}

/* Byte strings smbd's decoder rejects somewhere, and their neighbours. */
static const char *const tricky[] = {
	"caf\xe9", "CAF\xe9", "Caf\xe9", "caf\xc9", "caf\xc3\xa9",
	"CAF\xc3\x89", "caf\xe9x", "caf\xe9X", "CAF\xe9X",
	"\xc0\xaf", "/", "\xc0\xaf" "a", "\xc0\xaf" "A", "\xc1\xbf",
	"\xe0\x80\xaf",
	"\xc3", "a\xc3", "A\xc3", "\xe2\x82", "\xe2\x82" "x", "\xf0\x9f\x98",
	"\xf0\x9f\x98\x80", "\xf0\x9f\x98" "a",
	"\xed\xa0\x80", "\xed\xb0\x80",
	"\xf4\x90\x80\x80", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf",
	"\xf8\x88\x80\x80\x80",
	"\xff", "\xfe", "a\xff", "A\xff", "a\xfe", "\x80", "\x80\x80",
	"\xc3\xa9\xff", "\xc3\x89\xff", "\xc3\xa9\xfe", "\xce\xa3\xff",
	"\xcf\x83\xff", "\xff\xce\xa3", "\xff\xcf\x83", "\xffZ", "\xffz",
	"x", "X", "a", "A",
};

static void test_windows_invalid_utf8(void **state)
{
	const struct fastcase_fold_rules *rules[] = {
		&windows_rules, &windows_nfc_rules,
	};
	size_t r, i, j;

	for (r = 0; r < ARRAY_SIZE(rules); r++) {
		for (i = 0; i < ARRAY_SIZE(tricky); i++) {
			for (j = 0; j < ARRAY_SIZE(tricky); j++) {
				check_windows_pair(rules[r], tricky[i],
						   tricky[j], false);
			}
		}
	}
	/* what strcasecmp_m does with them, spelled out */
	assert_true(fastcase_fold_equal(&windows_rules, "caf\xe9", "CAF\xe9"));
	assert_false(fastcase_fold_equal(&windows_rules, "caf\xe9",
					 "caf\xc9"));
	assert_false(fastcase_fold_equal(&windows_rules, "caf\xe9",
					 "caf\xc3\xa9"));
	assert_false(fastcase_fold_equal(&windows_rules, "\xc0\xaf", "/"));
	assert_true(fastcase_fold_equal(&windows_rules, "a\xc3", "A\xc3"));
	assert_false(fastcase_fold_equal(&windows_rules, "a\xff", "a\xfe"));
	assert_true(fastcase_name_is_invalid_utf8("caf\xe9"));
	assert_true(fastcase_name_is_invalid_utf8("\xc0\xaf"));
	assert_true(fastcase_name_is_invalid_utf8("a\xc3"));
	assert_false(fastcase_name_is_invalid_utf8("caf\xc3\xa9"));
	assert_false(fastcase_name_is_invalid_utf8("plain"));
}

static void test_long_names(void **state)
{
	const struct fastcase_fold_rules *rules[] = {
		&windows_rules, &windows_nfc_rules, &unicode_rules,
		&unicode_nfc_rules, &unicode_tr_rules,
	};
	/* 255 bytes each */
	char ascii_lo[256], ascii_up[256], e_acute[256], e_acute_up[256];
	char iota[256], sharp[256], euro[256], raw[256], mixed[256];
	const char *names[] = {
		ascii_lo, ascii_up, e_acute, e_acute_up, iota, sharp, euro,
		raw, mixed,
	};
	struct key k, k2;
	char small[16];
	size_t small_len;
	size_t r, i;

	memset(ascii_lo, 'a', 255);
	memset(ascii_up, 'A', 255);
	for (i = 0; i < 127; i++) {
		memcpy(e_acute + 2 * i, "\xc3\xa9", 2);
		memcpy(e_acute_up + 2 * i, "\xc3\x89", 2);
		memcpy(iota + 2 * i, "\xce\x90", 2);	/* ΐ: folds to 3 */
		memcpy(sharp + 2 * i, "\xc3\x9f", 2);
	}
	e_acute[254] = e_acute_up[254] = iota[254] = sharp[254] = 'x';
	for (i = 0; i < 85; i++) {
		memcpy(euro + 3 * i, "\xe2\x82\xac", 3);
	}
	memset(raw, 0xff, 255);
	memset(mixed, 'M', 255);
	memcpy(mixed + 100, "\xe9", 1);
	ascii_lo[255] = ascii_up[255] = e_acute[255] = e_acute_up[255] = 0;
	iota[255] = sharp[255] = euro[255] = raw[255] = mixed[255] = 0;

	for (r = 0; r < ARRAY_SIZE(rules); r++) {
		for (i = 0; i < ARRAY_SIZE(names); i++) {
			assert_int_equal(strlen(names[i]), 255);
			must_key(rules[r], names[i], &k);
			/* a key that does not fit is refused, not cut */
			assert_int_equal(fastcase_fold_key(rules[r], names[i],
							   small,
							   sizeof(small),
							   &small_len),
					 ENAMETOOLONG);
		}
		must_key(rules[r], ascii_lo, &k);
		must_key(rules[r], ascii_up, &k2);
		assert_true(keys_equal(&k, &k2));
		assert_true(fastcase_fold_equal(rules[r], ascii_lo, ascii_up));
		must_key(rules[r], e_acute, &k);
		must_key(rules[r], e_acute_up, &k2);
		assert_true(keys_equal(&k, &k2));
	}
	check_windows_pair(&windows_rules, e_acute, e_acute_up, true);
	check_windows_pair(&windows_rules, raw, mixed, false);
	/* the unicode expansion of ΐ is three code points */
	must_key(&unicode_rules, iota, &k);
	assert_true(k.len > 255);
}

/*
 * THE PARITY TABLE. Classes are computed here from Samba's tables, by a
 * breadth-first walk over "is the upper or lower image of", independently
 * of the module's own union-find.
 */
static uint32_t class_of[BMP];
static uint32_t class_next[BMP];	/* members of a class, linked */

static bool skip_cp(uint32_t c)
{
	return c == 0 || (c >= 0xd800 && c <= 0xdfff);
}

static void build_classes(void)
{
	static uint32_t adj_head[BMP], adj_next[4 * BMP], adj_to[4 * BMP];
	static uint32_t queue[BMP];
	uint32_t nadj = 0, c;

	for (c = 0; c < BMP; c++) {
		adj_head[c] = UINT32_MAX;
		class_of[c] = UINT32_MAX;
		class_next[c] = UINT32_MAX;
	}
#define ADD_EDGE(a, b) do { \
		adj_to[nadj] = (b); adj_next[nadj] = adj_head[a]; \
		adj_head[a] = nadj++; \
	} while (0)
	for (c = 1; c < BMP; c++) {
		uint32_t img[2] = { toupper_m(c), tolower_m(c) };
		int i;

		if (skip_cp(c)) {
			continue;
		}
		for (i = 0; i < 2; i++) {
			if (img[i] != c && img[i] < BMP && !skip_cp(img[i])) {
				ADD_EDGE(c, img[i]);
				ADD_EDGE(img[i], c);
			}
		}
	}
#undef ADD_EDGE
	for (c = 1; c < BMP; c++) {
		uint32_t head = 0, tail = 0, last = c;

		if (skip_cp(c) || class_of[c] != UINT32_MAX) {
			continue;
		}
		class_of[c] = c;
		queue[tail++] = c;
		while (head < tail) {
			uint32_t u = queue[head++], e;

			for (e = adj_head[u]; e != UINT32_MAX;
			     e = adj_next[e]) {
				uint32_t v = adj_to[e];

				if (class_of[v] == UINT32_MAX) {
					class_of[v] = c;
					class_next[last] = v;
					last = v;
					queue[tail++] = v;
				}
			}
		}
	}
}

static void test_windows_parity_table(void **state)
{
	char a[16], b[16];
	uint32_t c, d, e;
	size_t pairs = 0, classes = 0, big = 0, smbd_unequal_edges = 0;

	build_classes();
	for (c = 1; c < BMP; c++) {
		uint32_t img[2];
		int i;

		if (skip_cp(c)) {
			continue;
		}
		img[0] = toupper_m(c);
		img[1] = tolower_m(c);
		xy_name(c, a);
		for (i = 0; i < 2; i++) {
			if (skip_cp(img[i]) || img[i] >= BMP) {
				continue;
			}
			xy_name(img[i], b);
			/* c and its images are one class: keys must match */
			check_windows_pair(&windows_rules, a, b, true);
			if (!smbd_equal(a, b)) {
				smbd_unequal_edges++;
			}
			pairs++;
		}
	}
	/* every pair within every class */
	for (c = 1; c < BMP; c++) {
		size_t members = 0;

		if (skip_cp(c) || class_of[c] != c) {
			continue;
		}
		classes++;
		for (d = c; d != UINT32_MAX; d = class_next[d]) {
			members++;
			xy_name(d, a);
			for (e = class_next[d]; e != UINT32_MAX;
			     e = class_next[e]) {
				xy_name(e, b);
				check_windows_pair(&windows_rules, a, b, true);
				pairs++;
			}
		}
		if (members > 2) {
			big++;
		}
	}
	print_message("parity: %zu pairs in %zu classes (%zu of more than "
		      "two members; %zu image pairs strcasecmp_m calls "
		      "different)\n", pairs, classes, big,
		      smbd_unequal_edges);
	/* sanity: the tables are really there (hundreds of case pairs,
	 * and Σ σ ς are one class of three) */
	assert_true(classes + 500 < BMP - 0x800 - 1);
	assert_true(big > 0);
}

static uint64_t rng_state = 0x243f6a8885a308d3ULL;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static uint32_t random_cp(void)
{
	uint32_t c;

	do {
		c = rnd() % BMP;
	} while (skip_cp(c));
	return c;
}

static void test_windows_random_pairs(void **state)
{
	char a[16], b[16];
	size_t i, equal = 0;

	for (i = 0; i < 300000; i++) {
		uint32_t ca = random_cp(), cb;

		/* half the time a near neighbour: more case pairs */
		cb = (i & 1) ? random_cp() : ca + (rnd() % 64) - 32;
		if (cb >= BMP || skip_cp(cb)) {
			cb = random_cp();
		}
		xy_name(ca, a);
		xy_name(cb, b);
		check_windows_pair(&windows_rules, a, b, false);
		if (smbd_equal(a, b)) {
			equal++;
		}
	}
	assert_true(equal > 0);
}

/* Random names of a few code points drawn from case pairs and junk. */
static void test_windows_random_names(void **state)
{
	static const char *const parts[] = {
		"a", "A", "z", "Z", "\xc3\xa9", "\xc3\x89", "\xce\xa3",
		"\xcf\x83", "\xcf\x82", "\xc4\xb0", "\xc4\xb1", "I", "i",
		"\xc3\x9f", "ss", "\xe2\x84\xaa", "k", "K", "\xc7\x84",
		"\xc7\x85", "\xc7\x86", "\xe9", "\xff", "\xc3", "\xc0\xaf",
		"/", "\xf0\x9f\x98\x80", "\xf0\x90\x90\x80",
		"\xf0\x90\x90\xa8", "\xed\xa0\x80", "e\xcc\x81",
	};
	size_t i, k;

	for (i = 0; i < 100000; i++) {
		char a[64] = "", b[64] = "";
		size_t na = 1 + rnd() % 4, nb = 1 + rnd() % 4;

		for (k = 0; k < na; k++) {
			strlcat(a, parts[rnd() % ARRAY_SIZE(parts)],
				sizeof(a));
		}
		if (rnd() % 2) {
			/* a case variant of a, part by part */
			b[0] = '\0';
			for (k = 0; a[k] != '\0'; k++) {
				char ch = a[k];

				if (rnd() % 2 && ch >= 'a' && ch <= 'z') {
					ch -= 0x20;
				}
				b[k] = ch;
				b[k + 1] = '\0';
			}
		} else {
			for (k = 0; k < nb; k++) {
				strlcat(b, parts[rnd() % ARRAY_SIZE(parts)],
					sizeof(b));
			}
		}
		check_windows_pair(&windows_rules, a, b, false);
		check_windows_pair(&windows_nfc_rules, a, b, false);
	}
}

/* ---- unicode rule ----------------------------------------------------- */

static void check_unicode_pair(const struct fastcase_fold_rules *rules,
			       const char *a, const char *b, bool expect)
{
	struct key ka, kb;
	bool eq = fastcase_fold_equal(rules, a, b);

	if (eq != expect) {
		fail_msg("unicode%s%s: fold_equal(\"%s\", \"%s\") = %d, "
			 "expected %d", rules->language[0] ? " lang=" : "",
			 rules->language, unit_hex(a), unit_hex(b), eq, expect);
	}
	assert_int_equal(fastcase_fold_equal(rules, b, a), eq);
	must_key(rules, a, &ka);
	must_key(rules, b, &kb);
	/* in unicode mode the key is the whole rule */
	assert_int_equal(keys_equal(&ka, &kb), eq);
}

static void test_unicode_rules(void **state)
{
	/* ß == ss, in both directions and inside names */
	check_unicode_pair(&unicode_rules, "\xc3\x9f", "ss", true);
	check_unicode_pair(&unicode_rules, "Stra\xc3\x9f" "e", "STRASSE",
			   true);
	check_unicode_pair(&unicode_rules, "\xe1\xba\x9e", "ss", true);
	/* Kelvin sign == k == K */
	check_unicode_pair(&unicode_rules, "\xe2\x84\xaa", "k", true);
	check_unicode_pair(&unicode_rules, "\xe2\x84\xaa" "elvin", "KELVIN",
			   true);
	/* Σ σ ς all fold to σ */
	check_unicode_pair(&unicode_rules, "\xce\xa3", "\xcf\x82", true);
	check_unicode_pair(&unicode_rules, "\xcf\x83", "\xcf\x82", true);
	check_unicode_pair(&unicode_rules, "abc", "abd", false);
	/* without a language, I == i, and İ is not plain i */
	check_unicode_pair(&unicode_rules, "I", "i", true);
	check_unicode_pair(&unicode_rules, "\xc4\xb0", "i", false);
	check_unicode_pair(&unicode_rules, "D\xc4\xb0YARBAKIR",
			   "diyarbak\xc4\xb1r", false);
	/* NFD is not NFC without normalize */
	check_unicode_pair(&unicode_rules, "e\xcc\x81", "\xc3\xa9", false);
}

static void test_unicode_turkish(void **state)
{
	/* Turkish: İ/i and I/ı are the case pairs; I is not i */
	check_unicode_pair(&unicode_tr_rules, "\xc4\xb0", "i", true);
	check_unicode_pair(&unicode_tr_rules, "I", "\xc4\xb1", true);
	check_unicode_pair(&unicode_tr_rules, "I", "i", false);
	check_unicode_pair(&unicode_tr_rules, "\xc4\xb0", "\xc4\xb1", false);
	check_unicode_pair(&unicode_tr_rules, "D\xc4\xb0YARBAKIR",
			   "diyarbak\xc4\xb1r", true);
	check_unicode_pair(&unicode_tr_rules, "DIYARBAKIR", "diyarbakir",
			   false);
	/* the rest of Unicode folding still applies */
	check_unicode_pair(&unicode_tr_rules, "\xc3\x9f", "ss", true);
}

/* Azerbaijani has the Turkish rule: İ/i and I/ı are the case pairs. */
static void test_unicode_azerbaijani(void **state)
{
	const char *names[] = {
		"I", "i", "\xc4\xb0", "\xc4\xb1", "BAKI", "Bak\xc4\xb1",
		"\xc4\xb0LHAM", "Stra\xc3\x9f" "e",
	};
	size_t i;

	check_unicode_pair(&unicode_az_rules, "\xc4\xb0", "i", true);
	check_unicode_pair(&unicode_az_rules, "I", "\xc4\xb1", true);
	check_unicode_pair(&unicode_az_rules, "I", "i", false);
	check_unicode_pair(&unicode_az_rules, "\xc4\xb0", "\xc4\xb1",
			   false);
	/* Bakı, the capital: BAKI is its upper case, "baki" is not it */
	check_unicode_pair(&unicode_az_rules, "BAKI", "bak\xc4\xb1", true);
	check_unicode_pair(&unicode_az_rules, "BAKI", "baki", false);
	check_unicode_pair(&unicode_az_rules, "\xc4\xb0LHAM", "ilham", true);
	check_unicode_pair(&unicode_az_rules, "\xc3\x9f", "ss", true);
	/* and the same keys as tr, name for name */
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		struct key kaz, ktr;

		must_key(&unicode_az_rules, names[i], &kaz);
		must_key(&unicode_tr_rules, names[i], &ktr);
		if (!keys_equal(&kaz, &ktr)) {
			fail_msg("az and tr keys differ for %s",
				 unit_hex(names[i]));
		}
	}
}

/*
 * Lithuanian: Unicode's lt rules (a dot above kept on i and j under
 * accents) change lower-casing, not case folding, so lt folds as no
 * language does: dots above stay as written, I is the capital of i, and
 * İ folds to i with a combining dot, never to plain i as in tr.
 */
static void test_unicode_lithuanian(void **state)
{
	const char *names[] = {
		"I", "i", "\xc4\xb0", "i\xcc\x87", "\xc3\x8c", "\xc3\xac",
		"I\xcc\x80", "i\xcc\x87\xcc\x80", "\xc4\xae", "\xc4\xaf",
		"J\xcc\x81", "j\xcc\x87\xcc\x81", "\xc4\xa8",
		"Stra\xc3\x9f" "e",
	};
	size_t i;

	check_unicode_pair(&unicode_lt_rules, "I", "i", true);
	check_unicode_pair(&unicode_lt_rules, "\xc4\xb1", "i", false);
	check_unicode_pair(&unicode_lt_rules, "\xc4\xb0", "i", false);
	check_unicode_pair(&unicode_lt_rules, "\xc4\xb0", "i\xcc\x87",
			   true);
	/* the combining dot above is kept, not folded away */
	check_unicode_pair(&unicode_lt_rules, "i\xcc\x87", "i", false);
	check_unicode_pair(&unicode_lt_rules, "\xc3\x8c", "\xc3\xac", true);
	/* Ì lower-cases to i̇̀ in Lithuanian, but does not fold to it */
	check_unicode_pair(&unicode_lt_rules, "\xc3\x8c",
			   "i\xcc\x87\xcc\x80", false);
	check_unicode_pair(&unicode_lt_rules, "\xc4\xae", "\xc4\xaf", true);
	check_unicode_pair(&unicode_lt_rules, "\xc3\x9f", "ss", true);
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		struct key klt, knone;

		must_key(&unicode_lt_rules, names[i], &klt);
		must_key(&unicode_rules, names[i], &knone);
		if (!keys_equal(&klt, &knone)) {
			fail_msg("lt and no-language keys differ for %s",
				 unit_hex(names[i]));
		}
	}
}

static void test_unicode_invalid_bytes(void **state)
{
	const struct fastcase_fold_rules *rules[] = {
		&unicode_rules, &unicode_nfc_rules, &unicode_tr_rules,
	};
	size_t r, i, j;

	for (r = 0; r < ARRAY_SIZE(rules); r++) {
		/* byte-exact: no U+FFFD merging, no ASCII folding */
		check_unicode_pair(rules[r], "a\xff", "a\xfe", false);
		check_unicode_pair(rules[r], "A\xff", "a\xff", false);
		check_unicode_pair(rules[r], "a\xff", "a\xff", true);
		check_unicode_pair(rules[r], "caf\xe9", "CAF\xe9", false);
		check_unicode_pair(rules[r], "caf\xe9", "caf\xc3\xa9", false);
		check_unicode_pair(rules[r], "\xc0\xaf", "/", false);
		check_unicode_pair(rules[r], "\xed\xa0\x80", "\xed\xa0\x81",
				   false);
		/* every junk string: no crash, equal only to itself */
		for (i = 0; i < ARRAY_SIZE(tricky); i++) {
			struct key k;

			must_key(rules[r], tricky[i], &k);
			if (!fastcase_name_is_invalid_utf8(tricky[i])) {
				continue;
			}
			for (j = 0; j < ARRAY_SIZE(tricky); j++) {
				if (strcmp(tricky[i], tricky[j]) == 0) {
					continue;
				}
				check_unicode_pair(rules[r], tricky[i],
						   tricky[j], false);
			}
		}
	}
}

static void test_unicode_nfc(void **state)
{
	check_unicode_pair(&unicode_nfc_rules, "e\xcc\x81", "\xc3\xa9", true);
	check_unicode_pair(&unicode_nfc_rules, "E\xcc\x81", "\xc3\xa9", true);
	check_unicode_pair(&unicode_nfc_rules, "cafe\xcc\x81", "CAF\xc3\x89",
			   true);
	check_unicode_pair(&unicode_nfc_rules, "e\xcc\x81", "e", false);
	check_unicode_pair(&unicode_nfc_rules, "Stra\xc3\x9f" "e", "strasse",
			   true);
	/* Ω (U+2126 ohm) is canonically Ω (U+03A9) */
	check_unicode_pair(&unicode_nfc_rules, "\xe2\x84\xa6", "\xcf\x89",
			   true);
}

static void test_rules_tags(void **state)
{
	const enum fastcase_fold_mode modes[] = {
		FASTCASE_FOLD_WINDOWS, FASTCASE_FOLD_UNICODE,
	};
	const enum fastcase_normalize norms[] = {
		FASTCASE_NORMALIZE_NONE, FASTCASE_NORMALIZE_NFC,
	};
	const char *langs[] = { "", "tr", "az", "lt", "nl" };
	char tags[ARRAY_SIZE(modes) * ARRAY_SIZE(norms) *
		  ARRAY_SIZE(langs)][64];
	size_t n = 0, m, o, l, i, j;

	for (m = 0; m < ARRAY_SIZE(modes); m++) {
		for (o = 0; o < ARRAY_SIZE(norms); o++) {
			for (l = 0; l < ARRAY_SIZE(langs); l++) {
				struct fastcase_fold_rules r = {
					.mode = modes[m],
					.normalize = norms[o],
				};
				const char *t;

				strlcpy(r.language, langs[l],
					sizeof(r.language));
				t = fastcase_fold_rules_tag(&r, tags[n],
							    sizeof(tags[n]));
				assert_ptr_equal(t, tags[n]);
				assert_true(strlen(t) > 0);
				n++;
			}
		}
	}
	for (i = 0; i < n; i++) {
		for (j = i + 1; j < n; j++) {
			if (strcmp(tags[i], tags[j]) == 0) {
				fail_msg("rules %zu and %zu share tag %s",
					 i, j, tags[i]);
			}
		}
	}
	/* the same rules always give the same tag */
	{
		char t1[64], t2[64];

		fastcase_fold_rules_tag(&unicode_tr_rules, t1, sizeof(t1));
		fastcase_fold_rules_tag(&unicode_tr_rules, t2, sizeof(t2));
		assert_string_equal(t1, t2);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_windows_ascii),
		cmocka_unit_test(test_windows_sharp_s),
		cmocka_unit_test(test_windows_sigma),
		cmocka_unit_test(test_windows_dotted_i),
		cmocka_unit_test(test_windows_nfc),
		cmocka_unit_test(test_windows_invalid_utf8),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_windows_parity_table),
		cmocka_unit_test(test_windows_random_pairs),
		cmocka_unit_test(test_windows_random_names),
		cmocka_unit_test(test_unicode_rules),
		cmocka_unit_test(test_unicode_turkish),
		cmocka_unit_test(test_unicode_azerbaijani),
		cmocka_unit_test(test_unicode_lithuanian),
		cmocka_unit_test(test_unicode_invalid_bytes),
		cmocka_unit_test(test_unicode_nfc),
		cmocka_unit_test(test_rules_tags),
	};

	return unit_run(tests, ARRAY_SIZE(tests), argc, argv);
}
