/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: the one status enum every library call returns.
 *
 * The first values mirror the runtime's NRT_STATUS so that logs and
 * consumers read the same numbers the seed documents (NRT_RESOURCE == 4).
 */
#ifndef NPROXY_STATUS_H
#define NPROXY_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#ifndef NPROXY_API
#define NPROXY_API __attribute__((visibility("default")))
#endif

enum nproxy_status {
	NPROXY_SUCCESS		= 0,
	NPROXY_FAILURE		= 1,	/* generic; also "no such task" from check-status */
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
};

/* Static, never NULL: "NPROXY_TIMEOUT" etc., "NPROXY_UNKNOWN(n)" style for others. */
NPROXY_API const char *nproxy_status_str(enum nproxy_status st);

#ifdef __cplusplus
}
#endif
#endif
