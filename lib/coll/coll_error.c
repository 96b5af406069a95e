// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The coll's error text: a leaf, so that the files that build an op and
 * register its buffers record why they failed without calling back into
 * the file that drives the op.
 */
#include <stdarg.h>
#include <stdio.h>
#include <nproxy/log.h>
#include "coll_internal.h"

enum nproxy_status npx_coll_fail(struct nproxy_coll *coll, enum nproxy_status st,
				 const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(coll->err, sizeof(coll->err), "rank %u: ", coll->me);
	va_start(ap, fmt);
	vsnprintf(coll->err + n, sizeof(coll->err) - (size_t)n, fmt, ap);
	va_end(ap);
	nproxy_log(NPROXY_LOG_ERROR, "%s", coll->err);
	return st;
}

const char *nproxy_coll_strerror(const struct nproxy_coll *coll)
{
	return coll ? coll->err : "";
}
