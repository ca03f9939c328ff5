/*
 * vfs_fastcase unit tests: parameter parsing (modules/fastcase_params.c)
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#include "replace.h"
#include "fastcase_params.h"

#include <setjmp.h>
#include <cmocka.h>
#include "unit_util.h"

/* Set one value that must be accepted. */
static void ok(struct fastcase_config *cfg, const char *name,
	       const char *value)
{
	const char *why = NULL;
	int ret = fastcase_param_set(cfg, name, value, &why);

	if (ret != 0) {
		fail_msg("fastcase:%s = \"%s\" refused (%d, %s)", name, value,
			 ret, why != NULL ? why : "no reason");
	}
}

static bool cfg_same(const struct fastcase_config *a,
		     const struct fastcase_config *b)
{
	return a->rules.mode == b->rules.mode &&
	       a->rules.normalize == b->rules.normalize &&
	       strcmp(a->rules.language, b->rules.language) == 0 &&
	       a->cache_file == b->cache_file &&
	       a->cache_size == b->cache_size &&
	       a->watch_limit == b->watch_limit &&
	       a->trust_inotify == b->trust_inotify &&
	       a->rebuild_interval_ms == b->rebuild_interval_ms &&
	       a->legacy_charset == b->legacy_charset;
}

/* A value that must be refused with EINVAL, leaving cfg as it was. */
static void bad(const char *name, const char *value)
{
	struct fastcase_config cfg, before;
	const char *why = NULL;
	int ret;

	fastcase_config_init(&cfg);
	before = cfg;
	ret = fastcase_param_set(&cfg, name, value, &why);
	if (ret != EINVAL) {
		fail_msg("fastcase:%s = \"%s\" gave %d, expected EINVAL",
			 name, value, ret);
	}
	assert_non_null(why);
	assert_true(strlen(why) > 0);
	if (!cfg_same(&cfg, &before)) {
		fail_msg("refused fastcase:%s = \"%s\" changed the config",
			 name, value);
	}
}

static void test_defaults(void **state)
{
	struct fastcase_config cfg;
	const char *bad_param = NULL, *why = NULL;

	memset(&cfg, 0xa5, sizeof(cfg));
	fastcase_config_init(&cfg);
	assert_int_equal(cfg.rules.mode, FASTCASE_FOLD_WINDOWS);
	assert_int_equal(cfg.rules.normalize, FASTCASE_NORMALIZE_NONE);
	assert_string_equal(cfg.rules.language, "");
	assert_null(cfg.cache_file);
	assert_int_equal(cfg.cache_size, FASTCASE_DEFAULT_CACHE_SIZE);
	assert_int_equal(cfg.watch_limit, FASTCASE_DEFAULT_WATCH_LIMIT);
	assert_int_equal(cfg.trust_inotify, FASTCASE_TRUST_INOTIFY_AUTO);
	assert_int_equal(cfg.rebuild_interval_ms, 250);
	assert_null(cfg.legacy_charset);
	assert_int_equal(fastcase_config_check(&cfg, &bad_param, &why), 0);
}

static void test_param_names(void **state)
{
	/* every listed name is known, with a value it accepts */
	static const struct {
		const char *name, *value;
	} valid[] = {
		{ "fold", "unicode" },
		{ "language", "tr" },
		{ "normalize", "nfc" },
		{ "cache file", "/var/cache/samba/fastcase.tdb" },
		{ "cache size", "64M" },
		{ "watch limit", "100" },
		{ "trust inotify", "no" },
		{ "rebuild interval", "1000" },
		{ "legacy charset", "ISO-8859-1" },
	};
	size_t i, j, n = 0;

	for (i = 0; fastcase_param_names[i] != NULL; i++) {
		struct fastcase_config cfg;
		bool listed = false;

		fastcase_config_init(&cfg);
		for (j = 0; j < ARRAY_SIZE(valid); j++) {
			if (strcmp(valid[j].name,
				   fastcase_param_names[i]) == 0) {
				ok(&cfg, valid[j].name, valid[j].value);
				listed = true;
			}
		}
		if (!listed) {
			fail_msg("parameter \"%s\" has no test",
				 fastcase_param_names[i]);
		}
		n++;
	}
	assert_int_equal(n, ARRAY_SIZE(valid));
}

