// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Library logging: one formatted line per call, to stderr or a sink. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/log.h>
#include "common/common_internal.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static nproxy_log_sink_fn log_sink;
static void *log_sink_arg;
static int log_level = -1;	/* -1: not read from the environment yet */

static int level_from_env(void)
{
	const char *v;

	/* Not npx_env_choice(): its warning would come back here. */
	if (npx_env_str("NPROXY_LOG_LEVEL", NULL, &v) == NPX_ENV_UNSET)
		return NPROXY_LOG_WARN;
	if (!strcasecmp(v, "error"))
		return NPROXY_LOG_ERROR;
	if (!strcasecmp(v, "info"))
		return NPROXY_LOG_INFO;
	if (!strcasecmp(v, "debug"))
		return NPROXY_LOG_DEBUG;
	return NPROXY_LOG_WARN;
}

void nproxy_log_set_sink(nproxy_log_sink_fn sink, void *arg)
{
	pthread_mutex_lock(&log_lock);
	log_sink = sink;
	log_sink_arg = arg;
	pthread_mutex_unlock(&log_lock);
}

void nproxy_log_set_level(enum nproxy_log_level level)
{
	pthread_mutex_lock(&log_lock);
	log_level = level;
	pthread_mutex_unlock(&log_lock);
}

static const char *level_name(enum nproxy_log_level level)
{
	switch (level) {
	case NPROXY_LOG_ERROR: return "error";
	case NPROXY_LOG_WARN: return "warn";
	case NPROXY_LOG_INFO: return "info";
	case NPROXY_LOG_DEBUG: return "debug";
	}
	return "?";
}

/*
 * "nproxy[pid] 1234.567890 warn proxy-0: text": CLOCK_MONOTONIC seconds (the
 * clock the proxy's deadlines and nproxyctl watch's mono= use), the level,
 * and the thread's name (every library thread is named).
 */
static void log_to_stderr(enum nproxy_log_level level, const char *msg)
{
	uint64_t now_ns = npx_now_ns();
	char thread[16] = "";

	if (pthread_getname_np(pthread_self(), thread, sizeof(thread)) || !thread[0])
		snprintf(thread, sizeof(thread), "?");
	fprintf(stderr, "nproxy[%d] %lld.%06ld %s %s: %s\n", (int)getpid(),
		(long long)(now_ns / 1000000000ull),
		(long)(now_ns % 1000000000ull / 1000), level_name(level), thread, msg);
}

void nproxy_log(enum nproxy_log_level level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	pthread_mutex_lock(&log_lock);
	if (log_level < 0)
		log_level = level_from_env();
	/* A sink sees everything: tests filter for themselves. */
	if (!log_sink && (int)level > log_level) {
		pthread_mutex_unlock(&log_lock);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_sink)
		log_sink(level, msg, log_sink_arg);
	else
		log_to_stderr(level, msg);
	pthread_mutex_unlock(&log_lock);
}
