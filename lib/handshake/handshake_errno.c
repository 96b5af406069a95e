// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * What an errno from open/ioctl/mmap of a handshake backend means as a
 * library status (no such device: unsupported here, so the caller can fall
 * back).  A leaf both backends and handshake.c use.
 */
#include <errno.h>
#include "handshake_internal.h"

enum nproxy_status npx_hs_status_from_errno(int err)
{
	switch (err) {
	case ENOENT:
	case ENODEV:
	case ENXIO:
	case ENOSYS:
	case EOPNOTSUPP:
	case ENOTTY:
		return NPROXY_UNSUPPORTED;
	case EACCES:
	case EPERM:
		return NPROXY_PERM;
	case ENOMEM:
	case EMFILE:
	case ENFILE:
	case EAGAIN:
	case ENOSPC:
		return NPROXY_RESOURCE;
	case EINVAL:
		return NPROXY_INVALID;
	case EBUSY:
		return NPROXY_BUSY;
	default:
		return NPROXY_FAILURE;
	}
}
