// SPDX-License-Identifier: GPL-2.0
/*
 * handshake_trigger: how fast a spinning host sees the emulated device's
 * trigger word, on the memfd handshake backend (the userspace emulator),
 * against an eventfd round trip measured in the same run.
 *
 * One round, in the shape of the real handshake (completion back-edge, then
 * the device's next start signal):
 *   host    t0; nproxy_device_sem_add(dev, 0, 1)  -> sem0 == k, and the
 *           region's bell rung if the device is parked on it (as the
 *           library's completions do)
 *   device  WAIT_SEM sem0 >= k; WRITE_TRIGGER(k)  (stamps last_trigger_ns
 *           just before its release store, like nproxy.ko)
 *   host    spins with nproxy_trigger_load until trigger == k; t1
 * reported per round:
 *   trigger -> spinning host  t1 - info.last_trigger_ns   (one way)
 *   sem add -> device wake    info.last_wait_done_ns - t0 (the ring runs
 *                             the device's next steps in the adding thread)
 *   round trip                t1 - t0
 * Baseline: two threads ping-pong over two eventfds with blocking reads;
 *   eventfd wake (one way)    the woken thread's clock - the writer's t0
 *   eventfd round trip        t1 - t0 at the writer.
 * Timestamps are CLOCK_MONOTONIC on both sides.
 *
 * Usage: handshake_trigger [ROUNDS]   (default and minimum 10000)
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/handshake.h>
#include <nproxy/seam.h>
#include "nproxy_test.h"

#define MIN_ROUNDS	10000
#define PAIRS_PER_PROG	(NPROXY_MAX_PROG_STEPS / 2)
#define SPIN_LIMIT_NS	2000000000ULL	/* a lost trigger ends the run, not hangs it */
#define WAIT_STEP_NS	1000000000ULL

struct stats {
	uint64_t median, p90, p99, max;
};

static struct stats summarize(uint64_t *v, size_t n)
{
	struct stats s;

	nproxy_test_sort_u64(v, n);
	s.median = nproxy_test_pct_u64(v, n, 50);
	s.p90 = nproxy_test_pct_u64(v, n, 90);
	s.p99 = nproxy_test_pct_u64(v, n, 99);
	s.max = nproxy_test_pct_u64(v, n, 100);
	return s;
}

static void print_row(const char *what, struct stats s)
{
	printf("%-34s %10llu %10llu %10llu %10llu\n", what, (unsigned long long)s.median,
	       (unsigned long long)s.p90, (unsigned long long)s.p99, (unsigned long long)s.max);
}

/* ---- the handshake on the memfd backend ---- */

static int submit_pairs(struct nproxy_hs *hs, uint64_t first_k, uint32_t pairs)
{
	struct nproxy_prog_step prog[NPROXY_MAX_PROG_STEPS];
	uint32_t i;

	memset(prog, 0, sizeof(prog));
	for (i = 0; i < pairs; i++) {
		prog[2 * i].op = NPROXY_STEP_WAIT_SEM;
		prog[2 * i].index = 0;
		prog[2 * i].value = first_k + i;
		prog[2 * i].timeout_ns = WAIT_STEP_NS;
		prog[2 * i + 1].op = NPROXY_STEP_WRITE_TRIGGER;
		prog[2 * i + 1].index = 0;
		prog[2 * i + 1].value = first_k + i;
	}
	return nproxy_hs_submit(hs, prog, 2 * pairs, NULL) == NPROXY_SUCCESS ? 0 : -1;
}

static int run_handshake(size_t rounds, uint64_t *trig, uint64_t *wake, uint64_t *rtt)
{
	struct nproxy_hs_opts opts = {
		.size = sizeof(opts),
		.backend = NPROXY_HS_MEMFD,
		.n_streams = 1,
		.n_sems = 1,
	};
	const volatile struct nproxy_region_info *info;
	volatile uint32_t *trigger;
	struct nproxy_device_sems dev;
	struct nproxy_hs *hs;
	size_t r = 0;
	int ret = -1;

	if (nproxy_hs_open(&opts, &hs) != NPROXY_SUCCESS)
		return -1;
	info = nproxy_hs_info(hs);
	trigger = nproxy_hs_trigger(hs, 0);
	dev = (struct nproxy_device_sems){ .sems = nproxy_hs_sem(hs, 0), .n_sems = 1,
					   .bell = nproxy_hs_sem_bell(hs) };

	while (r < rounds) {
		uint32_t pairs = rounds - r < PAIRS_PER_PROG ? (uint32_t)(rounds - r) : PAIRS_PER_PROG;
		struct nproxy_prog_result res;
		uint32_t i;

		if (submit_pairs(hs, r + 1, pairs))
			goto out;
		for (i = 0; i < pairs; i++, r++) {
			uint32_t k = (uint32_t)(r + 1);
			uint64_t t0, t1, deadline;

			t0 = nproxy_test_now_ns();
			nproxy_device_sem_add(&dev, 0, 1);
			deadline = t0 + SPIN_LIMIT_NS;
			while (nproxy_trigger_load(trigger) != k) {
				if (nproxy_test_now_ns() > deadline) {
					fprintf(stderr, "handshake_trigger: round %zu: no trigger in 2 s\n", r);
					nproxy_hs_cancel(hs);
					nproxy_hs_wait(hs, 1000, &res);
					goto out;
				}
			}
			t1 = nproxy_test_now_ns();
			/* Stamped before the release store our acquire load paired with. */
			trig[r] = t1 - __atomic_load_n(&info->last_trigger_ns, __ATOMIC_RELAXED);
			wake[r] = __atomic_load_n(&info->last_wait_done_ns, __ATOMIC_RELAXED) - t0;
			rtt[r] = t1 - t0;
		}
		if (nproxy_hs_wait(hs, 10000, &res) != NPROXY_SUCCESS) {
			fprintf(stderr, "handshake_trigger: program ended in state %u at step %u\n",
				res.state, res.failed_step);
			goto out;
		}
	}
	ret = 0;
out:
	nproxy_hs_close(hs);
	return ret;
}

