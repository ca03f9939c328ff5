/*
 * libFuzzer target: whatever bytes a cache file holds for a directory or
 * an entry record, reading them never crashes and never yields a name
 * that is empty or contains '/'.
 *
 * Input: first byte selects the record kind, the rest is its value.
 */

#include "replace.h"
#include "system/filesys.h"
#include "fastcase_build.h"
#include "fastcase_cache.h"
#include "fastcase_counters.h"
#include "fastcase_lock.h"
#include "fastcase_records.h"
#include "fastcase_usage.h"

#include <tdb.h>

static struct fastcase_cache *cache;
static struct tdb_context *raw;
static struct fastcase_scope scope;
static const struct fastcase_dir_id id = { .dev = 1, .ino = 2 };

static void check_names(const char *names, size_t len, void *private_data)
{
	size_t off = 0;

	while (off < len) {
		size_t n = strlen(names + off);

		if (n == 0 || memchr(names + off, '/', n) != NULL) {
			abort();
		}
		off += n + 1;
	}
}

static char path[] = "/tmp/fastcase-fuzz-XXXXXX";

static void cleanup(void)
{
	char file[64];

	TALLOC_FREE(cache);
	snprintf(file, sizeof(file), "%s/cache.tdb", path);
	unlink(file);
	snprintf(file, sizeof(file), "%s/cache.tdb.lock", path);
	unlink(file);
	rmdir(path);
}

static void setup(void)
{
	struct fastcase_fold_rules rules = { .mode = FASTCASE_FOLD_WINDOWS };
	char file[64];

	if (mkdtemp(path) == NULL) {
		abort();
	}
	atexit(cleanup);
	snprintf(file, sizeof(file), "%s/cache.tdb", path);
	if (fastcase_cache_open(NULL, file, 1 << 24, &cache) != 0) {
		abort();
	}
	/* raw bytes go straight into the file, as a corrupt one holds */
	raw = fastcase_cache_tdb(cache);
	fastcase_scope_init(&scope, &rules);
}

/* The record a lookup of "k" reads, built by the cache's own functions. */
static TDB_DATA record_key(uint8_t *buf, bool entry, uint64_t gen)
{
	char key[FASTCASE_KEY_MAX];
	size_t key_len;

	if (!entry) {
		return fastcase_records_dir_key(buf, &scope, &id);
	}
	if (fastcase_scope_disk_key(&scope, "k", key, &key_len) != 0) {
		abort();
	}
	return fastcase_records_entry_key(buf, &scope, &id, gen, key,
					  key_len);
}

/* The parse must have read the fuzzed bytes: malformed ones say so. */
static void fuzz_entry(TDB_DATA val, uint64_t gen)
{
	bool well_formed = fastcase_records_names_well_formed(val.dptr,
							      val.dsize);
	char key[FASTCASE_KEY_MAX];
	size_t key_len;
	int ret;

	if (fastcase_scope_disk_key(&scope, "k", key, &key_len) != 0) {
		abort();
	}
	ret = fastcase_cache_entry_parse(cache, &scope, &id, gen, key,
					 key_len, check_names, NULL);

	if (well_formed ? (ret != 0 && ret != ENOENT) : ret != EINVAL) {
		abort();
	}
	ret = fastcase_cache_entry_add(cache, &scope, &id, gen, "K");
	if (!well_formed && ret != EINVAL) {
		abort();
	}
	fastcase_cache_entry_remove(cache, &scope, &id, gen, "k");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fastcase_dir_record rec;
	uint8_t keybuf[FASTCASE_RECORD_KEY_MAX];
	/* a generation with 2^3 buckets, as a build of ~60 names makes */
	uint64_t gen = 0x1234500 | 3;
	bool entry;
	TDB_DATA key, val;

	if (cache == NULL) {
		setup();
	}
	if (size < 1) {
		return 0;
	}
	entry = (data[0] & 1) != 0;
	val = (TDB_DATA) { .dptr = discard_const_p(uint8_t, data + 1),
			   .dsize = size - 1 };
	key = record_key(keybuf, entry, gen);
	if (tdb_store(raw, key, val, TDB_REPLACE) != 0) {
		abort();
	}
	if (entry) {
		fuzz_entry(val, gen);
	} else {
		fastcase_cache_dir_get(cache, &scope, &id, &rec);
	}
	return 0;
}
