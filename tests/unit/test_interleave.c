/*
 * vfs_fastcase unit tests: the sync protocol, interleaved
 *
 * Several engines on one cache file, each in a process of its own (as in
 * smbd), and a local writer, are stopped at every step of the protocol
 * (enum fastcase_step) and run in every order of their steps that has at
 * most preemption_bound preemptions (a switch away from a process that
 * could have gone on): bounded exhaustively, not sampled. After each
 * order the answers are held against the contract (docs/DESIGN.md, "The
 * sync protocol"):
 *
 * - a lookup answers as the directory stood at some moment between its
 *   start and its end, or FASTCASE_UNKNOWN (smbd then scans);
 * - a create through the module never makes a second name that folds
 *   equal to one that was there when it began, or to one made through the
 *   module; a create refused names a variant that was there meanwhile;
 * - afterwards a new process without inotify, trusting what the records
 *   and their stamp say, answers every name exactly.
 *
 * What the processes take from their surroundings is injected through
 * struct fastcase_engine_probes: a clock shared by all (each reading
 * moves it CLOCK_STEP_NS, and a process that resumes after others ran
 * finds it CLOCK_WAIT_NS later, past the racy margin: which stamps are
 * racy depends only on the order), a lock that hands the turn back when
 * it is busy instead of waiting, and a filter on inotify events (a lost event must be caught by
 * these tests, an overflow must be harmless). Every change to the
 * directory sets its mtime from that clock, so that no two changes leave
 * equal times behind, as a coarse kernel clock could.
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
#include "system/time.h"
#include "lib/util/talloc_stack.h"
#include "fastcase_engine.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <setjmp.h>
#include <cmocka.h>
#include "unit_util.h"

/*
 * Two preemptions by default. FASTCASE_INTERLEAVE_BOUND changes it: the
 * ASan build runs with 1, since every order costs several forks and the
 * orders grow steeply with the bound (11,286 at 2, a few minutes).
 */
#define DEFAULT_PREEMPTION_BOUND 2
static int preemption_bound = DEFAULT_PREEMPTION_BOUND;
#define CLOCK_STEP_NS (20 * 1000 * 1000LL)
#define CLOCK_WAIT_NS (100 * 1000 * 1000LL)
#define MAX_ACTORS 4
#define MAX_OPS 4
#define MAX_NAMES 8
#define MAX_DECISIONS 256
#define MAX_CHANGES 16
#define NAME_LEN 16

static const struct fastcase_fold_rules rules = {
	.mode = FASTCASE_FOLD_WINDOWS,
};

/* ---- scenarios ---------------------------------------------------------- */

enum op_kind {
	OP_LOOKUP,		/* through the engine */
	OP_CREATE,		/* through the engine's create bracket */
	OP_LOCAL_CREATE,	/* a local program, not through smbd */
	OP_LOCAL_UNLINK,
	OP_LOCAL_RENAME,
};

struct op {
	enum op_kind kind;
	const char *name;
	const char *to;		/* OP_LOCAL_RENAME */
};

enum events_policy { EVENTS_KEPT, EVENTS_OVERFLOW, EVENTS_LOST };

struct actor_spec {
	unsigned watch_limit;	/* 0: no inotify, stamps only */
	enum events_policy events;
	struct op ops[MAX_OPS];
};

struct scenario {
	const char *initial[MAX_NAMES];
	struct actor_spec actors[MAX_ACTORS];
	/* the names the final check looks up */
	const char *probe_names[MAX_NAMES];
};

#define WATCHED 100
#define LOOKUP(n) { .kind = OP_LOOKUP, .name = (n) }
#define CREATE(n) { .kind = OP_CREATE, .name = (n) }
#define LOCAL_CREATE(n) { .kind = OP_LOCAL_CREATE, .name = (n) }
#define LOCAL_UNLINK(n) { .kind = OP_LOCAL_UNLINK, .name = (n) }
#define LOCAL_RENAME(a, b) { .kind = OP_LOCAL_RENAME, .name = (a), .to = (b) }

/* ---- what the processes report ----------------------------------------- */

/*
 * A process stops (and waits for its turn) at every step, when a lock is
 * busy, and before each operation; it reports a change it made and the
 * end of each operation without stopping.
 */
enum report_kind {
	REPORT_STEP = 'y',
	REPORT_BUSY = 'b',
	REPORT_START = 's',
	REPORT_CHANGE = 'c',
	REPORT_END = 'e',
	REPORT_DONE = 'd',
};

