// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The coll's error text: a leaf, so that the files that build an op and
 * register its buffers record why they failed without calling back into
 * the file that drives the op.
 */
#include <stdarg.h>
#include <stdio.h>
#include <nproxy/log.h>
#include "common/common_internal.h"
#include "coll_internal.h"

enum nproxy_status npx_coll_fail(struct nproxy_coll *coll, enum nproxy_status st,
				 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	npx_errbuf_vset_rank(coll->err, sizeof(coll->err), coll->me, fmt, ap);
	va_end(ap);
	return st;
}

const char *nproxy_coll_strerror(const struct nproxy_coll *coll)
{
	return coll ? coll->err : "";
}
