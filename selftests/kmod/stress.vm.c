// SPDX-License-Identifier: GPL-2.0
/*
 * Races and process death: nothing lost or leaked, no hangs.
 * Threads hammer one region with submit / cancel / collect / poll /
 * semaphore adds / trigger writes while others create and close regions
 * with running programs; every call must return success or its documented
 * errno, and afterwards no region is left.  A SIGKILLed owner leaks
 * nothing.  The VM runner fails the run on any kernel WARN/BUG.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "kmod_util.h"

#define STRESS_NS	(1500 * NP_MS)

struct shared {
	int dev;
	int rfd;
	uint64_t *sems;
	uint64_t stop_at;
	int bad_errno;		/* first unexpected errno, 0 if none */
	unsigned long ops;
};

static void note_bad(struct shared *s, int err)
{
	__atomic_compare_exchange_n(&s->bad_errno, &(int){ 0 }, err, false,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static bool running(struct shared *s)
{
	__atomic_fetch_add(&s->ops, 1, __ATOMIC_RELAXED);
	return np_now_ns() < s->stop_at;
}

static void *submitter(void *arg)
{
	struct shared *s = arg;
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 0),
		np_step(NPROXY_STEP_SIGNAL_EVENT, 0, 2, 0),
		np_step(NPROXY_STEP_WAIT_SEM, 0, 0, 2 * NP_MS),
		np_step(NPROXY_STEP_INC_SEM, 1, 1, 0),
		np_step(NPROXY_STEP_DELAY, 0, 0, 100000),
	};

	while (running(s)) {
		/* Wait for a value someone may or may not reach in time. */
		steps[2].value = __atomic_load_n(&s->sems[0], __ATOMIC_ACQUIRE) + 1;
		int err = np_submit(s->rfd, steps, 5, NULL);

		if (err && err != -EBUSY)
			note_bad(s, -err);
	}
	return NULL;
}

static void *canceller(void *arg)
{
	struct shared *s = arg;
	struct nproxy_prog_result res;

	while (running(s)) {
		if (ioctl(s->rfd, NPROXY_IOC_CANCEL_PROG) && errno != ENOENT)
			note_bad(s, errno);
		if (ioctl(s->rfd, NPROXY_IOC_COLLECT_PROG, &res)) {
			if (errno != ENOENT && errno != EAGAIN)
				note_bad(s, errno);
		} else if (res.state < NPROXY_PROG_DONE || res.state > NPROXY_PROG_CANCELLED) {
			note_bad(s, 1000 + res.state);
		}
		usleep(200);
	}
	return NULL;
}

static void *collector(void *arg)
{
	struct shared *s = arg;
	struct nproxy_prog_result res;

	while (running(s)) {
		int ev = np_poll(s->rfd, POLLIN | POLLPRI, 5);

		if (ev < 0)
			note_bad(s, -ev);
		if (ev & POLLIN && ioctl(s->rfd, NPROXY_IOC_COLLECT_PROG, &res) &&
		    errno != ENOENT && errno != EAGAIN)
			note_bad(s, errno);
	}
	return NULL;
}

static void *incrementer(void *arg)
{
	struct shared *s = arg;
	struct nproxy_sem_op op = { .sem = 0, .value = 1 };
	struct nproxy_trigger_write tw = { .stream = 1, .value = 3 };
	struct nproxy_region_state st;

	while (running(s)) {
		__atomic_fetch_add(&s->sems[0], 1, __ATOMIC_RELEASE);
		if (ioctl(s->rfd, NPROXY_IOC_SEM_INC, &op) ||
		    ioctl(s->rfd, NPROXY_IOC_WRITE_TRIGGER, &tw) ||
		    ioctl(s->rfd, NPROXY_IOC_GET_STATE, &st))
			note_bad(s, errno);
		usleep(50);
	}
	return NULL;
}

/* Regions that die with a program running, from another thread's view. */
static void *churner(void *arg)
{
	struct shared *s = arg;
	struct nproxy_prog_step step = np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 10000 * NP_MS);

	while (running(s)) {
		int rfd = np_create(s->dev, 1, 1);
		void *map;

		if (rfd < 0) {
			note_bad(s, -rfd);
			continue;
		}
		map = np_map(rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
		if (!map || np_submit(rfd, &step, 1, NULL))
			note_bad(s, errno);
		close(rfd);
		if (map)
			munmap(map, np_page_size());	/* the real release */
	}
	return NULL;
}

TEST(concurrent_ops_on_one_region)
{
	void *(*fns[])(void *) = { submitter, submitter, canceller, collector,
				   incrementer, churner };
	pthread_t th[sizeof(fns) / sizeof(fns[0])];
	struct shared s = { 0 };
	long long live0;
	size_t i;

	NP_OPEN_DEV_OR_SKIP(s.dev);
	live0 = np_stat("regions_live");
	s.rfd = np_create(s.dev, 2, 2);
	ASSERT_LE(0, s.rfd);
	s.sems = np_map(s.rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, s.sems);
	s.stop_at = np_now_ns() + STRESS_NS;
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, fns[i], &s));
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		pthread_join(th[i], NULL);
	EXPECT_EQ(0, s.bad_errno) {
		TH_LOG("unexpected errno/state %d", s.bad_errno);
	}
	TH_LOG("%lu operations", s.ops);
	/* Close with whatever is still running. */
	munmap(s.sems, np_page_size());
	close(s.rfd);
	EXPECT_EQ(live0, np_stat("regions_live"));
	close(s.dev);
}

/* An owner killed mid-program leaks nothing: the region goes with it. */
TEST(sigkilled_owner_frees_region)
{
	long long live0;
	int dev, pipefd[2];
	pid_t child;
	char c;

	NP_OPEN_DEV_OR_SKIP(dev);
	live0 = np_stat("regions_live");
	ASSERT_EQ(0, pipe(pipefd));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		struct nproxy_prog_step step = np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 30000 * NP_MS);
		int rfd = np_create(dev, 4, 8);

		if (rfd < 0 || !np_map(rfd, NPROXY_OFF_TRIGGERS, PROT_READ) ||
		    np_submit(rfd, &step, 1, NULL))
			_exit(1);
		if (write(pipefd[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &c, 1));
	EXPECT_EQ(live0 + 1, np_stat("regions_live"));
	ASSERT_EQ(0, kill(child, SIGKILL));
	ASSERT_EQ(child, waitpid(child, NULL, 0));
	EXPECT_EQ(live0, np_stat("regions_live"));
	close(pipefd[0]);
	close(dev);
}

/* The documented region limit holds and frees up again. */
TEST(region_limit_enospc)
{
	static int fds[NPROXY_MAX_REGIONS + 1];
	long long live0;
	int dev, n = 0, err = 0, i;

	NP_OPEN_DEV_OR_SKIP(dev);
	live0 = np_stat("regions_live");
	for (i = 0; i < NPROXY_MAX_REGIONS + 1; i++) {
		fds[i] = np_create(dev, 1, 0);
		if (fds[i] < 0) {
			err = fds[i];
			break;
		}
		n++;
	}
	EXPECT_EQ(-ENOSPC, err);
	EXPECT_EQ(NPROXY_MAX_REGIONS, n + live0);
	for (i = 0; i < n; i++)
		close(fds[i]);
	EXPECT_EQ(live0, np_stat("regions_live"));
	i = np_create(dev, 1, 0);
	EXPECT_LE(0, i);
	close(i);
	close(dev);
}

TEST_HARNESS_MAIN
