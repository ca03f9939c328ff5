/*
 * vfs_fastcase: O(1) case-insensitive name lookups for smbd
 *
 * Copyright (C) vfs_fastcase developers 2026
 *
 * This program is free software; you can redistribute it and/or modify
 * it under the terms of the GNU General Public License as published by
 * the Free Software Foundation; either version 3 of the License, or
 * (at your option) any later version.
 */

/*
 * The VFS glue: reads the share's parameters, owns the share's engine and
 * feeds it from smbd's hooks. All caching logic lives in the engine
 * (fastcase_engine.c), which knows nothing of smbd.
 *
 * Hooks:
 * - get_real_filename_at: smbd asks for the on-disk spelling after an
 *   exact-case miss. The engine answers from the cache; NOT_SUPPORTED
 *   hands the question back to smbd's full scan.
 * - openat (O_CREAT|O_EXCL) and mkdirat: a name that folds equal to an
 *   existing one is refused with EEXIST, under the directory's lock, so
 *   concurrent case-variant creates yield one file.
 * - unlinkat, renameat, symlinkat, linkat, mknodat: the changed names are
 *   brought into the cache at once.
 */

#include "includes.h"
#include "smbd/smbd.h"
#include "lib/global_contexts.h"
#include "system/filesys.h"
#include <sys/statfs.h>
#include "lib/param/loadparm.h"
#include "lib/util/memcache.h"
#include "fastcase_samba.h"
#include "fastcase_engine.h"
#include "fastcase_legacy_path.h"
#include "fastcase_fstype.h"
#include "fastcase_params.h"
#include "fastcase_cluster_lock.h"
#include "fastcase_watch.h"

#undef DBGC_CLASS
#define DBGC_CLASS DBGC_VFS

/*
 * Collect the share's "fastcase:" parameters into cfg. Every value must
 * parse and every fastcase: name must be known: a typo that silently fell
 * back to a default would change which names clients can tell apart.
 */
static bool fastcase_load_config(struct vfs_handle_struct *handle,
				 struct fastcase_config *cfg)
{
	int snum = SNUM(handle->conn);
	const char *service = lp_const_servicename(snum);
	struct loadparm_service *svc = lp_servicebynum(snum);
	struct parmlist_entry *opt = NULL;
	const char *why = NULL;
	const char *bad = NULL;
	size_t i;
	int ret;

	fastcase_config_init(cfg);

	for (i = 0; fastcase_param_names[i] != NULL; i++) {
		const char *name = fastcase_param_names[i];
		const char *value = lp_parm_const_string(
			snum, FASTCASE_PARAM_PREFIX, name, NULL);

		if (value == NULL) {
			continue;
		}
		ret = fastcase_param_set(cfg, name, value, &why);
		if (ret != 0) {
			DBG_ERR("share [%s]: invalid value \"%s\" for "
				"parameter \"fastcase:%s\": %s\n",
				service, value, name, why);
			return false;
		}
	}

	for (opt = svc != NULL ? svc->param_opt : NULL;
	     opt != NULL;
	     opt = opt->next) {
		struct fastcase_config scratch;
		const char *name = NULL;

		if (strncasecmp_m(opt->key, FASTCASE_PARAM_PREFIX ":",
				  sizeof(FASTCASE_PARAM_PREFIX)) != 0) {
			continue;
		}
		name = opt->key + sizeof(FASTCASE_PARAM_PREFIX);
		fastcase_config_init(&scratch);
		ret = fastcase_param_set(&scratch, name, opt->value, &why);
		if (ret == ENOENT) {
			DBG_ERR("share [%s]: unknown parameter \"%s\"\n",
				service, opt->key);
			return false;
		}
	}

	ret = fastcase_config_check(cfg, &bad, &why);
	if (ret != 0) {
		DBG_ERR("share [%s]: parameter \"fastcase:%s\" %s\n",
			service, bad, why);
		return false;
	}
	return true;
}

struct fastcase_share {
	struct fastcase_config cfg;
	struct fastcase_engine *engine;
	struct tevent_fd *watch_fde;
	/* idle: apply events in batches (fastcase_watch_handler()) */
	bool batch_events;
	struct tevent_timer *batch_timer;	/* the pending batch */
	bool authoritative;	/* answer even when smbd would scan */
	/* the engine's change count when smbd's real-name memcache was
	 * last known true for this share */
	uint64_t memcache_changes;
	bool legacy;		/* "fastcase:legacy charset" is set */
	/* a module below maps names or has no kernel fd: smbd answers */
	bool below_maps_names;
	/* no module above has an openat: smbd's own names reach ours */
	bool first_to_open;
	/* readdir's answer for a legacy name, under its UTF-8 spelling */
	struct dirent *legacy_dirent;
	/* clustering = yes: creates also lock across the nodes */
	struct fastcase_cluster_lock *cluster_lock;
};

static int fastcase_share_destructor(struct fastcase_share *share)
{
	/* the events must go before the engine closes the fd */
	TALLOC_FREE(share->batch_timer);
	TALLOC_FREE(share->watch_fde);
	TALLOC_FREE(share->engine);
	return 0;
}

/*
 * An idle process applies the events of a watched directory a batch at a
 * time, one wakeup per FASTCASE_BATCH_USEC at most instead of one per
 * change: each process that watches a busy directory pays for every
 * change made there (44 us of CPU per create through another program,
 * one at a time, tests/bench/idle_events.py). Lookups do not wait for
 * the batch: each drains the queue itself first. A queue that holds
 * fewer events than a burst of changes can make in that time would
 * overflow (safe, but every directory is then read again): with such a
 * fs.inotify.max_queued_events, events are applied one at a time.
 */
#define FASTCASE_BATCH_USEC 20000
#define FASTCASE_BATCH_MIN_QUEUE 16384

static void fastcase_apply_batch(struct tevent_context *ev,
				 struct tevent_timer *te,
				 struct timeval current_time,
				 void *private_data)
{
	struct fastcase_share *share = talloc_get_type_abort(
		private_data, struct fastcase_share);

	share->batch_timer = NULL;
	fastcase_engine_process_events(share->engine);
	tevent_fd_set_flags(share->watch_fde, TEVENT_FD_READ);
}

