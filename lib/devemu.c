// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The emulated device behind the memfd handshake backend: one thread
 * ("nproxy-dev") per region that runs device programs with the semantics
 * <linux/nproxy.h> documents for nproxy.ko (Documentation/handshake.md):
 *
 *   WRITE_TRIGGER  trigger[index] = value, one release store
 *   WAIT_SEM       until sem[index] >= value, checked every
 *                  DEVEMU_SEM_POLL_NS, at most timeout_ns (0: the maximum)
 *                  -> TIMEDOUT, error -ETIMEDOUT, failed_step = the step
 *   DELAY          sleep timeout_ns
 *   INC_SEM        sem[index] += value, one atomic add
 *   SIGNAL_EVENT   events_signalled++
 *
 * and the same info-page bookkeeping: prog_seq, prog_state (release store
 * after a program's effects), triggers_written, events_signalled,
 * last_trigger_ns (stored before the trigger word), last_wait_done_ns.
 *
 * One program at a time; cancel and stop interrupt any sleep or wait at
 * once (the thread sleeps on a condition variable they signal).  The thread
 * holds emu->lock except while it sleeps, so submit/cancel/wait see a
 * consistent state; the pages themselves are only touched with atomics,
 * because the host side touches them without any lock.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <nproxy/log.h>
#include "handshake_internal.h"

/* An idle emulator re-checks its stop flag at least this often. */
#define DEVEMU_IDLE_RECHECK_NS	1000000000ULL
/* Bound on how long cancel waits for the thread to notice (it is prompt). */
#define DEVEMU_CANCEL_WAIT_NS	5000000000ULL

struct devemu {
	struct devemu_pages pages;
	pid_t owner;			/* the process whose thread this is */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t work_cond;	/* to the thread: program, cancel, stop */
	pthread_cond_t done_cond;	/* from the thread: program finished */

	/* All below under lock. */
	bool stop;
	bool cancel_req;
	bool pending;			/* submitted, the thread has not taken it */
	bool running;			/* submitted and not finished */
	bool finished;			/* finished and not collected */
	uint64_t next_seq;
	uint64_t submit_ns;
	struct nproxy_prog_step *steps;
	uint32_t n_steps;
	struct nproxy_prog_result result;
};

/* Info page fields: written only here (under lock), read lock-free by users. */
static void info_publish_state(struct devemu *emu, uint32_t state)
{
	__atomic_store_n(&emu->pages.info->prog_state, state, __ATOMIC_RELEASE);
}

static void info_count(__u64 *counter)
{
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELEASE);
}

static bool interrupted(const struct devemu *emu)
{
	return emu->cancel_req || emu->stop;
}

/*
 * Sleep on work_cond until deadline_ns or until cancel/stop.  Returns false
 * when interrupted.  Spurious and unrelated wake-ups just loop.
 */
static bool sleep_until(struct devemu *emu, uint64_t deadline_ns)
{
	while (!interrupted(emu)) {
		struct timespec ts;

		if (hs_now_ns() >= deadline_ns)
			return true;
		ts = hs_ns_to_timespec(deadline_ns);
		pthread_cond_timedwait(&emu->work_cond, &emu->lock, &ts);
	}
	return false;
}

static uint64_t deadline_after(uint64_t start_ns, uint64_t dt_ns)
{
	return dt_ns > UINT64_MAX - start_ns ? UINT64_MAX : start_ns + dt_ns;
}

/*
 * WAIT_SEM: the condition is checked first, then every poll interval, and
 * once more at the deadline, so a semaphore that reaches its value just in
 * time still counts.
 */
static uint32_t run_wait_sem(struct devemu *emu, const struct nproxy_prog_step *step)
{
	const volatile uint64_t *sem = &emu->pages.sems[step->index];
	uint64_t timeout_ns = step->timeout_ns ? step->timeout_ns : NPROXY_MAX_WAIT_NS;
	uint64_t deadline_ns = deadline_after(hs_now_ns(), timeout_ns);

	for (;;) {
		uint64_t now_ns, next_poll_ns;

		if (nproxy_sem_load(sem) >= step->value) {
			__atomic_store_n(&emu->pages.info->last_wait_done_ns, hs_now_ns(),
					 __ATOMIC_RELEASE);
			return NPROXY_PROG_DONE;
		}
		if (interrupted(emu))
			return NPROXY_PROG_CANCELLED;
		now_ns = hs_now_ns();
		if (now_ns >= deadline_ns)
			return NPROXY_PROG_TIMEDOUT;
		next_poll_ns = deadline_after(now_ns, DEVEMU_SEM_POLL_NS);
		/* Interrupted or not: the loop re-checks the sem, then the cancel. */
		sleep_until(emu, next_poll_ns < deadline_ns ? next_poll_ns : deadline_ns);
	}
}

