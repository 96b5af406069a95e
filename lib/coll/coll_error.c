// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The coll's error text, by common's rule (errbuf.c): "rank R: why".  A
 * leaf, so that the files that build an op and register its buffers record
 * why they failed without calling back into the file that drives the op.
 */
#include <stdarg.h>
#include <stdio.h>
#include <nproxy/log.h>
#include "common/common_internal.h"
#include "coll_internal.h"

enum nproxy_status npx_coll_fail(struct nproxy_coll *coll, enum nproxy_status st,
				 const char *fmt, ...)
{
	char who[24];
	va_list ap;

	if (coll)
		snprintf(who, sizeof(who), "rank %u", coll->me);
	va_start(ap, fmt);
	npx_err_vset(coll ? &coll->err : NULL, NPX_ERR_COLL, NPROXY_LOG_ERROR, NPROXY_SUCCESS,
		     coll ? who : NULL, fmt, ap);
	va_end(ap);
	return st;
}

const char *nproxy_coll_strerror(const struct nproxy_coll *coll)
{
	return npx_err_text(coll ? &coll->err : NULL, NPX_ERR_COLL);
}