static void fastcase_watch_handler(struct tevent_context *ev,
				   struct tevent_fd *fde, uint16_t flags,
				   void *private_data)
{
	struct fastcase_share *share = talloc_get_type_abort(
		private_data, struct fastcase_share);

	if (share->batch_events && share->batch_timer == NULL) {
		share->batch_timer = tevent_add_timer(
			ev, share,
			tevent_timeval_current_ofs(0, FASTCASE_BATCH_USEC),
			fastcase_apply_batch, share);
	}
	if (share->batch_timer != NULL) {
		tevent_fd_set_flags(fde, 0);
		return;
	}
	/* apply events while idle, so the queue never overflows */
	fastcase_engine_process_events(share->engine);
}

/*
 * The engine made its inotify instance, at its first use in a request, as
 * the connected user: instances count against that user's
 * fs.inotify.max_user_instances, not root's (whose daemons need theirs).
 * Events are applied while idle, so the queue never overflows.
 */
static void fastcase_watch_started(void *private_data, int fd)
{
	struct fastcase_share *share = talloc_get_type_abort(
		private_data, struct fastcase_share);

	share->batch_events =
		fastcase_watch_queue_limit() >= FASTCASE_BATCH_MIN_QUEUE;
	share->watch_fde = tevent_add_fd(global_event_context(), share, fd,
					 TEVENT_FD_READ,
					 fastcase_watch_handler, share);
	if (share->watch_fde == NULL) {
		DBG_WARNING("cannot poll the inotify fd; events are "
			    "applied at each lookup only\n");
	}
}

/*
 * The engine's watch limit: 0 (validate by timestamps) where names may
 * change through other machines, which queue no inotify event here.
 */
static unsigned fastcase_watch_limit(struct vfs_handle_struct *handle,
				     const struct fastcase_share *share)
{
	const char *service = lp_const_servicename(SNUM(handle->conn));
	const char *why = NULL;
	int64_t f_type = 0;
	struct statfs sfs;

	if (statfs(handle->conn->connectpath, &sfs) == 0) {
		f_type = sfs.f_type;
	}
	if (fastcase_trusts_inotify(share->cfg.trust_inotify,
				    lp_clustering(), f_type, &why)) {
		if (why != NULL) {
			DBG_WARNING("share [%s]: trusting inotify although "
				    "%s (fastcase:trust inotify = yes): "
				    "changes made through other machines go "
				    "unseen\n", service, why);
		}
		return share->cfg.watch_limit;
	}
	DBG_NOTICE("share [%s]: not trusting inotify (%s): every lookup "
		   "checks the directory's timestamps\n", service, why);
	return 0;
}

/* Whether module is listed after (below) fastcase in "vfs objects". */
static bool fastcase_listed_below(struct vfs_handle_struct *handle,
				  const char *module)
{
	const char **objects = lp_vfs_objects(SNUM(handle->conn));
	bool below = false;
	size_t i;

	for (i = 0; objects != NULL && objects[i] != NULL; i++) {
		if (below && strcmp(objects[i], module) == 0) {
			return true;
		}
		below = below || strncmp(objects[i], "fastcase", 8) == 0;
	}
	return false;
}

/*
 * The engine's create_count on a clustered smbd: the count kept with the
 * cluster lock of the directory at fd, under the same key.
 */
static bool fastcase_create_count(void *private_data, int fd, bool held,
				  uint64_t *count)
{
	struct vfs_handle_struct *handle = private_data;
	struct fastcase_share *share = NULL;
	SMB_STRUCT_STAT sbuf;
	struct file_id id;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return false);
	if (share->cluster_lock == NULL || sys_fstat(fd, &sbuf, false) != 0) {
		return false;
	}
	id = SMB_VFS_FILE_ID_CREATE(handle->conn, &sbuf);
	return fastcase_cluster_read_count(share->cluster_lock, &id, held,
					   count);
}

static bool fastcase_start_engine(struct vfs_handle_struct *handle,
				  struct fastcase_share *share)
{
	struct fastcase_engine_options opts = {
		.rules = share->cfg.rules,
		.cache_size = share->cfg.cache_size,
		.watch_limit = fastcase_watch_limit(handle, share),
		.log_name = lp_const_servicename(SNUM(handle->conn)),
		.legacy_charset = share->cfg.legacy_charset,
		.defer_ambiguous = !share->authoritative,
		.rebuild_interval_ns =
			share->cfg.rebuild_interval_ms * 1000000LL,
		.watch_on_first_use = true,
		.watch_started = fastcase_watch_started,
		.watch_started_data = share,
	};
	char *path = NULL;
	int ret;

	/* no watch: names may change through other machines */
	opts.exact_create_checks = (opts.watch_limit == 0);
	if (share->cluster_lock != NULL) {
		opts.create_count = fastcase_create_count;
		opts.create_count_data = handle;
		/* vfs_glusterfs_fuse below asks the bricks: cheaper */
		opts.scan_put_off_lookups =
			!fastcase_listed_below(handle, "glusterfs_fuse");
	}
	if (share->cfg.cache_file != NULL) {
		path = talloc_strdup(share, share->cfg.cache_file);
	} else {
		path = cache_path(share, "fastcase.tdb");
	}
	if (path == NULL) {
		return false;
	}
	opts.cache_path = path;

	/*
	 * The cache file is shared by every user's smbd: open as root. The
	 * inotify instance is made at the first request, as its user.
	 */
	become_root();
	ret = fastcase_engine_create(share, &opts, &share->engine);
	unbecome_root();
	TALLOC_FREE(path);
	if (ret == EINVAL) {
		DBG_ERR("share [%s]: invalid value \"%s\" for parameter "
			"\"fastcase:legacy charset\": iconv does not know "
			"it\n", opts.log_name, share->cfg.legacy_charset);
		return false;
	}
	if (ret != 0) {
		return false;
	}

	return true;
}

/*
 * The engine reads directories and applies events through the kernel,
 * under the module's own fds. A module below that maps names (catia,
 * fruit) shows smbd other names than the disk holds, and one without a
 * kernel fd (glusterfs, ceph) has nothing the engine could read: with
 * either below, every question goes back to smbd. Listed above fastcase
 * they are fine.
 */
