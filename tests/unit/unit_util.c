/*
 * vfs_fastcase: helpers shared by the unit tests
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "unit_util.h"

static const char *filter_arg(int argc, char **argv)
{
	if (argc == 1) {
		return "";
	}
	if (argc == 3 && strcmp(argv[1], "--filter") == 0) {
		return argv[2];
	}
	if (argc == 2 && strncmp(argv[1], "--filter=", 9) == 0) {
		return argv[1] + 9;
	}
	return NULL;
}

int unit_run(const struct CMUnitTest *tests, size_t ntests,
	     int argc, char **argv)
{
	const char *slash = strrchr(argv[0], '/');
	const char *binary = slash != NULL ? slash + 1 : argv[0];
	const char *filter = filter_arg(argc, argv);
	struct CMUnitTest *chosen = NULL;
	size_t i, n = 0;
	int failed;

	if (filter == NULL) {
		fprintf(stderr, "usage: %s [--filter NAME]\n", binary);
		return 1;
	}
	chosen = calloc(ntests, sizeof(*chosen));
	if (chosen == NULL) {
		return 1;
	}
	for (i = 0; i < ntests; i++) {
		char id[512];

		snprintf(id, sizeof(id), "%s.%s", binary, tests[i].name);
		if (strstr(id, filter) != NULL) {
			chosen[n++] = tests[i];
		}
	}
	if (n == 0) {
		/* a renamed test must not turn a run into a silent pass */
		printf("%s: no test id contains \"%s\" (of %zu)\n",
		       binary, filter, ntests);
		free(chosen);
		return UNIT_NONE_SELECTED;
	}
	cmocka_set_message_output(CM_OUTPUT_STDOUT);
	/* the number of failed tests could be UNIT_NONE_SELECTED */
	failed = _cmocka_run_group_tests(binary, chosen, n, NULL, NULL);
	free(chosen);
	return failed == 0 ? 0 : 1;
}

char *unit_tmpdir(TALLOC_CTX *mem_ctx, const char *prefix)
{
	const char *base = getenv("TMPDIR");
	char *tmpl = NULL;

	if (base == NULL || base[0] == '\0') {
		base = "/tmp";
	}
	tmpl = talloc_asprintf(mem_ctx, "%s/%s-XXXXXX", base, prefix);

	if (tmpl == NULL || mkdtemp(tmpl) == NULL) {
		TALLOC_FREE(tmpl);
	}
	return tmpl;
}

static int remove_one(const char *path, const struct stat *sb, int flag,
		      struct FTW *ftw)
{
	return remove(path);
}

void unit_rmtree(const char *path)
{
	nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *unit_hex(const char *s)
{
	static char buf[4][1024];
	static unsigned which;
	char *out = buf[which++ % 4];
	size_t n = 0;

	for (; s != NULL && *s != '\0' && n + 5 < sizeof(buf[0]); s++) {
		unsigned char c = *s;

		if (c >= 0x20 && c < 0x7f) {
			out[n++] = c;
		} else {
			n += snprintf(out + n, 5, "\\x%02x", c);
		}
	}
	out[n] = '\0';
	return out;
}
