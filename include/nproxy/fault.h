/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: fault injection, for tests and for trying a deployment's
 * error paths.  NPROXY_FAULT="kind:N[,kind:N...]" (read when the library
 * loads) or nproxy_fault_set() arms it; unset, it costs one predicted
 * branch per call site.  Kinds (N counts the library's own calls of that
 * kind, from 1, since the library loaded or nproxy_fault_set()):
 *
 *   alloc:N        the Nth malloc/calloc/realloc/strdup returns NULL (ENOMEM)
 *   thread:N       the Nth pthread_create fails with EAGAIN
 *   fi:N           the Nth libfabric setup or post call (fi_getinfo, fi_fabric,
 *                  fi_domain, fi_endpoint, fi_cq_open, fi_av_open, fi_ep_bind,
 *                  fi_enable, fi_getname, fi_av_insert, fi_mr_reg, fi_mr_bind,
 *                  fi_mr_enable, fi_tsend, fi_trecv) fails with -FI_EIO
 *   futex:N        the Nth futex wait returns at once (EINTR): a spurious wake-up
 *   post_eagain:N  every fi_tsend/fi_trecv from the Nth on returns -FI_EAGAIN
 *                  (a provider whose queue never drains)
 *
 * Each of alloc, thread, fi and futex fails once; the documented error of
 * the API call that met it is returned (NPROXY_RESOURCE for an allocation
 * or a thread, NPROXY_NET_ERROR or NPROXY_UNSUPPORTED for libfabric, see
 * libnproxy(3)), and nothing the call had set up is left behind.
 */
#ifndef NPROXY_FAULT_PUBLIC_H
#define NPROXY_FAULT_PUBLIC_H

#include <stdint.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Re-arm from spec (the NPROXY_FAULT syntax; NULL or "" disarms) and reset
 * every counter.  NPROXY_INVALID (and nothing armed) on a malformed spec.
 * Not thread-safe against library calls in flight: arm between them.
 */
NPROXY_API enum nproxy_status nproxy_fault_set(const char *spec);
/* Faults injected since the last nproxy_fault_set() (or load). */
NPROXY_API uint64_t nproxy_fault_injected(void);

#ifdef __cplusplus
}
#endif

#endif
