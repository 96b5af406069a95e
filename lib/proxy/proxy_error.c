// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A comm's error text (nproxy_comm_strerror()), by common's rule (errbuf.c):
 * "[nec_dev D gid G] rank R: why".  A leaf that every proxy file may call
 * without calling back into the registry or the queue.
 */
#include <stdarg.h>
#include <stdio.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

enum nproxy_status npx_comm_record(struct nproxy_comm *comm, enum nproxy_log_level level,
				   enum nproxy_status st, const char *fmt, ...)
{
	char who[64];
	va_list ap;

	if (comm)
		snprintf(who, sizeof(who), "[nec_dev %u gid %u] rank %u", comm->device_index,
			 comm->gid, comm->rank);
	va_start(ap, fmt);
	npx_err_vset(comm ? &comm->err : NULL, NPX_ERR_COMM, level, st, comm ? who : NULL, fmt, ap);
	va_end(ap);
	return st;
}

const char *nproxy_comm_strerror(const struct nproxy_comm *comm)
{
	return npx_err_text(comm ? &comm->err : NULL, NPX_ERR_COMM);
}