struct report {
	char kind;
	int8_t op;
	int result;	/* enum fastcase_result, or a create's errno */
	char name[NAME_LEN];	/* found, existing, or the name changed */
	char gone[NAME_LEN];	/* REPORT_CHANGE: the name that went */
};

static bool reports_stop(char kind)
{
	return kind == REPORT_STEP || kind == REPORT_BUSY ||
		kind == REPORT_START;
}

/* ---- one process -------------------------------------------------------- */

struct actor_ctx {
	int to_controller, from_controller;
	int64_t *clock;		/* shared by every process of a run */
	const char *dir;
	int dirfd;
	enum events_policy events;
};

static void send_report(struct actor_ctx *a, const struct report *r)
{
	if (write(a->to_controller, r, sizeof(*r)) != sizeof(*r)) {
		_exit(3);
	}
	if (reports_stop(r->kind)) {
		char go;

		if (read(a->from_controller, &go, 1) != 1) {
			_exit(0);	/* the controller is done with us */
		}
	}
}

static void report(struct actor_ctx *a, char kind, int op, int result,
		   const char *name, const char *gone)
{
	struct report r = { .kind = kind, .op = op, .result = result };

	strlcpy(r.name, name != NULL ? name : "", sizeof(r.name));
	strlcpy(r.gone, gone != NULL ? gone : "", sizeof(r.gone));
	send_report(a, &r);
}

static int64_t shared_now_ns(void *private_data)
{
	struct actor_ctx *a = private_data;

	return __atomic_add_fetch(a->clock, CLOCK_STEP_NS, __ATOMIC_SEQ_CST);
}

static void at_step(void *private_data, enum fastcase_step at)
{
	report(private_data, REPORT_STEP, -1, at, NULL, NULL);
}

static bool lock_busy(void *private_data)
{
	report(private_data, REPORT_BUSY, -1, 0, NULL, NULL);
	return true;
}

static bool filter_event(void *private_data, enum fastcase_watch_kind *kind)
{
	struct actor_ctx *a = private_data;

	switch (a->events) {
	case EVENTS_KEPT:
		return true;
	case EVENTS_OVERFLOW:
		*kind = FASTCASE_WATCH_OVERFLOW;
		return true;
	case EVENTS_LOST:
		return false;
	}
	return true;
}

/* Every change leaves times of its own behind (see the top). */
static void stamp_change(struct actor_ctx *a)
{
	int64_t now = shared_now_ns(a);
	struct timespec ts[2] = {
		{ .tv_sec = now / 1000000000LL, .tv_nsec = now % 1000000000LL },
		{ .tv_sec = now / 1000000000LL, .tv_nsec = now % 1000000000LL },
	};

	if (utimensat(AT_FDCWD, a->dir, ts, 0) != 0) {
		_exit(4);
	}
}

static void run_local_change(struct actor_ctx *a, int i, const struct op *op)
{
	int ret = 0;

	switch (op->kind) {
	case OP_LOCAL_CREATE: {
		int fd = openat(a->dirfd, op->name,
				O_CREAT | O_EXCL | O_WRONLY, 0644);

		ret = fd >= 0 ? 0 : errno;
		if (fd >= 0) {
			close(fd);
		}
		break;
	}
	case OP_LOCAL_UNLINK:
		ret = unlinkat(a->dirfd, op->name, 0) == 0 ? 0 : errno;
		break;
	case OP_LOCAL_RENAME:
		ret = renameat(a->dirfd, op->name, a->dirfd, op->to) == 0 ?
			0 : errno;
		break;
	default:
		break;
	}
	if (ret == 0) {
		stamp_change(a);
		report(a, REPORT_CHANGE, i,
		       op->kind == OP_LOCAL_UNLINK ? -1 : 0,
		       op->kind == OP_LOCAL_CREATE ? op->name : op->to,
		       op->kind == OP_LOCAL_CREATE ? NULL : op->name);
	}
	report(a, REPORT_END, i, ret, NULL, NULL);
}

