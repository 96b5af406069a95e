// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Handshake regions: argument checks, backend choice and device-program
 * validation shared by both backends (handshake_kmod.c, handshake_memfd.c).
 *
 * Validation lives here, not only in the module, so that both backends
 * reject exactly the same programs and the error names the bad step.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <nproxy/log.h>
#include <nproxy/seam.h>
#include "handshake_internal.h"
#include "common/common_internal.h"


#define HS_ENV		"NPROXY_HANDSHAKE"
#define HS_DEV_PATH	"/dev/" NPROXY_DEVICE_NAME
#define HS_WHY_LEN	256

enum nproxy_status nproxy_hs_backend_parse(const char *name, enum nproxy_hs_backend *out)
{
	if (!name || !out)
		return NPROXY_INVALID;
	if (!strcmp(name, "auto"))
		*out = NPROXY_HS_AUTO;
	else if (!strcmp(name, "kmod"))
		*out = NPROXY_HS_KMOD;
	else if (!strcmp(name, "memfd"))
		*out = NPROXY_HS_MEMFD;
	else
		return NPROXY_INVALID;
	return NPROXY_SUCCESS;
}

const char *nproxy_hs_backend_name(enum nproxy_hs_backend b)
{
	switch (b) {
	case NPROXY_HS_AUTO:
		return "auto";
	case NPROXY_HS_KMOD:
		return "kmod";
	case NPROXY_HS_MEMFD:
		return "memfd";
	}
	return "unknown";
}

/*
 * Log a failed call on hs and keep its text for nproxy_hs_strerror() (common's
 * rule, errbuf.c); the prefix names the region and rank, as every handshake
 * message does.
 */
