// SPDX-License-Identifier: GPL-2.0
/*
 * kmod_latency: handshake latencies of nproxy.ko's emulated device, run
 * inside the VM with the module loaded (bench/kmod_latency.sh does that).
 *
 * One round: the host stores 0 to the trigger word, increments semaphore 0
 * (t0), and spins with acquire loads until the device program - a WAIT_SEM
 * (sem0 >= k) then WRITE_TRIGGER(k) pair per round - writes trigger k (t1).
 * The info page's kernel timestamps split the round trip:
 *   sem -> wait  = last_wait_done_ns - t0  (host increment to device wait end)
 *   trigger -> host = t1 - last_trigger_ns (device store to host observation)
 * measured once with increments through the mapping (the device polls every
 * sem_poll_ns) and once with the SEM_INC ioctl (which rings a doorbell).
 * Baseline, same run: an eventfd ping-pong between two threads.
 *
 * Then, for each POLL_NS given, the mapping path again with the module's
 * sem_poll_ns set to it (restored afterwards), to show what the poll
 * interval costs.
 *
 * Usage: kmod_latency [ROUNDS [POLL_NS...]]   (ROUNDS default 20000, >= 10000)
 * Exit 4 (skip) when /dev/nproxy is absent.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/nproxy.h>
#include "nproxy_test.h"

#define PAIRS_PER_PROG	(NPROXY_MAX_PROG_STEPS / 2)
/* Generous: under TCG on a loaded host the guest can stall for seconds. */
#define SPIN_LIMIT_NS	30000000000ULL

static void report(const char *what, uint64_t *v, size_t n, uint64_t *median_out)
{
	nproxy_test_sort_u64(v, n);
	printf("%-34s median %8llu ns  p99 %9llu ns  max %10llu ns  (n=%zu)\n", what,
	       (unsigned long long)nproxy_test_pct_u64(v, n, 50),
	       (unsigned long long)nproxy_test_pct_u64(v, n, 99),
	       (unsigned long long)nproxy_test_pct_u64(v, n, 100), n);
	if (median_out)
		*median_out = nproxy_test_pct_u64(v, n, 50);
}

struct region {
	int fd;
	uint32_t *trig;
	uint64_t *sems;
	volatile struct nproxy_region_info *info;
};

static int submit_pairs(struct region *r, uint64_t first_k, unsigned int pairs)
{
	static struct nproxy_prog_step steps[NPROXY_MAX_PROG_STEPS];
	struct nproxy_prog_submit req = { .n_steps = 2 * pairs, .steps = (uintptr_t)steps };
	unsigned int i;

	memset(steps, 0, sizeof(steps));
	for (i = 0; i < pairs; i++) {
		steps[2 * i].op = NPROXY_STEP_WAIT_SEM;
		steps[2 * i].value = first_k + i;
		steps[2 * i].timeout_ns = 0;	/* NPROXY_MAX_WAIT_NS */
		steps[2 * i + 1].op = NPROXY_STEP_WRITE_TRIGGER;
		steps[2 * i + 1].value = (uint32_t)(first_k + i);
	}
	return ioctl(r->fd, NPROXY_IOC_SUBMIT_PROG, &req);
}

static int collect(struct region *r)
{
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
	struct nproxy_prog_result res;

	if (poll(&pfd, 1, 10000) != 1)
		return -1;
	if (ioctl(r->fd, NPROXY_IOC_COLLECT_PROG, &res))
		return -1;
	return res.state == NPROXY_PROG_DONE ? 0 : -1;
}

/* Rounds through the device program; use_ioctl picks the doorbell path. */
static int run_handshake(struct region *r, size_t rounds, int use_ioctl,
			 uint64_t *sem_lat, uint64_t *trig_lat, uint64_t *rtt)
{
	uint64_t k = r->sems[0] + 1;
	size_t done = 0;

	while (done < rounds) {
		unsigned int pairs = rounds - done < PAIRS_PER_PROG ? rounds - done : PAIRS_PER_PROG;
		unsigned int i;

		if (submit_pairs(r, k, pairs)) {
			perror("kmod_latency: submit");
			return -1;
		}
		for (i = 0; i < pairs; i++, k++, done++) {
			uint64_t t0, t1, deadline;

			__atomic_store_n(&r->trig[0], 0, __ATOMIC_RELEASE);
			t0 = nproxy_test_now_ns();
			if (use_ioctl) {
				struct nproxy_sem_op op = { .sem = 0, .value = 1 };

				if (ioctl(r->fd, NPROXY_IOC_SEM_INC, &op))
					return -1;
			} else {
				__atomic_fetch_add(&r->sems[0], 1, __ATOMIC_RELEASE);
			}
			deadline = t0 + SPIN_LIMIT_NS;
			while (__atomic_load_n(&r->trig[0], __ATOMIC_ACQUIRE) != (uint32_t)k) {
				if (nproxy_test_now_ns() > deadline) {
					fprintf(stderr, "kmod_latency: round %zu: no trigger in 30 s\n", done);
					return -1;
				}
			}
			t1 = nproxy_test_now_ns();
			/* Written before the trigger's release store: visible now. */
			sem_lat[done] = r->info->last_wait_done_ns - t0;
			trig_lat[done] = t1 - r->info->last_trigger_ns;
			rtt[done] = t1 - t0;
		}
		if (collect(r)) {
			fprintf(stderr, "kmod_latency: program did not complete\n");
			return -1;
		}
	}
	return 0;
}

struct pingpong {
	int to_peer, to_main;
	size_t rounds;
};