static bool fastcase_names_mapped_below(struct vfs_handle_struct *handle)
{
	static const struct {
		const char *module, *why;
	} below_modules[] = {
		{ "catia", "maps names: list fastcase after it" },
		{ "fruit", "maps names: list fastcase after it" },
		{ "glusterfs", "has no kernel file descriptors (libgfapi): "
		  "fastcase cannot read the share; vfs_glusterfs_fuse on a "
		  "FUSE mount can" },
		{ "ceph", "has no kernel file descriptors: fastcase cannot "
		  "read the share; a kernel CephFS mount can" },
		{ "ceph_new", "has no kernel file descriptors: fastcase cannot "
		  "read the share; a kernel CephFS mount can" },
	};
	const char **objects = lp_vfs_objects(SNUM(handle->conn));
	bool below = false;
	size_t i, j;

	for (i = 0; objects != NULL && objects[i] != NULL; i++) {
		if (strncmp(objects[i], "fastcase", 8) == 0) {
			below = true;
			continue;
		}
		for (j = 0; below && j < ARRAY_SIZE(below_modules); j++) {
			if (strcmp(objects[i], below_modules[j].module) != 0) {
				continue;
			}
			DBG_WARNING("share [%s]: vfs_%s is below fastcase in "
				    "\"vfs objects\" and %s; smbd answers "
				    "every lookup itself and fastcase checks "
				    "no create\n",
				    lp_const_servicename(SNUM(handle->conn)),
				    objects[i], below_modules[j].why);
			return true;
		}
	}
	return false;
}

/*
 * Whether smbd's own smb_filename reaches this module's openat: no module
 * listed above it has an openat of its own, which may pass a copy (catia
 * passes the name it mapped). The whole-path answer writes the on-disk
 * spelling into smbd's string; into a copy, smbd would never see it.
 */
static bool fastcase_first_to_open(struct vfs_handle_struct *handle)
{
	struct vfs_handle_struct *h = handle->conn->vfs_handles;

	while (h != NULL && h != handle && h->fns->openat_fn == NULL) {
		h = h->next;
	}
	return h == handle;
}

/* The share's state from its parameters; 0 or an errno for connect. */
static int fastcase_share_setup(struct vfs_handle_struct *handle,
				struct fastcase_share *share)
{
	const char *service = lp_const_servicename(SNUM(handle->conn));

	if (!fastcase_load_config(handle, &share->cfg)) {
		return EINVAL;
	}
	share->authoritative =
		share->cfg.rules.mode != FASTCASE_FOLD_WINDOWS ||
		share->cfg.rules.normalize != FASTCASE_NORMALIZE_NONE;

	share->legacy = (share->cfg.legacy_charset != NULL);
	if (share->legacy) {
		share->legacy_dirent = (struct dirent *)talloc_zero_size(
			share, sizeof(struct dirent) + NAME_MAX + 1);
		if (share->legacy_dirent == NULL) {
			return ENOMEM;
		}
	}

	share->below_maps_names = fastcase_names_mapped_below(handle);
	share->first_to_open = fastcase_first_to_open(handle);
	if (lp_clustering()) {
		share->cluster_lock = fastcase_cluster_lock_create(share);
		if (share->cluster_lock == NULL) {
			DBG_ERR("share [%s]: clustering = yes, but no "
				"cluster-wide lock for creates: refusing the "
				"share rather than let two nodes create case "
				"variants\n", service);
			return EIO;
		}
	}
	if (!fastcase_start_engine(handle, share)) {
		return ENOMEM;
	}
	return 0;
}

static int fastcase_connect(struct vfs_handle_struct *handle,
			    const char *service, const char *user)
{
	struct fastcase_share *share = NULL;
	int ret;

	ret = SMB_VFS_NEXT_CONNECT(handle, service, user);
	if (ret < 0) {
		return ret;
	}

	share = talloc_zero(handle->conn, struct fastcase_share);
	if (share == NULL) {
		SMB_VFS_NEXT_DISCONNECT(handle);
		errno = ENOMEM;
		return -1;
	}
	talloc_set_destructor(share, fastcase_share_destructor);
	ret = fastcase_share_setup(handle, share);
	if (ret != 0) {
		TALLOC_FREE(share);
		SMB_VFS_NEXT_DISCONNECT(handle);
		errno = ret;
		return -1;
	}

	SMB_VFS_HANDLE_SET_DATA(handle, share, NULL,
				struct fastcase_share, return -1);
	return 0;
}

/*
 * smbd keeps a per-process memcache of real names (GETREALFILENAME_CACHE,
 * when "stat cache" is on) and consults it after an exact-case miss,
 * before it asks get_real_filename_at: an answer there outlives a local
 * change, and a create after a local delete would take the deleted
 * name's spelling. Every such lookup starts with an exact-case open that
 * fails with ENOENT, so here the memcache is dropped whenever the engine
 * saw (or may have missed) a change since it was last known true, and
 * always for rules other than smbd's own, whose answers smbd's memcache
 * key (smbd's upper case) cannot tell apart. Other shares of the process
 * keep "stat cache" as configured.
 */
static void fastcase_keep_memcache_true(struct fastcase_share *share)
{
	uint64_t changes;

	if (!lp_stat_cache()) {
		return;
	}
	changes = fastcase_engine_change_count(share->engine);
	if (share->authoritative || changes != share->memcache_changes) {
		memcache_flush(NULL, GETREALFILENAME_CACHE);
		share->memcache_changes = changes;
	}
}

/*
 * The fd of a directory fsp, opening "." for the share's working
 * directory, which smbd represents by AT_FDCWD. *tmp_fd is to be closed.
 */
static int fastcase_dir_fd(const struct files_struct *dirfsp, int *tmp_fd)
{
	int fd = fsp_get_pathref_fd(dirfsp);

	*tmp_fd = -1;
	if (fd == AT_FDCWD) {
		fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		*tmp_fd = fd;
	}
	return fd;
}

/*
 * smbd's own scan compares the client's name with every directory entry
 * as SMB_VFS_TRANSLATE_NAME shows it to clients (vfs_readdirname()): a
 * module such as catia maps characters there. The engine holds the names
 * on disk, so the question is translated to them and the answer back.
 * Without such a module both calls answer NONE_MAPPED and cost nothing.
 */
