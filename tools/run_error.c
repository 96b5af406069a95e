// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: the first error of this process, in its shared record (the
 * supervisor prints it), and library statuses as exit codes.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include "run_rank.h"

static struct run_proc_record *error_rec;
/* A failure that leaves peers unsure of our state (not a data mismatch). */
static bool failed_fatally;
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

void run_error_init(struct run_proc_record *rec)
{
	error_rec = rec;
}

int run_fail(int code, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&error_lock);
	if (code != RUN_EXIT_VERIFY)
		failed_fatally = true;
	if (!error_rec->error[0]) {
		va_start(ap, fmt);
		vsnprintf(error_rec->error, sizeof(error_rec->error), fmt, ap);
		va_end(ap);
		error_rec->exit_code = code;
	}
	pthread_mutex_unlock(&error_lock);
	return code;
}

bool run_failed_fatally(void)
{
	bool fatal;

	pthread_mutex_lock(&error_lock);
	fatal = failed_fatally;
	pthread_mutex_unlock(&error_lock);
	return fatal;
}

int run_status_exit(enum nproxy_status st)
{
	switch (st) {
	case NPROXY_SUCCESS: return RUN_EXIT_OK;
	case NPROXY_TIMEOUT: return RUN_EXIT_TIMEOUT;
	case NPROXY_PEER_DEAD:
	case NPROXY_PEER_LEFT: return RUN_EXIT_DEAD;
	case NPROXY_INVALID: return RUN_EXIT_USAGE;
	default: return RUN_EXIT_FAILURE;
	}
}

int run_status_exit_nonusage(enum nproxy_status st)
{
	int code = run_status_exit(st);

	return code == RUN_EXIT_USAGE ? RUN_EXIT_FAILURE : code;
}