static void *pong(void *arg)
{
	struct pingpong *pp = arg;
	uint64_t v;
	size_t i;

	for (i = 0; i < pp->rounds; i++) {
		if (read(pp->to_peer, &v, sizeof(v)) != sizeof(v))
			break;
		if (write(pp->to_main, &v, sizeof(v)) != sizeof(v))
			break;
	}
	return NULL;
}

static int run_eventfd(size_t rounds, uint64_t *rtt)
{
	struct pingpong pp = {
		.to_peer = eventfd(0, EFD_CLOEXEC), .to_main = eventfd(0, EFD_CLOEXEC),
		.rounds = rounds,
	};
	pthread_t th;
	uint64_t v = 1;
	size_t i;

	if (pp.to_peer < 0 || pp.to_main < 0 || pthread_create(&th, NULL, pong, &pp))
		return -1;
	for (i = 0; i < rounds; i++) {
		uint64_t t0 = nproxy_test_now_ns();

		if (write(pp.to_peer, &v, sizeof(v)) != sizeof(v) ||
		    read(pp.to_main, &v, sizeof(v)) != sizeof(v))
			return -1;
		rtt[i] = nproxy_test_now_ns() - t0;
	}
	pthread_join(th, NULL);
	close(pp.to_peer);
	close(pp.to_main);
	return 0;
}

#define SEM_POLL_PARAM "/sys/module/nproxy/parameters/sem_poll_ns"

static int set_sem_poll_ns(const char *val)
{
	int fd = open(SEM_POLL_PARAM, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -1 : 0;
}

/* A region of one stream and one semaphore on dev, its three pages mapped; 0 or -1. */
static int region_open(int dev, struct region *r)
{
	struct nproxy_region_create req = { .n_streams = 1, .n_sems = 1 };
	long page = sysconf(_SC_PAGESIZE);

	r->fd = ioctl(dev, NPROXY_IOC_CREATE_REGION, &req);
	if (r->fd < 0) {
		perror("kmod_latency: CREATE_REGION");
		return -1;
	}
	r->trig = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		       NPROXY_OFF_TRIGGERS);
	r->sems = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		       NPROXY_OFF_SEMS);
	r->info = mmap(NULL, page, PROT_READ, MAP_SHARED | MAP_POPULATE, r->fd, NPROXY_OFF_INFO);
	if (r->trig == MAP_FAILED || r->sems == MAP_FAILED || r->info == MAP_FAILED) {
		perror("kmod_latency: mmap");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
	uint64_t *sem_lat, *trig_lat, *rtt, *efd;
	uint64_t m_rtt_map, m_rtt_ioctl, m_efd;
	struct nproxy_info info;
	struct region r;
	int dev;

	if (rounds < 10000)
		rounds = 10000;
	dev = open("/dev/nproxy", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		printf("# SKIP kmod_latency: /dev/nproxy: %s (run via bench/kmod_latency.sh)\n",
		       strerror(errno));
		return 4;
	}
	if (ioctl(dev, NPROXY_IOC_GET_INFO, &info)) {
		perror("kmod_latency: GET_INFO");
		return 1;
	}
	if (region_open(dev, &r))
		return 1;
	sem_lat = calloc(rounds, sizeof(uint64_t));
	trig_lat = calloc(rounds, sizeof(uint64_t));
	rtt = calloc(rounds, sizeof(uint64_t));
	efd = calloc(rounds, sizeof(uint64_t));
	if (!sem_lat || !trig_lat || !rtt || !efd)
		return 1;

	printf("kmod_latency: %zu rounds, sem_poll_ns %u, %ld CPUs online\n", rounds,
	       info.sem_poll_ns, sysconf(_SC_NPROCESSORS_ONLN));

	if (run_eventfd(rounds, efd)) {
		fprintf(stderr, "kmod_latency: eventfd baseline failed\n");
		return 1;
	}
	report("eventfd ping-pong round trip", efd, rounds, &m_efd);

	if (run_handshake(&r, rounds, 0, sem_lat, trig_lat, rtt))
		return 1;
	report("sem add (mapping) -> device wait", sem_lat, rounds, NULL);
	report("device trigger -> host spin", trig_lat, rounds, NULL);
	report("round trip (mapping)", rtt, rounds, &m_rtt_map);

	if (run_handshake(&r, rounds, 1, sem_lat, trig_lat, rtt))
		return 1;
	report("sem SEM_INC ioctl -> device wait", sem_lat, rounds, NULL);
	report("device trigger -> host spin", trig_lat, rounds, NULL);
	report("round trip (ioctl doorbell)", rtt, rounds, &m_rtt_ioctl);

	printf("ratio round trip / eventfd round trip (medians): mapping %.2f, ioctl %.2f\n",
	       (double)m_rtt_map / m_efd, (double)m_rtt_ioctl / m_efd);

	for (int a = 2; a < argc; a++) {
		char label[64], old[32];
		uint64_t m;

		snprintf(old, sizeof(old), "%u", info.sem_poll_ns);
		if (set_sem_poll_ns(argv[a])) {
			perror("kmod_latency: " SEM_POLL_PARAM);
			return 1;
		}
		if (run_handshake(&r, rounds, 0, sem_lat, trig_lat, rtt))
			return 1;
		snprintf(label, sizeof(label), "sem add -> wait, poll %s ns", argv[a]);
		report(label, sem_lat, rounds, NULL);
		snprintf(label, sizeof(label), "round trip, poll %s ns", argv[a]);
		report(label, rtt, rounds, &m);
		printf("  ratio to eventfd round trip: %.2f\n", (double)m / m_efd);
		set_sem_poll_ns(old);
	}
	return 0;
}
