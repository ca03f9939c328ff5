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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fastcase_dir_record rec;
	uint8_t keybuf[128];
	size_t klen = 0;
	TDB_DATA key, val;

	if (cache == NULL) {
		setup();
	}
	if (size < 1) {
		return 0;
	}
	val = (TDB_DATA) { .dptr = discard_const_p(uint8_t, data + 1),
			   .dsize = size - 1 };

	keybuf[klen++] = (data[0] & 1) ? 'E' : 'D';
	memcpy(keybuf + klen, scope.tag, scope.tag_len + 1);
	klen += scope.tag_len + 1;
	memcpy(keybuf + klen, &id.dev, 8);
	klen += 8;
	memcpy(keybuf + klen, &id.ino, 8);
	klen += 8;
	if (data[0] & 1) {
		uint64_t gen = 7;

		memcpy(keybuf + klen, &gen, 8);
		klen += 8;
		keybuf[klen++] = 'k';
	}
	key = (TDB_DATA) { .dptr = keybuf, .dsize = klen };
	tdb_store(raw, key, val, TDB_REPLACE);

	if (data[0] & 1) {
		fastcase_cache_entry_parse(cache, &scope, &id, 7, "k", 1,
					   check_names, NULL);
		fastcase_cache_entry_add(cache, &scope, &id, 7, "K");
		fastcase_cache_entry_remove(cache, &scope, &id, 7, "k");
	} else {
		fastcase_cache_dir_get(cache, &scope, &id, &rec);
	}
	return 0;
}
