// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl shm-sweep: libfabric shm regions left in /dev/shm by dead
 * processes.  The one command that is not about the module: it calls the
 * library's sweep (nproxy_net_shm_sweep, linked statically from
 * libnproxy.a, no libfabric needed) so that the tool and the engine apply
 * the same rule -- a file goes only if its PID does not exist and no live
 * process has it open or mapped.
 */
#include <stdio.h>
#include <string.h>
#include <nproxy/net.h>
#include "cli.h"
#include "ctl.h"
#include "ctl_cmd.h"
#include "json_writer.h"

struct sweep_out {
	bool json;
	struct json_writer w;
	uint32_t kept, failed, listed;
};

static void report(const char *path, int pid, enum nproxy_shm_verdict v, int user, int err,
		   void *arg)
{
	struct sweep_out *o = arg;

	o->listed++;
	o->kept += v == NPROXY_SHM_IN_USE;
	o->failed += v == NPROXY_SHM_FAILED;
	if (o->json) {
		json_obj_begin(&o->w, NULL);
		json_str(&o->w, "path", path);
		json_i64(&o->w, "pid", pid);
		json_str(&o->w, "verdict", nproxy_shm_verdict_str(v));
		if (user)
			json_i64(&o->w, "used_by", user);
		if (err)
			json_str(&o->w, "error", strerror(err));
		json_obj_end(&o->w);
		return;
	}
	if (v == NPROXY_SHM_IN_USE)
		printf("kept %s: pid %d is gone, but %s%d uses it\n", path, pid,
		       user ? "pid " : "", user);
	else if (v == NPROXY_SHM_FAILED)
		printf("cannot remove %s (pid %d is gone): %s\n", path, pid, strerror(err));
	else
		printf("%s %s (pid %d is gone)\n", nproxy_shm_verdict_str(v), path, pid);
}

int cmd_shm_sweep(bool dry_run, int pid, const char *dir, bool json)
{
	struct sweep_out out = { .json = json };
	struct nproxy_shm_sweep_opts o = { .size = sizeof(o), .dir = dir, .pid = pid,
					   .dry_run = dry_run, .each = report, .arg = &out };
	enum nproxy_status st;
	uint32_t removed = 0;

	if (json) {
		json_init(&out.w, stdout, false);
		json_obj_begin(&out.w, NULL);
		json_str(&out.w, "dir", dir ? dir : "/dev/shm");
		json_bool(&out.w, "dry_run", dry_run);
		json_arr_begin(&out.w, "files");
	}
	st = nproxy_net_shm_sweep(&o, &removed);
	if (json) {
		json_arr_end(&out.w);
		json_u64(&out.w, "removed", removed);
		json_u64(&out.w, "kept", out.kept);
		json_u64(&out.w, "failed", out.failed);
		json_obj_end(&out.w);
		json_finish(&out.w);
	} else if (st == NPROXY_SUCCESS) {
		printf("%u %s, %u kept (in use), %u could not be removed\n",
		       dry_run ? out.listed - out.kept : removed,
		       dry_run ? "would be removed" : "removed", out.kept, out.failed);
	}
	if (st != NPROXY_SUCCESS) {
		ctl_err("shm-sweep: cannot sweep %s: %s", dir ? dir : "/dev/shm",
			nproxy_status_str(st));
		return st == NPROXY_PERM ? CTL_DENIED : CTL_FAIL;
	}
	return out.failed ? CTL_FAIL : CTL_OK;
}

int ctl_cmd_shm_sweep(const struct ctl_cmd *cmd, int argc, char **argv)
{
	enum { O_DRY_RUN = 256, O_PID, O_DIR };
	CTL_LONGOPTS(longopts,
		{ "dry-run", no_argument, NULL, O_DRY_RUN },
		{ "pid", required_argument, NULL, O_PID },
		{ "dir", required_argument, NULL, O_DIR });
	const char *dir = NULL;
	bool dry_run = false, done;
	char why[200];
	int c, pid = 0, code = CTL_OK;

	while ((c = ctl_next_option(cmd, argc, argv, longopts, &code)) > 0) {
		if (c == O_DRY_RUN)
			dry_run = true;
		else if (c == O_DIR)
			dir = optarg;
		else if (cli_parse_pid("--pid", optarg, &pid, why, sizeof(why)))
			return ctl_usage_err("%s", why);
	}
	code = ctl_no_operands(cmd, c, code, argc, &done);
	if (done)
		return code;
	return cmd_shm_sweep(dry_run, pid, dir, ctl_json);
}
