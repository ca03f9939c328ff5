/*
 * fastcase-check: a pre-flight check of a tree for vfs_fastcase
 *
 * Walks a tree once, without following symlinks and without a stat per
 * file, and reports what a share with the given fold rules will do to it:
 * names that clients cannot tell apart, names that are not valid UTF-8,
 * and directories large enough that stock case-insensitive lookups are
 * slow there.
 *
 * Exit status: 0 nothing found, 1 findings, 2 error.
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
#include "fastcase_fold.h"
#include "fastcase_params.h"

#include <dirent.h>
#include <ctype.h>
#include <getopt.h>
#include <spawn.h>
#include <sys/wait.h>

#define DEFAULT_LARGE 10000

struct check_opts {
	struct fastcase_config cfg;
	struct fastcase_legacy *legacy;
	unsigned long large;
	bool json;
	bool progress;
};

struct check_totals {
	unsigned long dirs, names, collisions, invalid, large, errors, legacy;
	bool first_json;
};

struct keyed_name {
	char *key;
	size_t key_len;
	char *name;		/* on disk */
	char *spelling;		/* as clients see it */
};

/* Print bytes as a JSON or human string; invalid bytes as \xNN. */
static void print_name(FILE *f, const char *s, bool json)
{
	const unsigned char *p = (const unsigned char *)s;

	if (json) {
		fputc('"', f);
	}
	for (; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\') {
			fprintf(f, json ? "\\%c" : "%c", *p);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, json ? "\\u%04x" : "\\x%02x", *p);
		} else if (*p >= 0x80 && fastcase_name_is_invalid_utf8(s)) {
			fprintf(f, json ? "\\\\x%02x" : "\\x%02x", *p);
		} else {
			fputc(*p, f);
		}
	}
	if (json) {
		fputc('"', f);
	}
}

static void json_sep(struct check_totals *t)
{
	if (!t->first_json) {
		printf(",\n");
	}
	t->first_json = false;
}

static int cmp_keyed(const void *a, const void *b)
{
	const struct keyed_name *x = a, *y = b;
	size_t n = MIN(x->key_len, y->key_len);
	int c = memcmp(x->key, y->key, n);

	if (c != 0) {
		return c;
	}
	if (x->key_len != y->key_len) {
		return x->key_len < y->key_len ? -1 : 1;
	}
	return strcmp(x->name, y->name);
}

static void report_collision(const struct check_opts *o,
			     struct check_totals *t, const char *dir,
			     struct keyed_name *group, size_t n)
{
	size_t i;

	t->collisions++;
	if (o->json) {
		json_sep(t);
		printf("{\"kind\": \"collision\", \"directory\": ");
		print_name(stdout, dir, true);
		printf(", \"names\": [");
		for (i = 0; i < n; i++) {
			printf(i > 0 ? ", " : "");
			print_name(stdout, group[i].name, true);
		}
		printf("]}");
		return;
	}
	printf("collision: ");
	print_name(stdout, dir, false);
	printf(":");
	for (i = 0; i < n; i++) {
		printf(" \"");
		print_name(stdout, group[i].name, false);
		printf("\"");
	}
	printf("\n");
}

/* Report every set of names that the rule calls equal. */
static void check_collisions(const struct check_opts *o,
			     struct check_totals *t, const char *dir,
			     struct keyed_name *v, size_t n)
{
	size_t i = 0;

	qsort(v, n, sizeof(*v), cmp_keyed);
	while (i < n) {
		size_t j = i + 1, k, m = 0;
		struct keyed_name *group;

		while (j < n && v[j].key_len == v[i].key_len &&
		       memcmp(v[j].key, v[i].key, v[i].key_len) == 0) {
			j++;
		}
		if (j - i < 2) {
			i = j;
			continue;
		}
		/* a key may bucket names the rule keeps apart: confirm */
		group = calloc(j - i, sizeof(*group));
		if (group == NULL) {
			return;
		}
		for (k = i; k < j; k++) {
			size_t l;
			bool equal = false;

			for (l = i; l < j; l++) {
				if (l != k && fastcase_fold_equal(
					    &o->cfg.rules, v[k].spelling,
					    v[l].spelling)) {
					equal = true;
					break;
				}
			}
			if (equal) {
				group[m++] = v[k];
			}
		}
		if (m > 1) {
			report_collision(o, t, dir, group, m);
		}
		free(group);
		i = j;
	}
}

