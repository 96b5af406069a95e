// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl's error reports, a leaf every other ctl file calls (and linked
 * into nproxy-run with the snapshots it shares with hang-report): a message
 * on stderr, or with --json one object on stdout; an errno from the module
 * turned into a hint and an exit code (ctl.h); a usage error (ctl_cmd.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "ctl.h"
#include "ctl_cmd.h"
#include "json_writer.h"

const char *ctl_prog = "nproxyctl";
bool ctl_json;

static void __attribute__((format(printf, 2, 0)))
report_v(const char *status, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	ctl_report_error(status, msg);
}

void ctl_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_v("error", fmt, ap);
	va_end(ap);
}

/* --json: one object on stdout ({"status":"error","error":"..."}), for the
 * program that reads stdout; otherwise "nproxyctl: msg" on stderr. */
void ctl_report_error(const char *status, const char *msg)
{
	if (ctl_json) {
		struct json_writer w;

		json_init(&w, stdout, false);
		json_obj_begin(&w, NULL);
		json_str(&w, "status", status);
		json_str(&w, "error", msg);
		json_obj_end(&w);
		json_finish(&w);
		fflush(stdout);
		return;
	}
	fprintf(stderr, "%s: %s\n", ctl_prog, msg);
}

int ctl_errno_exit(int err, const char *what)
{
	switch (err) {
	case ENOENT:
	case ENODEV:
	case ENXIO:
		ctl_err("%s: %s not found: is nproxy.ko loaded? (modprobe nproxy)",
			what, CTL_DEV_PATH);
		return -CTL_NO_MODULE;
	case EACCES:
	case EPERM:
		ctl_err("%s: permission denied (need root, or access to %s / CAP_NET_ADMIN for admin commands)",
			what, CTL_DEV_PATH);
		return -CTL_DENIED;
	default:
		ctl_err("%s: %s", what, strerror(err));
		return -CTL_FAIL;
	}
}

int ctl_usage_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_v("usage-error", fmt, ap);
	va_end(ap);
	if (!ctl_json)
		fprintf(stderr, "Try 'nproxyctl help' or 'nproxyctl COMMAND --help'.\n");
	return CTL_USAGE;
}