static char *fastcase_translate(struct vfs_handle_struct *handle,
				const char *name,
				enum vfs_translate_direction direction,
				TALLOC_CTX *mem_ctx)
{
	char *out = NULL;
	NTSTATUS status;

	status = SMB_VFS_TRANSLATE_NAME(handle->conn, name, direction,
					mem_ctx, &out);
	if (NT_STATUS_EQUAL(status, NT_STATUS_NONE_MAPPED)) {
		return talloc_strdup(mem_ctx, name);
	}
	return NT_STATUS_IS_OK(status) ? out : NULL;
}

static enum fastcase_result fastcase_lookup(struct vfs_handle_struct *handle,
					    struct fastcase_share *share,
					    int fd, const char *name,
					    TALLOC_CTX *mem_ctx,
					    char **found_name)
{
	TALLOC_CTX *frame = talloc_stackframe();
	char *disk_name = NULL, *found = NULL;
	enum fastcase_result res = FASTCASE_UNKNOWN;

	disk_name = fastcase_translate(handle, name, vfs_translate_to_unix,
				       frame);
	if (disk_name != NULL) {
		res = fastcase_engine_lookup(share->engine, fd, disk_name,
					     frame, &found);
	}
	if (res == FASTCASE_UNKNOWN && disk_name != NULL &&
	    share->authoritative) {
		/* smbd's scan would compare by its own rule: scan here */
		res = fastcase_engine_scan(share->engine, fd, disk_name,
					   frame, &found);
	}
	if (res == FASTCASE_FOUND) {
		*found_name = fastcase_translate(handle, found,
						 vfs_translate_to_windows,
						 mem_ctx);
		if (*found_name == NULL) {
			res = FASTCASE_UNKNOWN;
		}
	}
	TALLOC_FREE(frame);
	return res;
}

static NTSTATUS fastcase_get_real_filename_at(
	struct vfs_handle_struct *handle,
	struct files_struct *dirfsp,
	const char *name,
	TALLOC_CTX *mem_ctx,
	char **found_name)
{
	struct fastcase_share *share = NULL;
	enum fastcase_result res = FASTCASE_UNKNOWN;
	int fd;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return NT_STATUS_INTERNAL_ERROR);

	/*
	 * A search by an 8.3 mangled name (FIND_FIRST of "ASVML4~Z") asks
	 * here before it reads the directory, and takes any answer but
	 * NOT_SUPPORTED as final. No name on disk is spelled like that:
	 * only smbd's scan, which demangles, can answer.
	 */
	if (share->below_maps_names ||
	    mangle_is_mangled(name, handle->conn->params)) {
		return SMB_VFS_NEXT_GET_REAL_FILENAME_AT(
			handle, dirfsp, name, mem_ctx, found_name);
	}
	/*
	 * AT_FDCWD for the share root: the engine keeps its own fd of a
	 * directory it knows, so a lookup there opens nothing.
	 */
	fd = fsp_get_pathref_fd(dirfsp);
	if (fd != -1) {
		res = fastcase_lookup(handle, share, fd, name, mem_ctx,
				      found_name);
	}
	switch (res) {
	case FASTCASE_FOUND:
		return NT_STATUS_OK;
	case FASTCASE_NOT_FOUND:
		return NT_STATUS_OBJECT_NAME_NOT_FOUND;
	case FASTCASE_UNKNOWN:
		break;
	}
	return SMB_VFS_NEXT_GET_REAL_FILENAME_AT(
		handle, dirfsp, name, mem_ctx, found_name);
}

/*
 * Run fn with the parent directory and last component of smb_fname
 * relative to dirfsp; smbd sometimes passes a path below the share's
 * working directory rather than a single name.
 */
static void fastcase_note_changed(struct fastcase_share *share,
				  const struct files_struct *dirfsp,
				  const struct smb_filename *smb_fname)
{
	const char *path = smb_fname->base_name;
	const char *slash = strrchr(path, '/');
	int fd, tmp_fd, parent_fd = -1;

	fd = fastcase_dir_fd(dirfsp, &tmp_fd);
	if (fd == -1) {
		return;
	}
	if (slash != NULL) {
		char *parent = talloc_strndup(talloc_tos(), path,
					      slash - path);

		if (parent != NULL) {
			parent_fd = openat(fd, parent[0] != '\0' ? parent : "/",
					   O_PATH | O_DIRECTORY | O_CLOEXEC);
		}
		TALLOC_FREE(parent);
		if (parent_fd != -1) {
			fastcase_engine_name_changed(share->engine,
						     parent_fd, slash + 1);
			close(parent_fd);
		}
	} else {
		fastcase_engine_name_changed(share->engine, fd, path);
	}
	if (tmp_fd != -1) {
		close(tmp_fd);
	}
}

/*
 * Legacy charset names. Listings show a name that is not UTF-8 under its
 * decoding; smbd then uses that spelling in path-based calls, which fail
 * with ENOENT on disk. Those calls are retried once with the on-disk bytes,
 * so shares without "fastcase:legacy charset" pay nothing.
 */
static struct dirent *fastcase_readdir(struct vfs_handle_struct *handle,
				       struct files_struct *dirfsp,
				       DIR *dirp
				       FASTCASE_READDIR_SBUF_PARAM)
{
	struct fastcase_share *share = NULL;
	struct dirent *de = NULL, *shown = NULL;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return NULL);

	while ((de = FASTCASE_NEXT_READDIR(handle, dirfsp, dirp,
					   FASTCASE_READDIR_SBUF)) != NULL) {
		if (!share->legacy) {
			return de;
		}
		shown = fastcase_legacy_dirent(share->engine,
					       fsp_get_pathref_fd(dirfsp), de,
					       share->legacy_dirent);
		if (shown != NULL) {
			return shown;
		}
	}
	return NULL;
}

/* The on-disk spelling of path (relative to dirfsp), or NULL. */
static char *fastcase_legacy_path(struct fastcase_share *share,
				  const struct files_struct *dirfsp,
				  const char *path, TALLOC_CTX *mem_ctx)
{
	char *disk = NULL;
	int fd, tmp_fd;

	fd = fastcase_dir_fd(dirfsp, &tmp_fd);
	if (fd == -1) {
		return NULL;
	}
	disk = fastcase_legacy_disk_path(share->engine, fd, path, mem_ctx);
	if (tmp_fd != -1) {
		close(tmp_fd);
	}
	return disk;
}

