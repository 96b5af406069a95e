/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: handshake pages -- the memory the proxy state machines run on.
 *
 * One handshake region per device context (rank): NPROXY_MAX_STREAMS trigger
 * words (device -> host "reached the network stage") and up to
 * NPROXY_MAX_SEMS semaphores (host -> device "net op complete"), laid out as
 * in <linux/nproxy.h>.  Two backends give the same pages:
 *
 *   kmod   /dev/nproxy region fd, pages mapped from the module; the module's
 *          kernel worker plays the device.
 *   memfd  the same four pages in a sealed memfd; a userspace emulator
 *          thread ("nproxy-dev") runs the same device-program semantics.
 *
 * Choice: opts->backend when not AUTO, else NPROXY_HANDSHAKE=kmod|memfd|auto,
 * else auto: kmod when /dev/nproxy exists (memfd, with a warning, when it
 * exists but cannot be used), memfd otherwise.  A forced backend that cannot
 * be had fails with NPROXY_UNSUPPORTED (or NPROXY_PERM) and a message saying
 * why.  See Documentation/handshake.md.
 *
 * All shared-page access goes through the inline helpers below: one acquire
 * load, one release store, one atomic add.
 */
#ifndef NPROXY_HANDSHAKE_H
#define NPROXY_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/nproxy.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shared-page access: the only way library code touches the pages ---- */

