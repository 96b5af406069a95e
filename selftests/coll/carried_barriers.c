// SPDX-License-Identifier: GPL-2.0
/*
 * Which ops' barriers the engine runs (lib/coll/coll.c decide_barrier(),
 * lib/rank/rank_barrier.c): at 2 ranks an allgather or a small allreduce
 * carries the previous op's barrier on its data, so a run of them enters
 * no engine barrier; a sendrecv carries none, so the barrier before it
 * runs on the engine; at 4 ranks every barrier runs on the engine.  The
 * results are right all along, and the close ends the job cleanly.
 *
 * The engine barriers entered are read from the rank's barrier
 * (rank/rank_internal.h) after each wait.
 */
#include "kselftest_harness.h"
#include <inttypes.h>
#include "coll_test.h"
#include "rank/rank_internal.h"

#define COUNT 64u

struct job {
	char id[64];
};

/* One op of kind on this rank's buffers, its result checked; 0 or a code. */
static int one_op(struct ct_rank *r, uint32_t i, uint32_t n, enum nproxy_coll_kind kind,
		  uint32_t salt)
{
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	uint32_t in[COUNT], out[COUNT * 4];
	int rc;

	for (uint32_t e = 0; e < COUNT; e++)
		in[e] = rt_pattern(i, e) + salt;
	d.kind = kind;
	d.dtype = NPROXY_UINT32;
	d.count = COUNT;
	d.sendbuf = in;
	d.recvbuf = out;
	rc = ct_run(r, i, &d);
	if (rc)
		return rc;
	for (uint32_t e = 0; e < COUNT; e++) {
		uint32_t want = 0;

		if (kind == NPROXY_COLL_SENDRECV) {
			want = rt_pattern((i + n - 1) % n, e) + salt;
		} else if (kind == NPROXY_COLL_ALLREDUCE) {
			for (uint32_t k = 0; k < n; k++)
				want += rt_pattern(k, e) + salt;
		}
		if (kind == NPROXY_COLL_ALLGATHER) {
			for (uint32_t k = 0; k < n; k++)
				if (out[k * COUNT + e] != rt_pattern(k, e) + salt)
					return 3;
		} else if (out[e] != want) {
			return 4;
		}
	}
	return 0;
}

static uint64_t engine_barriers(const struct ct_rank *r)
{
	struct npx_rank_barrier *b = &r->rank->barrier;
	uint64_t n;

	pthread_mutex_lock(&b->lock);
	n = b->engine_seq;
	pthread_mutex_unlock(&b->lock);
	return n;
}

static const enum nproxy_coll_kind sequence[] = {
	NPROXY_COLL_ALLGATHER, NPROXY_COLL_ALLGATHER, NPROXY_COLL_ALLREDUCE,
	NPROXY_COLL_SENDRECV, NPROXY_COLL_ALLGATHER, NPROXY_COLL_ALLREDUCE,
};
#define N_OPS (sizeof(sequence) / sizeof(sequence[0]))

/*
 * The engine barriers entered by the end of each op's wait, 2 ranks: the
 * barrier before the sendrecv (op 3's) runs on the engine, at the latest
 * by the end of op 5's wait (which collects op 3's barrier), maybe already
 * in op 4's; every other one is carried.
 */
static const uint64_t engine_min_2[N_OPS] = { 0, 0, 0, 0, 1, 1 };
static const uint64_t engine_max_2[N_OPS] = { 0, 0, 0, 1, 1, 1 };

static int sequence_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	struct ct_rank r;
	int rc;

	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	for (uint32_t k = 0; k < N_OPS && !rc; k++) {
		uint64_t seen;

		rc = one_op(&r, i, n, sequence[k], k);
		if (rc)
			break;
		seen = engine_barriers(&r);
		/* More ranks: every barrier this wait collected (all but the last two ops'). */
		if (n == 2 ? seen < engine_min_2[k] || seen > engine_max_2[k] : seen + 1 < k) {
			fprintf(stderr, "# rank %u: after op %u, %" PRIu64 " engine barriers\n", i,
				k + 1, seen);
			rc = 5;
		}
	}
	ct_close(&r);
	return rc;
}

static void run(struct __test_metadata *_metadata, const char *what, uint32_t n)
{
	struct job job;
	int codes[RT_MAX_RANKS];

	rt_job_id(job.id, sizeof(job.id), what);
	rt_run_forked(n, sequence_rank, &job, 2 * RT_WAIT_MS, codes);
	for (uint32_t i = 0; i < n; i++) {
		EXPECT_EQ(0, codes[i]) {
			TH_LOG("rank %u exited %d", i, codes[i]);
		}
	}
}

TEST(at_2_ranks_allgathers_and_allreduces_carry_the_barriers_and_a_sendrecv_does_not)
{
	run(_metadata, "carry2", 2);
}

TEST(at_4_ranks_every_barrier_runs_on_the_engine)
{
	run(_metadata, "carry4", 4);
}

TEST_HARNESS_MAIN