static void run_create(struct actor_ctx *a, struct fastcase_engine *e, int i,
		       const char *name)
{
	struct fastcase_create op;
	char *existing = NULL;
	int ret, fd;

	ret = fastcase_engine_create_begin(e, a->dirfd, name, &op,
					   talloc_tos(), &existing);
	if (ret != 0) {
		report(a, REPORT_END, i, ret, existing, NULL);
		return;
	}
	fd = openat(a->dirfd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
	ret = fd >= 0 ? 0 : errno;
	if (fd >= 0) {
		close(fd);
		stamp_change(a);
		report(a, REPORT_CHANGE, i, 0, name, NULL);
		/* between the create and the end of its bracket */
		at_step(a, FASTCASE_STEP_READ);
	}
	fastcase_engine_create_end(e, &op, name, ret == 0);
	report(a, REPORT_END, i, ret, NULL, NULL);
}

static void run_lookup(struct actor_ctx *a, struct fastcase_engine *e, int i,
		       const char *name)
{
	char *found = NULL;
	enum fastcase_result r;

	r = fastcase_engine_lookup(e, a->dirfd, name, talloc_tos(), &found);
	report(a, REPORT_END, i, r, found, NULL);
}

static struct fastcase_engine *actor_engine(struct actor_ctx *a,
					    const struct actor_spec *spec,
					    const char *cache_path,
					    struct fastcase_engine_probes *p)
{
	struct fastcase_engine_options o = {
		.rules = rules,
		.cache_path = cache_path,
		.cache_size = 64ULL << 20,
		.watch_limit = spec->watch_limit,
		.log_name = "interleave",
		.probes = p,
	};
	struct fastcase_engine *e = NULL;

	*p = (struct fastcase_engine_probes) {
		.now_ns = shared_now_ns,
		.step = at_step,
		.lock_busy = lock_busy,
		.event = filter_event,
		.private_data = a,
	};
	if (fastcase_engine_create(talloc_tos(), &o, &e) != 0) {
		_exit(5);
	}
	return e;
}

static void actor_main(struct actor_ctx *a, const struct actor_spec *spec,
		       const char *cache_path)
{
	struct fastcase_engine_probes probes;
	struct fastcase_engine *e = NULL;
	int i;

	for (i = 0; i < MAX_OPS && spec->ops[i].name != NULL; i++) {
		if (spec->ops[i].kind == OP_LOOKUP ||
		    spec->ops[i].kind == OP_CREATE) {
			e = actor_engine(a, spec, cache_path, &probes);
			break;
		}
	}
	for (i = 0; i < MAX_OPS && spec->ops[i].name != NULL; i++) {
		const struct op *op = &spec->ops[i];

		report(a, REPORT_START, i, 0, NULL, NULL);
		if (op->kind == OP_LOOKUP) {
			run_lookup(a, e, i, op->name);
		} else if (op->kind == OP_CREATE) {
			run_create(a, e, i, op->name);
		} else {
			run_local_change(a, i, op);
		}
	}
	report(a, REPORT_DONE, -1, 0, NULL, NULL);
	_exit(0);
}

/* ---- the directory as it stood, change by change ----------------------- */

struct dir_model {
	char names[MAX_NAMES][NAME_LEN];
	bool via_module[MAX_NAMES];
	int n;
};

struct history {
	struct dir_model states[MAX_CHANGES + 1];	/* [0]: initial */
	unsigned at[MAX_CHANGES + 1];	/* the tick of each change */
	int changes;
};

static int model_find(const struct dir_model *m, const char *name)
{
	int i;

	for (i = 0; i < m->n; i++) {
		if (strcmp(m->names[i], name) == 0) {
			return i;
		}
	}
	return -1;
}

static void model_apply(struct history *h, unsigned tick,
			const struct report *r, bool via_module)
{
	struct dir_model m = h->states[h->changes];
	int i;

	if (r->gone[0] != '\0' && (i = model_find(&m, r->gone)) >= 0) {
		m.n--;
		memcpy(m.names[i], m.names[m.n], NAME_LEN);
		m.via_module[i] = m.via_module[m.n];
	}
	if (r->result == 0 && r->name[0] != '\0' && m.n < MAX_NAMES) {
		strlcpy(m.names[m.n], r->name, NAME_LEN);
		m.via_module[m.n] = via_module;
		m.n++;
	}
	assert_true(h->changes < MAX_CHANGES);
	h->changes++;
	h->states[h->changes] = m;
	h->at[h->changes] = tick;
}

/* The last state at or before tick. */
static int state_at(const struct history *h, unsigned tick)
{
	int k = 0;

	while (k < h->changes && h->at[k + 1] <= tick) {
		k++;
	}
	return k;
}

/* Whether the lookup's answer is what state k would give. */
static bool answer_fits(const struct dir_model *m, const char *name,
			enum fastcase_result res, const char *found)
{
	bool any = false;
	int i;

	for (i = 0; i < m->n; i++) {
		if (!fastcase_fold_equal(&rules, m->names[i], name)) {
			continue;
		}
		any = true;
		if (res == FASTCASE_FOUND && strcmp(m->names[i], found) == 0) {
			return true;
		}
	}
	return res == FASTCASE_NOT_FOUND && !any;
}

/* ---- running one order -------------------------------------------------- */

struct op_record {
	unsigned start, end;	/* ticks */
	struct report end_report;
	unsigned change_tick;	/* a create's, 0: none */
	struct dir_model before_change;	/* what it was created beside */
};

struct actor_run {
	pid_t pid;
	int to, from;
	bool waiting, done, busy;
	unsigned busy_since;	/* the tick it found the lock busy */
	int op;			/* the operation under way */
	struct op_record ops[MAX_OPS];
};

struct run {
	const struct scenario *sc;
	struct actor_run actors[MAX_ACTORS];
	int nactors;
	unsigned tick;
	int64_t *clock;
	int last;		/* the process that ran last */
	struct history history;
	/* the order: who ran at each decision, and what could have */
	int chosen[MAX_DECISIONS];
	unsigned enabled[MAX_DECISIONS];	/* bit mask */
	int ndecisions;
	int preemptions[MAX_DECISIONS + 1];	/* before each decision */
	const char *violation;
	char detail[256];
	bool diverged;	/* the prefix could not be followed */
};

static void record_report(struct run *run, int who, const struct report *r)
{
	struct actor_run *ar = &run->actors[who];
	const struct actor_spec *spec = &run->sc->actors[who];

	run->tick++;
	/* FASTCASE_INTERLEAVE_TRACE=1: every report, to study an order */
	if (getenv("FASTCASE_INTERLEAVE_TRACE") != NULL) {
		fprintf(stderr, "%u: %d %c op=%d res=%d %s %s\n", run->tick,
			who, r->kind, r->op, r->result, r->name, r->gone);
	}
	switch (r->kind) {
	case REPORT_START:
		ar->op = r->op;
		ar->ops[r->op].start = run->tick;
		break;
	case REPORT_CHANGE:
		ar->ops[r->op].change_tick = run->tick;
		ar->ops[r->op].before_change =
			run->history.states[run->history.changes];
		model_apply(&run->history, run->tick, r,
			    spec->ops[r->op].kind == OP_CREATE);
		break;
	case REPORT_END:
		ar->ops[r->op].end = run->tick;
		ar->ops[r->op].end_report = *r;
		break;
	case REPORT_BUSY:
		ar->busy = true;
		ar->busy_since = run->tick;
		break;
	case REPORT_DONE:
		ar->done = true;
		break;
	}
	ar->waiting = reports_stop(r->kind);
}

/* Let actor who run until it stops again or is done. */
static void advance(struct run *run, int who)
{
	struct actor_run *ar = &run->actors[who];
	struct report r;

	if (ar->waiting) {
		char go = 'g';

		if (run->last != who) {
			/* it waited while others ran: maybe long */
			*run->clock += CLOCK_WAIT_NS;
		}
		ar->waiting = false;
		ar->busy = false;
		assert_int_equal(write(ar->to, &go, 1), 1);
	}
	run->last = who;
	while (!ar->waiting && !ar->done) {
		ssize_t n = read(ar->from, &r, sizeof(r));

		if (n != sizeof(r)) {
			fail_msg("process %d of the run died", who);
		}
		record_report(run, who, &r);
	}
}

/* A busy process may go again once another has done something since. */
static unsigned enabled_mask(const struct run *run)
{
	unsigned mask = 0;
	int i;

	for (i = 0; i < run->nactors; i++) {
		const struct actor_run *ar = &run->actors[i];

		if (ar->done || !ar->waiting) {
			continue;
		}
		if (ar->busy && ar->busy_since == run->tick) {
			continue;
		}
		mask |= 1u << i;
	}
	return mask;
}

static void start_actors(struct run *run, const char *dir,
			 const char *cache_path, int64_t *clock)
{
	int i;

	for (i = 0; i < MAX_ACTORS && run->sc->actors[i].ops[0].name != NULL;
	     i++) {
		int down[2], up[2];
		pid_t pid;

		assert_int_equal(pipe(down), 0);
		assert_int_equal(pipe(up), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct actor_ctx a = {
				.to_controller = up[1],
				.from_controller = down[0],
				.clock = clock,
				.dir = dir,
				.events = run->sc->actors[i].events,
			};

			close(down[1]);
			close(up[0]);
			a.dirfd = open(dir, O_RDONLY | O_DIRECTORY);
			actor_main(&a, &run->sc->actors[i], cache_path);
		}
		close(down[0]);
		close(up[1]);
		run->actors[i] = (struct actor_run) {
			.pid = pid, .to = down[1], .from = up[0], .op = -1,
		};
		run->nactors++;
		advance(run, i);	/* to its first stop */
	}
}

/*
 * Closing the pipes ends them. They are reaped later (reap_actors()): a
 * process's exit waits for the kernel to tear its inotify instance down
 * (an RCU grace period), which would otherwise dominate every order.
 */
static void stop_actors(struct run *run)
{
	int i;

	for (i = 0; i < run->nactors; i++) {
		close(run->actors[i].to);
		close(run->actors[i].from);
	}
}

static void reap_actors(bool wait_for_all)
{
	while (waitpid(-1, NULL, wait_for_all ? 0 : WNOHANG) > 0) {
	}
}

/*
 * Run the order given by prefix, then go on with whoever ran last while
 * it can (no preemption), else with the first that can.
 */
static void schedule(struct run *run, const int *prefix, int nprefix)
{
	int last = -1;

	for (;;) {
		unsigned mask = enabled_mask(run);
		int who, d = run->ndecisions;

		if (mask == 0) {
			break;
		}
		assert_true(d < MAX_DECISIONS);
		if (d < nprefix) {
			who = prefix[d];
		} else if (last >= 0 && (mask & (1u << last))) {
			who = last;
		} else {
			who = __builtin_ctz(mask);
		}
		if (!(mask & (1u << who))) {
			run->diverged = true;
			break;
		}
		run->enabled[d] = mask;
		run->chosen[d] = who;
		run->preemptions[d + 1] = run->preemptions[d] +
			(last >= 0 && last != who && (mask & (1u << last)));
		run->ndecisions++;
		advance(run, who);
		last = who;
	}
}

/* ---- the contract -------------------------------------------------------- */

static void violation(struct run *run, const char *what, int who, int op,
		      const char *name)
{
	if (run->violation != NULL) {
		return;
	}
	run->violation = what;
	snprintf(run->detail, sizeof(run->detail),
		 "%s: process %d, operation %d (%s)", what, who, op,
		 unit_hex(name));
}

static void check_lookup(struct run *run, int who, int i)
{
	const struct op_record *o = &run->actors[who].ops[i];
	const char *name = run->sc->actors[who].ops[i].name;
	int res = o->end_report.result;
	int k, first = state_at(&run->history, o->start);

	if (res == FASTCASE_UNKNOWN) {
		return;
	}
	for (k = first; k <= run->history.changes &&
	     (k == first || run->history.at[k] <= o->end); k++) {
		if (answer_fits(&run->history.states[k], name, res,
				o->end_report.name)) {
			return;
		}
	}
	violation(run, "a lookup's answer fits no moment of it", who, i,
		  name);
}

/* A variant the create must not have been made beside. */
static bool forbidden_variant(const struct run *run,
			      const struct op_record *o, const char *name)
{
	const struct dir_model *then = &o->before_change;
	const struct dir_model *at_start =
		&run->history.states[state_at(&run->history, o->start)];
	int i;

	for (i = 0; i < then->n; i++) {
		if (strcmp(then->names[i], name) == 0 ||
		    !fastcase_fold_equal(&rules, then->names[i], name)) {
			continue;
		}
		if (then->via_module[i] ||
		    model_find(at_start, then->names[i]) >= 0) {
			return true;
		}
	}
	return false;
}

static bool existed_meanwhile(const struct run *run,
			      const struct op_record *o, const char *name)
{
	int k;

	for (k = state_at(&run->history, o->start);
	     k <= run->history.changes; k++) {
		if (k > 0 && run->history.at[k] > o->end) {
			break;
		}
		if (model_find(&run->history.states[k], name) >= 0) {
			return true;
		}
	}
	return false;
}

static void check_create(struct run *run, int who, int i)
{
	const struct op_record *o = &run->actors[who].ops[i];
	const char *name = run->sc->actors[who].ops[i].name;
	const char *existing;

	switch (o->end_report.result) {
	case 0:
		if (forbidden_variant(run, o, name)) {
			violation(run, "a create made a second name that "
				  "folds equal", who, i, name);
		}
		break;
	case EEXIST:
		/* the engine names the variant; the kernel the name itself */
		existing = o->end_report.name[0] != '\0' ?
			o->end_report.name : name;
		if (!fastcase_fold_equal(&rules, existing, name) ||
		    !existed_meanwhile(run, o, existing)) {
			violation(run, "a create was refused for a variant "
				  "that was not there", who, i, name);
		}
		break;
	default:
		violation(run, "a create failed", who, i, name);
		break;
	}
}

static void check_answers(struct run *run)
{
	int who, i;

	for (who = 0; who < run->nactors; who++) {
		const struct actor_spec *spec = &run->sc->actors[who];

		for (i = 0; i < MAX_OPS && spec->ops[i].name != NULL; i++) {
			if (spec->ops[i].kind == OP_LOOKUP) {
				check_lookup(run, who, i);
			} else if (spec->ops[i].kind == OP_CREATE) {
				check_create(run, who, i);
			}
		}
	}
}

/* A new process without inotify, trusting records and stamps. */
static void check_afterwards(struct run *run, const char *dir,
			     const char *cache_path, int64_t *clock)
{
	struct actor_ctx a = { .clock = clock };
	struct fastcase_engine_probes probes = {
		.now_ns = shared_now_ns, .private_data = &a,
	};
	struct fastcase_engine_options o = {
		.rules = rules,
		.cache_path = cache_path,
		.cache_size = 64ULL << 20,
		.log_name = "interleave",
		.probes = &probes,
	};
	const struct dir_model *final =
		&run->history.states[run->history.changes];
	struct fastcase_engine *e = NULL;
	int i, fd = open(dir, O_RDONLY | O_DIRECTORY);

	assert_true(fd >= 0);
	assert_int_equal(fastcase_engine_create(talloc_tos(), &o, &e), 0);
	for (i = 0; i < MAX_NAMES && run->sc->probe_names[i] != NULL; i++) {
		const char *name = run->sc->probe_names[i];
		char *found = NULL;
		enum fastcase_result r = fastcase_engine_lookup(
			e, fd, name, talloc_tos(), &found);

		if (!answer_fits(final, name, r, found)) {
			violation(run, "afterwards a new process answers from "
				  "records that miss a change", -1, i, name);
		}
	}
	TALLOC_FREE(e);
	close(fd);
}

/* ---- exploring every order ---------------------------------------------- */

struct explore {
	const struct scenario *sc;
	const char *base;
	int64_t *clock;
	unsigned runs;
	unsigned violations;
	unsigned diverged;	/* orders that had to be run again */
	/* lookups answered, creates refused, from the cache */
	unsigned answered;
	char first_violation[256];
	char first_order[512];
};

static void make_run_dir(const char *dir, const struct scenario *sc,
			 int64_t clock)
{
	struct timespec old[2] = {
		{ .tv_sec = clock / 1000000000LL - 10 },
		{ .tv_sec = clock / 1000000000LL - 10 },
	};
	int i;

	assert_int_equal(mkdir(dir, 0755), 0);
	for (i = 0; i < MAX_NAMES && sc->initial[i] != NULL; i++) {
		char *p = talloc_asprintf(talloc_tos(), "%s/%s", dir,
					  sc->initial[i]);
		int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);

		assert_true(fd >= 0);
		close(fd);
	}
	assert_int_equal(utimensat(AT_FDCWD, dir, old, 0), 0);
}