/* A copy of smb_fname naming the on-disk bytes, or NULL. */
static struct smb_filename *fastcase_legacy_fname(
	struct vfs_handle_struct *handle,
	const struct files_struct *dirfsp,
	const struct smb_filename *smb_fname)
{
	struct fastcase_share *share = NULL;
	struct smb_filename *copy = NULL;
	char *disk = NULL;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return NULL);
	if (!share->legacy || errno != ENOENT) {
		return NULL;
	}
	disk = fastcase_legacy_path(share, dirfsp, smb_fname->base_name,
				    talloc_tos());
	if (disk == NULL) {
		errno = ENOENT;
		return NULL;
	}
	copy = cp_smb_filename(talloc_tos(), smb_fname);
	if (copy == NULL) {
		TALLOC_FREE(disk);
		errno = ENOENT;
		return NULL;
	}
	TALLOC_FREE(copy->base_name);
	copy->base_name = talloc_move(copy, &disk);
	return copy;
}

static int fastcase_stat_common(struct vfs_handle_struct *handle,
				struct smb_filename *smb_fname, bool follow)
{
	struct smb_filename *disk = NULL;
	int ret;

	ret = follow ? SMB_VFS_NEXT_STAT(handle, smb_fname) :
		SMB_VFS_NEXT_LSTAT(handle, smb_fname);
	if (ret == -1 &&
	    (disk = fastcase_legacy_fname(handle, handle->conn->cwd_fsp,
					  smb_fname)) != NULL) {
		ret = follow ? SMB_VFS_NEXT_STAT(handle, disk) :
			SMB_VFS_NEXT_LSTAT(handle, disk);
		smb_fname->st = disk->st;
		TALLOC_FREE(disk);
	}
	return ret;
}

static int fastcase_stat(struct vfs_handle_struct *handle,
			 struct smb_filename *smb_fname)
{
	return fastcase_stat_common(handle, smb_fname, true);
}

static int fastcase_lstat(struct vfs_handle_struct *handle,
			  struct smb_filename *smb_fname)
{
	return fastcase_stat_common(handle, smb_fname, false);
}

static int fastcase_fstatat(struct vfs_handle_struct *handle,
			    const struct files_struct *dirfsp,
			    const struct smb_filename *smb_fname,
			    SMB_STRUCT_STAT *sbuf,
			    int flags)
{
	struct smb_filename *disk = NULL;
	int ret = SMB_VFS_NEXT_FSTATAT(handle, dirfsp, smb_fname, sbuf,
				       flags);

	if (ret == -1 &&
	    (disk = fastcase_legacy_fname(handle, dirfsp, smb_fname)) != NULL) {
		ret = SMB_VFS_NEXT_FSTATAT(handle, dirfsp, disk, sbuf, flags);
		TALLOC_FREE(disk);
	}
	return ret;
}

/*
 * smbd 4.17 opens a pathref of a multi-component name by changing into
 * its parent first: a legacy-encoded directory on that path must be
 * found there too, or every name beneath it is unreachable.
 */
static int fastcase_chdir(struct vfs_handle_struct *handle,
			  const struct smb_filename *smb_fname)
{
	struct smb_filename *disk = NULL;
	int ret = SMB_VFS_NEXT_CHDIR(handle, smb_fname);

	if (ret == -1 &&
	    (disk = fastcase_legacy_fname(handle, handle->conn->cwd_fsp,
					  smb_fname)) != NULL) {
		ret = SMB_VFS_NEXT_CHDIR(handle, disk);
		TALLOC_FREE(disk);
	}
	return ret;
}

static bool is_single_name(const struct smb_filename *smb_fname)
{
	return strchr(smb_fname->base_name, '/') == NULL &&
	       smb_fname->stream_name == NULL;
}

/*
 * A POSIX client (SMB1 UNIX extensions, SMB3 POSIX extensions) names
 * files case-sensitively on the same share, as smbd resolves them: its
 * Report.docx beside REPORT.DOCX is a second file, not a collision.
 */
static bool is_posix_name(const struct smb_filename *smb_fname)
{
	return (smb_fname->flags & SMB_FILENAME_POSIX_PATH) != 0;
}

/* A directory's cluster lock, taken or not. */
struct fastcase_held_dir {
	struct file_id id;
	bool held;
};

/*
 * On a clustered smbd, lock the directory at fd across the nodes, before
 * the engine takes its own lock (fastcase_cluster_lock.h): keyed by the
 * identity smbd gives it (SMB_VFS_FILE_ID_CREATE, vfs_fileid included),
 * which must be the same on every node. Returns 0 or an errno.
 */
static int fastcase_lock_cluster(struct vfs_handle_struct *handle,
				 struct fastcase_share *share, int fd,
				 struct fastcase_held_dir *dir)
{
	SMB_STRUCT_STAT sbuf;
	int ret;

	*dir = (struct fastcase_held_dir) { .held = false };
	if (share->cluster_lock == NULL) {
		return 0;
	}
	if (sys_fstat(fd, &sbuf, false) != 0) {
		return errno;
	}
	dir->id = SMB_VFS_FILE_ID_CREATE(handle->conn, &sbuf);
	ret = fastcase_cluster_lock_dir(share->cluster_lock, &dir->id);
	dir->held = (ret == 0);
	return ret;
}

/*
 * A create or rename into a directory whose cluster lock we hold is
 * counted before it is made (fastcase_cluster_lock.h). 0 or EIO: the
 * create must then be refused, as another node's check may rely on the
 * count.
 */
static int fastcase_count_create(struct fastcase_share *share,
				 const struct fastcase_held_dir *dir)
{
	if (!dir->held) {
		return 0;
	}
	return fastcase_cluster_add_create(share->cluster_lock, &dir->id);
}

static void fastcase_unlock_cluster(struct fastcase_share *share,
				    struct fastcase_held_dir *dir)
{
	if (dir->held) {
		fastcase_cluster_unlock_dir(share->cluster_lock, &dir->id);
		dir->held = false;
	}
}

