// SPDX-License-Identifier: GPL-2.0
/*
 * The emulated device: programs that write triggers,
 * wait on semaphores advanced by another process's mapping, time out,
 * signal, get cancelled; poll() readiness; collect; and every bad program.
 */
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>

#include "kselftest_harness.h"
#include "kmod_util.h"

FIXTURE(prog) {
	int dev;
	int rfd;
	uint32_t *trig;
	uint64_t *sems;
	struct nproxy_region_info *info;
};

FIXTURE_SETUP(prog)
{
	self->rfd = -1;
	NP_OPEN_DEV_OR_SKIP(self->dev);
	self->rfd = np_create(self->dev, 2, 4);
	ASSERT_LE(0, self->rfd);
	self->trig = np_map(self->rfd, NPROXY_OFF_TRIGGERS, PROT_READ | PROT_WRITE);
	self->sems = np_map(self->rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	self->info = np_map(self->rfd, NPROXY_OFF_INFO, PROT_READ);
	ASSERT_NE(NULL, self->trig);
	ASSERT_NE(NULL, self->sems);
	ASSERT_NE(NULL, self->info);
}

FIXTURE_TEARDOWN(prog)
{
	if (self->rfd < 0)
		return;
	munmap(self->trig, np_page_size());
	munmap(self->sems, np_page_size());
	munmap(self->info, np_page_size());
	close(self->rfd);
	close(self->dev);
}

/* libnrt's gate: one acquire load per spin until the word leaves the sentinel. */
TEST_F(prog, program_trigger_seen_by_acquire_load)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_DELAY, 0, 0, 20 * NP_MS),
		np_step(NPROXY_STEP_WRITE_TRIGGER, 1, 0x1234, 0),
	};
	uint64_t deadline, seq = 0;
	uint32_t v;

	ASSERT_EQ(0, np_submit(self->rfd, steps, 2, &seq));
	EXPECT_EQ(1, seq);
	deadline = np_now_ns() + 5000 * NP_MS;
	while ((v = np_load_acquire32(&self->trig[1])) == NPROXY_TRIGGER_SENTINEL &&
	       np_now_ns() < deadline)
		;
	EXPECT_EQ(0x1234, v);
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, np_load_acquire32(&self->trig[0]));
	EXPECT_EQ(1, self->info->triggers_written);
}

TEST_F(prog, info_page_tracks_program_state)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 5000 * NP_MS),
	};
	struct nproxy_prog_result res;

	ASSERT_EQ(0, np_submit(self->rfd, steps, 1, NULL));
	EXPECT_EQ(NPROXY_PROG_RUNNING, __atomic_load_n(&self->info->prog_state, __ATOMIC_ACQUIRE));
	EXPECT_EQ(1, self->info->prog_seq);
	__atomic_fetch_add(&self->sems[0], 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	/* Collect resets the published state. */
	EXPECT_EQ(NPROXY_PROG_NONE, __atomic_load_n(&self->info->prog_state, __ATOMIC_ACQUIRE));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
	EXPECT_NE(0, self->info->last_wait_done_ns);
}

/*
 * sem_sleepers: 1 while the device sleeps in a WAIT_SEM between two re-reads
 * of the semaphore, 0 once the step is over and during other steps, so a
 * host that just added rings the doorbell (SEM_INC of 0) only when it helps.
 */
