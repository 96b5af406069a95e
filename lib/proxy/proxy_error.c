// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A comm's error text (nproxy_comm_strerror()): a leaf that every proxy
 * file may call without calling back into the registry or the queue.
 */
#include <stdarg.h>
#include <stdio.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

/*
 * Error text per thread, not per comm: producers and consumers of one comm
 * run on different threads, and a shared buffer would hand one thread the
 * text of another's failure (or a torn one).
 */
static __thread char comm_err_text[256];
static __thread const struct nproxy_comm *comm_err_of;

static void comm_err_vset(const struct nproxy_comm *comm, const char *fmt, va_list ap)
{
	int n = 0;

	if (comm)
		n = snprintf(comm_err_text, sizeof(comm_err_text), "[nec_dev %u gid %u] rank %u: ",
			     comm->device_index, comm->gid, comm->rank);
	if (n < 0 || (size_t)n >= sizeof(comm_err_text))
		n = 0;
	vsnprintf(comm_err_text + n, sizeof(comm_err_text) - (size_t)n, fmt, ap);
	comm_err_of = comm;
}

enum nproxy_status npx_comm_err(const struct nproxy_comm *comm, enum nproxy_status st,
				const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	comm_err_vset(comm, fmt, ap);
	va_end(ap);
	nproxy_log(NPROXY_LOG_ERROR, "%s (%s)", comm_err_text, nproxy_status_str(st));
	return st;
}

enum nproxy_status npx_comm_note(const struct nproxy_comm *comm, enum nproxy_status st,
				 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	comm_err_vset(comm, fmt, ap);
	va_end(ap);
	return st;
}

/* A new nproxy_comm_open() starts with no text of an earlier failure. */
void npx_comm_err_clear(void)
{
	comm_err_text[0] = '\0';
	comm_err_of = NULL;
}

const char *nproxy_comm_strerror(const struct nproxy_comm *comm)
{
	return comm_err_of == comm ? comm_err_text : "";
}
