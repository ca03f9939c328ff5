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

#include "includes.h"
#include "smbd/smbd.h"
#include "system/filesys.h"
#include "lib/param/loadparm.h"
#include "fastcase_params.h"

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

static int fastcase_connect(struct vfs_handle_struct *handle,
			    const char *service, const char *user)
{
	struct fastcase_config *cfg = NULL;
	int ret;

	ret = SMB_VFS_NEXT_CONNECT(handle, service, user);
	if (ret < 0) {
		return ret;
	}

	cfg = talloc_zero(handle->conn, struct fastcase_config);
	if (cfg == NULL) {
		SMB_VFS_NEXT_DISCONNECT(handle);
		errno = ENOMEM;
		return -1;
	}
	if (!fastcase_load_config(handle, cfg)) {
		TALLOC_FREE(cfg);
		SMB_VFS_NEXT_DISCONNECT(handle);
		errno = EINVAL;
		return -1;
	}
	SMB_VFS_HANDLE_SET_DATA(handle, cfg, NULL,
				struct fastcase_config, return -1);
	return 0;
}

static struct vfs_fn_pointers vfs_fastcase_fns = {
	.connect_fn = fastcase_connect,
};

static_decl_vfs;
NTSTATUS vfs_fastcase_init(TALLOC_CTX *ctx);
_PUBLIC_ NTSTATUS samba_init_module(TALLOC_CTX *ctx)
{
	return smb_register_vfs(SMB_VFS_INTERFACE_VERSION, "fastcase",
				&vfs_fastcase_fns);
}