TEST_F(prog, sem_sleepers_shown_while_wait_sem_sleeps)
{
	struct nproxy_prog_step wait_step[] = {
		np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 5000 * NP_MS),
	};
	struct nproxy_prog_step delay_step[] = {
		np_step(NPROXY_STEP_DELAY, 0, 0, 50 * NP_MS),
	};
	struct nproxy_sem_op ring = { .sem = 0, .value = 0 };
	struct nproxy_prog_result res;
	uint64_t deadline;
	int seen = 0;

	ASSERT_EQ(0, np_submit(self->rfd, wait_step, 1, NULL));
	deadline = np_now_ns() + 5000 * NP_MS;
	while (!(seen = np_load_acquire32(&self->info->sem_sleepers)) && np_now_ns() < deadline)
		;
	EXPECT_EQ(1, seen);
	__atomic_fetch_add(&self->sems[0], 1, __ATOMIC_SEQ_CST);
	/* The doorbell: adds nothing, wakes the sleeper. */
	EXPECT_EQ(0, ioctl(self->rfd, NPROXY_IOC_SEM_INC, &ring));
	EXPECT_EQ(1, __atomic_load_n(&self->sems[0], __ATOMIC_ACQUIRE));
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(0, np_load_acquire32(&self->info->sem_sleepers));

	/* A DELAY sleeps too, but waits for no semaphore: nothing to ring. */
	ASSERT_EQ(0, np_submit(self->rfd, delay_step, 1, NULL));
	for (int i = 0; i < 1000; i++)
		seen |= np_load_acquire32(&self->info->sem_sleepers) != 0 ? 2 : 0;
	EXPECT_EQ(1, seen);
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
}

/*
 * The completion back-edge across processes: a child that received the
 * region fd over SCM_RIGHTS maps the semaphores itself and increments them
 * with plain atomic adds; the device program waiting on them advances.
 */
TEST_F(prog, wait_sem_advanced_by_other_process_via_scm_rights)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_WAIT_SEM, 2, 3, 10000 * NP_MS),
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 7, 0),
	};
	struct nproxy_prog_result res;
	struct nproxy_region_state st;
	int sv[2], status;
	pid_t child;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		int fd = np_recv_fd(sv[1]);
		uint64_t *sems;
		char go;
		int i;

		if (fd < 0)
			_exit(10);
		sems = np_map(fd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
		if (!sems)
			_exit(11);
		close(fd);
		if (read(sv[1], &go, 1) != 1)
			_exit(12);
		for (i = 0; i < 3; i++) {
			usleep(5000);
			__atomic_fetch_add(&sems[2], 1, __ATOMIC_RELEASE);
		}
		_exit(0);
	}
	close(sv[1]);
	ASSERT_EQ(0, np_submit(self->rfd, steps, 2, NULL));
	ASSERT_EQ(0, np_send_fd(sv[0], self->rfd));
	/* Nothing incremented yet: the device must still be waiting. */
	usleep(50000);
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_GET_STATE, &st));
	EXPECT_EQ(NPROXY_PROG_RUNNING, st.prog_state);
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, st.triggers[0]);
	ASSERT_EQ(1, write(sv[0], "g", 1));

	ASSERT_EQ(0, np_wait_collect(self->rfd, 10000, &res));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(2, res.steps_done);
	EXPECT_EQ(7, np_load_acquire32(&self->trig[0]));
	EXPECT_EQ(3, np_load_acquire64(&self->sems[2]));
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sv[0]);
}

TEST_F(prog, poll_wakes_on_completion)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_DELAY, 0, 0, 100 * NP_MS),
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 0),
	};
	uint64_t t0, waited;
	int ev;

	EXPECT_EQ(0, np_poll(self->rfd, POLLIN, 0));
	/* Before the submit: the DELAY may start before the ioctl returns. */
	t0 = np_now_ns();
	ASSERT_EQ(0, np_submit(self->rfd, steps, 2, NULL));
	EXPECT_EQ(0, np_poll(self->rfd, POLLIN, 0));
	ev = np_poll(self->rfd, POLLIN, 5000);
	waited = np_now_ns() - t0;
	EXPECT_TRUE(ev & POLLIN);
	EXPECT_GE(waited, 90 * NP_MS);	/* it slept through the DELAY */
	EXPECT_LT(waited, 4000 * NP_MS);	/* and was woken, not timed out */
	EXPECT_EQ(1, np_load_acquire32(&self->trig[0]));
}