/* ---- baseline: eventfd ping-pong ---- */

struct ponger {
	int to_pong, to_ping;
	size_t rounds;
	uint64_t *woke_at;
};

static void *pong(void *arg)
{
	struct ponger *p = arg;
	size_t r;

	for (r = 0; r < p->rounds; r++) {
		uint64_t v;

		if (read(p->to_pong, &v, sizeof(v)) != sizeof(v))
			return NULL;
		p->woke_at[r] = nproxy_test_now_ns();
		v = 1;
		if (write(p->to_ping, &v, sizeof(v)) != sizeof(v))
			return NULL;
	}
	return NULL;
}

static int run_eventfd(size_t rounds, uint64_t *wake, uint64_t *rtt)
{
	struct ponger p = { .rounds = rounds };
	pthread_t th;
	size_t r;
	int ret = -1;

	p.woke_at = calloc(rounds, sizeof(*p.woke_at));
	p.to_pong = eventfd(0, EFD_CLOEXEC);
	p.to_ping = eventfd(0, EFD_CLOEXEC);
	if (!p.woke_at || p.to_pong < 0 || p.to_ping < 0 || pthread_create(&th, NULL, pong, &p))
		goto out_close;
	for (r = 0; r < rounds; r++) {
		uint64_t t0, v = 1;

		t0 = nproxy_test_now_ns();
		if (write(p.to_pong, &v, sizeof(v)) != sizeof(v) ||
		    read(p.to_ping, &v, sizeof(v)) != sizeof(v))
			break;
		rtt[r] = nproxy_test_now_ns() - t0;
		/* The ponger wrote woke_at[r] before its write we just read. */
		wake[r] = p.woke_at[r] - t0;
	}
	pthread_join(th, NULL);
	ret = r == rounds ? 0 : -1;
out_close:
	if (p.to_pong >= 0)
		close(p.to_pong);
	if (p.to_ping >= 0)
		close(p.to_ping);
	free(p.woke_at);
	return ret;
}

int main(int argc, char **argv)
{
	size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 0) : MIN_ROUNDS;
	uint64_t *trig, *wake, *rtt, *ev_wake, *ev_rtt;
	struct stats s_trig, s_wake, s_rtt, s_ev_wake, s_ev_rtt;

	if (rounds < MIN_ROUNDS)
		rounds = MIN_ROUNDS;
	trig = calloc(rounds, sizeof(*trig));
	wake = calloc(rounds, sizeof(*wake));
	rtt = calloc(rounds, sizeof(*rtt));
	ev_wake = calloc(rounds, sizeof(*ev_wake));
	ev_rtt = calloc(rounds, sizeof(*ev_rtt));
	if (!trig || !wake || !rtt || !ev_wake || !ev_rtt) {
		fprintf(stderr, "handshake_trigger: out of memory\n");
		return 1;
	}
	/* Interleave halves so drift in machine load hits both sides alike. */
	if (run_eventfd(rounds / 2, ev_wake, ev_rtt) ||
	    run_handshake(rounds / 2, trig, wake, rtt) ||
	    run_eventfd(rounds - rounds / 2, ev_wake + rounds / 2, ev_rtt + rounds / 2) ||
	    run_handshake(rounds - rounds / 2, trig + rounds / 2, wake + rounds / 2,
			  rtt + rounds / 2)) {
		fprintf(stderr, "handshake_trigger: run failed\n");
		return 1;
	}
	s_trig = summarize(trig, rounds);
	s_wake = summarize(wake, rounds);
	s_rtt = summarize(rtt, rounds);
	s_ev_wake = summarize(ev_wake, rounds);
	s_ev_rtt = summarize(ev_rtt, rounds);

	printf("# handshake_trigger: memfd backend, %zu rounds, %ld CPUs online, ns\n", rounds,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("%-34s %10s %10s %10s %10s\n", "latency", "median", "p90", "p99", "max");
	print_row("trigger -> spinning host", s_trig);
	print_row("eventfd wake (baseline, one way)", s_ev_wake);
	print_row("sem add -> emulated device wake", s_wake);
	print_row("handshake round trip", s_rtt);
	print_row("eventfd round trip (baseline)", s_ev_rtt);
	printf("ratio eventfd wake / trigger observe (median): %.1fx\n",
	       s_trig.median ? (double)s_ev_wake.median / (double)s_trig.median : 0.0);
	printf("ratio eventfd round trip / handshake round trip (median): %.2fx\n",
	       s_rtt.median ? (double)s_ev_rtt.median / (double)s_rtt.median : 0.0);
	free(trig);
	free(wake);
	free(rtt);
	free(ev_wake);
	free(ev_rtt);
	return 0;
}
