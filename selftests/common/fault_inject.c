// SPDX-License-Identifier: GPL-2.0
/*
 * Library fault injection (NPROXY_FAULT, <nproxy/fault.h>): every
 * allocation, thread creation and libfabric call on the setup and
 * transfer paths is failed in turn.  Each failure must come back as the
 * documented status of the call that met it, and leave no fd, thread,
 * shared mapping (handshake region) or /dev/shm file of ours behind; a failed
 * futex wait (a spurious wake-up) must change nothing at all.
 */
#include <dirent.h>
#include "kselftest_harness.h"
#include "../proxy/proxy_test_util.h"
#include "../handshake/handshake_test.h"
#include <nproxy/fault.h>
#include <nproxy/net.h>

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 600
#define SWEEP_MAX 400	/* more calls of a kind than any path below makes */

/* libfabric shm files of this process: /dev/shm/<pid>:<uid>:<index>. */
static int count_own_shm(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char prefix[24];
	int n = 0;

	if (!d)
		return -1;
	snprintf(prefix, sizeof(prefix), "%d:", (int)getpid());
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)))
			n++;
	closedir(d);
	return n;
}

struct census {
	int fds, threads, shared_maps, shm_entries;
};

static struct census census(void)
{
	struct census c = {
		.fds = hs_test_count_fds(),
		.threads = hs_test_count_threads(),
		.shared_maps = hs_test_count_shared_maps(),
		.shm_entries = count_own_shm(),
	};
	return c;
}

/*
 * The census once it holds still (three reads 5 ms apart agree, within
 * 2 s): right after a call returns, a thread it joined may still be
 * listed in /proc while the kernel tears it down (a VM under TCG showed
 * one there after the warm-up, and the sweep's every census "lost" it).
 */
static struct census census_steady(void)
{
	uint64_t deadline = now_ns() + 2000000000ull;
	struct census c = census(), d;
	int same = 0;

	while (same < 3 && now_ns() < deadline) {
		sleep_ms(5);
		d = census();
		same = memcmp(&c, &d, sizeof(c)) ? 0 : same + 1;
		c = d;
	}
	return c;
}

/* Back to `want` within a bound: an exiting thread may linger a moment. */
static int census_settles(struct census want, struct census *got)
{
	uint64_t deadline = now_ns() + 5000000000ull;

	do {
		*got = census();
		if (!memcmp(got, &want, sizeof(want)))
			return 1;
		sleep_ms(2);
	} while (now_ns() < deadline);
	return 0;
}

#define EXPECT_NOTHING_LEFT(before, what, n) do {					\
	struct census __got;								\
	if (!census_settles(before, &__got)) {						\
		TH_LOG("%s:%u left fds %d->%d threads %d->%d shared maps %d->%d "	\
		       "/dev/shm %d->%d", what, n, before.fds, __got.fds,		\
		       before.threads, __got.threads, before.shared_maps,		\
		       __got.shared_maps, before.shm_entries, __got.shm_entries);	\
		EXPECT_TRUE(false);							\
	}										\
} while (0)

TEST(fault_specs_are_parsed_strictly)
{
	static const char *const bad[] = {
		"alloc", "alloc:", "alloc:0", "alloc:x", "alloc:1,", "heap:1", "alloc:1;fi:2",
		":3", "alloc:-1",
	};
	size_t i;

	capture_start();
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_ST(NPROXY_INVALID, nproxy_fault_set(bad[i]));
	EXPECT_GE(capture_count("NPROXY_FAULT=", 0), (int)(sizeof(bad) / sizeof(bad[0])));
	capture_stop();
	EXPECT_ST(NPROXY_SUCCESS, nproxy_fault_set("alloc:1,thread:2,fi:3,futex:4,post_eagain:5"));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_fault_set(""));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_fault_set(NULL));
	EXPECT_EQ(0u, nproxy_fault_injected());
}

/*
 * The local path: a memfd handshake region (with its emulator thread), a
 * comm on the loopback seam, one network task triggered by a device
 * program, its status, and teardown.  Returns the first failing status.
 */