TEST_F(prog, wait_timeout_reports_timedout)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_WRITE_TRIGGER, 1, 5, 0),
		np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 50 * NP_MS),
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 9, 0),
	};
	long long timeouts0 = np_stat("timeouts");
	struct nproxy_prog_result res;
	uint64_t seq = 0;

	ASSERT_EQ(0, np_submit(self->rfd, steps, 3, &seq));
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	EXPECT_EQ(NPROXY_PROG_TIMEDOUT, res.state);
	EXPECT_EQ(-ETIMEDOUT, res.error);
	EXPECT_EQ(seq, res.seq);
	EXPECT_EQ(1, res.failed_step);
	EXPECT_EQ(1, res.steps_done);
	EXPECT_GE(res.elapsed_ns, 50 * NP_MS);
	/* The step after the failed wait never ran. */
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, np_load_acquire32(&self->trig[0]));
	EXPECT_EQ(timeouts0 + 1, np_stat("timeouts"));
}

TEST_F(prog, inc_sem_step_visible_in_mapping)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_INC_SEM, 3, 40, 0),
		np_step(NPROXY_STEP_INC_SEM, 3, 2, 0),
	};
	struct nproxy_prog_result res;

	ASSERT_EQ(0, np_submit(self->rfd, steps, 2, NULL));
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(42, np_load_acquire64(&self->sems[3]));
}

/* The SEM_INC ioctl rings the doorbell: the wait ends well before its timeout. */
TEST_F(prog, sem_inc_ioctl_advances_wait)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_WAIT_SEM, 1, 2, 10000 * NP_MS),
	};
	struct nproxy_sem_op op = { .sem = 1, .value = 2 };
	struct nproxy_prog_result res;

	ASSERT_EQ(0, np_submit(self->rfd, steps, 1, NULL));
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_SEM_INC, &op));
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
}

/*
 * SIGNAL_EVENT wakes a poll() already sleeping for POLLPRI (the DELAY
 * first lets it fall asleep), and POLLPRI stays set until the collect.
 */
TEST_F(prog, signal_event_sets_pollpri_until_collect)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_DELAY, 0, 0, 200 * NP_MS),
		np_step(NPROXY_STEP_SIGNAL_EVENT, 0, 77, 0),
		np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 10000 * NP_MS),
	};
	struct nproxy_prog_result res;
	uint64_t t0;
	int ev;

	ASSERT_EQ(0, np_submit(self->rfd, steps, 3, NULL));
	t0 = np_now_ns();
	ev = np_poll(self->rfd, POLLPRI, 5000);
	EXPECT_LT(np_now_ns() - t0, 4000 * NP_MS);	/* woken, not timed out */
	EXPECT_TRUE(ev & POLLPRI);
	EXPECT_FALSE(ev & POLLIN);	/* still waiting on the semaphore */
	EXPECT_EQ(1, self->info->events_signalled);
	__atomic_fetch_add(&self->sems[0], 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	EXPECT_EQ(0, np_poll(self->rfd, POLLPRI | POLLIN, 0));
}

TEST_F(prog, cancel_stops_waiting_program)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 30000 * NP_MS),
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 0),
	};
	long long cancels0 = np_stat("cancels");
	struct nproxy_prog_result res;
	uint64_t t0;

	ASSERT_EQ(0, np_submit(self->rfd, steps, 2, NULL));
	usleep(10000);
	t0 = np_now_ns();
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_CANCEL_PROG));
	EXPECT_LT(np_now_ns() - t0, 2000 * NP_MS);
	/* Synchronous: the result is ready at once. */
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_COLLECT_PROG, &res));
	EXPECT_EQ(NPROXY_PROG_CANCELLED, res.state);
	EXPECT_EQ(-ECANCELED, res.error);
	EXPECT_EQ(0, res.steps_done);
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, np_load_acquire32(&self->trig[0]));
	EXPECT_EQ(cancels0 + 1, np_stat("cancels"));
}

/* Closing the region (last fd and mapping) cancels its program. */
TEST_F(prog, close_cancels_program)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_DELAY, 0, 0, 30000 * NP_MS),
	};
	long long cancels0 = np_stat("cancels");
	long long live0 = np_stat("regions_live");
	int rfd = np_create(self->dev, 1, 0);
	uint64_t t0;

	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, np_submit(rfd, steps, 1, NULL));
	t0 = np_now_ns();
	close(rfd);
	EXPECT_LT(np_now_ns() - t0, 2000 * NP_MS);
	EXPECT_EQ(cancels0 + 1, np_stat("cancels"));
	EXPECT_EQ(live0, np_stat("regions_live"));
}