static void test_fold(void **state)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "fold", "unicode");
	assert_int_equal(cfg.rules.mode, FASTCASE_FOLD_UNICODE);
	ok(&cfg, "fold", "windows");
	assert_int_equal(cfg.rules.mode, FASTCASE_FOLD_WINDOWS);
	ok(&cfg, "fold", "UNICODE");
	assert_int_equal(cfg.rules.mode, FASTCASE_FOLD_UNICODE);
	ok(&cfg, "fold", "Windows");
	assert_int_equal(cfg.rules.mode, FASTCASE_FOLD_WINDOWS);
	bad("fold", "");
	bad("fold", "win");
	bad("fold", "unicode ");
	bad("fold", " windows");
	bad("fold", "ascii");
	bad("fold", "unicodes");
}

static void test_language(void **state)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "language", "tr");
	assert_string_equal(cfg.rules.language, "tr");
	ok(&cfg, "language", "az");
	assert_string_equal(cfg.rules.language, "az");
	ok(&cfg, "language", "lit");
	assert_string_equal(cfg.rules.language, "lit");
	ok(&cfg, "language", "");
	assert_string_equal(cfg.rules.language, "");
	bad("language", "t");
	bad("language", "TR");
	bad("language", "Tr");
	bad("language", "turk");
	bad("language", "tr_TR");
	bad("language", "t1");
	bad("language", "tr ");
	bad("language", "-tr");
	bad("language", "\xc3\xa9n");
}

static void test_normalize(void **state)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "normalize", "nfc");
	assert_int_equal(cfg.rules.normalize, FASTCASE_NORMALIZE_NFC);
	ok(&cfg, "normalize", "none");
	assert_int_equal(cfg.rules.normalize, FASTCASE_NORMALIZE_NONE);
	ok(&cfg, "normalize", "NFC");
	assert_int_equal(cfg.rules.normalize, FASTCASE_NORMALIZE_NFC);
	ok(&cfg, "normalize", "None");
	assert_int_equal(cfg.rules.normalize, FASTCASE_NORMALIZE_NONE);
	bad("normalize", "nfd");
	bad("normalize", "nfkc");
	bad("normalize", "");
	bad("normalize", "yes");
}

static void test_cache_file(void **state)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "cache file", "/tmp/x.tdb");
	assert_string_equal(cfg.cache_file, "/tmp/x.tdb");
	ok(&cfg, "cache file", "/");
	assert_string_equal(cfg.cache_file, "/");
	bad("cache file", "");
	bad("cache file", "relative/path.tdb");
	bad("cache file", "fastcase.tdb");
	bad("cache file", " /tmp/x.tdb");
	bad("cache file", "./x.tdb");
}

static void size_is(const char *value, uint64_t expect)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "cache size", value);
	if (cfg.cache_size != expect) {
		fail_msg("cache size \"%s\" = %llu, expected %llu", value,
			 (unsigned long long)cfg.cache_size,
			 (unsigned long long)expect);
	}
}

