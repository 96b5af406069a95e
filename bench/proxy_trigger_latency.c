// SPDX-License-Identifier: GPL-2.0
/*
 * proxy_trigger_latency: device trigger -> the proxy worker progressing the
 * network task, per idle policy, against an eventfd-blocking baseline in
 * the same run.
 *
 * One round: a network task (device-wait policy) starts its block and waits
 * in WAITING_DEVICE_TRIGGER; after GAP_US of quiet (so the adaptive policy
 * has reached its sleeping phase, its worst case) the "device" (this thread)
 * stamps t0 and stores the trigger word; the seam's first progress() call
 * for the task stamps t1.  latency = t1 - t0 (observe + consume + one tick).
 * Baseline: a thread blocked in read(eventfd); the writer stamps t0 and
 * writes; the reader stamps t1 when read returns.
 *
 * Usage: proxy_trigger_latency [ROUNDS]  (default 1000)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/handshake.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"

#define GAP_US	2000

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static void report(const char *name, uint64_t *v, size_t n, double base_median)
{
	double med;

	nproxy_test_sort_u64(v, n);
	med = (double)nproxy_test_pct_u64(v, n, 50);
	printf("| %-22s | %8.1f | %8.1f | %8.1f | %8.1f | %6.2fx |\n", name, med / 1e3,
	       nproxy_test_pct_u64(v, n, 90) / 1e3, nproxy_test_pct_u64(v, n, 99) / 1e3,
	       nproxy_test_pct_u64(v, n, 100) / 1e3,
	       base_median > 0 ? med / base_median : 1.0);
}

/* ---- a seam that stamps the first progress() of the round ---- */
static uint64_t t_started;	/* atomic: start() ran (task is past INIT) */
static uint64_t t_progress;	/* atomic: first progress() time */

static enum nproxy_status b_start(void *e, uint32_t s, uint32_t bb,
				  const struct nproxy_fifo_set *f,
				  const struct nproxy_device_sems *d)
{
	__atomic_store_n(&t_started, 1, __ATOMIC_RELEASE);
	return NPROXY_SUCCESS;
}

static enum nproxy_status b_progress(void *e, uint32_t s, uint32_t bb, bool *idle,
				     bool *block_done, bool *done)
{
	uint64_t zero = 0;

	__atomic_compare_exchange_n(&t_progress, &zero, nproxy_test_now_ns(), false, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
	*idle = false;
	*block_done = *done = true;
	return NPROXY_SUCCESS;
}

static enum nproxy_status b_stop(void *e, uint32_t s, uint32_t bb)
{
	return NPROXY_SUCCESS;
}

static const struct nproxy_seam_ops bench_ops = {
	.name = "bench", .start = b_start, .progress = b_progress, .stop = b_stop,
};

static int run_policy(enum nproxy_idle_policy pol, uint64_t *lat, size_t rounds)
{
	struct nproxy_comm_opts o;
	struct nproxy_fifo_set fs;
	struct nproxy_cc_op op;
	struct nproxy_comm *c;
	uint32_t trig;
	size_t i;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.n_ranks = 1;
	o.ranks_per_proxy = 1;
	o.flags = NPROXY_COMM_F_DEVICE_WAIT;
	o.idle_policy = pol;
	o.seam.ops = &bench_ops;
	if (nproxy_comm_open(&o, &c))
		return -1;
	memset(&fs, 0, sizeof(fs));
	memset(&op, 0, sizeof(op));
	op.size = sizeof(op);
	op.streams_n = 1;
	op.streams[0].blocks = &fs;
	op.streams[0].n_blocks = 1;
	op.trigger_words[0] = &trig;
	for (i = 0; i < rounds; i++) {
		uint64_t ctx, t0;

		nproxy_trigger_store(&trig, NPROXY_PROXY_TRIGGER_SENTINEL);
		__atomic_store_n(&t_started, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&t_progress, 0, __ATOMIC_RELAXED);
		if (nproxy_enq_proxy_tasks(c, &op, i, &ctx))
			return -1;
		while (!__atomic_load_n(&t_started, __ATOMIC_ACQUIRE))
			sleep_us(10);
		sleep_us(GAP_US);
		t0 = nproxy_test_now_ns();
		nproxy_trigger_store(&trig, 1);
		if (nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 10000) ||
		    nproxy_wait_status(c, ctx, NPROXY_TASK_BARRIER, 10000))
			return -1;
		lat[i] = __atomic_load_n(&t_progress, __ATOMIC_ACQUIRE) - t0;
	}
	nproxy_comm_close(c);
	return 0;
}