/* Runs one step; returns DONE to go on, or the program's final state. */
static uint32_t run_step(struct devemu *emu, const struct nproxy_prog_step *step)
{
	switch (step->op) {
	case NPROXY_STEP_WRITE_TRIGGER:
		/* Like the module: time stamp and counter first, then the word. */
		__atomic_store_n(&emu->pages.info->last_trigger_ns, hs_now_ns(), __ATOMIC_RELAXED);
		info_count(&emu->pages.info->triggers_written);
		nproxy_trigger_store(&emu->pages.triggers[step->index], (uint32_t)step->value);
		return NPROXY_PROG_DONE;
	case NPROXY_STEP_WAIT_SEM:
		return run_wait_sem(emu, step);
	case NPROXY_STEP_DELAY:
		return sleep_until(emu, deadline_after(hs_now_ns(), step->timeout_ns)) ?
			NPROXY_PROG_DONE : NPROXY_PROG_CANCELLED;
	case NPROXY_STEP_INC_SEM:
		nproxy_sem_add(&emu->pages.sems[step->index], step->value);
		return NPROXY_PROG_DONE;
	case NPROXY_STEP_SIGNAL_EVENT:
		info_count(&emu->pages.info->events_signalled);
		return NPROXY_PROG_DONE;
	}
	/* Submit validates every step; reaching this is a library bug. */
	return NPROXY_PROG_ERROR;
}

static void run_program(struct devemu *emu)
{
	struct nproxy_prog_result *res = &emu->result;
	uint32_t state = NPROXY_PROG_DONE;
	uint32_t i;

	for (i = 0; i < emu->n_steps; i++) {
		if (interrupted(emu)) {
			state = NPROXY_PROG_CANCELLED;
			break;
		}
		state = run_step(emu, &emu->steps[i]);
		if (state != NPROXY_PROG_DONE)
			break;
	}

	res->state = state;
	res->steps_done = i;
	res->failed_step = state == NPROXY_PROG_DONE ? 0 : i;
	switch (state) {
	case NPROXY_PROG_DONE:
		res->error = 0;
		break;
	case NPROXY_PROG_TIMEDOUT:
		res->error = -ETIMEDOUT;
		break;
	case NPROXY_PROG_CANCELLED:
		res->error = -ECANCELED;
		break;
	default:
		res->error = -EINVAL;
		break;
	}
	res->elapsed_ns = hs_now_ns() - emu->submit_ns;

	free(emu->steps);
	emu->steps = NULL;
	emu->running = false;
	emu->finished = true;
	emu->cancel_req = false;
	/* After every effect of the program: pairs with acquire loads of prog_state. */
	info_publish_state(emu, state);
	pthread_cond_broadcast(&emu->done_cond);
}

static void *devemu_main(void *arg)
{
	struct devemu *emu = arg;

	/* Poll intervals and delays are tens of microseconds: keep them honest. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	pthread_mutex_lock(&emu->lock);
	while (!emu->stop) {
		if (!emu->pending) {
			struct timespec ts = hs_ns_to_timespec(hs_now_ns() + DEVEMU_IDLE_RECHECK_NS);

			pthread_cond_timedwait(&emu->work_cond, &emu->lock, &ts);
			continue;
		}
		emu->pending = false;
		run_program(emu);
	}
	pthread_mutex_unlock(&emu->lock);
	return NULL;
}

/*
 * After fork() the child has the pages but not the thread, and the lock may
 * have been held by that thread at the fork: the child must touch neither.
 */
static bool inherited(const struct devemu *emu)
{
	if (getpid() == emu->owner)
		return false;
	nproxy_log(NPROXY_LOG_ERROR,
		   "handshake: the memfd region's emulated device belongs to pid %d, not %d (inherited across fork)",
		   (int)emu->owner, (int)getpid());
	return true;
}

enum nproxy_status devemu_start(const struct devemu_pages *pages, struct devemu **out)
{
	pthread_condattr_t cattr;
	sigset_t all, old;
	struct devemu *emu;
	int err;

	*out = NULL;
	emu = calloc(1, sizeof(*emu));
	if (!emu)
		return NPROXY_RESOURCE;
	emu->pages = *pages;
	emu->owner = getpid();
	emu->next_seq = 1;

	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_mutex_init(&emu->lock, NULL);
	pthread_cond_init(&emu->work_cond, &cattr);
	pthread_cond_init(&emu->done_cond, &cattr);
	pthread_condattr_destroy(&cattr);

	/* The device thread takes no signals: they belong to the application. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&emu->thread, NULL, devemu_main, emu);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		nproxy_log(NPROXY_LOG_ERROR, "Failed to create worker thread: %d", err);
		pthread_cond_destroy(&emu->done_cond);
		pthread_cond_destroy(&emu->work_cond);
		pthread_mutex_destroy(&emu->lock);
		free(emu);
		return NPROXY_RESOURCE;
	}
	err = pthread_setname_np(emu->thread, "nproxy-dev");
	if (err)
		nproxy_log(NPROXY_LOG_WARN, "Cannot set thread name: %d", err);
	*out = emu;
	return NPROXY_SUCCESS;
}

void devemu_stop(struct devemu *emu)
{
	if (!emu)
		return;
	if (getpid() != emu->owner) {
		/* Forked child: no thread to stop, a lock it must not take. */
		free(emu);
		return;
	}
	pthread_mutex_lock(&emu->lock);
	emu->stop = true;	/* a running program ends CANCELLED ("by close") */
	pthread_cond_broadcast(&emu->work_cond);
	pthread_mutex_unlock(&emu->lock);
	pthread_join(emu->thread, NULL);

	free(emu->steps);	/* submitted but never taken by the thread */
	pthread_cond_destroy(&emu->done_cond);
	pthread_cond_destroy(&emu->work_cond);
	pthread_mutex_destroy(&emu->lock);
	free(emu);
}

