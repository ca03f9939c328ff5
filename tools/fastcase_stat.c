/*
 * fastcase-stat: what the vfs_fastcase cache holds and how it is used
 *
 * Reads the shared cache file read-only (it never clears or locks it for
 * writing) and prints the counters every smbd process adds to it, per
 * share, and what the file holds, per fold rule.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#include "replace.h"
#include "system/filesys.h"
#include "fastcase_build.h"
#include "fastcase_cache.h"
#include "fastcase_counters.h"
#include "fastcase_lock.h"
#include "fastcase_records.h"
#include "fastcase_usage.h"
#include "fastcase_engine.h"

#include <getopt.h>
#include <tdb.h>

#define MAX_GROUPS 64

static const char *const counter_names[] = {
#define X(f) #f,
	FASTCASE_STATS_FIELDS
#undef X
};
#define NCOUNTERS ARRAY_SIZE(counter_names)

struct share_counters {
	char name[256];
	uint64_t v[NCOUNTERS];
};

struct rule_totals {
	char tag[32];
	uint64_t dirs, complete, too_big, entries, bytes, records;
};

struct stat_state {
	struct share_counters shares[MAX_GROUPS];
	size_t nshares;
	struct rule_totals rules[MAX_GROUPS];
	size_t nrules;
	uint64_t records;
};

static struct rule_totals *rule_get(struct stat_state *s, const char *tag)
{
	size_t i;

	for (i = 0; i < s->nrules; i++) {
		if (strcmp(s->rules[i].tag, tag) == 0) {
			return &s->rules[i];
		}
	}
	if (s->nrules == MAX_GROUPS) {
		return NULL;
	}
	strlcpy(s->rules[s->nrules].tag, tag, sizeof(s->rules[0].tag));
	return &s->rules[s->nrules++];
}

static int collect(struct tdb_context *tdb, TDB_DATA key, TDB_DATA val,
		   void *private_data)
{
	struct stat_state *s = private_data;
	const char *k = (const char *)key.dptr;
	struct rule_totals *r;
	size_t taglen;

	s->records++;
	if (key.dsize > sizeof(FASTCASE_STATS_KEY) &&
	    memcmp(k, FASTCASE_STATS_KEY, sizeof(FASTCASE_STATS_KEY)) == 0) {
		struct share_counters *sc;
		size_t namelen;

		if (s->nshares == MAX_GROUPS ||
		    val.dsize != sizeof(sc->v)) {
			return 0;
		}
		sc = &s->shares[s->nshares++];
		/* the key's own bytes only: a record written by anything
		 * but the module may lack the terminating NUL */
		namelen = strnlen(k + sizeof(FASTCASE_STATS_KEY),
				  key.dsize - sizeof(FASTCASE_STATS_KEY));
		namelen = MIN(namelen, sizeof(sc->name) - 1);
		memcpy(sc->name, k + sizeof(FASTCASE_STATS_KEY), namelen);
		sc->name[namelen] = '\0';
		memcpy(sc->v, val.dptr, sizeof(sc->v));
		return 0;
	}
	if (key.dsize < 2 || (k[0] != 'D' && k[0] != 'E')) {
		return 0;
	}
	taglen = strnlen(k + 1, key.dsize - 1);
	if (taglen == key.dsize - 1 || taglen >= sizeof(r->tag)) {
		return 0;
	}
	r = rule_get(s, k + 1);
	if (r == NULL) {
		return 0;
	}
	if (k[0] == 'E') {
		r->records++;
		return 0;
	}
	if (val.dsize == sizeof(struct fastcase_dir_record)) {
		struct fastcase_dir_record rec;

		memcpy(&rec, val.dptr, sizeof(rec));
		r->dirs++;
		r->complete += (rec.flags & FASTCASE_DIR_COMPLETE) ? 1 : 0;
		r->too_big += (rec.flags & FASTCASE_DIR_TOO_BIG) ? 1 : 0;
		r->entries += rec.entries;
		r->bytes += rec.bytes;
	}
	return 0;
}

static void print_plain(const struct stat_state *s, const char *path,
			uint64_t size)
{
	size_t i, j;

	printf("cache file %s: %" PRIu64 " bytes, %" PRIu64 " records\n",
	       path, size, s->records);
	for (i = 0; i < s->nshares; i++) {
		printf("share [%s]\n", s->shares[i].name);
		for (j = 0; j < NCOUNTERS; j++) {
			printf("  %-16s %" PRIu64 "\n", counter_names[j],
			       s->shares[i].v[j]);
		}
	}
	for (i = 0; i < s->nrules; i++) {
		const struct rule_totals *r = &s->rules[i];

		printf("rules %s\n", r->tag);
		printf("  directories      %" PRIu64 " (%" PRIu64
		       " complete, %" PRIu64 " too big)\n",
		       r->dirs, r->complete, r->too_big);
		printf("  entries          %" PRIu64 "\n", r->entries);
		printf("  bytes            %" PRIu64 "\n", r->bytes);
		printf("  entry records    %" PRIu64 "\n", r->records);
	}
}

static void print_json(const struct stat_state *s, const char *path,
		       uint64_t size)
{
	size_t i, j;

	printf("{\"cache_file\": \"%s\", \"file_bytes\": %" PRIu64
	       ", \"records\": %" PRIu64 ", \"shares\": {", path, size,
	       s->records);
	for (i = 0; i < s->nshares; i++) {
		printf("%s\"%s\": {", i ? ", " : "", s->shares[i].name);
		for (j = 0; j < NCOUNTERS; j++) {
			printf("%s\"%s\": %" PRIu64, j ? ", " : "",
			       counter_names[j], s->shares[i].v[j]);
		}
		printf("}");
	}
	printf("}, \"rules\": {");
	for (i = 0; i < s->nrules; i++) {
		const struct rule_totals *r = &s->rules[i];

		printf("%s\"%s\": {\"directories\": %" PRIu64
		       ", \"complete\": %" PRIu64 ", \"too_big\": %" PRIu64
		       ", \"entries\": %" PRIu64 ", \"bytes\": %" PRIu64
		       ", \"entry_records\": %" PRIu64 "}", i ? ", " : "",
		       r->tag, r->dirs, r->complete, r->too_big, r->entries,
		       r->bytes, r->records);
	}
	printf("}}\n");
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: fastcase-stat [--json] [CACHE-FILE]\n"
"  CACHE-FILE defaults to fastcase.tdb in smbd's cache directory\n"
"  (the fastcase:cache file of the share, when it is set).\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct stat_state *s = calloc(1, sizeof(*s));
	const char *path = FASTCASE_DEFAULT_CACHE_DIR "/fastcase.tdb";
	struct tdb_context *tdb;
	bool json = false;
	struct stat st;
	int c;

	if (s == NULL) {
		return 2;
	}
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		path = argv[optind];
	}
	/* read-only and without TDB_CLEAR_IF_FIRST: never wipes it */
	tdb = tdb_open(path, 0, 0, O_RDONLY, 0);
	if (tdb == NULL || fstat(tdb_fd(tdb), &st) != 0) {
		fprintf(stderr, "fastcase-stat: %s: %s\n", path,
			strerror(errno));
		return 2;
	}
	if (tdb_traverse_read(tdb, collect, s) < 0) {
		fprintf(stderr, "fastcase-stat: %s: cannot read: %s\n", path,
			tdb_errorstr(tdb));
		return 2;
	}
	if (json) {
		print_json(s, path, st.st_size);
	} else {
		print_plain(s, path, st.st_size);
	}
	tdb_close(tdb);
	free(s);
	return 0;
}
