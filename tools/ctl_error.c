// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl's error reporting, also linked into nproxy-run with the proxy
 * snapshots it shares with hang-report (ctl_proxy.c, ctl_hang.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include "ctl.h"
#include "json_writer.h"

const char *ctl_prog = "nproxyctl";
bool ctl_json;

void ctl_err(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctl_report_error("error", msg);
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