TEST_F(prog, one_program_at_a_time_ebusy)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 10000 * NP_MS),
	};
	struct nproxy_prog_result res;

	ASSERT_EQ(0, np_submit(self->rfd, steps, 1, NULL));
	EXPECT_EQ(-EBUSY, np_submit(self->rfd, steps, 1, NULL));
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_COLLECT_PROG, &res));
	EXPECT_EQ(EAGAIN, errno);
	__atomic_fetch_add(&self->sems[0], 1, __ATOMIC_RELEASE);
	ASSERT_EQ(0, np_poll(self->rfd, POLLIN, 5000) & POLLIN ? 0 : -1);
	/* Finished but not collected: still busy. */
	EXPECT_EQ(-EBUSY, np_submit(self->rfd, steps, 1, NULL));
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_COLLECT_PROG, &res));
	EXPECT_EQ(1, res.seq);
	__atomic_fetch_add(&self->sems[0], 1, __ATOMIC_RELEASE);
	uint64_t seq = 0;

	EXPECT_EQ(0, np_submit(self->rfd, steps, 1, &seq));
	EXPECT_EQ(2, seq);
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
}

TEST_F(prog, collect_or_cancel_without_program_enoent)
{
	struct nproxy_prog_result res;

	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_COLLECT_PROG, &res));
	EXPECT_EQ(ENOENT, errno);
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_CANCEL_PROG));
	EXPECT_EQ(ENOENT, errno);
}

TEST_F(prog, bad_steps_einval)
{
	const struct nproxy_prog_step bad[] = {
		np_step(0, 0, 0, 0),					/* no op 0 */
		np_step(6, 0, 0, 0),					/* unknown op */
		np_step(NPROXY_STEP_WRITE_TRIGGER, 2, 1, 0),		/* stream >= n_streams */
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1ULL << 32, 0),	/* value > u32 */
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 1),		/* unused timeout */
		np_step(NPROXY_STEP_WAIT_SEM, 4, 1, 0),			/* sem >= n_sems */
		np_step(NPROXY_STEP_WAIT_SEM, 0, 1, NPROXY_MAX_WAIT_NS + 1),
		np_step(NPROXY_STEP_DELAY, 0, 0, NPROXY_MAX_WAIT_NS + 1),
		np_step(NPROXY_STEP_DELAY, 1, 0, 1),			/* unused index */
		np_step(NPROXY_STEP_DELAY, 0, 1, 1),			/* unused value */
		np_step(NPROXY_STEP_INC_SEM, 4, 1, 0),
		np_step(NPROXY_STEP_INC_SEM, 0, 1, 1),
		np_step(NPROXY_STEP_SIGNAL_EVENT, 1, 0, 0),
		np_step(NPROXY_STEP_SIGNAL_EVENT, 0, 0, 1),
	};
	struct nproxy_prog_step steps[2];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* A bad step anywhere rejects the whole program. */
		steps[0] = np_step(NPROXY_STEP_INC_SEM, 0, 1, 0);
		steps[1] = bad[i];
		EXPECT_EQ(-EINVAL, np_submit(self->rfd, steps, 2, NULL)) {
			TH_LOG("bad step %zu", i);
		}
	}
	steps[1] = np_step(NPROXY_STEP_INC_SEM, 0, 1, 0);
	steps[1].flags = 1;
	EXPECT_EQ(-EINVAL, np_submit(self->rfd, steps, 2, NULL));
	/* Nothing ran. */
	EXPECT_EQ(0, np_load_acquire64(&self->sems[0]));
	EXPECT_EQ(NPROXY_PROG_NONE, self->info->prog_state);
}

