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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "unit_util.h"

char *unit_tmpdir(TALLOC_CTX *mem_ctx, const char *prefix)
{
	char *tmpl = talloc_asprintf(mem_ctx, "/tmp/%s-XXXXXX", prefix);

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