static void seed_history(struct history *h, const struct scenario *sc)
{
	int i;

	for (i = 0; i < MAX_NAMES && sc->initial[i] != NULL; i++) {
		strlcpy(h->states[0].names[i], sc->initial[i], NAME_LEN);
	}
	h->states[0].n = i;
}

static void count_answers(struct explore *x, const struct run *run)
{
	int who, i;

	for (who = 0; who < run->nactors; who++) {
		for (i = 0; i < MAX_OPS; i++) {
			const struct op *op = &x->sc->actors[who].ops[i];
			int res = run->actors[who].ops[i].end_report.result;

			const char *existing =
				run->actors[who].ops[i].end_report.name;

			if (op->name != NULL && op->kind == OP_LOOKUP &&
			    res != FASTCASE_UNKNOWN) {
				x->answered++;
			}
			/* a create refused by the engine's check */
			if (op->name != NULL && op->kind == OP_CREATE &&
			    res == EEXIST && existing[0] != '\0') {
				x->answered++;
			}
		}
	}
}

static void note_violation(struct explore *x, const struct run *run)
{
	size_t off = 0;
	int d;

	if (x->violations++ > 0) {
		return;
	}
	strlcpy(x->first_violation, run->detail, sizeof(x->first_violation));
	for (d = 0; d < run->ndecisions && off + 4 < sizeof(x->first_order);
	     d++) {
		off += snprintf(x->first_order + off,
				sizeof(x->first_order) - off, "%d",
				run->chosen[d]);
	}
}