static void report_simple(const struct check_opts *o, struct check_totals *t,
			  const char *kind, const char *dir, const char *name,
			  unsigned long count)
{
	if (o->json) {
		json_sep(t);
		printf("{\"kind\": \"%s\", \"directory\": ", kind);
		print_name(stdout, dir, true);
		if (name != NULL) {
			printf(", \"name\": ");
			print_name(stdout, name, true);
		} else {
			printf(", \"entries\": %lu", count);
		}
		printf("}");
		return;
	}
	printf("%s: ", kind);
	print_name(stdout, dir, false);
	if (name != NULL) {
		printf("/");
		print_name(stdout, name, false);
		printf("\n");
	} else {
		printf(" (%lu entries)\n", count);
	}
}

static void report_legacy(const struct check_opts *o, struct check_totals *t,
			  const char *dir, const char *name,
			  const char *decoded)
{
	if (o->json) {
		json_sep(t);
		printf("{\"kind\": \"legacy-name\", \"directory\": ");
		print_name(stdout, dir, true);
		printf(", \"name\": ");
		print_name(stdout, name, true);
		printf(", \"decoded\": ");
		print_name(stdout, decoded, true);
		printf("}");
		return;
	}
	printf("legacy-name: ");
	print_name(stdout, dir, false);
	printf("/");
	print_name(stdout, name, false);
	printf(" -> %s\n", decoded);
}

static void report_error(struct check_totals *t, const char *path, int err)
{
	t->errors++;
	fprintf(stderr, "fastcase-check: %s: %s\n", path, strerror(err));
}

static void progress(const struct check_opts *o, const struct check_totals *t)
{
	if (o->progress && t->dirs % 256 == 0) {
		fprintf(stderr, "\r%lu directories, %lu names", t->dirs,
			t->names);
	}
}

static void check_dir(const struct check_opts *o, struct check_totals *t,
		      int fd, const char *path);

/* Opened by path after the parent is closed, so depth costs no fds. */
static void check_subdir(const struct check_opts *o, struct check_totals *t,
			 const char *path, const char *name)
{
	char *sub = NULL;
	int fd;

	if (asprintf(&sub, "%s/%s", path, name) < 0) {
		return;
	}
	fd = open(sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1) {
		if (errno != ENOTDIR && errno != ELOOP) {
			report_error(t, sub, errno);
		}
	} else {
		check_dir(o, t, fd, sub);
	}
	free(sub);
}

/* d_type says, except on file systems that leave it DT_UNKNOWN. */
static bool is_subdir(DIR *d, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_UNKNOWN) {
		return de->d_type == DT_DIR;
	}
	return fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(st.st_mode);
}

/* What one directory's read collects. */
struct dir_listing {
	struct keyed_name *v;
	size_t n, cap;
	char **subdirs;
	size_t nsub;
};

/* Report a legacy or invalid name and keep its key; false: no memory. */
static bool note_name(const struct check_opts *o, struct check_totals *t,
		      const char *path, const char *name,
		      struct dir_listing *l)
{
	char key[FASTCASE_KEY_MAX], decoded[FASTCASE_KEY_MAX];
	const char *spelling = NULL;
	struct keyed_name *k = NULL;
	size_t key_len;

	t->names++;
	spelling = fastcase_legacy_decode(o->legacy, name, decoded,
					  sizeof(decoded));
	if (spelling != NULL) {
		t->legacy++;
		report_legacy(o, t, path, name, spelling);
	} else if (fastcase_name_is_invalid_utf8(name)) {
		t->invalid++;
		report_simple(o, t, "invalid-utf8", path, name, 0);
	}
	if (fastcase_fold_key(&o->cfg.rules, spelling != NULL ? spelling : name,
			      key, sizeof(key), &key_len) != 0) {
		return true;
	}
	if (l->n == l->cap) {
		struct keyed_name *v = NULL;

		l->cap = l->cap ? l->cap * 2 : 64;
		v = realloc(l->v, l->cap * sizeof(*v));
		if (v == NULL) {
			return false;
		}
		l->v = v;
	}
	k = &l->v[l->n];
	k->key = malloc(key_len);
	k->name = strdup(name);
	k->spelling = strdup(spelling != NULL ? spelling : name);
	if (k->key == NULL || k->name == NULL || k->spelling == NULL) {
		free(k->key);
		free(k->name);
		free(k->spelling);
		return false;
	}
	memcpy(k->key, key, key_len);
	k->key_len = key_len;
	l->n++;
	return true;
}

static bool note_subdir(struct dir_listing *l, const char *name)
{
	char **tmp = realloc(l->subdirs, (l->nsub + 1) * sizeof(*tmp));

	if (tmp == NULL) {
		return false;
	}
	l->subdirs = tmp;
	l->subdirs[l->nsub] = strdup(name);
	if (l->subdirs[l->nsub] != NULL) {
		l->nsub++;
	}
	return true;
}

static void free_listing(struct dir_listing *l)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].name);
		free(l->v[i].spelling);
	}
	free(l->v);
	for (i = 0; i < l->nsub; i++) {
		free(l->subdirs[i]);
	}
	free(l->subdirs);
}

