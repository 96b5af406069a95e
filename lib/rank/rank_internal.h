/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy private: the rank subsystem (one rank of a job in one call).
 * It sits above every other subsystem and reaches them through their
 * public headers only.
 */
#ifndef NPX_RANK_INTERNAL_H
#define NPX_RANK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <nproxy/bananaphone.h>
#include <nproxy/proxy.h>
#include "common/common_internal.h"

struct nproxy_rank {
	uint32_t rank, n_ranks;
	uint32_t local_size;		/* ranks on this host (the bus's size) */
	uint32_t gid;			/* the proxy group this rank's comm joins */
	uint32_t open_timeout_ms;
	uint64_t deadline_ms;		/* CLOCK_MONOTONIC: end of the open */
	enum nproxy_idle_policy idle_policy;
	/* Local (bus) rank -> rank in the job, from the exchange at open. */
	uint32_t bus_to_rank[NPROXY_BP_MAX_RANKS];

	struct nproxy_bp *bp;			/* NULL when this host runs one rank */
	struct nproxy_net *net;
	struct nproxy_hs *hs;
	struct nproxy_comm *comm;
	/* The dead peer's held shm locks were looked for (once per rank). */
	bool dead_locks_freed;

	struct npx_errbuf err;		/* which step failed and why (common's rule) */
};

#endif