/* Returns false when the order could not be followed. */
static bool run_once(struct explore *x, const int *prefix, int nprefix,
		     struct run *run)
{
	TALLOC_CTX *frame = talloc_stackframe();
	char *dir = talloc_asprintf(frame, "%s/d%u", x->base, x->runs);
	char *cache = talloc_asprintf(frame, "%s/c%u.tdb", x->base, x->runs);
	struct timespec now;

	reap_actors(false);
	clock_gettime(CLOCK_REALTIME, &now);
	*x->clock = (now.tv_sec + 10) * 1000000000LL;
	*run = (struct run) { .sc = x->sc, .clock = x->clock, .last = -1 };
	seed_history(&run->history, x->sc);
	make_run_dir(dir, x->sc, *x->clock);
	start_actors(run, dir, cache, x->clock);
	schedule(run, prefix, nprefix);
	stop_actors(run);
	if (!run->diverged) {
		check_answers(run);
		check_afterwards(run, dir, cache, x->clock);
		count_answers(x, run);
		if (run->violation != NULL) {
			note_violation(x, run);
		}
	}
	x->runs++;
	unit_rmtree(dir);
	unlink(cache);
	unlink(talloc_asprintf(frame, "%s.lock", cache));
	TALLOC_FREE(frame);
	return !run->diverged;
}