static void check_dir(const struct check_opts *o, struct check_totals *t,
		      int fd, const char *path)
{
	struct dir_listing l = { .v = NULL };
	struct dirent *de = NULL;
	DIR *d = fdopendir(fd);
	size_t i;

	if (d == NULL) {
		report_error(t, path, errno);
		close(fd);
		return;
	}
	t->dirs++;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0) {
			continue;
		}
		if (!note_name(o, t, path, de->d_name, &l) ||
		    (is_subdir(d, de) && !note_subdir(&l, de->d_name))) {
			report_error(t, path, ENOMEM);
			break;
		}
		progress(o, t);
	}
	closedir(d);

	check_collisions(o, t, path, l.v, l.n);
	if (l.n >= o->large) {
		t->large++;
		report_simple(o, t, "large-directory", path, NULL, l.n);
	}
	for (i = 0; i < l.nsub; i++) {
		check_subdir(o, t, path, l.subdirs[i]);
	}
	free_listing(&l);
}

/*
 * Start "testparm -s -- CONFIG" with its output on a pipe. No shell: the
 * path is one argument whatever it holds, and posix_spawnp looks
 * testparm up once in PATH.
 */
static FILE *testparm_start(const char *config, pid_t *pid)
{
	char *argv[] = { discard_const_p(char, "testparm"),
			 discard_const_p(char, "-s"),
			 discard_const_p(char, "--"),
			 discard_const_p(char, config), NULL };
	posix_spawn_file_actions_t fa;
	int fds[2], ret;
	FILE *f;

	if (pipe2(fds, O_CLOEXEC) != 0) {
		return NULL;
	}
	ret = posix_spawn_file_actions_init(&fa);
	if (ret == 0) {
		/* dup2 onto stdout clears the close-on-exec flag there */
		ret = posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
		if (ret == 0) {
			ret = posix_spawn_file_actions_addopen(
				&fa, 2, "/dev/null", O_WRONLY, 0);
		}
		if (ret == 0) {
			ret = posix_spawnp(pid, "testparm", &fa, NULL, argv,
					   environ);
		}
		posix_spawn_file_actions_destroy(&fa);
	}
	close(fds[1]);
	if (ret != 0) {
		close(fds[0]);
		errno = ret;
		return NULL;
	}
	f = fdopen(fds[0], "r");
	if (f == NULL) {
		close(fds[0]);
		waitpid(*pid, NULL, 0);
	}
	return f;
}

