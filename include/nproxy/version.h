/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy version: the macros say which headers a program was compiled
 * against, nproxy_version*() which library it runs with (they differ after
 * a library upgrade without a rebuild; the soname guards compatibility, these
 * say what is actually there).  The numbers follow the tree's VERSION file;
 * selftests/packaging/version_api checks that they agree.
 */
#ifndef NPROXY_VERSION_H
#define NPROXY_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The export mark of every public function of libnproxy, defined here once
 * (every public header includes this one, through status.h): the library is
 * built with -fvisibility=hidden, so only what carries it is exported.
 */
#ifndef NPROXY_API
#define NPROXY_API __attribute__((visibility("default")))
#endif

#define NPROXY_VERSION_MAJOR	0
#define NPROXY_VERSION_MINOR	3
#define NPROXY_VERSION_PATCH	0
#define NPROXY_VERSION_STRING	"0.3.0"

/* One comparable number: 0.1.0 is 100, 1.2.3 is 10203. */
#define NPROXY_VERSION_NUMBER(major, minor, patch) \
	((major) * 10000 + (minor) * 100 + (patch))
#define NPROXY_VERSION_CODE \
	NPROXY_VERSION_NUMBER(NPROXY_VERSION_MAJOR, NPROXY_VERSION_MINOR, NPROXY_VERSION_PATCH)
/* Compile-time test: #if NPROXY_VERSION_AT_LEAST(0, 2, 0) */
#define NPROXY_VERSION_AT_LEAST(major, minor, patch) \
	(NPROXY_VERSION_CODE >= NPROXY_VERSION_NUMBER(major, minor, patch))

/* The running library's version, "MAJOR.MINOR.PATCH"; a static string. */
NPROXY_API const char *nproxy_version(void);
/* The running library's NPROXY_VERSION_NUMBER(). */
NPROXY_API int nproxy_version_code(void);

#ifdef __cplusplus
}
#endif
#endif