TEST_F(prog, submit_bad_header)
{
	struct nproxy_prog_step step = np_step(NPROXY_STEP_INC_SEM, 0, 1, 0);
	struct nproxy_prog_submit req = { .n_steps = 1, .steps = (uintptr_t)&step };
	static struct nproxy_prog_step many[NPROXY_MAX_PROG_STEPS + 1];

	req.flags = 1;
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_SUBMIT_PROG, &req));
	EXPECT_EQ(EINVAL, errno);
	req.flags = 0;
	req.reserved[1] = 1;
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_SUBMIT_PROG, &req));
	EXPECT_EQ(EINVAL, errno);
	req.reserved[1] = 0;
	EXPECT_EQ(-EINVAL, np_submit(self->rfd, &step, 0, NULL));
	EXPECT_EQ(-EINVAL, np_submit(self->rfd, many, NPROXY_MAX_PROG_STEPS + 1, NULL));
	/* Bad step pointer. */
	req.steps = 8;
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_SUBMIT_PROG, &req));
	EXPECT_EQ(EFAULT, errno);
	/* Bad struct pointer. */
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_SUBMIT_PROG, (void *)8));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(0, np_load_acquire64(&self->sems[0]));
}

/* The longest program is accepted and every step runs. */
TEST_F(prog, max_steps_all_run)
{
	static struct nproxy_prog_step many[NPROXY_MAX_PROG_STEPS];
	struct nproxy_prog_result res;
	int i;

	for (i = 0; i < NPROXY_MAX_PROG_STEPS; i++)
		many[i] = np_step(NPROXY_STEP_INC_SEM, 1, 1, 0);
	ASSERT_EQ(0, np_submit(self->rfd, many, NPROXY_MAX_PROG_STEPS, NULL));
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	EXPECT_EQ(NPROXY_MAX_PROG_STEPS, res.steps_done);
	EXPECT_EQ(NPROXY_MAX_PROG_STEPS, np_load_acquire64(&self->sems[1]));
}

TEST_F(prog, collect_bad_pointer_keeps_result)
{
	struct nproxy_prog_step step = np_step(NPROXY_STEP_INC_SEM, 0, 1, 0);
	struct nproxy_prog_result res;

	ASSERT_EQ(0, np_submit(self->rfd, &step, 1, NULL));
	ASSERT_TRUE(np_poll(self->rfd, POLLIN, 5000) & POLLIN);
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_COLLECT_PROG, (void *)8));
	EXPECT_EQ(EFAULT, errno);
	/* The failed collect consumed nothing. */
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_COLLECT_PROG, &res));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
}

/*
 * SUBMIT_PROG writes seq back: from a read-only struct it is EFAULT before
 * the program is queued (no step ran, prog_seq unchanged, the next submit
 * works) rather than a program that ran and an EFAULT after it.
 */