/* The call a create bracket wraps; -1 with errno on failure. */
typedef int (*fastcase_create_fn)(struct vfs_handle_struct *handle,
				  void *private_data);

/*
 * Create name in dirfsp by create(), refused when a name that folds equal
 * exists (EEXIST) or when the check cannot be made race-free (the
 * engine's errno, such as ETIMEDOUT): see "Creates" in docs/DESIGN.md.
 */
static int fastcase_create_checked(struct vfs_handle_struct *handle,
				   struct fastcase_share *share,
				   const struct files_struct *dirfsp,
				   const char *name, fastcase_create_fn create,
				   void *private_data)
{
	struct fastcase_create op;
	struct fastcase_held_dir cluster;
	char *existing = NULL;
	int fd, tmp_fd, ret, err;

	fd = fastcase_dir_fd(dirfsp, &tmp_fd);
	err = fastcase_lock_cluster(handle, share, fd, &cluster);
	if (err == 0) {
		err = fastcase_engine_create_begin(share->engine, fd, name,
						   &op, talloc_tos(),
						   &existing);
	}
	if (err == 0) {
		err = fastcase_count_create(share, &cluster);
		if (err != 0) {
			fastcase_engine_create_end(share->engine, &op, name,
						   false);
		}
	}
	if (err == EEXIST) {
		DBG_INFO("create of [%s] refused: [%s] exists\n", name,
			 existing);
		TALLOC_FREE(existing);
		ret = -1;
	} else if (err != 0) {
		DBG_NOTICE("create of [%s] refused: %s\n", name,
			   strerror(err));
		ret = -1;
	} else {
		ret = create(handle, private_data);
		err = errno;
		fastcase_engine_create_end(share->engine, &op, name,
					   ret != -1);
	}
	fastcase_unlock_cluster(share, &cluster);
	if (tmp_fd != -1) {
		close(tmp_fd);
	}
	errno = err;
	return ret;
}

struct fastcase_openat_args {
	const struct files_struct *dirfsp;
	const struct smb_filename *smb_fname;
	struct files_struct *fsp;
	const struct vfs_open_how *how;
};

static int fastcase_next_openat(struct vfs_handle_struct *handle,
				void *private_data)
{
	struct fastcase_openat_args *a = private_data;

	return SMB_VFS_NEXT_OPENAT(handle, a->dirfsp, a->smb_fname, a->fsp,
				   a->how);
}

/* Whether test holds for any component of path. */
static bool fastcase_any_component(connection_struct *conn, const char *path,
				   bool (*test)(connection_struct *conn,
						const char *name))
{
	char *rest = talloc_strdup(talloc_tos(), path);
	char *copy = rest, *name = NULL;
	bool any = (rest == NULL);

	while (!any && (name = strsep(&rest, "/")) != NULL) {
		any = test(conn, name);
	}
	TALLOC_FREE(copy);
	return any;
}

static bool fastcase_is_mangled(connection_struct *conn, const char *name)
{
	return mangle_is_mangled(name, conn->params);
}

static bool fastcase_is_vetoed(connection_struct *conn, const char *name)
{
	return IS_VETO_PATH(conn, name);
}

/* Whether a module in the stack shows clients other names than disk's. */
static bool fastcase_path_translated(struct vfs_handle_struct *handle,
				     const char *path)
{
	char *out = NULL;
	NTSTATUS status;
	bool same;

	status = SMB_VFS_TRANSLATE_NAME(handle->conn, path,
					vfs_translate_to_unix, talloc_tos(),
					&out);
	if (NT_STATUS_EQUAL(status, NT_STATUS_NONE_MAPPED)) {
		return false;
	}
	same = NT_STATUS_IS_OK(status) && strcmp(out, path) == 0;
	TALLOC_FREE(out);
	return !same;
}

/*
 * Whether smbd's walk would ask get_real_filename_at for the components
 * of this path that miss, and take the cache's answer as it stands.
 */
static bool fastcase_path_answerable(struct vfs_handle_struct *handle,
				     struct fastcase_share *share,
				     const struct fastcase_openat_args *a)
{
	connection_struct *conn = handle->conn;
	const char *path = a->smb_fname->base_name;

	/* twrp: a snapshot's directories, which modules below map to */
	return share->first_to_open && !conn->case_sensitive &&
	       !share->below_maps_names &&
	       a->smb_fname->stream_name == NULL &&
	       a->smb_fname->twrp == 0 && !is_posix_name(a->smb_fname) &&
	       fsp_get_pathref_fd(a->dirfsp) != -1 &&
	       !fastcase_any_component(conn, path, fastcase_is_mangled) &&
	       !fastcase_path_translated(handle, path);
}

/*
 * smbd opens the directories of a path with one openat2(RESOLVE_NO_
 * SYMLINKS) (openat_pathref_*_nosymlink(), 4.17 to 4.25) and, when the
 * client's spelling misses, walks them one by one: per component a
 * failed open, get_real_filename_at and the open again. Here the engine
 * answers the whole path at once, which is opened by its on-disk
 * spelling, still without following a symlink.
 *
 * smbd names the directory by the string it passed: rel_fname.base_name
 * is smbd's own talloc copy of the client's path, which smbd itself
 * case-normalises in place (normalize_filename_case()). The on-disk
 * spelling is written into it, so that every later use (the fsp's name,
 * share modes, notify, query-name) shows what the walk would have found.
 * Only a spelling of the same length fits; any other answer, and any
 * doubt (a mangled or vetoed component, a symlink, a snapshot's path, a
 * path changed meanwhile), leaves smbd its ENOENT and the walk as before.
 */
static int fastcase_open_disk_path(struct vfs_handle_struct *handle,
				   struct fastcase_share *share,
				   struct fastcase_openat_args *a)
{
	TALLOC_CTX *frame = talloc_stackframe();
	char *path = a->smb_fname->base_name;
	size_t len = strlen(path);
	struct smb_filename disk_fname = *a->smb_fname;
	char *disk = NULL;
	int fd = -1;

