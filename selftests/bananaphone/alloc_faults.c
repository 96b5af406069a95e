// SPDX-License-Identifier: GPL-2.0
/*
 * An allocation that fails inside an all-gather (NPROXY_FAULT alloc:N,
 * armed in one rank just before the call, for every N the call reaches)
 * ends that rank's call with NPROXY_RESOURCE saying "out of memory" --
 * never a success with a missing blob, never a crash -- and the other
 * rank's call ends too, with success or the peer's leaving.
 */
#include <nproxy/fault.h>
#include "kselftest_harness.h"
#include "bp_test.h"

#define AF_LEN		3000	/* more than one ring slot: several fragments */
#define AF_MAX_N	16	/* far more allocations than one all-gather makes */

struct af_arg {
	char job[96];
	uint32_t n_fault;		/* arm alloc:n_fault in rank 1 */
	volatile int *injected;		/* shared: rank 1 saw its fault injected */
};

static int af_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct af_arg *arg = varg;
	size_t lens[2], offs[2];
	uint8_t mine[AF_LEN];
	struct nproxy_bp *bp;
	enum nproxy_status st;
	void *all = NULL;
	char spec[32];

	BP_T_CHECK(bp_t_join_all(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	bp_t_fill(mine, sizeof(mine), rank);
	if (rank == 1) {
		snprintf(spec, sizeof(spec), "alloc:%u", arg->n_fault);
		BP_T_CHECK(nproxy_fault_set(spec) == NPROXY_SUCCESS, "arm %s", spec);
	}
	st = nproxy_bp_allgather(bp, mine, sizeof(mine), &all, lens, offs, BP_T_TIMEOUT_MS);
	if (rank == 1) {
		*arg->injected = (int)nproxy_fault_injected();
		nproxy_fault_set(NULL);
		if (*arg->injected) {
			BP_T_CHECK(st == NPROXY_RESOURCE, "alloc:%u: %s: %s", arg->n_fault,
				   nproxy_status_str(st), nproxy_bp_strerror(bp));
			BP_T_CHECK(strstr(nproxy_bp_strerror(bp), "out of memory"),
				   "alloc:%u: \"%s\" does not say out of memory", arg->n_fault,
				   nproxy_bp_strerror(bp));
		}
	}
	if (st == NPROXY_SUCCESS) {
		for (uint32_t r = 0; r < n; r++) {
			uint8_t want[AF_LEN];

			bp_t_fill(want, sizeof(want), r);
			BP_T_CHECK(lens[r] == AF_LEN && !memcmp((char *)all + offs[r], want, AF_LEN),
				   "blob of rank %u", r);
		}
	} else {
		BP_T_CHECK(st == NPROXY_RESOURCE || st == NPROXY_PEER_LEFT || st == NPROXY_PEER_DEAD,
			   "alloc:%u: %s: %s", arg->n_fault, nproxy_status_str(st),
			   nproxy_bp_strerror(bp));
	}
	free(all);
	bp_t_leave(bp);
	return 0;
}

TEST(every_failed_allocation_of_an_allgather_is_resource)
{
	struct af_arg arg;
	uint32_t hit = 0;

	arg.injected = bp_t_shared(sizeof(int));
	ASSERT_NE(NULL, arg.injected);
	for (arg.n_fault = 1; arg.n_fault <= AF_MAX_N; arg.n_fault++) {
		*arg.injected = 0;
		ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "allocfault", af_rank, 2, 4 * BP_T_TIMEOUT_MS))
			TH_LOG("alloc:%u", arg.n_fault);
		if (!*arg.injected)
			break;	/* the call makes fewer than n_fault allocations */
		hit++;
	}
	TH_LOG("%u allocations of rank 1's all-gather failed in turn", hit);
	EXPECT_LT(0u, hit);
	EXPECT_GT((uint32_t)AF_MAX_N, hit);
	munmap((void *)arg.injected, sizeof(int));
}

TEST_HARNESS_MAIN
