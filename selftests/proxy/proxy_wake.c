// SPDX-License-Identifier: GPL-2.0
/*
 * No lost wake-up on the op path's hand-offs (lib/common/common_internal.h and its users):
 * every waiter here parks at once (spin windows 0) and every side sleeps a
 * random while, so each interleaving of "condition set" / "waiter parks"
 * comes up.  A lost wake-up cannot hide behind a safety net: the futex
 * ping-pong counts waits that ran into their timeout, the worker counts
 * parks that ran into theirs (safety_timeouts), and a consumer wait that
 * would have needed its timeout takes far longer than a whole op may.
 */
#include <stdlib.h>
#include "kselftest_harness.h"
#include "proxy_test_util.h"
#include "../../lib/common/common_internal.h"

/* A random pause of up to max_ns: spin or park, so both sides of a race win. */
static void random_pause(unsigned int *seed, uint64_t max_ns)
{
	uint64_t ns = (uint64_t)rand_r(seed) % (max_ns + 1);

	if (rand_r(seed) & 1) {
		uint64_t end = now_ns() + ns;

		while (now_ns() < end)
			wake_cpu_relax();
	} else if (ns) {
		struct timespec ts = { 0, (long)ns };

		nanosleep(&ts, NULL);
	}
}

#define PING_ROUNDS		20000
#define PING_PARK_NS		2000000000ull	/* a lost wake-up costs this */

struct ping {
	struct wake w[2];
	uint32_t turn;		/* whose move: round * 2 + side */
	uint32_t timeouts;	/* waits that hit PING_PARK_NS */
};

static void ping_side(struct ping *p, int side)
{
	unsigned int seed = 1234u + (unsigned int)side;

	for (uint32_t round = 0; round < PING_ROUNDS; round++) {
		uint32_t mine = round * 2 + (uint32_t)side;

		/* Wait for my turn, parked on my word. */
		for (;;) {
			uint32_t seen = wake_seq(&p->w[side]);
			uint64_t t0;

			if (__atomic_load_n(&p->turn, __ATOMIC_SEQ_CST) == mine)
				break;
			t0 = now_ns();
			wake_wait(&p->w[side], seen, PING_PARK_NS);
			if (now_ns() - t0 >= PING_PARK_NS)
				__atomic_add_fetch(&p->timeouts, 1, __ATOMIC_RELAXED);
		}
		random_pause(&seed, 3000);
		__atomic_store_n(&p->turn, mine + 1, __ATOMIC_SEQ_CST);
		wake_signal(&p->w[!side]);
	}
}

static void *ping_thread(void *arg)
{
	ping_side(arg, 1);
	return NULL;
}

TEST(futex_word_ping_pong_loses_no_wakeup)
{
	struct ping p;
	pthread_t th;

	memset(&p, 0, sizeof(p));
	ASSERT_EQ(0, pthread_create(&th, NULL, ping_thread, &p));
	ping_side(&p, 0);
	pthread_join(th, NULL);
	EXPECT_EQ(2u * PING_ROUNDS, p.turn);
	EXPECT_EQ(0u, p.timeouts);
}

#define OPS			300
#define AWAIT_MS		3000	/* one lost consumer wake-up costs this */

/*
 * The whole op path on one rank: a memfd region (its device writes the
 * trigger after a random DELAY, then waits in WAIT_SEM for the completion
 * the network task's RECV adds through the region's bell), the loopback
 * seam, the adaptive worker and a consumer that parks at once.
 */
TEST(parked_device_worker_and_consumer_lose_no_wakeup)
{
	struct nproxy_hs_opts ho = { .size = sizeof(ho), .backend = NPROXY_HS_MEMFD, .n_streams = 1,
				     .n_sems = 4 };
	struct nproxy_loopback_fabric *f;
	struct nproxy_proxy_stats stats;
	struct nproxy_comm_opts o;
	struct nproxy_comm *c;
	struct nproxy_hs *hs;
	unsigned int seed = 42;
	uint64_t worst_ns = 0;
	struct lb_rank r;

	setenv("NPROXY_SPIN_US", "0", 1);
	setenv("NPROXY_CONSUMER_SPIN_US", "0", 1);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_open(&ho, &hs));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_loopback_fabric_create(1, &f));
	ASSERT_EQ(0, lb_rank_setup(&r, f, 0, 0, 64));
	o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_DEVICE_WAIT, r.lb);
	o.idle_policy = NPROXY_IDLE_ADAPTIVE;
	o.hs = hs;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));

	for (uint64_t k = 1; k <= OPS; k++) {
		struct nproxy_prog_step prog[3] = {
			{ .op = NPROXY_STEP_DELAY, .timeout_ns = (uint64_t)rand_r(&seed) % 200000 },
			{ .op = NPROXY_STEP_WRITE_TRIGGER, .index = 0, .value = 1 },
			{ .op = NPROXY_STEP_WAIT_SEM, .index = 0, .value = k,
			  .timeout_ns = 10000000000ull },
		};
		struct nproxy_cc_op op = lb_rank_op(&r);
		struct nproxy_prog_result res;
		enum nproxy_status st;
		uint64_t ctx, t0 = now_ns();
		bool done;

		/* The region's words and semaphores (and so its bell). */
		memset(op.trigger_words, 0, sizeof(op.trigger_words));
		memset(&op.dev, 0, sizeof(op.dev));
		nproxy_trigger_store(nproxy_hs_trigger(hs, 0), NPROXY_TRIGGER_SENTINEL);
		ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(hs, prog, 3, NULL));
		random_pause(&seed, 100000);
		ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &op, k, &ctx));
		random_pause(&seed, 100000);
		ASSERT_ST(NPROXY_SUCCESS, nproxy_await_status(c, ctx, NPROXY_TASK_NETWORK, AWAIT_MS,
							       &done, &st));
		ASSERT_TRUE(done);
		EXPECT_ST(NPROXY_SUCCESS, st);
		ASSERT_ST(NPROXY_SUCCESS, nproxy_await_status(c, ctx, NPROXY_TASK_BARRIER, AWAIT_MS,
							       &done, &st));
		ASSERT_TRUE(done);
		EXPECT_ST(NPROXY_SUCCESS, st);
		ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(hs, AWAIT_MS, &res));
		EXPECT_EQ((uint32_t)NPROXY_PROG_DONE, res.state);
		if (now_ns() - t0 > worst_ns)
			worst_ns = now_ns() - t0;
	}
	/* Every park that only a signal ends was ended by one. */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_proxy_group_stats(0, &stats));
	EXPECT_EQ(0u, stats.safety_timeouts);
	EXPECT_GT(stats.idle_parks, 0u);	/* it did park (spin window 0) */
	/* Not a speed limit: a consumer wake-up that was lost costs AWAIT_MS. */
	EXPECT_LT(worst_ns, (uint64_t)AWAIT_MS * 1000000ull);
	TH_LOG("%d ops, worst %.1f ms, %llu idle parks", OPS, worst_ns / 1e6,
	       (unsigned long long)stats.idle_parks);
	nproxy_comm_close(c);
	nproxy_loopback_destroy(r.lb);
	nproxy_loopback_fabric_destroy(f);
	nproxy_hs_close(hs);
	unsetenv("NPROXY_SPIN_US");
	unsetenv("NPROXY_CONSUMER_SPIN_US");
}

TEST_HARNESS_MAIN