static void test_cache_size(void **state)
{
	size_is("1M", 1024 * 1024);
	size_is("1m", 1024 * 1024);
	size_is("1024K", 1024 * 1024);
	size_is("1024k", 1024 * 1024);
	size_is("1048576", 1048576);
	size_is("256M", 256ULL * 1024 * 1024);
	size_is("2G", 2ULL * 1024 * 1024 * 1024);
	size_is("2g", 2ULL * 1024 * 1024 * 1024);
	size_is("16384G", 16384ULL * 1024 * 1024 * 1024);
	size_is("0001M", 1024 * 1024);
	/* the largest the parser takes without overflow */
	size_is("17179869183G", 17179869183ULL * 1024 * 1024 * 1024);
	size_is("18446744073709551615", UINT64_MAX);

	/* below the 1M minimum */
	bad("cache size", "0");
	bad("cache size", "1023K");
	bad("cache size", "1048575");
	bad("cache size", "4096");
	/* malformed */
	bad("cache size", "");
	bad("cache size", "M");
	bad("cache size", "-1");
	bad("cache size", "-64M");
	bad("cache size", "+64M");
	bad("cache size", " 64M");
	bad("cache size", "64M ");
	bad("cache size", "64 M");
	bad("cache size", "64MB");
	bad("cache size", "64T");
	bad("cache size", "1.5G");
	bad("cache size", "0x100000");
	bad("cache size", "64MM");
	bad("cache size", "lots");
	/* overflow */
	bad("cache size", "18446744073709551616");
	bad("cache size", "99999999999999999999999");
	bad("cache size", "17179869184G");
	/* would wrap around to 1G, 1M and 2M */
	bad("cache size", "17179869185G");
	bad("cache size", "17592186044417M");
	bad("cache size", "18014398509481986K");
	bad("cache size", "18014398509481984M");
}

static void test_watch_limit(void **state)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "watch limit", "0");
	assert_int_equal(cfg.watch_limit, 0);
	ok(&cfg, "watch limit", "100");
	assert_int_equal(cfg.watch_limit, 100);
	ok(&cfg, "watch limit", "1000000");
	assert_int_equal(cfg.watch_limit, 1000000);
	ok(&cfg, "watch limit", "4K");
	assert_int_equal(cfg.watch_limit, 4096);
	ok(&cfg, "watch limit", "976k");
	assert_int_equal(cfg.watch_limit, 976 * 1024);
	bad("watch limit", "1000001");
	bad("watch limit", "1M");
	bad("watch limit", "1G");
	bad("watch limit", "-1");
	bad("watch limit", "");
	bad("watch limit", "ten");
	bad("watch limit", "10 ");
	bad("watch limit", "4294967296");
	bad("watch limit", "18446744073709551616");
	/* would wrap around to 0 and 1024 */
	bad("watch limit", "17179869184G");
	bad("watch limit", "18014398509481985K");
}

static void test_rebuild_interval(void **state)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "rebuild interval", "0");
	assert_int_equal(cfg.rebuild_interval_ms, 0);
	ok(&cfg, "rebuild interval", "60000");
	assert_int_equal(cfg.rebuild_interval_ms, 60000);
	ok(&cfg, "Rebuild Interval", "1000");
	assert_int_equal(cfg.rebuild_interval_ms, 1000);
	bad("rebuild interval", "60001");
	bad("rebuild interval", "-1");
	bad("rebuild interval", "");
	bad("rebuild interval", "1s");
	bad("rebuild interval", "1K");
	bad("rebuild interval", " 1");
	bad("rebuild interval", "18446744073709551616");
}

static void test_trust_inotify(void **state)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "trust inotify", "no");
	assert_int_equal(cfg.trust_inotify, FASTCASE_TRUST_INOTIFY_NO);
	ok(&cfg, "trust inotify", "True");
	assert_int_equal(cfg.trust_inotify, FASTCASE_TRUST_INOTIFY_YES);
	ok(&cfg, "trust inotify", "off");
	assert_int_equal(cfg.trust_inotify, FASTCASE_TRUST_INOTIFY_NO);
	ok(&cfg, "trust inotify", "AUTO");
	assert_int_equal(cfg.trust_inotify, FASTCASE_TRUST_INOTIFY_AUTO);
	bad("trust inotify", "");
	bad("trust inotify", "maybe");
	bad("trust inotify", "yes ");
}

