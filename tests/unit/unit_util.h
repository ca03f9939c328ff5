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

#ifndef _FASTCASE_UNIT_UTIL_H_
#define _FASTCASE_UNIT_UTIL_H_

#include <stddef.h>
#include <talloc.h>

struct CMUnitTest;

/*
 * Exit status of a test binary whose filter selects no test (pytest's
 * "no tests collected"): ./waf test tells it from a failure.
 */
#define UNIT_NONE_SELECTED 5

/*
 * main() of a unit test binary: runs the tests whose id, "<binary>.<test
 * function>", contains the argument of "--filter NAME" (all without one).
 * Returns 0 when every selected test passed, 1 when one failed or the
 * arguments are wrong, UNIT_NONE_SELECTED when the filter selects none.
 */
int unit_run(const struct CMUnitTest *tests, size_t ntests,
	     int argc, char **argv);

/* A fresh directory $TMPDIR/<prefix>-XXXXXX (/tmp without TMPDIR). */
char *unit_tmpdir(TALLOC_CTX *mem_ctx, const char *prefix);

/* Remove a directory tree made by the tests; symlinks are not followed. */
void unit_rmtree(const char *path);

/*
 * A name printable in a failure message: bytes outside ASCII as \xNN. The
 * result lives until four more calls, enough for one message.
 */
const char *unit_hex(const char *s);

#endif /* _FASTCASE_UNIT_UTIL_H_ */