static void hs_err(struct nproxy_hs *hs, enum nproxy_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void hs_err(struct nproxy_hs *hs, enum nproxy_log_level level, const char *fmt, ...)
{
	char who[64];
	va_list ap;

	snprintf(who, sizeof(who), "handshake region %u (rank %u)", hs->info->region_id, hs->rank);
	va_start(ap, fmt);
	npx_err_vset(&hs->err, NPX_ERR_HS, level, NPROXY_SUCCESS, who, fmt, ap);
	va_end(ap);
}

/* A failed open: logged, and kept for this thread's nproxy_hs_strerror(NULL). */
static enum nproxy_status hs_open_fail(enum nproxy_status st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static enum nproxy_status hs_open_fail(enum nproxy_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	npx_err_vset(NULL, NPX_ERR_HS, NPROXY_LOG_ERROR, NPROXY_SUCCESS, NULL, fmt, ap);
	va_end(ap);
	return st;
}

const char *nproxy_hs_strerror(const struct nproxy_hs *hs)
{
	return npx_err_text(hs ? &hs->err : NULL, NPX_ERR_HS);
}

static enum nproxy_status check_opts(const struct nproxy_hs_opts *opts)
{
	if (NPX_OPTS_CHECK(opts, "handshake: open"))
		return npx_err_set(NULL, NPX_ERR_HS, NPX_LOG_NONE, NPROXY_INVALID, NULL,
				   "handshake: open: options NULL or of a wrong size (see the log)");
	if ((unsigned int)opts->backend > NPROXY_HS_MEMFD)
		return hs_open_fail(NPROXY_INVALID, "handshake: open: unknown backend %d",
				    (int)opts->backend);
	if (opts->n_streams < 1 || opts->n_streams > NPROXY_MAX_STREAMS)
		return hs_open_fail(NPROXY_INVALID, "handshake: open (rank %u): n_streams %u not in 1..%u",
				    opts->rank, opts->n_streams, NPROXY_MAX_STREAMS);
	if (opts->n_sems > NPROXY_MAX_SEMS)
		return hs_open_fail(NPROXY_INVALID, "handshake: open (rank %u): n_sems %u not in 0..%u",
				    opts->rank, opts->n_sems, NPROXY_MAX_SEMS);
	return NPROXY_SUCCESS;
}

/* Which backend was asked for, and by whom (for messages). */
static enum nproxy_status requested_backend(const struct nproxy_hs_opts *opts,
					    enum nproxy_hs_backend *b, const char **source)
{
	const char *env;

	*b = opts->backend;
	*source = NULL;		/* the caller's options */
	if (*b != NPROXY_HS_AUTO)
		return NPROXY_SUCCESS;
	if (npx_env_str(HS_ENV, NULL, &env) == NPX_ENV_UNSET)
		return NPROXY_SUCCESS;
	*source = HS_ENV;
	if (nproxy_hs_backend_parse(env, b) != NPROXY_SUCCESS)
		return hs_open_fail(NPROXY_INVALID, "handshake: %s=%s: expected kmod, memfd or auto",
				    HS_ENV, env);
	return NPROXY_SUCCESS;
}

enum nproxy_status nproxy_hs_open(const struct nproxy_hs_opts *opts, struct nproxy_hs **out)
{
	enum nproxy_hs_backend want;
	char why[HS_WHY_LEN] = "";
	enum nproxy_status st;
	const char *source;
	struct nproxy_hs *hs;
	long page_size;

	npx_err_clear_open(NPX_ERR_HS);
	if (!out)
		return hs_open_fail(NPROXY_INVALID, "handshake: open: out is NULL");
	*out = NULL;
	st = check_opts(opts);
	if (st != NPROXY_SUCCESS)
		return st;
	st = requested_backend(opts, &want, &source);
	if (st != NPROXY_SUCCESS)
		return st;

	page_size = sysconf(_SC_PAGESIZE);
	hs = calloc(1, sizeof(*hs));
	if (!hs || page_size <= 0) {
		free(hs);
		return hs_open_fail(NPROXY_RESOURCE, "handshake: open (rank %u): out of memory",
				    opts->rank);
	}
	hs->n_streams = opts->n_streams;
	hs->n_sems = opts->n_sems;
	hs->rank = opts->rank;
	hs->gid = opts->gid;
	hs->page_size = (size_t)page_size;
	hs->fd = -1;

	switch (want) {
	case NPROXY_HS_KMOD:
		st = npx_hs_kmod_open(hs, why, sizeof(why));
		break;
	case NPROXY_HS_MEMFD:
		st = npx_hs_memfd_open(hs, why, sizeof(why));
		break;
	case NPROXY_HS_AUTO:
		if (access(HS_DEV_PATH, F_OK) == 0) {
			st = npx_hs_kmod_open(hs, why, sizeof(why));
			if (st == NPROXY_SUCCESS)
				break;
			nproxy_log(NPROXY_LOG_WARN,
				   "handshake (rank %u): %s; using the memfd backend (set %s=kmod to insist)",
				   hs->rank, why, HS_ENV);
		}
		st = npx_hs_memfd_open(hs, why, sizeof(why));
		source = "automatic choice";
		break;
	}
	if (st != NPROXY_SUCCESS) {
		uint32_t rank = hs->rank;

		free(hs);
		if (want == NPROXY_HS_AUTO)
			return hs_open_fail(st, "handshake (rank %u): %s: %s", rank, source, why);
		if (source)
			return hs_open_fail(st, "handshake (rank %u): %s=%s: %s", rank, source,
					    nproxy_hs_backend_name(want), why);
		return hs_open_fail(st, "handshake (rank %u): the %s backend (asked for by the caller): %s",
				    rank, nproxy_hs_backend_name(want), why);
	}
	nproxy_log(NPROXY_LOG_DEBUG, "handshake region %u (rank %u gid %u): %s backend, %u streams, %u sems",
		   hs->info->region_id, hs->rank, hs->gid, nproxy_hs_backend_name(hs->backend),
		   hs->n_streams, hs->n_sems);
	*out = hs;
	return NPROXY_SUCCESS;
}

void nproxy_hs_close(struct nproxy_hs *hs)
{
	if (!hs)
		return;
	hs->ops->close(hs);
	free(hs);
}

enum nproxy_hs_backend nproxy_hs_backend_of(const struct nproxy_hs *hs)
{
	return hs ? hs->backend : NPROXY_HS_AUTO;
}

uint32_t nproxy_hs_n_streams(const struct nproxy_hs *hs)
{
	return hs ? hs->n_streams : 0;
}

uint32_t nproxy_hs_n_sems(const struct nproxy_hs *hs)
{
	return hs ? hs->n_sems : 0;
}

volatile uint32_t *nproxy_hs_trigger(struct nproxy_hs *hs, uint32_t stream)
{
	return hs && stream < hs->n_streams ? &hs->triggers[stream] : NULL;
}

volatile uint64_t *nproxy_hs_sem(struct nproxy_hs *hs, uint32_t sem)
{
	return hs && sem < hs->n_sems ? &hs->sems[sem] : NULL;
}

const volatile struct nproxy_region_info *nproxy_hs_info(const struct nproxy_hs *hs)
{
	return hs ? hs->info : NULL;
}

struct nproxy_proxy_state *nproxy_hs_proxy_state(struct nproxy_hs *hs)
{
	return hs ? hs->proxy_state : NULL;
}

struct nproxy_sem_bell *nproxy_hs_sem_bell(struct nproxy_hs *hs)
{
	return hs && hs->bell.sleepers ? &hs->bell : NULL;
}

void nproxy_sem_bell_ring(struct nproxy_sem_bell *bell)
{
	struct nproxy_hs *hs = bell ? bell->device : NULL;

	if (hs && hs->ops->ring)
		hs->ops->ring(hs);
}

enum nproxy_status nproxy_hs_set_trigger_notify(struct nproxy_hs *hs, void (*fn)(void *),
						void *arg)
{
	if (!hs)
		return NPROXY_INVALID_HANDLE;
	if (!hs->ops->set_trigger_notify)
		return NPROXY_UNSUPPORTED;
	return hs->ops->set_trigger_notify(hs, fn, arg);
}

int nproxy_hs_fd(const struct nproxy_hs *hs)
{
	return hs ? hs->fd : -1;
}

static const char *step_op_name(uint16_t op)
{
	switch (op) {
	case NPROXY_STEP_WRITE_TRIGGER:
		return "WRITE_TRIGGER";
	case NPROXY_STEP_WAIT_SEM:
		return "WAIT_SEM";
	case NPROXY_STEP_DELAY:
		return "DELAY";
	case NPROXY_STEP_INC_SEM:
		return "INC_SEM";
	case NPROXY_STEP_SIGNAL_EVENT:
		return "SIGNAL_EVENT";
	}
	return "unknown";
}

/* NULL when the step is valid for this region, else what is wrong with it. */
static const char *step_problem(const struct nproxy_hs *hs, const struct nproxy_prog_step *s)
{
	if (s->flags)
		return "flags must be 0";
	switch (s->op) {
	case NPROXY_STEP_WRITE_TRIGGER:
		if (s->index >= hs->n_streams)
			return "index >= n_streams";
		if (s->value > UINT32_MAX)
			return "value does not fit a 32-bit trigger word";
		if (s->timeout_ns)
			return "timeout_ns unused: must be 0";
		return NULL;
	case NPROXY_STEP_WAIT_SEM:
		if (s->index >= hs->n_sems)
			return "index >= n_sems";
		if (s->timeout_ns > NPROXY_MAX_WAIT_NS)
			return "timeout_ns > NPROXY_MAX_WAIT_NS";
		return NULL;
	case NPROXY_STEP_DELAY:
		if (s->index || s->value)
			return "index and value unused: must be 0";
		if (s->timeout_ns > NPROXY_MAX_WAIT_NS)
			return "timeout_ns > NPROXY_MAX_WAIT_NS";
		return NULL;
	case NPROXY_STEP_INC_SEM:
		if (s->index >= hs->n_sems)
			return "index >= n_sems";
		if (s->timeout_ns)
			return "timeout_ns unused: must be 0";
		return NULL;
	case NPROXY_STEP_SIGNAL_EVENT:
		if (s->index || s->timeout_ns)
			return "index and timeout_ns unused: must be 0";
		return NULL;
	}
	return "unknown op";
}

static enum nproxy_status validate_program(struct nproxy_hs *hs,
					   const struct nproxy_prog_step *steps, uint32_t n_steps)
{
	uint32_t i;

	if (!steps || n_steps < 1 || n_steps > NPROXY_MAX_PROG_STEPS) {
		hs_err(hs, NPROXY_LOG_ERROR,
			   "submit: %u steps at %p: need 1..%u steps", n_steps, (const void *)steps,
			   NPROXY_MAX_PROG_STEPS);
		return NPROXY_INVALID;
	}
	for (i = 0; i < n_steps; i++) {
		const char *problem = step_problem(hs, &steps[i]);

		if (problem) {
			hs_err(hs, NPROXY_LOG_ERROR,
				   "submit: step %u (op %u %s, index %u): %s", i, steps[i].op,
				   step_op_name(steps[i].op), steps[i].index, problem);
			return NPROXY_INVALID;
		}
	}
	return NPROXY_SUCCESS;
}

/* Keep a copy of the program about to be submitted in the region's proxy
 * state page: the hang evidence nproxyctl hang-report shows. */
static void record_prog(struct nproxy_proxy_state *ps, const struct nproxy_prog_step *steps,
			uint32_t n_steps)
{
	uint32_t kept = n_steps < NPROXY_PROXY_STATE_PROG_STEPS ? n_steps
								 : NPROXY_PROXY_STATE_PROG_STEPS;
	uint32_t i, s;

	if (!ps)
		return;
	s = npx_seq_write_begin(&ps->prog_seqlock);
	for (i = 0; i < kept; i++) {
		NPX_SEQ_STORE(ps->prog[i].op, steps[i].op);
		NPX_SEQ_STORE(ps->prog[i].flags, steps[i].flags);
		NPX_SEQ_STORE(ps->prog[i].index, steps[i].index);
		NPX_SEQ_STORE(ps->prog[i].value, steps[i].value);
		NPX_SEQ_STORE(ps->prog[i].timeout_ns, steps[i].timeout_ns);
	}
	NPX_SEQ_STORE(ps->prog_n_steps, n_steps);
	NPX_SEQ_STORE(ps->prog_seq, ps->prog_seq + 1);
	npx_seq_write_end(&ps->prog_seqlock, s);
}

enum nproxy_status nproxy_hs_submit(struct nproxy_hs *hs, const struct nproxy_prog_step *steps,
				    uint32_t n_steps, uint64_t *seq)
{
	enum nproxy_status st;

	if (!hs) {
		nproxy_log(NPROXY_LOG_ERROR, "handshake: submit: region is NULL");
		return NPROXY_INVALID_HANDLE;
	}
	st = validate_program(hs, steps, n_steps);
	if (st != NPROXY_SUCCESS)
		return st;
	record_prog(hs->proxy_state, steps, n_steps);
	st = hs->ops->submit(hs, steps, n_steps, seq);
	if (st == NPROXY_BUSY)
		hs_err(hs, NPROXY_LOG_DEBUG,
			   "submit: a program is running or not collected");
	return st;
}

enum nproxy_status nproxy_hs_cancel(struct nproxy_hs *hs)
{
	enum nproxy_status st;

	if (!hs) {
		nproxy_log(NPROXY_LOG_ERROR, "handshake: cancel: region is NULL");
		return NPROXY_INVALID_HANDLE;
	}
	st = hs->ops->cancel(hs);
	if (st == NPROXY_INVALID)
		hs_err(hs, NPROXY_LOG_DEBUG, "cancel: no program running");
	return st;
}

static enum nproxy_status status_of_prog_state(uint32_t state)
{
	switch (state) {
	case NPROXY_PROG_DONE:
		return NPROXY_SUCCESS;
	case NPROXY_PROG_CANCELLED:
		return NPROXY_CANCELLED;
	default:	/* TIMEDOUT, ERROR */
		return NPROXY_HW_ERROR;
	}
}

enum nproxy_status nproxy_hs_wait(struct nproxy_hs *hs, uint32_t timeout_ms,
				  struct nproxy_prog_result *result)
{
	struct nproxy_prog_result res;
	enum nproxy_status st;

	if (!hs) {
		nproxy_log(NPROXY_LOG_ERROR, "handshake: wait: region is NULL");
		return NPROXY_INVALID_HANDLE;
	}
	/* The backends count in int milliseconds; longer is no deadline anyone means. */
	if (timeout_ms > INT_MAX)
		timeout_ms = INT_MAX;
	memset(&res, 0, sizeof(res));
	st = hs->ops->wait(hs, (int)timeout_ms, &res);
	if (st == NPROXY_INVALID)
		hs_err(hs, NPROXY_LOG_ERROR, "wait: no program submitted");
	if (st != NPROXY_SUCCESS)
		return st;
	if (result)
		*result = res;
	if (res.state == NPROXY_PROG_TIMEDOUT)
		hs_err(hs, NPROXY_LOG_INFO,
			   "program %llu timed out at step %u", (unsigned long long)res.seq,
			   res.failed_step);
	return status_of_prog_state(res.state);
}