TEST_F(prog, submit_read_only_struct_not_queued)
{
	struct nproxy_prog_step step = np_step(NPROXY_STEP_INC_SEM, 0, 1, 0);
	struct nproxy_prog_submit *ro;
	struct nproxy_prog_result res;
	uint64_t seq = 0;

	ro = mmap(NULL, np_page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	ro->n_steps = 1;
	ro->steps = (uintptr_t)&step;
	ASSERT_EQ(0, mprotect(ro, np_page_size(), PROT_READ));
	errno = 0;
	EXPECT_EQ(-1, ioctl(self->rfd, NPROXY_IOC_SUBMIT_PROG, ro));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(0, self->info->prog_seq);
	EXPECT_EQ(NPROXY_PROG_NONE, self->info->prog_state);
	EXPECT_EQ(-ENOENT, ioctl(self->rfd, NPROXY_IOC_COLLECT_PROG, &res) ? -errno : 0);
	EXPECT_EQ(0, np_load_acquire64(&self->sems[0]));
	ASSERT_EQ(0, np_submit(self->rfd, &step, 1, &seq));
	EXPECT_EQ(1, seq);
	ASSERT_EQ(0, np_wait_collect(self->rfd, 5000, &res));
	EXPECT_EQ(1, np_load_acquire64(&self->sems[0]));
	munmap(ro, np_page_size());
}

struct collect_call {
	int rfd;
	struct nproxy_prog_result *res;
	int ret;
	int err;
};

static void *collect_call_run(void *arg)
{
	struct collect_call *c = arg;

	c->ret = ioctl(c->rfd, NPROXY_IOC_COLLECT_PROG, c->res);
	c->err = errno;
	return NULL;
}

static int uffd_protect(int uffd, void *addr, size_t len, int on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	return ioctl(uffd, UFFDIO_WRITEPROTECT, &wp);
}

/* The page of the next write-protect fault, or 0 after timeout_ms. */
static uintptr_t uffd_next_fault_page(int uffd, int timeout_ms)
{
	struct uffd_msg msg;

	if (!(np_poll(uffd, POLLIN, timeout_ms) & POLLIN) ||
	    read(uffd, &msg, sizeof(msg)) != sizeof(msg) ||
	    msg.event != UFFD_EVENT_PAGEFAULT)
		return 0;
	return msg.arg.pagefault.address & ~((uintptr_t)np_page_size() - 1);
}

/*
 * A COLLECT whose buffer passes the zeroing before the command but cannot
 * take the result afterwards (made read-only in between) is EFAULT and
 * consumes nothing: the info page still says DONE and the next COLLECT
 * gets the result.  The result struct straddles two pages under
 * userfaultfd write-protection, which stops the collecting thread at its
 * two writes: the zeroing faults on the second page, the copy-out of the
 * result on the first.
 */
TEST_F(prog, collect_copy_out_fault_keeps_result)
{
	struct nproxy_prog_step step = np_step(NPROXY_STEP_INC_SEM, 0, 1, 0);
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_WP };
	struct uffdio_range wake;
	struct nproxy_prog_result res;
	struct collect_call call;
	long ps = np_page_size();
	pthread_t th;
	char *buf;
	int uffd;

	uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		NP_SKIP("userfaultfd: %s (needed to fault between the two writes)", strerror(errno));
	if (ioctl(uffd, UFFDIO_API, &api) || !(api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP))
		NP_SKIP("userfaultfd write-protection is not supported by this kernel");
	buf = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, buf);
	memset(buf, 0xa5, 2 * ps);	/* write-protection applies to present pages */
	reg.range.start = (uintptr_t)buf;
	reg.range.len = 2 * ps;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_REGISTER, &reg));
	ASSERT_EQ(0, uffd_protect(uffd, buf + ps, ps, 1));

	ASSERT_EQ(0, np_submit(self->rfd, &step, 1, NULL));
	ASSERT_TRUE(np_poll(self->rfd, POLLIN, 5000) & POLLIN);
	call.rfd = self->rfd;
	call.res = (void *)(buf + ps - sizeof(*call.res) / 2);
	ASSERT_EQ(0, pthread_create(&th, NULL, collect_call_run, &call));

	/* The zeroing reaches the second page: let it through, stop the first. */
	EXPECT_EQ((uintptr_t)buf + ps, uffd_next_fault_page(uffd, 10000));
	EXPECT_EQ(0, uffd_protect(uffd, buf, ps, 1));
	EXPECT_EQ(0, uffd_protect(uffd, buf + ps, ps, 0));
	/* The copy-out of the result reaches the first page: make it fail. */
	EXPECT_EQ((uintptr_t)buf, uffd_next_fault_page(uffd, 10000));
	EXPECT_EQ(0, mprotect(buf, 2 * ps, PROT_READ));
	wake.start = (uintptr_t)buf;
	wake.len = 2 * ps;
	EXPECT_EQ(0, ioctl(uffd, UFFDIO_WAKE, &wake));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ(-1, call.ret);
	EXPECT_EQ(EFAULT, call.err);

	/* Nothing consumed. */
	EXPECT_EQ(NPROXY_PROG_DONE, __atomic_load_n(&self->info->prog_state, __ATOMIC_ACQUIRE));
	memset(&res, 0, sizeof(res));
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_COLLECT_PROG, &res));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(1, res.seq);
	EXPECT_EQ(1, res.steps_done);
	close(uffd);
	munmap(buf, 2 * ps);
}

TEST_HARNESS_MAIN
