// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone error recording, the leaf every other bananaphone_*.c calls.
 * The text follows common's rule (errbuf.c): a bus keeps it ("bananaphone
 * job 'J' rank R: why", nproxy_bp_strerror()); an open that failed before
 * there was a bus keeps it per thread (nproxy_bp_strerror(NULL)).  An error
 * either leaves the bus usable (npx_bp_error) or breaks it for good
 * (npx_bp_fail).
 */
#include <stdarg.h>
#include <stdio.h>
#include <nproxy/log.h>
#include "bananaphone_internal.h"

static void bp_vset(struct nproxy_bp *bp, enum nproxy_status st, const char *fmt, va_list ap)
{
	char who[sizeof(bp->job_id) + 48];

	if (bp)
		snprintf(who, sizeof(who), "bananaphone job '%s' rank %u", bp->job_id, bp->rank);
	npx_err_vset(bp ? &bp->err : NULL, NPX_ERR_BP,
		     st == NPROXY_TIMEOUT ? NPROXY_LOG_INFO : NPROXY_LOG_WARN, st,
		     bp ? who : NULL, fmt, ap);
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

/* The bus is unusable from now on: every later call returns st again. */
enum nproxy_status npx_bp_break(struct nproxy_bp *bp, enum nproxy_status st)
{
	if (bp) {
		bp->state = BP_S_BROKEN;
		bp->sticky = st;
	}
	return st;
}

/* Record a sticky error (peer gone, a collective interrupted half way). */
enum nproxy_status npx_bp_fail(struct nproxy_bp *bp, enum nproxy_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bp_vset(bp, st, fmt, ap);
	va_end(ap);
	return npx_bp_break(bp, st);
}

/* An open is failing: keep its bus's text for nproxy_bp_strerror(NULL). */
void npx_bp_keep_setup_err(const struct nproxy_bp *bp)
{
	npx_err_keep_open(NPX_ERR_BP, &bp->err);
}

const char *nproxy_bp_strerror(const struct nproxy_bp *bp)
{
	return npx_err_text(bp ? &bp->err : NULL, NPX_ERR_BP);
}