	if (fastcase_path_answerable(handle, share, a) &&
	    fastcase_engine_lookup_path(share->engine,
					fsp_get_pathref_fd(a->dirfsp), path,
					frame, &disk) == FASTCASE_FOUND &&
	    strlen(disk) == len &&
	    !fastcase_any_component(handle->conn, disk, fastcase_is_vetoed)) {
		disk_fname.base_name = disk;
		fd = SMB_VFS_NEXT_OPENAT(handle, a->dirfsp, &disk_fname,
					 a->fsp, a->how);
	}
	if (fd != -1) {
		memcpy(path, disk, len);
	}
	TALLOC_FREE(frame);
	if (fd == -1) {
		errno = ENOENT;
	}
	return fd;
}

/*
 * An open that creates nothing: a path answered from the cache, the
 * legacy retry, smbd's memcache.
 */
static int fastcase_open_existing(struct vfs_handle_struct *handle,
				  struct fastcase_share *share,
				  struct fastcase_openat_args *a)
{
	struct smb_filename *disk = NULL;
	int ret = fastcase_next_openat(handle, a);

	if (ret == -1 && errno == ENOENT &&
	    (a->how->resolve & VFS_OPEN_HOW_RESOLVE_NO_SYMLINKS)) {
		ret = fastcase_open_disk_path(handle, share, a);
	}
	if (ret == -1 && errno == ENOENT) {
		/* smbd's walk follows */
		fastcase_keep_memcache_true(share);
		errno = ENOENT;
	}
	if (ret == -1 && !(a->how->flags & O_CREAT) &&
	    (disk = fastcase_legacy_fname(handle, a->dirfsp,
					  a->smb_fname)) != NULL) {
		ret = SMB_VFS_NEXT_OPENAT(handle, a->dirfsp, disk, a->fsp,
					  a->how);
		TALLOC_FREE(disk);
	}
	return ret;
}

static int fastcase_openat(struct vfs_handle_struct *handle,
			   const struct files_struct *dirfsp,
			   const struct smb_filename *smb_fname,
			   struct files_struct *fsp,
			   const struct vfs_open_how *how)
{
	struct fastcase_share *share = NULL;
	struct fastcase_openat_args a = {
		.dirfsp = dirfsp, .smb_fname = smb_fname, .fsp = fsp,
		.how = how,
	};
	int fd;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return -1);

	/* smbd always creates with O_EXCL; anything else opens */
	if ((how->flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL) ||
	    !is_single_name(smb_fname) || share->below_maps_names) {
		return fastcase_open_existing(handle, share, &a);
	}
	/*
	 * The client's name, not the one at hand: smbd retries a failed
	 * open (our refusal included) under a POSIX-flagged name of its own
	 * (fd_openat() since 4.22), which must stay refused.
	 */
	if (fsp->fsp_name != NULL && is_posix_name(fsp->fsp_name)) {
		fd = fastcase_next_openat(handle, &a);
		if (fd != -1) {
			fastcase_note_changed(share, dirfsp, smb_fname);
		}
		return fd;
	}
	return fastcase_create_checked(handle, share, dirfsp,
				       smb_fname->base_name,
				       fastcase_next_openat, &a);
}

struct fastcase_mkdirat_args {
	struct files_struct *dirfsp;
	const struct smb_filename *smb_fname;
	mode_t mode;
};

static int fastcase_next_mkdirat(struct vfs_handle_struct *handle,
				 void *private_data)
{
	struct fastcase_mkdirat_args *a = private_data;

	return SMB_VFS_NEXT_MKDIRAT(handle, a->dirfsp, a->smb_fname, a->mode);
}

static int fastcase_mkdirat(struct vfs_handle_struct *handle,
			    struct files_struct *dirfsp,
			    const struct smb_filename *smb_fname,
			    mode_t mode)
{
	struct fastcase_share *share = NULL;
	struct fastcase_mkdirat_args a = {
		.dirfsp = dirfsp, .smb_fname = smb_fname, .mode = mode,
	};
	int ret;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return -1);

	if (!is_single_name(smb_fname) || share->below_maps_names ||
	    is_posix_name(smb_fname)) {
		ret = fastcase_next_mkdirat(handle, &a);
		if (ret == 0) {
			fastcase_note_changed(share, dirfsp, smb_fname);
		}
		return ret;
	}
	return fastcase_create_checked(handle, share, dirfsp,
				       smb_fname->base_name,
				       fastcase_next_mkdirat, &a);
}

static int fastcase_unlinkat(struct vfs_handle_struct *handle,
			     struct files_struct *dirfsp,
			     const struct smb_filename *smb_fname,
			     int flags)
{
	struct fastcase_share *share = NULL;
	int ret, saved_errno;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return -1);
	ret = SMB_VFS_NEXT_UNLINKAT(handle, dirfsp, smb_fname, flags);
	if (ret == -1) {
		struct smb_filename *disk = fastcase_legacy_fname(
			handle, dirfsp, smb_fname);

		if (disk != NULL) {
			ret = SMB_VFS_NEXT_UNLINKAT(handle, dirfsp, disk,
						    flags);
			if (ret == 0) {
				fastcase_note_changed(share, dirfsp, disk);
			}
			TALLOC_FREE(disk);
			return ret;
		}
	}
	if (ret == 0 && smb_fname->stream_name == NULL) {
		saved_errno = errno;
		fastcase_note_changed(share, dirfsp, smb_fname);
		errno = saved_errno;
	}
	return ret;
}

/*
 * A rename's target is checked like a create, under the target
 * directory's lock, so that a rename cannot make a second name that folds
 * equal to an existing one.
 */