/* ext4, NFS, FUSE (GlusterFS), GPFS: the statfs magic numbers */
#define EXT4_MAGIC 0xEF53
#define NFS_MAGIC 0x6969
#define FUSE_MAGIC 0x65735546
#define GPFS_MAGIC 0x47504653

static void test_inotify_detection(void **state)
{
	const char *why = NULL;

	assert_null(fastcase_fstype_shared(EXT4_MAGIC));
	assert_string_equal(fastcase_fstype_shared(NFS_MAGIC), "NFS");
	assert_string_equal(fastcase_fstype_shared(FUSE_MAGIC), "FUSE");
	/* f_type is a signed long: a magic above 2^31 may come sign-extended */
	assert_string_equal(fastcase_fstype_shared((int32_t)0xFF534D42),
			    "CIFS");

	assert_true(fastcase_trusts_inotify(FASTCASE_TRUST_INOTIFY_AUTO,
					    false, EXT4_MAGIC, &why));
	assert_null(why);
	assert_false(fastcase_trusts_inotify(FASTCASE_TRUST_INOTIFY_AUTO,
					     true, EXT4_MAGIC, &why));
	assert_string_equal(why, "clustering = yes");
	assert_false(fastcase_trusts_inotify(FASTCASE_TRUST_INOTIFY_AUTO,
					     false, GPFS_MAGIC, &why));
	assert_string_equal(why, "GPFS");
	/* an explicit setting wins, and says what it overrode */
	assert_true(fastcase_trusts_inotify(FASTCASE_TRUST_INOTIFY_YES,
					    true, FUSE_MAGIC, &why));
	assert_string_equal(why, "clustering = yes");
	assert_false(fastcase_trusts_inotify(FASTCASE_TRUST_INOTIFY_NO,
					     false, EXT4_MAGIC, &why));
	assert_non_null(why);
}

static void test_legacy_charset(void **state)
{
	struct fastcase_config cfg;
	char long_name[40];

	fastcase_config_init(&cfg);
	ok(&cfg, "legacy charset", "ISO-8859-1");
	assert_string_equal(cfg.legacy_charset, "ISO-8859-1");
	ok(&cfg, "legacy charset", "none");
	assert_null(cfg.legacy_charset);
	ok(&cfg, "legacy charset", "CP1252");
	assert_string_equal(cfg.legacy_charset, "CP1252");
	ok(&cfg, "legacy charset", "NONE");
	assert_null(cfg.legacy_charset);
	ok(&cfg, "legacy charset", "CP850");
	ok(&cfg, "legacy charset", "");
	assert_null(cfg.legacy_charset);
	/* iconv's own spellings: any case, aliases (the longest glibc has) */
	ok(&cfg, "legacy charset", "iso-8859-15");
	ok(&cfg, "legacy charset", "CSISO60DANISHNORWEGIAN");
	assert_string_equal(cfg.legacy_charset, "CSISO60DANISHNORWEGIAN");
	/* more than 32 characters is refused before iconv is asked */
	memset(long_name, 'A', 33);
	long_name[33] = '\0';
	bad("legacy charset", long_name);
	bad("legacy charset", "../../etc/passwd");
	bad("legacy charset", "ISO/8859");
}

/* A name iconv does not know is refused by the parser, saying so. */
static void test_legacy_charset_unknown_to_iconv(void **state)
{
	const char *unknown[] = {
		"NO-SUCH-CHARSET", "ISO-8859-99", "UTF-9", "latin-1x",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",	/* 32, the most taken */
	};
	struct fastcase_config cfg;
	const char *why = NULL;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(unknown); i++) {
		bad("legacy charset", unknown[i]);
	}
	fastcase_config_init(&cfg);
	ok(&cfg, "legacy charset", "CP1252");
	assert_int_equal(fastcase_param_set(&cfg, "legacy charset",
					    "NO-SUCH-CHARSET", &why), EINVAL);
	assert_non_null(why);
	assert_non_null(strstr(why, "unknown to iconv"));
	/* the refused value left the earlier one in place */
	assert_string_equal(cfg.legacy_charset, "CP1252");
}

