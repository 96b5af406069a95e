// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The library's own version, answered at run time (see nproxy/version.h):
 * a program built against one release can tell which one it loaded.
 */
#include <nproxy/version.h>

const char *nproxy_version(void)
{
	return NPROXY_VERSION_STRING;
}

int nproxy_version_code(void)
{
	return NPROXY_VERSION_CODE;
}