static int fastcase_rename_checked(struct vfs_handle_struct *handle,
				   struct fastcase_share *share,
				   struct files_struct *srcdir_fsp,
				   const struct smb_filename *smb_fname_src,
				   struct files_struct *dstdir_fsp,
				   const struct smb_filename *smb_fname_dst,
				   const struct vfs_rename_how *how)
{
	struct fastcase_create op;
	struct fastcase_held_dir cluster;
	char *existing = NULL;
	int dst_fd, dst_tmp, src_fd, src_tmp, ret, saved_errno;

	dst_fd = fastcase_dir_fd(dstdir_fsp, &dst_tmp);
	src_fd = fastcase_dir_fd(srcdir_fsp, &src_tmp);
	ret = fastcase_lock_cluster(handle, share, dst_fd, &cluster);
	if (ret == 0) {
		/* a directory that cannot be opened is the engine's to note */
		ret = fastcase_engine_rename_begin(share->engine, dst_fd,
						   smb_fname_dst->base_name,
						   src_fd,
						   smb_fname_src->base_name,
						   &op, talloc_tos(),
						   &existing);
	}
	if (ret == 0) {
		ret = fastcase_count_create(share, &cluster);
		if (ret != 0) {
			fastcase_engine_create_end(share->engine, &op,
						   smb_fname_dst->base_name,
						   false);
		}
	}
	if (ret != 0) {
		DBG_INFO("rename to [%s] refused: %s%s\n",
			 smb_fname_dst->base_name,
			 ret == EEXIST ? "exists as " : strerror(ret),
			 ret == EEXIST ? existing : "");
		TALLOC_FREE(existing);
		errno = ret;
		ret = -1;
		goto out;
	}
	ret = FASTCASE_NEXT_RENAMEAT(handle, srcdir_fsp, smb_fname_src,
				     dstdir_fsp, smb_fname_dst, how);
	saved_errno = errno;
	if (!fastcase_engine_rename_end(share->engine, &op,
					smb_fname_dst->base_name, ret == 0) &&
	    ret == 0) {
		fastcase_note_changed(share, srcdir_fsp, smb_fname_src);
	}
	errno = saved_errno;
out:
	saved_errno = errno;
	fastcase_unlock_cluster(share, &cluster);
	errno = saved_errno;
	if (dst_tmp != -1) {
		close(dst_tmp);
	}
	if (src_tmp != -1) {
		close(src_tmp);
	}
	return ret;
}

static int fastcase_renameat(struct vfs_handle_struct *handle,
			     struct files_struct *srcdir_fsp,
			     const struct smb_filename *smb_fname_src,
			     struct files_struct *dstdir_fsp,
			     const struct smb_filename *smb_fname_dst
			     FASTCASE_RENAME_HOW_PARAM)
{
	struct fastcase_share *share = NULL;
	struct smb_filename *disk = NULL;
	int ret;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return -1);
	if (!is_single_name(smb_fname_src) || !is_single_name(smb_fname_dst) ||
	    share->below_maps_names || is_posix_name(smb_fname_dst)) {
		ret = FASTCASE_NEXT_RENAMEAT(handle, srcdir_fsp,
					     smb_fname_src, dstdir_fsp,
					     smb_fname_dst,
					     FASTCASE_RENAME_HOW);
		if (ret == 0 && smb_fname_src->stream_name == NULL) {
			fastcase_note_changed(share, srcdir_fsp,
					      smb_fname_src);
			fastcase_note_changed(share, dstdir_fsp,
					      smb_fname_dst);
		}
		return ret;
	}
	ret = fastcase_rename_checked(handle, share, srcdir_fsp,
				      smb_fname_src, dstdir_fsp,
				      smb_fname_dst, FASTCASE_RENAME_HOW);
	if (ret == -1 &&
	    (disk = fastcase_legacy_fname(handle, srcdir_fsp,
					  smb_fname_src)) != NULL) {
		ret = fastcase_rename_checked(handle, share, srcdir_fsp, disk,
					      dstdir_fsp, smb_fname_dst,
					      FASTCASE_RENAME_HOW);
		TALLOC_FREE(disk);
	}
	return ret;
}

static int fastcase_symlinkat(struct vfs_handle_struct *handle,
			      const struct smb_filename *link_contents,
			      struct files_struct *dirfsp,
			      const struct smb_filename *new_smb_fname)
{
	struct fastcase_share *share = NULL;
	int ret;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return -1);
	ret = SMB_VFS_NEXT_SYMLINKAT(handle, link_contents, dirfsp,
				     new_smb_fname);
	if (ret == 0) {
		fastcase_note_changed(share, dirfsp, new_smb_fname);
	}
	return ret;
}

static int fastcase_linkat(struct vfs_handle_struct *handle,
			   struct files_struct *srcfsp,
			   const struct smb_filename *old_smb_fname,
			   struct files_struct *dstfsp,
			   const struct smb_filename *new_smb_fname,
			   int flags)
{
	struct fastcase_share *share = NULL;
	int ret;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return -1);
	ret = SMB_VFS_NEXT_LINKAT(handle, srcfsp, old_smb_fname, dstfsp,
				  new_smb_fname, flags);
	if (ret == 0) {
		fastcase_note_changed(share, dstfsp, new_smb_fname);
	}
	return ret;
}

static int fastcase_mknodat(struct vfs_handle_struct *handle,
			    struct files_struct *dirfsp,
			    const struct smb_filename *smb_fname,
			    mode_t mode,
			    SMB_DEV_T dev)
{
	struct fastcase_share *share = NULL;
	int ret;

	SMB_VFS_HANDLE_GET_DATA(handle, share, struct fastcase_share,
				return -1);
	ret = SMB_VFS_NEXT_MKNODAT(handle, dirfsp, smb_fname, mode, dev);
	if (ret == 0) {
		fastcase_note_changed(share, dirfsp, smb_fname);
	}
	return ret;
}

static struct vfs_fn_pointers vfs_fastcase_fns = {
	.connect_fn = fastcase_connect,
	.get_real_filename_at_fn = fastcase_get_real_filename_at,
	.openat_fn = fastcase_openat,
	.mkdirat_fn = fastcase_mkdirat,
	.unlinkat_fn = fastcase_unlinkat,
	.renameat_fn = fastcase_renameat,
	.symlinkat_fn = fastcase_symlinkat,
	.linkat_fn = fastcase_linkat,
	.mknodat_fn = fastcase_mknodat,
	.readdir_fn = fastcase_readdir,
	.stat_fn = fastcase_stat,
	.lstat_fn = fastcase_lstat,
	.fstatat_fn = fastcase_fstatat,
	.chdir_fn = fastcase_chdir,
};

NTSTATUS samba_init_module(TALLOC_CTX *ctx);
_PUBLIC_ NTSTATUS samba_init_module(TALLOC_CTX *ctx)
{
	return smb_register_vfs(SMB_VFS_INTERFACE_VERSION, "fastcase",
				&vfs_fastcase_fns);
}