/* Device trigger word: one acquire load (pairs with the device's store). */
static inline uint32_t nproxy_trigger_load(const volatile uint32_t *word)
{
	return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

/* Consume a trigger: release store of 0. */
static inline void nproxy_trigger_clear(volatile uint32_t *word)
{
	__atomic_store_n(word, 0, __ATOMIC_RELEASE);
}

/* Device side (emulator/tests): publish a trigger value. */
static inline void nproxy_trigger_store(volatile uint32_t *word, uint32_t value)
{
	__atomic_store_n(word, value, __ATOMIC_RELEASE);
}

static inline uint64_t nproxy_sem_load(const volatile uint64_t *sem)
{
	return __atomic_load_n(sem, __ATOMIC_ACQUIRE);
}

/*
 * The completion back-edge (libnccom's nec_inc_semaphore in the reference
 * runtime): one atomic add.
 */
static inline uint64_t nproxy_sem_add(volatile uint64_t *sem, uint64_t inc)
{
	return __atomic_add_fetch(sem, inc, __ATOMIC_RELEASE);
}

/* ---- regions ---- */

enum nproxy_hs_backend {
	NPROXY_HS_AUTO	= 0,	/* NPROXY_HANDSHAKE, else kmod if /dev/nproxy exists, else memfd */
	NPROXY_HS_KMOD	= 1,
	NPROXY_HS_MEMFD	= 2,
};

/*
 * size must be at least the first released layout's sizeof; a newer, longer
 * caller works as long as the bytes past the fields this library knows are
 * zero (Documentation/development.md, "API conventions").
 */
struct nproxy_hs_opts {
	uint32_t size;			/* sizeof(struct nproxy_hs_opts) as the caller compiled it */
	enum nproxy_hs_backend backend;
	uint32_t n_streams;		/* 1..NPROXY_MAX_STREAMS */
	uint32_t n_sems;		/* 0..NPROXY_MAX_SEMS */
	uint32_t rank;			/* informational */
	uint32_t gid;			/* informational */
};

/* Every field not named is 0 (AUTO backend, no semaphores). */
#define NPROXY_HS_OPTS_INIT { .size = sizeof(struct nproxy_hs_opts), .n_streams = 1 }

struct nproxy_hs;

NPROXY_API enum nproxy_status nproxy_hs_open(const struct nproxy_hs_opts *opts,
					     struct nproxy_hs **out);
/*
 * Unmaps the pages and closes the fd; a running program is cancelled and the
 * emulator thread (memfd) joined.  NULL is a no-op.  No other call on hs may
 * run concurrently with close.
 */
NPROXY_API void nproxy_hs_close(struct nproxy_hs *hs);
/*
 * Text of the last failed call on hs (submit, cancel, wait), naming the
 * region and rank; "" when none.  NULL: this thread's last failed
 * nproxy_hs_open() (the error-text rule: <nproxy/status.h>).
 */
NPROXY_API const char *nproxy_hs_strerror(const struct nproxy_hs *hs);

/* Parse "kmod" / "memfd" / "auto"; NPROXY_INVALID otherwise. */
NPROXY_API enum nproxy_status nproxy_hs_backend_parse(const char *name,
						      enum nproxy_hs_backend *out);
NPROXY_API const char *nproxy_hs_backend_name(enum nproxy_hs_backend b);
NPROXY_API enum nproxy_hs_backend nproxy_hs_backend_of(const struct nproxy_hs *hs);

NPROXY_API uint32_t nproxy_hs_n_streams(const struct nproxy_hs *hs);
NPROXY_API uint32_t nproxy_hs_n_sems(const struct nproxy_hs *hs);
/* Pointers into the mapped pages; NULL when the index is out of range. */
NPROXY_API volatile uint32_t *nproxy_hs_trigger(struct nproxy_hs *hs, uint32_t stream);
NPROXY_API volatile uint64_t *nproxy_hs_sem(struct nproxy_hs *hs, uint32_t sem);
NPROXY_API const volatile struct nproxy_region_info *nproxy_hs_info(const struct nproxy_hs *hs);
/*
 * The fd behind the pages: the region fd (kmod) or the sealed memfd (memfd).
 * Owned by the region: do not close it.  Useful to poll() (kmod) or to check
 * the seals (memfd).
 */
NPROXY_API int nproxy_hs_fd(const struct nproxy_hs *hs);
/*
 * The region's proxy state page (struct nproxy_proxy_state, <linux/nproxy.h>),
 * which the proxy of the comm using this region fills for nproxyctl top and
 * hang-report; NULL when the region has none (a module without the page).
 */
NPROXY_API struct nproxy_proxy_state *nproxy_hs_proxy_state(struct nproxy_hs *hs);

struct nproxy_sem_bell;
/*
 * The doorbell a semaphore increment rings so that a device asleep in
 * WAIT_SEM goes on at once (see nproxy_device_sem_add in <nproxy/seam.h>):
 * memfd: the emulator runs its next steps in the adding thread; kmod: the
 * region's doorbell ioctl, only while the info page's sem_sleepers says
 * the module sleeps.  An op whose dev.sems come from this region gets it
 * automatically.
 */
NPROXY_API struct nproxy_sem_bell *nproxy_hs_sem_bell(struct nproxy_hs *hs);
/*
 * Device -> host wake-up: fn(arg) runs on the device side right after every
 * trigger word store, so that a host thread can park instead of polling the
 * words (the proxy worker registers its queue here).  fn must not block or
 * call into this region.  fn NULL removes the callback; once that call
 * returns, fn is not running and will not run.  One callback per region.
 * NPROXY_UNSUPPORTED when the device cannot call back (kmod: the module
 * writes the words; poll them).
 */
NPROXY_API enum nproxy_status nproxy_hs_set_trigger_notify(struct nproxy_hs *hs,
							   void (*fn)(void *), void *arg);

/* ---- the (emulated) device side ---- */

/*
 * After fork(), a memfd region's emulator thread stays with the parent: in
 * the child these calls return NPROXY_INVALID_HANDLE (the pages stay shared).
 */

/*
 * Submit a device program (struct nproxy_prog_step[], <linux/nproxy.h>).
 * Both backends validate it the same way before it runs: n_steps in
 * 1..NPROXY_MAX_PROG_STEPS, known op, flags 0, index in range for the op,
 * WRITE_TRIGGER value fits 32 bits, timeout_ns <= NPROXY_MAX_WAIT_NS, and
 * every field the op does not use is 0 -- else NPROXY_INVALID (logged with
 * the step index) and nothing runs.
 * One program at a time per region: NPROXY_BUSY while one runs or a finished
 * one is not collected.  *seq (optional) receives the program's id.
 */
NPROXY_API enum nproxy_status nproxy_hs_submit(struct nproxy_hs *hs,
					       const struct nproxy_prog_step *steps,
					       uint32_t n_steps, uint64_t *seq);
/*
 * Ask the running program to stop at its current step; it finishes as
 * NPROXY_PROG_CANCELLED (collect it with nproxy_hs_wait).  NPROXY_INVALID
 * when no program is running (it may just have finished).
 */
NPROXY_API enum nproxy_status nproxy_hs_cancel(struct nproxy_hs *hs);
/*
 * Wait up to timeout_ms (0 = just check) for the submitted program to
 * finish, then collect its result into *result (optional) and reset the
 * region's prog_state to NONE, so the next program may be submitted.
 * Returns, once collected:
 *   NPROXY_SUCCESS    the program ran every step (state DONE);
 *   NPROXY_HW_ERROR   a WAIT_SEM step timed out (state TIMEDOUT, error
 *                     -ETIMEDOUT, failed_step = its index) or a step failed
 *                     at run time (state ERROR);
 *   NPROXY_CANCELLED  cancelled by nproxy_hs_cancel (state CANCELLED).
 * Without collecting:
 *   NPROXY_TIMEOUT    the program is still running after timeout_ms;
 *   NPROXY_INVALID    nothing was submitted since the last collect.
 */
NPROXY_API enum nproxy_status nproxy_hs_wait(struct nproxy_hs *hs, uint32_t timeout_ms,
					     struct nproxy_prog_result *result);

#ifdef __cplusplus
}
#endif
#endif
