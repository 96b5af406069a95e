// SPDX-License-Identifier: GPL-2.0
/*
 * What each idle policy does while its worker's only task never moves
 * (selftests/common's idle seam), counted rather than timed:
 *   SPIN            re-ticks: no sched_yield(), no park;
 *   YIELD           one sched_yield() per idle tick, no park;
 *   ADAPTIVE        parks after its spin window, and the park doubles
 *                   (16 us up to 1 ms) once the spell is 2 ms old, so a
 *                   long spell parks a few hundred times a second, not
 *                   once per 16 us;
 *   ADAPTIVE_YIELD  the same parks, with yields in the spin window.
 * sched_yield() is interposed by this program (the library is linked in
 * statically); the parks are the group's idle_parks statistic.  The
 * adaptive policies' worker parks with a 1 us timer slack (the kernel's
 * default 50 us would stretch each short park); the others keep the
 * slack they inherit.
 */
#include "kselftest_harness.h"
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"

#define WINDOW_MS	300

static uint64_t n_yields;

int sched_yield(void)
{
	__atomic_add_fetch(&n_yields, 1, __ATOMIC_RELAXED);
	return (int)syscall(SYS_sched_yield);
}

struct idle_counts {
	uint64_t ticks, idle_ticks, yields, parks;
};

/* One comm with one never-moving task under policy; counts over WINDOW_MS. */
static int count_idle(enum nproxy_idle_policy policy, struct idle_counts *c)
{
	struct nproxy_proxy_stats a, b;
	struct nproxy_comm *comm;
	uint64_t y0;

	if (nproxy_test_idle_task_open(policy, &comm))
		return -1;
	if (nproxy_test_idle_tasks_settle(1, 5000, &a)) {
		nproxy_comm_close(comm);
		return -1;
	}
	y0 = __atomic_load_n(&n_yields, __ATOMIC_RELAXED);
	nproxy_proxy_group_stats(0, &a);
	nproxy_test_sleep_ms(WINDOW_MS);
	nproxy_proxy_group_stats(0, &b);
	c->yields = __atomic_load_n(&n_yields, __ATOMIC_RELAXED) - y0;
	c->ticks = b.ticks - a.ticks;
	c->idle_ticks = b.idle_ticks - a.idle_ticks;
	c->parks = b.idle_parks - a.idle_parks;
	nproxy_comm_close(comm);
	return (int)(b.idle_policy != policy);
}

/* count_idle() under policy (its name for the log), which must succeed. */
static void measure(struct __test_metadata *_metadata, enum nproxy_idle_policy policy,
		    const char *name, struct idle_counts *c)
{
	ASSERT_EQ(0, count_idle(policy, c));
	TH_LOG("%s over %d ms: %llu ticks (%llu idle), %llu yields, %llu parks", name, WINDOW_MS,
	       (unsigned long long)c->ticks, (unsigned long long)c->idle_ticks,
	       (unsigned long long)c->yields, (unsigned long long)c->parks);
}

TEST(spin_neither_yields_nor_parks)
{
	struct idle_counts c;

	measure(_metadata, NPROXY_IDLE_SPIN, "spin", &c);
	EXPECT_LT(100u, c.idle_ticks);
	EXPECT_EQ(0u, c.yields);
	EXPECT_EQ(0u, c.parks);
}

TEST(yield_yields_every_idle_tick_and_never_parks)
{
	struct idle_counts c;

	measure(_metadata, NPROXY_IDLE_YIELD, "yield", &c);
	EXPECT_LT(100u, c.yields);
	/*
	 * One yield per idle tick: the window's edges may split a few, a
	 * producer taking the lock makes the worker yield once more, and a
	 * sanitizer's runtime yields in its own spin locks (TSan: 9 in 100000
	 * ticks), so 0.1 % on top.  Two yields a tick, or none, still fail.
	 */
	EXPECT_GE(c.yields + 8, c.idle_ticks);
	EXPECT_LE(c.yields, c.idle_ticks + 8 + c.idle_ticks / 1000);
	EXPECT_EQ(0u, c.parks);
}

/*
 * A spell older than its spin window only parks; the parks double, so
 * WINDOW_MS holds at most about one per ms (2 per ms allowed), not one
 * per 16 us.
 */
TEST(adaptive_parks_and_doubles_its_park)
{
	struct idle_counts c;

	measure(_metadata, NPROXY_IDLE_ADAPTIVE, "adaptive", &c);
	EXPECT_LT(0u, c.parks);
	EXPECT_GE(c.idle_ticks, c.parks);
	EXPECT_GT(WINDOW_MS * 2u, c.parks);
	/* Past the spin window: no yields while parked. */
	EXPECT_GT(c.parks, c.yields);
}

