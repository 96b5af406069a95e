// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone error recording, the leaf every other bananaphone_*.c calls:
 * a bus keeps its last error text (nproxy_bp_strerror()); an open that
 * failed before there was a bus keeps it per thread.  An error either
 * leaves the bus usable (npx_bp_error) or breaks it for good (npx_bp_fail).
 */
#include <stdarg.h>
#include <stdio.h>
#include <nproxy/log.h>
#include "bananaphone_internal.h"

/* Text of this thread's last failed nproxy_bp_open(). */
static __thread char bp_setup_err[256];

static void bp_vset(struct nproxy_bp *bp, enum nproxy_status st, const char *fmt, va_list ap)
{
	char *dst = bp ? bp->err : bp_setup_err;
	size_t cap = bp ? sizeof(bp->err) : sizeof(bp_setup_err);
	int n = 0;

	if (bp)
		n = snprintf(dst, cap, "bananaphone job '%s' rank %u: ", bp->job_id, bp->rank);
	if (n < 0 || (size_t)n >= cap)
		n = 0;
	vsnprintf(dst + n, cap - (size_t)n, fmt, ap);
	nproxy_log(st == NPROXY_TIMEOUT ? NPROXY_LOG_INFO : NPROXY_LOG_WARN, "%s (%s)",
		   dst, nproxy_status_str(st));
}

/* Record an error that leaves the bus usable (bad argument, join timeout). */
enum nproxy_status npx_bp_error(struct nproxy_bp *bp, enum nproxy_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bp_vset(bp, st, fmt, ap);
	va_end(ap);
	return st;
}

/* Record a sticky error: the bus is unusable from now on (peer gone, a
 * collective interrupted half way); every later call returns it again. */
enum nproxy_status npx_bp_fail(struct nproxy_bp *bp, enum nproxy_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bp_vset(bp, st, fmt, ap);
	va_end(ap);
	if (bp) {
		bp->state = BP_S_BROKEN;
		bp->sticky = st;
	}
	return st;
}

/* An open is failing: keep its bus's text for nproxy_bp_strerror(NULL). */
void npx_bp_keep_setup_err(const struct nproxy_bp *bp)
{
	snprintf(bp_setup_err, sizeof(bp_setup_err), "%s", bp->err);
}

/* Set (or with "" clear) this thread's open-failure text. */
void npx_bp_set_setup_err(const char *text)
{
	snprintf(bp_setup_err, sizeof(bp_setup_err), "%s", text);
}

const char *npx_bp_setup_err(void)
{
	return bp_setup_err;
}