static void test_unknown_names(void **state)
{
	const char *names[] = {
		"", "folds", "fold ", "foldx", "cache", "cachefile",
		"cache_file", "size", "watch", "charset", "fastcase:fold",
		"case sensitive", "lang",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(names); i++) {
		struct fastcase_config cfg, before;
		const char *why = NULL;
		int ret;

		fastcase_config_init(&cfg);
		before = cfg;
		ret = fastcase_param_set(&cfg, names[i], "windows", &why);
		if (ret != ENOENT) {
			fail_msg("unknown parameter \"%s\" gave %d",
				 names[i], ret);
		}
		assert_non_null(why);
		assert_true(cfg_same(&cfg, &before));
	}
}

static void test_names_case_insensitive(void **state)
{
	struct fastcase_config cfg;

	fastcase_config_init(&cfg);
	ok(&cfg, "FOLD", "unicode");
	assert_int_equal(cfg.rules.mode, FASTCASE_FOLD_UNICODE);
	ok(&cfg, "Cache Size", "2M");
	assert_int_equal(cfg.cache_size, 2 * 1024 * 1024);
	ok(&cfg, "WATCH LIMIT", "7");
	assert_int_equal(cfg.watch_limit, 7);
	ok(&cfg, "Language", "tr");
	assert_string_equal(cfg.rules.language, "tr");
}

static void test_config_check(void **state)
{
	struct fastcase_config cfg;
	const char *bad_param = NULL, *why = NULL;

	/* language needs fold = unicode */
	fastcase_config_init(&cfg);
	ok(&cfg, "language", "tr");
	assert_int_equal(fastcase_config_check(&cfg, &bad_param, &why),
			 EINVAL);
	assert_non_null(bad_param);
	assert_string_equal(bad_param, "language");
	assert_non_null(why);

	/* the order the parameters come in does not matter */
	ok(&cfg, "fold", "unicode");
	bad_param = why = NULL;
	assert_int_equal(fastcase_config_check(&cfg, &bad_param, &why), 0);

	ok(&cfg, "fold", "windows");
	assert_int_equal(fastcase_config_check(&cfg, &bad_param, &why),
			 EINVAL);
	ok(&cfg, "language", "");
	assert_int_equal(fastcase_config_check(&cfg, &bad_param, &why), 0);

	/* windows with nfc is fine */
	ok(&cfg, "normalize", "nfc");
	assert_int_equal(fastcase_config_check(&cfg, &bad_param, &why), 0);

	/* a full unicode share */
	fastcase_config_init(&cfg);
	ok(&cfg, "fold", "unicode");
	ok(&cfg, "language", "az");
	ok(&cfg, "normalize", "nfc");
	ok(&cfg, "cache size", "1G");
	ok(&cfg, "watch limit", "0");
	ok(&cfg, "legacy charset", "CP1252");
	assert_int_equal(fastcase_config_check(&cfg, &bad_param, &why), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_param_names),
		cmocka_unit_test(test_fold),
		cmocka_unit_test(test_language),
		cmocka_unit_test(test_normalize),
		cmocka_unit_test(test_cache_file),
		cmocka_unit_test(test_cache_size),
		cmocka_unit_test(test_watch_limit),
		cmocka_unit_test(test_rebuild_interval),
		cmocka_unit_test(test_trust_inotify),
		cmocka_unit_test(test_inotify_detection),
		cmocka_unit_test(test_legacy_charset),
		cmocka_unit_test(test_legacy_charset_unknown_to_iconv),
		cmocka_unit_test(test_unknown_names),
		cmocka_unit_test(test_names_case_insensitive),
		cmocka_unit_test(test_config_check),
	};

	return unit_run(tests, ARRAY_SIZE(tests), argc, argv);
}
