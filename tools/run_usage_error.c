// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: a refused command line or environment.  With --json anywhere
 * on the line the program reading stdout gets one object there too, as
 * nproxyctl --json does: {"tool":"nproxy-run","status":"usage-error",
 * "exit_code":2,"error":"..."}; the text stays on stderr either way.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "json_writer.h"
#include "run.h"

static bool json_errors;
static const char *prog = "nproxy-run";

/* The name the hint tells to run with --help: as invoked in nccl-tests
 * mode (nproxy_all_reduce_perf --help prints that mode's options). */
void run_usage_error_prog(const char *name)
{
	prog = name;
}

/* "--json", "-j" or a bundle of flags holding j ("-qj"), before any "--". */
void run_usage_error_scan(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--"))
			return;
		if (!strcmp(a, "--json") ||
		    (a[0] == '-' && a[1] != '-' && strchr(a, 'j') && strspn(a + 1, "jqhV") == strlen(a + 1)))
			json_errors = true;
	}
}

int run_usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "nproxy-run: %s\nTry '%s --help'.\n", msg, prog);
	if (json_errors) {
		struct json_writer w;

		json_init(&w, stdout, false);
		json_obj_begin(&w, NULL);
		json_str(&w, "tool", "nproxy-run");
		json_str(&w, "status", "usage-error");
		json_u64(&w, "exit_code", RUN_EXIT_USAGE);
		json_str(&w, "error", msg);
		json_obj_end(&w);
		json_finish(&w);
		fflush(stdout);
	}
	return RUN_EXIT_USAGE;
}
