/*
 * bench_helper: the local side of ./waf bench (tests/bench/bench.py).
 *
 *   bench_helper fill DIR N      create DIR/File_NNNNNNN_data.txt, 0 <= i < N
 *                                (empty files; DIR is created if needed)
 *   bench_helper readdir DIR R   R times: opendir, readdir to the end,
 *                                closedir; one line per pass:
 *                                "<nanoseconds> <entries>"
 *
 * The readdir pass is the reference of the cold cost: what one plain read
 * of a directory costs a C program, without stat() or anything else.
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int fill(const char *dir, long n)
{
	char name[64];
	int dfd;
	long i;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		perror(dir);
		return 1;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		perror(dir);
		return 1;
	}
	for (i = 0; i < n; i++) {
		int fd;

		snprintf(name, sizeof(name), "File_%07ld_data.txt", i);
		fd = openat(dfd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0) {
			perror(name);
			close(dfd);
			return 1;
		}
		close(fd);
	}
	close(dfd);
	return 0;
}

static int read_dir(const char *dir, int repeat)
{
	int r;

	for (r = 0; r < repeat; r++) {
		long long t0, t1;
		struct dirent *de;
		long entries = 0;
		DIR *d;

		t0 = now_ns();
		d = opendir(dir);
		if (d == NULL) {
			perror(dir);
			return 1;
		}
		while ((de = readdir(d)) != NULL) {
			entries++;
		}
		closedir(d);
		t1 = now_ns();
		printf("%lld %ld\n", t1 - t0, entries);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "fill") == 0) {
		return fill(argv[2], atol(argv[3]));
	}
	if (argc == 4 && strcmp(argv[1], "readdir") == 0) {
		return read_dir(argv[2], atoi(argv[3]));
	}
	fprintf(stderr, "usage: bench_helper fill DIR N | "
		"readdir DIR REPEAT\n");
	return 2;
}