/* testparm's exit status, or -1 when it did not exit normally. */
static int testparm_finish(FILE *f, pid_t pid)
{
	int status;

	fclose(f);
	while (waitpid(pid, &status, 0) == -1) {
		if (errno != EINTR) {
			return -1;
		}
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* "[name]" on a line of testparm's output: is it this share? */
static bool is_share_header(const char *s, const char *share)
{
	const char *end = strchr(s, ']');

	return end != NULL && (size_t)(end - s - 1) == strlen(share) &&
	       strncasecmp(s + 1, share, strlen(share)) == 0;
}

/* One "fastcase:NAME = VALUE" line of the share into cfg. */
static int load_param_line(struct fastcase_config *cfg, const char *share,
			   char *s)
{
	char *eq, *name, *value, *end;
	const char *why = NULL;

	if (strncasecmp(s, FASTCASE_PARAM_PREFIX ":",
			sizeof(FASTCASE_PARAM_PREFIX)) != 0 ||
	    (eq = strchr(s, '=')) == NULL) {
		return 0;
	}
	name = s + sizeof(FASTCASE_PARAM_PREFIX);
	end = eq;
	while (end > name && isspace((unsigned char)end[-1])) {
		end--;
	}
	*end = '\0';
	value = eq + 1;
	while (isspace((unsigned char)*value)) {
		value++;
	}
	if (strcasecmp(name, "cache file") == 0) {
		return 0;
	}
	if (fastcase_param_set(cfg, name, strdup(value), &why) != 0) {
		fprintf(stderr, "fastcase-check: share [%s]: fastcase:%s: %s\n",
			share, name, why);
		return EINVAL;
	}
	return 0;
}

/* The fastcase: options of one share, as testparm expands smb.conf. */
static int load_share(struct fastcase_config *cfg, const char *config,
		      const char *share)
{
	char line[4096];
	bool in_share = false, found = false;
	int ret = 0, status;
	pid_t pid;
	FILE *p = testparm_start(config, &pid);

	if (p == NULL) {
		fprintf(stderr, "fastcase-check: cannot run testparm: %s\n",
			strerror(errno));
		return errno;
	}
	while (ret == 0 && fgets(line, sizeof(line), p) != NULL) {
		char *s = line;

		s[strcspn(s, "\n")] = '\0';
		while (isspace((unsigned char)*s)) {
			s++;
		}
		if (*s == '[') {
			in_share = is_share_header(s, share);
			found |= in_share;
		} else if (in_share) {
			ret = load_param_line(cfg, share, s);
		}
	}
	status = testparm_finish(p, pid);
	if (ret != 0) {
		return ret;
	}
	if (!found) {
		fprintf(stderr, "fastcase-check: no share [%s] in %s%s\n",
			share, config, status != 0 ?
			" (testparm cannot load it)" : "");
		return ENOENT;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: fastcase-check [options] PATH...\n"
"  --fold windows|unicode   fold rule (default windows)\n"
"  --language CODE          language rules with --fold unicode (tr, az, lt)\n"
"  --normalize none|nfc     NFC and NFD spellings are one name\n"
"  --share NAME             take the fold options from this smb.conf share\n"
"  --config FILE            smb.conf for --share (default: smbd's)\n"
"  --large N                report directories of N+ entries (default %d)\n"
"  --legacy-charset CS      decode names that are not UTF-8 with CS and\n"
"                           list them (fastcase:legacy charset)\n"
"  --json                   one JSON document on stdout\n"
"exit status: 0 nothing found, 1 findings, 2 error\n", DEFAULT_LARGE);
}

/* The command line into o; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct check_opts *o)
{
	static const struct option longopts[] = {
		{ "fold", required_argument, NULL, 'f' },
		{ "language", required_argument, NULL, 'l' },
		{ "normalize", required_argument, NULL, 'n' },
		{ "share", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "large", required_argument, NULL, 'L' },
		{ "json", no_argument, NULL, 'j' },
		{ "legacy-charset", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *share = NULL, *config = "/etc/samba/smb.conf";
	const char *why = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		const char *param = NULL;

		switch (c) {
		case 'f': param = "fold"; break;
		case 'l': param = "language"; break;
		case 'n': param = "normalize"; break;
		case 's': share = optarg; continue;
		case 'c': config = optarg; continue;
		case 'L': o->large = strtoul(optarg, NULL, 10); continue;
		case 'j': o->json = true; continue;
		case 'C': param = "legacy charset"; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (fastcase_param_set(&o->cfg, param, optarg, &why) != 0) {
			fprintf(stderr, "fastcase-check: --%s %s: %s\n",
				param, optarg, why);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (share != NULL && load_share(&o->cfg, config, share) != 0) {
		return 2;
	}
	return -1;
}

static void print_summary(const struct check_opts *o,
			  const struct check_totals *t)
{
	if (o->json) {
		printf("\n], \"summary\": {\"directories\": %lu, "
		       "\"names\": %lu, \"collisions\": %lu, "
		       "\"invalid_utf8\": %lu, \"legacy_names\": %lu, "
		       "\"large_directories\": %lu, \"errors\": %lu}}\n",
		       t->dirs, t->names, t->collisions, t->invalid,
		       t->legacy, t->large, t->errors);
	} else {
		printf("%lu directories, %lu names: %lu collisions, "
		       "%lu invalid UTF-8, %lu legacy names, "
		       "%lu large directories\n", t->dirs, t->names,
		       t->collisions, t->invalid, t->legacy, t->large);
	}
}

int main(int argc, char **argv)
{
	struct check_opts o = { .large = DEFAULT_LARGE };
	struct check_totals t = { .first_json = true };
	const char *why = NULL, *bad = NULL;
	int i, ret;

	fastcase_config_init(&o.cfg);
	ret = parse_args(argc, argv, &o);
	if (ret != -1) {
		return ret;
	}
	if (fastcase_config_check(&o.cfg, &bad, &why) != 0) {
		fprintf(stderr, "fastcase-check: %s %s\n", bad, why);
		return 2;
	}
	if (o.cfg.legacy_charset != NULL &&
	    fastcase_legacy_open(NULL, o.cfg.legacy_charset,
				 &o.legacy) != 0) {
		fprintf(stderr, "fastcase-check: unknown charset %s\n",
			o.cfg.legacy_charset);
		return 2;
	}
	o.progress = !o.json && isatty(STDERR_FILENO);
	if (o.json) {
		printf("{\"findings\": [\n");
	}
	for (i = optind; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd == -1) {
			report_error(&t, argv[i], errno);
			continue;
		}
		check_dir(&o, &t, fd, argv[i]);
	}
	if (o.progress) {
		fprintf(stderr, "\r\033[K");
	}
	print_summary(&o, &t);
	if (t.errors > 0) {
		return 2;
	}
	return (t.collisions + t.invalid + t.legacy + t.large) > 0 ? 1 : 0;
}
