/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy logging.  Messages go to stderr as
 * "nproxy[<pid>] <CLOCK_MONOTONIC s.us> <level> <thread name>: <text>",
 * filtered by NPROXY_LOG_LEVEL (error|warn|info|debug, default warn).
 * A sink can replace stderr: tests use it to check that the library says
 * exactly the reference runtime's (libnrt's) words ("Failed to create
 * worker thread: %d", ...).
 */
#ifndef NPROXY_LOG_H
#define NPROXY_LOG_H

#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

enum nproxy_log_level {
	NPROXY_LOG_ERROR = 0,
	NPROXY_LOG_WARN	 = 1,
	NPROXY_LOG_INFO	 = 2,
	NPROXY_LOG_DEBUG = 3,
};

typedef void (*nproxy_log_sink_fn)(enum nproxy_log_level level, const char *msg, void *arg);

/* NULL restores stderr.  The sink is called from any library thread. */
NPROXY_API void nproxy_log_set_sink(nproxy_log_sink_fn sink, void *arg);
NPROXY_API void nproxy_log_set_level(enum nproxy_log_level level);
NPROXY_API void nproxy_log(enum nproxy_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
