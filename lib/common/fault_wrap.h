/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy private: fault injection (NPROXY_FAULT, <nproxy/fault.h>).
 *
 * lib/Makefile force-includes this header into every C file of lib/, so the
 * library's own calls to malloc/calloc/realloc/strdup, pthread_create,
 * the futex syscall and the libfabric calls listed below go through a
 * check that can fail them -- without a line of the callers changing.
 * The real declarations are included first; the macros come after them,
 * so system headers are untouched.
 *
 * Cost when NPROXY_FAULT is unset: one load of a flag that never changes
 * and one predicted-not-taken branch per call.
 */
#ifndef NPROXY_FAULT_H
#define NPROXY_FAULT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

enum nproxy_fault_kind {
	NPROXY_FAULT_ALLOC,		/* malloc, calloc, realloc, strdup: NULL, ENOMEM */
	NPROXY_FAULT_THREAD,		/* pthread_create: EAGAIN */
	NPROXY_FAULT_FI,		/* a libfabric setup or post call: -FI_EIO */
	NPROXY_FAULT_FUTEX,		/* FUTEX_WAIT: returns at once, EINTR */
	NPROXY_FAULT_POST_EAGAIN,	/* fi_tsend/fi_trecv: -FI_EAGAIN from the Nth on */
	NPROXY_FAULT_KINDS
};

/* Non-zero once NPROXY_FAULT (or nproxy_fault_set) armed any fault. */
extern int npx_fault_armed __attribute__((visibility("hidden")));

__attribute__((visibility("hidden"))) bool npx_fault_hit(enum nproxy_fault_kind kind);
/* 0, or the negative libfabric error an fi call fails with. */
__attribute__((visibility("hidden"))) int npx_fault_fi(bool post);
/* Variadic like syscall(2): true when this is a FUTEX_WAIT to fail. */
__attribute__((visibility("hidden"))) bool npx_fault_futex_wait(long nr, ...);

#define NPROXY_FAULT_ON() __builtin_expect(__atomic_load_n(&npx_fault_armed, __ATOMIC_RELAXED), 0)

static inline void *nproxy_fault_alloc_fails(void)
{
	errno = ENOMEM;
	return NULL;
}

#define malloc(n) \
	(NPROXY_FAULT_ON() && npx_fault_hit(NPROXY_FAULT_ALLOC) ? nproxy_fault_alloc_fails() : malloc(n))
#define calloc(n, sz) \
	(NPROXY_FAULT_ON() && npx_fault_hit(NPROXY_FAULT_ALLOC) ? nproxy_fault_alloc_fails() : calloc(n, sz))
#define realloc(p, n) \
	(NPROXY_FAULT_ON() && npx_fault_hit(NPROXY_FAULT_ALLOC) ? nproxy_fault_alloc_fails() : realloc(p, n))
#define strdup(s) \
	(NPROXY_FAULT_ON() && npx_fault_hit(NPROXY_FAULT_ALLOC) ? (char *)nproxy_fault_alloc_fails() : strdup(s))
#define pthread_create(t, attr, fn, arg) \
	(NPROXY_FAULT_ON() && npx_fault_hit(NPROXY_FAULT_THREAD) ? EAGAIN : pthread_create(t, attr, fn, arg))
/* A failed FUTEX_WAIT is a spurious return: every caller re-checks. */
#define syscall(nr, ...) \
	(NPROXY_FAULT_ON() && (nr) == SYS_futex && npx_fault_futex_wait(nr, ##__VA_ARGS__) ? \
	 -1L : syscall(nr, ##__VA_ARGS__))

#define NPROXY_FAULT_FI_CALL(post, call, ...) \
	((NPROXY_FAULT_ON() ? npx_fault_fi(post) : 0) ?: call(__VA_ARGS__))
#define fi_getinfo(...)		NPROXY_FAULT_FI_CALL(false, fi_getinfo, __VA_ARGS__)
#define fi_fabric(...)		NPROXY_FAULT_FI_CALL(false, fi_fabric, __VA_ARGS__)
#define fi_domain(...)		NPROXY_FAULT_FI_CALL(false, fi_domain, __VA_ARGS__)
#define fi_endpoint(...)	NPROXY_FAULT_FI_CALL(false, fi_endpoint, __VA_ARGS__)
#define fi_cq_open(...)		NPROXY_FAULT_FI_CALL(false, fi_cq_open, __VA_ARGS__)
#define fi_av_open(...)		NPROXY_FAULT_FI_CALL(false, fi_av_open, __VA_ARGS__)
#define fi_ep_bind(...)		NPROXY_FAULT_FI_CALL(false, fi_ep_bind, __VA_ARGS__)
#define fi_enable(...)		NPROXY_FAULT_FI_CALL(false, fi_enable, __VA_ARGS__)
#define fi_getname(...)		NPROXY_FAULT_FI_CALL(false, fi_getname, __VA_ARGS__)
#define fi_av_insert(...)	NPROXY_FAULT_FI_CALL(false, fi_av_insert, __VA_ARGS__)
#define fi_mr_reg(...)		NPROXY_FAULT_FI_CALL(false, fi_mr_reg, __VA_ARGS__)
#define fi_mr_bind(...)		NPROXY_FAULT_FI_CALL(false, fi_mr_bind, __VA_ARGS__)
#define fi_mr_enable(...)	NPROXY_FAULT_FI_CALL(false, fi_mr_enable, __VA_ARGS__)
#define fi_tsend(...)		NPROXY_FAULT_FI_CALL(true, fi_tsend, __VA_ARGS__)
#define fi_trecv(...)		NPROXY_FAULT_FI_CALL(true, fi_trecv, __VA_ARGS__)

#endif