/* ---- eventfd baseline ---- */
struct efd_state {
	int fd;
	size_t rounds;
	uint64_t *t1;
};

static void *efd_reader(void *arg)
{
	struct efd_state *s = arg;
	size_t i;

	for (i = 0; i < s->rounds; i++) {
		uint64_t v;

		if (read(s->fd, &v, sizeof(v)) != sizeof(v))
			break;
		s->t1[i] = nproxy_test_now_ns();
	}
	return NULL;
}

static int run_eventfd(uint64_t *lat, size_t rounds)
{
	struct efd_state s = { eventfd(0, 0), rounds, calloc(rounds, sizeof(uint64_t)) };
	uint64_t *t0 = calloc(rounds, sizeof(uint64_t));
	pthread_t th;
	size_t i;

	if (s.fd < 0 || !s.t1 || !t0 || pthread_create(&th, NULL, efd_reader, &s))
		return -1;
	for (i = 0; i < rounds; i++) {
		uint64_t one = 1;

		sleep_us(GAP_US);
		t0[i] = nproxy_test_now_ns();
		if (write(s.fd, &one, sizeof(one)) != sizeof(one))
			return -1;
		while (!__atomic_load_n(&s.t1[i], __ATOMIC_ACQUIRE))
			sleep_us(10);
	}
	pthread_join(th, NULL);
	for (i = 0; i < rounds; i++)
		lat[i] = s.t1[i] - t0[i];
	close(s.fd);
	free(s.t1);
	free(t0);
	return 0;
}

int main(int argc, char **argv)
{
	size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	static const struct {
		const char *name;
		enum nproxy_idle_policy pol;
	} pols[] = {
		{ "busy-spin", NPROXY_IDLE_SPIN },
		{ "sched_yield", NPROXY_IDLE_YIELD },
		{ "adaptive", NPROXY_IDLE_ADAPTIVE },
	};
	uint64_t *lat;
	double base;
	size_t i;

	if (rounds < 10)
		rounds = 10;
	lat = calloc(rounds, sizeof(*lat));
	if (!lat)
		return 1;
	printf("# trigger -> first progress() of the network task, %zu rounds, %d us gap, %ld CPUs\n",
	       rounds, GAP_US, sysconf(_SC_NPROCESSORS_ONLN));
	printf("| %-22s | %8s | %8s | %8s | %8s | %7s |\n", "policy", "p50 us", "p90 us",
	       "p99 us", "max us", "p50/efd");
	printf("|------------------------|----------|----------|----------|----------|---------|\n");
	if (run_eventfd(lat, rounds)) {
		fprintf(stderr, "eventfd baseline failed: %s\n", strerror(errno));
		return 1;
	}
	nproxy_test_sort_u64(lat, rounds);
	base = (double)lat[rounds / 2];
	report("eventfd (blocking)", lat, rounds, base);
	for (i = 0; i < sizeof(pols) / sizeof(pols[0]); i++) {
		if (run_policy(pols[i].pol, lat, rounds)) {
			fprintf(stderr, "%s: run failed\n", pols[i].name);
			return 1;
		}
		report(pols[i].name, lat, rounds, base);
	}
	free(lat);
	return 0;
}