TEST(adaptive_yield_parks_too)
{
	struct idle_counts c;

	measure(_metadata, NPROXY_IDLE_ADAPTIVE_YIELD, "adaptive-yield", &c);
	EXPECT_LT(0u, c.parks);
	EXPECT_GT(WINDOW_MS * 2u, c.parks);
	EXPECT_GT(c.parks, c.yields);
}

/*
 * A spell that follows a sleep on quiescence starts its own spin window:
 * with a 100 ms window (NPROXY_SPIN_US, its maximum) the worker, asleep
 * with nothing queued when an op arrives whose device never triggers it
 * (idle from its first tick, and polled), yields rather than parks for
 * the window's first tens of ms.  The look at the parks counts only when
 * it came within 60 ms of the enqueue (a loaded host may hold this thread
 * longer; then it looks again, with a new group).
 */
TEST(adaptive_spins_its_window_after_a_quiescent_sleep)
{
	struct nproxy_comm_opts o = NPROXY_COMM_OPTS_INIT;
	struct nproxy_cc_op op = NPROXY_CC_OP_INIT;
	struct nproxy_fifo_set blocks = { 0 };
	uint32_t never = NPROXY_PROXY_TRIGGER_SENTINEL;
	struct nproxy_proxy_stats st;
	struct nproxy_comm *comm;
	bool looked = false;

	setenv("NPROXY_SPIN_US", "100000", 1);
	o.n_ranks = 1;
	o.ranks_per_proxy = 1;
	o.flags = NPROXY_COMM_F_DEVICE_WAIT;
	o.idle_policy = NPROXY_IDLE_ADAPTIVE;
	o.seam.ops = &nproxy_test_idle_seam_ops;
	op.streams_n = 1;
	op.streams[0].blocks = &blocks;
	op.streams[0].n_blocks = 1;
	op.trigger_words[0] = &never;
	for (int attempt = 0; attempt < 5 && !looked; attempt++) {
		uint64_t t0;

		/* Group 0 with nothing queued: its worker sleeps on quiescence. */
		ASSERT_EQ(0, (int)nproxy_comm_open(&o, &comm));
		for (int i = 0; i < 500 && (nproxy_proxy_group_stats(0, &st) || !st.cv_waits); i++)
			nproxy_test_sleep_ms(1);
		ASSERT_LT(0u, st.cv_waits);
		t0 = nproxy_test_now_ms();
		ASSERT_EQ(0, (int)nproxy_enq_proxy_tasks(comm, &op, 0, NULL));
		nproxy_test_sleep_ms(20);
		ASSERT_EQ(0, (int)nproxy_proxy_group_stats(0, &st));
		if (nproxy_test_now_ms() - t0 < 60) {
			looked = true;
			EXPECT_LT(0u, st.idle_ticks);
			EXPECT_EQ(0u, st.idle_parks);
		}
		nproxy_comm_close(comm);
	}
	unsetenv("NPROXY_SPIN_US");
	if (!looked)
		SKIP(return, "this thread never looked within 60 ms of the enqueue (a loaded host)");
}

/*
 * The timer slack (ns) of group 0's worker under policy, from
 * /proc/<tid>/timerslack_ns; -1 on failure, -2 when that file cannot be
 * read (another thread's slack needs CAP_SYS_NICE on some kernels).
 */
static long worker_slack_ns(enum nproxy_idle_policy policy)
{
	struct nproxy_proxy_stats st;
	struct nproxy_comm *comm;
	char path[96];
	long slack = -1;
	FILE *f;

	if (nproxy_test_idle_task_open(policy, &comm))
		return -1;
	if (!nproxy_test_idle_tasks_settle(1, 5000, &st) && st.worker_tid > 0) {
		snprintf(path, sizeof(path), "/proc/%d/timerslack_ns", (int)st.worker_tid);
		f = fopen(path, "r");
		if (!f || fscanf(f, "%ld", &slack) != 1)
			slack = -2;
		if (f)
			fclose(f);
	}
	nproxy_comm_close(comm);
	return slack;
}

#define SKIP_UNREADABLE(slack) do {							\
	if ((slack) == -2)								\
		SKIP(return, "/proc/<tid>/timerslack_ns of another thread is not readable here");	\
} while (0)

TEST(adaptive_worker_parks_with_a_1_us_timer_slack)
{
	long slack = worker_slack_ns(NPROXY_IDLE_ADAPTIVE);

	SKIP_UNREADABLE(slack);
	ASSERT_EQ(1000, slack);
	ASSERT_EQ(1000, worker_slack_ns(NPROXY_IDLE_ADAPTIVE_YIELD));
}

TEST(yield_worker_keeps_the_slack_it_inherits)
{
	long mine = (long)prctl(PR_GET_TIMERSLACK);

	long slack = worker_slack_ns(NPROXY_IDLE_YIELD);

	SKIP_UNREADABLE(slack);
	ASSERT_NE(1000, mine);	/* else the comparison says nothing */
	ASSERT_EQ(mine, slack);
}

TEST_HARNESS_MAIN