enum nproxy_status devemu_submit(struct devemu *emu, const struct nproxy_prog_step *steps,
				 uint32_t n_steps, uint64_t *seq)
{
	struct nproxy_prog_step *copy;

	if (inherited(emu))
		return NPROXY_INVALID_HANDLE;
	/* Copy before taking the lock: the caller's array may go away at once. */
	copy = malloc(sizeof(*copy) * n_steps);
	if (!copy)
		return NPROXY_RESOURCE;
	memcpy(copy, steps, sizeof(*copy) * n_steps);

	pthread_mutex_lock(&emu->lock);
	if (emu->running || emu->finished) {
		pthread_mutex_unlock(&emu->lock);
		free(copy);
		return NPROXY_BUSY;
	}
	emu->steps = copy;
	emu->n_steps = n_steps;
	emu->submit_ns = hs_now_ns();
	memset(&emu->result, 0, sizeof(emu->result));
	emu->result.seq = emu->next_seq++;
	emu->cancel_req = false;
	emu->pending = true;
	emu->running = true;
	__atomic_store_n(&emu->pages.info->prog_seq, emu->result.seq, __ATOMIC_RELAXED);
	info_publish_state(emu, NPROXY_PROG_RUNNING);
	if (seq)
		*seq = emu->result.seq;
	pthread_cond_broadcast(&emu->work_cond);
	pthread_mutex_unlock(&emu->lock);
	return NPROXY_SUCCESS;
}

enum nproxy_status devemu_cancel(struct devemu *emu)
{
	uint64_t deadline_ns = hs_now_ns() + DEVEMU_CANCEL_WAIT_NS;
	enum nproxy_status st = NPROXY_SUCCESS;

	if (inherited(emu))
		return NPROXY_INVALID_HANDLE;
	pthread_mutex_lock(&emu->lock);
	if (!emu->running) {
		pthread_mutex_unlock(&emu->lock);
		return NPROXY_INVALID;
	}
	emu->cancel_req = true;
	pthread_cond_broadcast(&emu->work_cond);
	/* Synchronous, like the module's: once we return the program is over. */
	while (emu->running) {
		struct timespec ts = hs_ns_to_timespec(deadline_ns);

		if (pthread_cond_timedwait(&emu->done_cond, &emu->lock, &ts) == ETIMEDOUT &&
		    emu->running) {
			st = NPROXY_TIMEOUT;
			break;
		}
	}
	pthread_mutex_unlock(&emu->lock);
	return st;
}

enum nproxy_status devemu_wait(struct devemu *emu, int timeout_ms,
			       struct nproxy_prog_result *result)
{
	uint64_t deadline_ns = hs_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	enum nproxy_status st = NPROXY_SUCCESS;

	if (inherited(emu))
		return NPROXY_INVALID_HANDLE;
	pthread_mutex_lock(&emu->lock);
	if (!emu->running && !emu->finished) {
		st = NPROXY_INVALID;
		goto out;
	}
	while (emu->running) {
		struct timespec ts = hs_ns_to_timespec(deadline_ns);

		if (pthread_cond_timedwait(&emu->done_cond, &emu->lock, &ts) == ETIMEDOUT &&
		    emu->running) {
			st = NPROXY_TIMEOUT;
			goto out;
		}
	}
	*result = emu->result;
	emu->finished = false;
	info_publish_state(emu, NPROXY_PROG_NONE);
out:
	pthread_mutex_unlock(&emu->lock);
	return st;
}
