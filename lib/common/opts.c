// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The one check of a size-carrying option struct (Documentation/development.md,
 * "API conventions"): the caller puts sizeof() of the struct it compiled
 * against in the first field, so a program built against older headers
 * (shorter struct) and one built against newer ones (longer struct) both
 * work with this library as long as what it does not know is zero.
 */
#include <stdint.h>
#include <string.h>
#include <nproxy/log.h>
#include "common/common_internal.h"

enum nproxy_status npx_opts_check(const void *opts, size_t min_size, size_t known_size,
				  const char *what)
{
	const unsigned char *bytes = opts;
	uint32_t size;
	size_t i;

	if (!opts) {
		nproxy_log(NPROXY_LOG_ERROR, "%s: options are NULL", what);
		return NPROXY_INVALID;
	}
	memcpy(&size, opts, sizeof(size));
	if (size == 0) {
		nproxy_log(NPROXY_LOG_ERROR,
			   "%s: options size is 0 (set .size = sizeof(the struct), or use its _OPTS_INIT)",
			   what);
		return NPROXY_INVALID;
	}
	if (size < min_size) {
		nproxy_log(NPROXY_LOG_ERROR, "%s: options size %u is smaller than the oldest layout (%zu)",
			   what, size, min_size);
		return NPROXY_INVALID;
	}
	/* A newer caller's fields this library does not know: only zero is safe. */
	for (i = known_size; i < size; i++) {
		if (bytes[i]) {
			nproxy_log(NPROXY_LOG_ERROR,
				   "%s: options size %u, byte %zu past the %zu this library knows is not 0",
				   what, size, i, known_size);
			return NPROXY_INVALID;
		}
	}
	return NPROXY_SUCCESS;
}