static enum nproxy_status local_path(void)
{
	struct nproxy_hs_opts ho = { .size = sizeof(ho), .backend = NPROXY_HS_MEMFD,
				     .n_streams = 1, .n_sems = 4 };
	struct nproxy_loopback_fabric *f = NULL;
	struct nproxy_prog_step prog[1];
	struct nproxy_prog_result res;
	struct nproxy_comm *c = NULL;
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;
	struct nproxy_hs *hs;
	struct lb_rank r;
	enum nproxy_status st;
	uint64_t ctx;

	st = nproxy_hs_open(&ho, &hs);
	if (st)
		return st;
	st = nproxy_loopback_fabric_create(1, &f);
	if (st)
		goto out_hs;
	memset(&r, 0, sizeof(r));
	if (lb_rank_setup(&r, f, 0, 0, 64)) {
		st = NPROXY_RESOURCE;
		goto out_lb;	/* the rank's loopback may exist already */
	}
	o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_DEVICE_WAIT, r.lb);
	o.hs = hs;
	st = nproxy_comm_open(&o, &c);
	if (st)
		goto out_lb;
	op = lb_rank_op(&r);
	op.trigger_words[0] = NULL;	/* the region's */
	op.dev.sems = NULL;
	op.dev.n_sems = 0;
	st = nproxy_enq_proxy_tasks(c, &op, 1, &ctx);
	if (st)
		goto out_comm;
	memset(prog, 0, sizeof(prog));
	prog[0].op = NPROXY_STEP_WRITE_TRIGGER;
	prog[0].value = 1;
	st = nproxy_hs_submit(hs, prog, 1, NULL);
	if (!st)
		st = nproxy_hs_wait(hs, 20000, &res);
	if (!st)
		st = nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 20000);
out_comm:
	nproxy_comm_close(c);
out_lb:
	nproxy_loopback_destroy(r.lb);
	nproxy_loopback_fabric_destroy(f);
out_hs:
	nproxy_hs_close(hs);
	return st;
}

/*
 * Fail call 1, 2, ... of kind until a run meets no fault: every run must
 * end in success or in one of the allowed statuses, leaving nothing.
 */
static void sweep(struct __test_metadata *_metadata, const char *kind,
		  enum nproxy_status (*path)(void), const enum nproxy_status *allowed,
		  unsigned int n_allowed, unsigned int *faults, unsigned int *survived)
{
	struct census before;
	unsigned int n, i;

	ASSERT_ST(NPROXY_SUCCESS, path());	/* warm-up: what stays for good is not a leak */
	before = census_steady();
	for (n = 1; n <= SWEEP_MAX; n++) {
		enum nproxy_status st;
		char spec[32];
		uint64_t hit;
		bool ok = false;

		snprintf(spec, sizeof(spec), "%s:%u", kind, n);
		ASSERT_ST(NPROXY_SUCCESS, nproxy_fault_set(spec));
		capture_start();	/* the failures log; keep the TAP readable */
		st = path();
		capture_stop();
		hit = nproxy_fault_injected();
		nproxy_fault_set(NULL);
		if (!hit) {
			EXPECT_ST(NPROXY_SUCCESS, st);
			break;
		}
		(*faults)++;
		for (i = 0; i < n_allowed; i++)
			ok |= st == allowed[i];
		if (!ok) {
			TH_LOG("%s: %s", spec, nproxy_status_str(st));
			EXPECT_TRUE(ok);
		}
		if (st == NPROXY_SUCCESS)
			(*survived)++;
		EXPECT_NOTHING_LEFT(before, kind, n);
	}
	EXPECT_LE(n, (unsigned int)SWEEP_MAX);
	TH_LOG("%s: %u faults injected, %u absorbed (the call still succeeded)", kind, *faults,
	       *survived);
}

static const enum nproxy_status resource_or_ok[] = { NPROXY_SUCCESS, NPROXY_RESOURCE };

TEST(every_allocation_of_the_local_path_fails_cleanly)
{
	unsigned int faults = 0, survived = 0;

	sweep(_metadata, "alloc", local_path, resource_or_ok, 2, &faults, &survived);
	EXPECT_GT(faults, 5u);
}