/*
 * Every order is meant to repeat exactly. One did not, rarely, on a loaded
 * machine (cause not found): run it again rather than report a violation
 * that is not there, and fail only when it keeps diverging.
 */
static void run_order(struct explore *x, const int *prefix, int nprefix,
		      struct run *run)
{
	int attempt;

	for (attempt = 0; attempt < 3; attempt++) {
		if (run_once(x, prefix, nprefix, run)) {
			return;
		}
		x->diverged++;
	}
	fail_msg("an order of %d decisions cannot be repeated", nprefix);
}

/*
 * Depth first over orders: every decision after the prefix is tried with
 * each other process that could have run, within the preemption bound.
 * Each order is run once, from scratch.
 */
static void explore_from(struct explore *x, const int *prefix, int nprefix)
{
	struct run *run = talloc_zero(NULL, struct run);
	int next[MAX_DECISIONS];
	int d, who;

	run_order(x, prefix, nprefix, run);
	memcpy(next, run->chosen, sizeof(next));
	for (d = run->ndecisions - 1; d >= nprefix; d--) {
		int prev = d > 0 ? run->chosen[d - 1] : -1;

		for (who = 0; who < run->nactors; who++) {
			bool preempts;

			if (who == run->chosen[d] ||
			    !(run->enabled[d] & (1u << who))) {
				continue;
			}
			preempts = prev >= 0 && prev != who &&
				(run->enabled[d] & (1u << prev));
			if (run->preemptions[d] + preempts >
			    preemption_bound) {
				continue;
			}
			next[d] = who;
			explore_from(x, next, d + 1);
		}
		next[d] = run->chosen[d];
	}
	TALLOC_FREE(run);
}

