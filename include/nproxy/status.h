/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: the one status enum every library call returns.
 *
 * The first values mirror the reference runtime's NRT_STATUS so that logs
 * and consumers read the same numbers libnrt uses (NRT_RESOURCE == 4).
 * New codes are added at the end; no value ever changes.
 */
#ifndef NPROXY_STATUS_H
#define NPROXY_STATUS_H

/* NPROXY_API, the export mark, is defined once, in version.h. */
#include <nproxy/version.h>

#ifdef __cplusplus
extern "C" {
#endif

enum nproxy_status {
	NPROXY_SUCCESS		= 0,
	NPROXY_FAILURE		= 1,	/* generic */
	NPROXY_INVALID		= 2,	/* bad argument */
	NPROXY_INVALID_HANDLE	= 3,
	NPROXY_RESOURCE		= 4,	/* out of memory, threads, fds */
	NPROXY_TIMEOUT		= 5,
	NPROXY_HW_ERROR		= 6,	/* the (emulated) device reported an error */
	NPROXY_UNSUPPORTED	= 7,	/* backend/provider not available here */
	NPROXY_NET_ERROR	= 8,	/* libfabric reported an error */
	NPROXY_PEER_DEAD	= 9,	/* a peer process exited or was killed */
	NPROXY_PEER_LEFT	= 10,	/* a peer left in an orderly way (hangup) */
	NPROXY_PERM		= 11,	/* permission denied */
	NPROXY_BUSY		= 12,
	NPROXY_CANCELLED	= 13,
	NPROXY_NOT_FOUND	= 14,	/* no such task, group or ctx */
};

/*
 * The code's name, never NULL: "NPROXY_TIMEOUT" etc. (a static string), and
 * "NPROXY_UNKNOWN(n)" for a value this library does not know, in a
 * thread-local buffer valid until this thread's next such call.  Only names
 * the code: an object's detailed text is nproxy_<object>_strerror().
 */
NPROXY_API const char *nproxy_status_str(enum nproxy_status st);

/*
 * The error-text rule, one for every nproxy_<x>_strerror(obj) (bp, net,
 * rdzv, hs, comm, rank, coll): the text names the object ("net rank 3:
 * ...") and says why, and was logged when it was set.  A thread reads back
 * its own last failure on obj; a thread with none reads obj's last failure
 * from any thread, and a failure one of the library's own threads (a proxy
 * worker, the device emulator) finds later replaces it.  "" when none.  The
 * string is the calling thread's copy, never NULL, unchanged by other
 * threads or other objects, valid until this thread reads or records the
 * text of eight other objects.  nproxy_<x>_strerror(NULL) is this thread's
 * last failed nproxy_<x>_open() (nproxy_coll_open() for coll).
 */

#ifdef __cplusplus
}
#endif
#endif
