// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* The status enum's names, for logs and tools. */
#include <stdio.h>
#include <nproxy/status.h>

const char *nproxy_status_str(enum nproxy_status st)
{
	static const char *const names[] = {
		[NPROXY_SUCCESS] = "NPROXY_SUCCESS",
		[NPROXY_FAILURE] = "NPROXY_FAILURE",
		[NPROXY_INVALID] = "NPROXY_INVALID",
		[NPROXY_INVALID_HANDLE] = "NPROXY_INVALID_HANDLE",
		[NPROXY_RESOURCE] = "NPROXY_RESOURCE",
		[NPROXY_TIMEOUT] = "NPROXY_TIMEOUT",
		[NPROXY_HW_ERROR] = "NPROXY_HW_ERROR",
		[NPROXY_UNSUPPORTED] = "NPROXY_UNSUPPORTED",
		[NPROXY_NET_ERROR] = "NPROXY_NET_ERROR",
		[NPROXY_PEER_DEAD] = "NPROXY_PEER_DEAD",
		[NPROXY_PEER_LEFT] = "NPROXY_PEER_LEFT",
		[NPROXY_PERM] = "NPROXY_PERM",
		[NPROXY_BUSY] = "NPROXY_BUSY",
		[NPROXY_CANCELLED] = "NPROXY_CANCELLED",
		[NPROXY_NOT_FOUND] = "NPROXY_NOT_FOUND",
	};
	/* Per thread: two threads naming unknown codes get their own text. */
	static __thread char unknown[32];

	if ((unsigned int)st < sizeof(names) / sizeof(names[0]) && names[st])
		return names[st];
	snprintf(unknown, sizeof(unknown), "NPROXY_UNKNOWN(%d)", (int)st);
	return unknown;
}