static struct explore explore(const struct scenario *sc)
{
	TALLOC_CTX *frame = talloc_stackframe();
	struct explore x = { .sc = sc };

	x.base = unit_tmpdir(talloc_tos(), "fastcase-interleave");
	assert_non_null(x.base);
	x.clock = mmap(NULL, sizeof(*x.clock), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(x.clock != MAP_FAILED);
	explore_from(&x, NULL, 0);
	reap_actors(true);
	munmap(x.clock, sizeof(*x.clock));
	unit_rmtree(x.base);
	print_message("%u orders, %u answers from the cache, "
		      "%u violations, %u run again\n", x.runs, x.answered,
		      x.violations, x.diverged);
	TALLOC_FREE(frame);
	return x;
}

static void expect_contract_holds(const struct scenario *sc)
{
	struct explore x = explore(sc);

	if (x.violations > 0) {
		fail_msg("%u of %u orders break the contract; the first: %s "
			 "(order %s)", x.violations, x.runs,
			 x.first_violation, x.first_order);
	}
	/* an exploration whose questions all went to smbd proves nothing */
	assert_true(x.answered > 0);
	assert_true(x.runs > 1);
}

/* ---- the scenarios ------------------------------------------------------ */

/*
 * Two local creates, seen by a process with inotify and one without: the
 * second lands while the first's event is being applied.
 */
static void test_local_create(void **state)
{
	const struct scenario sc = {
		.initial = { "Other.txt" },
		.actors = {
			{ .watch_limit = WATCHED,
			  .ops = { LOOKUP("FOO"), LOOKUP("foo") } },
			{ .ops = { LOCAL_CREATE("Foo") } },
			{ .ops = { LOCAL_CREATE("Bar") } },
			{ .ops = { LOOKUP("BAR"), LOOKUP("fOO") } },
		},
		.probe_names = { "FOO", "BAR", "OTHER.TXT" },
	};

	expect_contract_holds(&sc);
}

/* A local delete, and a create of its case variant through the module. */
static void test_local_delete(void **state)
{
	const struct scenario sc = {
		.initial = { "Foo", "Other.txt" },
		.actors = {
			{ .ops = { LOCAL_UNLINK("Foo") } },
			{ .watch_limit = WATCHED,
			  .ops = { LOOKUP("FOO"), CREATE("FOO") } },
			{ .ops = { LOOKUP("foo"), LOOKUP("FOO") } },
		},
		.probe_names = { "FOO", "OTHER.TXT" },
	};

	expect_contract_holds(&sc);
}

/* A local rename, looked up by both names. */
static void test_local_rename(void **state)
{
	const struct scenario sc = {
		.initial = { "Foo", "Other.txt" },
		.actors = {
			{ .ops = { LOCAL_RENAME("Foo", "Bar") } },
			{ .watch_limit = WATCHED,
			  .ops = { LOOKUP("BAR"), LOOKUP("FOO") } },
			{ .ops = { LOOKUP("bar"), LOOKUP("foo") } },
		},
		.probe_names = { "FOO", "BAR", "OTHER.TXT" },
	};

	expect_contract_holds(&sc);
}

/* Two processes create case variants of one name; a local change too. */
static void test_create_race(void **state)
{
	const struct scenario sc = {
		.initial = { "Other.txt" },
		.actors = {
			{ .ops = { LOCAL_CREATE("Zed") } },
			{ .watch_limit = WATCHED, .ops = { CREATE("FOO") } },
			{ .ops = { CREATE("foo") } },
		},
		.probe_names = { "FOO", "ZED", "OTHER.TXT" },
	};

	expect_contract_holds(&sc);
}

/* Lost queue contents reported as an overflow are harmless. */
static void test_overflow(void **state)
{
	const struct scenario sc = {
		.initial = { "Other.txt" },
		.actors = {
			{ .ops = { LOCAL_CREATE("Foo"),
				   LOCAL_UNLINK("Other.txt") } },
			{ .watch_limit = WATCHED, .events = EVENTS_OVERFLOW,
			  .ops = { LOOKUP("FOO"), LOOKUP("other.txt") } },
		},
		.probe_names = { "FOO", "OTHER.TXT" },
	};

	expect_contract_holds(&sc);
}

/*
 * The tests can fail: a process whose inotify loses an event silently
 * answers from records that miss it, in some order.
 */
static void test_lost_event_is_caught(void **state)
{
	const struct scenario sc = {
		.initial = { "Other.txt" },
		.actors = {
			{ .ops = { LOCAL_CREATE("Foo") } },
			{ .watch_limit = WATCHED, .events = EVENTS_LOST,
			  .ops = { LOOKUP("FOO"), LOOKUP("foo") } },
		},
		.probe_names = { "FOO" },
	};
	struct explore x = explore(&sc);

	assert_true(x.violations > 0);
	assert_true(x.violations < x.runs);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local_create),
		cmocka_unit_test(test_local_delete),
		cmocka_unit_test(test_local_rename),
		cmocka_unit_test(test_create_race),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_lost_event_is_caught),
	};

	const char *bound = getenv("FASTCASE_INTERLEAVE_BOUND");

	if (bound != NULL) {
		preemption_bound = atoi(bound);
	}
	print_message("orders with at most %d preemptions\n",
		      preemption_bound);
	signal(SIGPIPE, SIG_IGN);
	return unit_run(tests, ARRAY_SIZE(tests), argc, argv);
}