TEST(every_thread_creation_of_the_local_path_fails_cleanly)
{
	unsigned int faults = 0, survived = 0;

	sweep(_metadata, "thread", local_path, resource_or_ok, 1 + 1, &faults, &survived);
	EXPECT_EQ(2u, faults);		/* the emulator and the proxy worker */
	EXPECT_EQ(0u, survived);
}

TEST(a_spurious_futex_wake_changes_nothing)
{
	unsigned int faults = 0, survived = 0;
	static const enum nproxy_status ok[] = { NPROXY_SUCCESS };

	sweep(_metadata, "futex", local_path, ok, 1, &faults, &survived);
	EXPECT_EQ(faults, survived);
}

/* The network path: a one-rank shm engine, a transfer to itself, close. */
static enum nproxy_status net_path(void)
{
	struct nproxy_net_opts no = { .size = sizeof(no), .rank = 0, .n_ranks = 1,
				      .timeout_ms = 5000, .provider = "shm" };
	static unsigned char src[1024], dst[1024];
	struct nproxy_net_addr sa = { 0 }, da = { 0 };
	struct nproxy_net_op ops[2];
	struct nproxy_fifo_set fs;
	struct nproxy_comm *c = NULL;
	uint64_t sems[4] = { 0 };
	uint32_t trig[1] = { 0 };
	volatile uint32_t *words[1] = { trig };
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;
	struct nproxy_net *net;
	enum nproxy_status st;
	uint64_t ctx;

	st = nproxy_net_open(&no, &net);
	if (st)
		return st;
	st = nproxy_net_mr_register(net, src, sizeof(src), &sa.mr);
	if (!st)
		st = nproxy_net_mr_register(net, dst, sizeof(dst), &da.mr);
	if (st)
		goto out_net;
	memset(ops, 0, sizeof(ops));
	ops[0].kind = NPROXY_NET_OP_SEND;
	ops[0].len = sizeof(src);
	ops[1].kind = NPROXY_NET_OP_RECV;
	ops[1].len = sizeof(dst);
	ops[1].flags = NPROXY_NET_OP_F_COMPLETE;
	ops[1].post_inc = 1;
	memset(&fs, 0, sizeof(fs));
	fs.ops = ops;
	fs.n_ops = 2;
	fs.src = &sa;
	fs.n_src = 1;
	fs.dst = &da;
	fs.n_dst = 1;
	o = comm_opts(0, 1, 0, 1, 0, NULL);
	nproxy_net_seam(net, &o.seam);
	st = nproxy_comm_open(&o, &c);
	if (st)
		goto out_net;
	op = cc_op(1, words, sems, 4);
	op.streams[0].blocks = &fs;
	op.streams[0].n_blocks = 1;
	st = nproxy_enq_proxy_tasks(c, &op, 1, &ctx);
	if (!st)
		st = nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 30000);
	if (!st && sems[0] != 1)
		st = NPROXY_FAILURE;
	nproxy_comm_close(c);
out_net:
	nproxy_net_close(net);
	return st;
}

/*
 * Every `kind` fault over the network path fails cleanly, and the path
 * makes more than min_faults such calls (skips without the shm provider).
 */
static void sweep_net_path(struct __test_metadata *_metadata, const char *kind,
			   unsigned int min_faults)
{
	static const enum nproxy_status allowed[] = {
		NPROXY_SUCCESS, NPROXY_NET_ERROR, NPROXY_UNSUPPORTED, NPROXY_RESOURCE,
	};
	unsigned int faults = 0, survived = 0;
	struct nproxy_net_opts no = { .size = sizeof(no), .n_ranks = 1, .provider = "shm" };
	struct nproxy_net *probe;

	if (nproxy_net_open(&no, &probe) != NPROXY_SUCCESS)
		SKIP(return, "libfabric shm provider unavailable");
	nproxy_net_close(probe);
	sweep(_metadata, kind, net_path, allowed, 4, &faults, &survived);
	EXPECT_GT(faults, min_faults);
}

TEST(every_libfabric_call_of_the_network_path_fails_cleanly)
{
	sweep_net_path(_metadata, "fi", 8);
}

TEST(every_allocation_of_the_network_path_fails_cleanly)
{
	sweep_net_path(_metadata, "alloc", 5);
}

TEST_HARNESS_MAIN
