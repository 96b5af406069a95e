// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The emulated device behind the memfd handshake backend.  It runs device
 * programs with the semantics <linux/nproxy.h> documents for nproxy.ko
 * (Documentation/handshake.md):
 *
 *   WRITE_TRIGGER  trigger[index] = value, one release store, then the
 *                  registered trigger notification (the proxy worker's
 *                  wake-up)
 *   WAIT_SEM       until sem[index] >= value, at most timeout_ns (0: the
 *                  maximum) -> TIMEDOUT, error -ETIMEDOUT, failed_step = the
 *                  step
 *   DELAY          timeout_ns of device time
 *   INC_SEM        sem[index] += value, one atomic add
 *   SIGNAL_EVENT   events_signalled++
 *
 * and the same info-page bookkeeping: prog_seq, prog_state (release store
 * after a program's effects), triggers_written, events_signalled,
 * last_trigger_ns (stored before the trigger word), last_wait_done_ns.
 *
 * Where a program runs: a real device needs no host CPU, and every hand-off
 * to another thread costs a wake-up (tens of microseconds across CPUs on a
 * virtual machine), so the program is advanced by whoever makes it runnable:
 * the submitter runs the steps that need no waiting at once; a semaphore
 * increment that rings the bell (nproxy_device_sem_add) runs the steps that
 * the WAIT_SEM was holding back.  The "nproxy-dev" thread only keeps time:
 * it ends DELAY steps and WAIT_SEM timeouts, re-checks a WAIT_SEM every
 * DEVEMU_SEM_POLL_NS (increments made straight through the mapping ring
 * nothing), and finishes a program a ringer could not (it found the lock
 * taken).  Steps always run under
 * emu->lock, in order, one program at a time; cancel and stop end a
 * running program at once.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <nproxy/log.h>
#include <nproxy/seam.h>
#include "handshake_internal.h"
#include "common/common_internal.h"

/* Waits this short are spun (yielding), not parked on a timer. */
#define DEVEMU_SPIN_WAIT_NS	50000ULL
/* An idle emulator thread re-checks its state at least this often. */
#define DEVEMU_IDLE_RECHECK_NS	1000000000ULL
/*
 * For this long after a program ends, the idle thread looks every
 * DEVEMU_SEM_POLL_NS, as it would inside a WAIT_SEM: the next program of
 * a loop of ops then finds it due sooner than its own WAIT_SEM re-check,
 * and its submit needs no wake-up of the thread (one futex call and a
 * thread switch per op, on a CPU the op's own threads need).
 */
#define DEVEMU_HOT_NS		100000000ULL
/* Bound on how long cancel waits for the thread to notice (it is prompt). */
#define DEVEMU_CANCEL_WAIT_NS	5000000000ULL

struct devemu {
	struct devemu_pages pages;
	pid_t owner;			/* the process whose thread this is */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t done_cond;	/* a program finished */

	/* All below under lock. */
	bool stop;
	bool cancel_req;
	bool running;			/* submitted and not finished */
	uint32_t pc;			/* the step to run next */
	bool step_begun;		/* step pc has started (published for tools) */
	bool step_timed;		/* step_deadline_ns is set */
	uint64_t step_deadline_ns;	/* DELAY end / WAIT_SEM timeout of step pc */
	/*
	 * 1 while a WAIT_SEM waits (lock-free reads): the word the region's
	 * bell points at, so that nproxy_device_sem_add rings only then.
	 */
	uint32_t wait_armed;
	uint64_t thread_wake_ns;	/* when the parked thread will look again */
	bool finished;			/* finished and not collected */
	uint64_t next_seq;
	uint64_t submit_ns;
	uint64_t finish_ns;		/* when the last program ended */
	struct nproxy_prog_step *steps;	/* grows, never shrinks: no malloc per program */
	uint32_t n_steps, cap_steps;
	struct nproxy_prog_result result;
	void (*notify_fn)(void *);	/* after every trigger store */
	void *notify_arg;

	/*
	 * Lock-free: submit, cancel, stop and a ring that found the lock
	 * taken signal it; the thread parks on it.
	 */
	struct wake bell;
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

static uint64_t deadline_after(uint64_t start_ns, uint64_t dt_ns)
{
	return dt_ns > UINT64_MAX - start_ns ? UINT64_MAX : start_ns + dt_ns;
}

static void disarm(struct devemu *emu)
{
	if (emu->wait_armed)
		__atomic_store_n(&emu->wait_armed, 0, __ATOMIC_SEQ_CST);
}

/*
 * WAIT_SEM's condition.  Before it reports "not yet", the step is armed:
 * from then on every increment through nproxy_device_sem_add rings, and the
 * check after arming sees any increment made before it (both seq_cst).
 */
static bool sem_reached(struct devemu *emu, const struct nproxy_prog_step *step)
{
	const volatile uint64_t *sem = &emu->pages.sems[step->index];

	if (nproxy_sem_load(sem) >= step->value)
		return true;
	if (!emu->wait_armed)
		__atomic_store_n(&emu->wait_armed, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(sem, __ATOMIC_SEQ_CST) >= step->value;
}

static void finish_program(struct devemu *emu, uint32_t state, uint64_t now_ns)
{
	struct nproxy_prog_result *res = &emu->result;

	disarm(emu);
	res->state = state;
	res->steps_done = emu->pc;
	res->failed_step = state == NPROXY_PROG_DONE ? 0 : emu->pc;
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
	emu->finish_ns = now_ns;
	res->elapsed_ns = emu->finish_ns - emu->submit_ns;

	emu->running = false;
	emu->finished = true;
	emu->cancel_req = false;
	/* After every effect of the program: pairs with acquire loads of prog_state. */
	info_publish_state(emu, state);
	pthread_cond_broadcast(&emu->done_cond);
}

/*
 * One call of advance() runs its steps within microseconds: they share one
 * clock read, taken when first needed (a trigger's or a wait's stamp, a
 * deadline, the end).  Three reads less per op (2 ranks, 1 KiB).
 */
static uint64_t call_clock(uint64_t *clock_ns)
{
	if (!*clock_ns)
		*clock_ns = npx_now_ns();
	return *clock_ns;
}

/*
 * The deadline of step pc (a DELAY's end, a WAIT_SEM's timeout), set at the
 * step's first look, now_ns: a step is looked at in the call that began it,
 * so that is when it began.  Lazily: a WAIT_SEM whose semaphore is there
 * at the first look, and every step that never waits, read no clock
 * (2 ranks, 1 KiB allreduce: three clock reads less per op, of ~36).
 */
static uint64_t step_deadline(struct devemu *emu, const struct nproxy_prog_step *step,
			      uint64_t now_ns)
{
	if (!emu->step_timed) {
		uint64_t t = step->op == NPROXY_STEP_WAIT_SEM && !step->timeout_ns ?
			     NPROXY_MAX_WAIT_NS : step->timeout_ns;

		emu->step_deadline_ns = deadline_after(now_ns, t);
		emu->step_timed = true;
	}
	return emu->step_deadline_ns;
}

/*
 * Run the program from step pc for as long as no step has to wait.  Returns
 * when the program has finished (0) or the time at which the blocking step
 * must be looked at again (its deadline, or the next WAIT_SEM re-check).
 * Called with emu->lock held, by any thread.
 */
static uint64_t advance(struct devemu *emu, uint64_t clock_ns)
{
	/* clock_ns: the caller's read of the clock, or 0 (call_clock()) */

	while (emu->running) {
		const struct nproxy_prog_step *step = &emu->steps[emu->pc];
		uint64_t now_ns;

		if (interrupted(emu)) {
			finish_program(emu, NPROXY_PROG_CANCELLED, call_clock(&clock_ns));
			break;
		}
		if (emu->pc == emu->n_steps) {
			finish_program(emu, NPROXY_PROG_DONE, call_clock(&clock_ns));
			break;
		}
		if (!emu->step_begun) {
			emu->step_begun = true;
			emu->step_timed = false;
			/* For tools: the step the device is in (hang evidence). */
			__atomic_store_n(&emu->pages.info->prog_step, emu->pc, __ATOMIC_RELAXED);
		}
		switch (step->op) {
		case NPROXY_STEP_WRITE_TRIGGER:
			/* Like the module: time stamp and counter first, then the word. */
			__atomic_store_n(&emu->pages.info->last_trigger_ns, call_clock(&clock_ns),
					 __ATOMIC_RELAXED);
			info_count(&emu->pages.info->triggers_written);
			nproxy_trigger_store(&emu->pages.triggers[step->index], (uint32_t)step->value);
			if (emu->notify_fn)
				emu->notify_fn(emu->notify_arg);
			break;
		case NPROXY_STEP_INC_SEM:
			nproxy_sem_add(&emu->pages.sems[step->index], step->value);
			break;
		case NPROXY_STEP_SIGNAL_EVENT:
			info_count(&emu->pages.info->events_signalled);
			break;
		case NPROXY_STEP_DELAY:
			now_ns = call_clock(&clock_ns);
			if (now_ns < step_deadline(emu, step, now_ns))
				return emu->step_deadline_ns;
			break;
		case NPROXY_STEP_WAIT_SEM:
			/* The semaphore first, then the deadline: just in time counts. */
			if (!sem_reached(emu, step)) {
				uint64_t deadline_ns;

				now_ns = call_clock(&clock_ns);
				deadline_ns = step_deadline(emu, step, now_ns);
				if (now_ns >= deadline_ns) {
					finish_program(emu, NPROXY_PROG_TIMEDOUT, now_ns);
					return 0;
				}
				now_ns = deadline_after(now_ns, DEVEMU_SEM_POLL_NS);
				return now_ns < deadline_ns ? now_ns : deadline_ns;
			}
			disarm(emu);
			__atomic_store_n(&emu->pages.info->last_wait_done_ns, call_clock(&clock_ns),
					 __ATOMIC_RELEASE);
			break;
		default:
			/* Submit validates every step; reaching this is a library bug. */
			finish_program(emu, NPROXY_PROG_ERROR, call_clock(&clock_ns));
			return 0;
		}
		emu->pc++;
		emu->step_begun = false;
	}
	return 0;
}

static void *devemu_main(void *arg)
{
	struct devemu *emu = arg;

	npx_err_on_library_thread();
	/* Delays and re-checks are tens of microseconds: keep them honest. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	pthread_mutex_lock(&emu->lock);
	for (;;) {
		uint32_t seen = wake_seq(&emu->bell);
		uint64_t now_ns = npx_now_ns(), wake_ns;
		bool in_delay;

		wake_ns = advance(emu, 0);	/* stop while running: ends CANCELLED */
		if (emu->stop)
			break;
		in_delay = emu->running && emu->steps[emu->pc].op == NPROXY_STEP_DELAY;
		if (!wake_ns && emu->finish_ns && now_ns - emu->finish_ns < DEVEMU_HOT_NS)
			wake_ns = now_ns + DEVEMU_SEM_POLL_NS;
		if (!wake_ns || wake_ns - now_ns > DEVEMU_IDLE_RECHECK_NS)
			wake_ns = now_ns + DEVEMU_IDLE_RECHECK_NS;
		emu->thread_wake_ns = wake_ns;
		pthread_mutex_unlock(&emu->lock);
		now_ns = npx_now_ns();
		if (wake_ns > now_ns && wake_ns - now_ns <= DEVEMU_SPIN_WAIT_NS) {
			/*
			 * A short DELAY (the emulated device reaching the net
			 * stage): a timer wake-up would overshoot it several
			 * times on a virtual machine, so yield until it is over.
			 */
			while (npx_now_ns() < wake_ns && wake_seq(&emu->bell) == seen)
				sched_yield();
		} else if (wake_ns > now_ns) {
			/*
			 * A timer wake-up is late by tens of microseconds on a
			 * virtual machine: the end of a DELAY is woken for that
			 * much early and spun (2 ranks, 1 KiB, device delay
			 * 100 us: 117 us per op, 122-154 us without).
			 */
			wake_wait(&emu->bell, seen,
				  wake_ns - now_ns - (in_delay ? DEVEMU_SPIN_WAIT_NS : 0));
		}
		pthread_mutex_lock(&emu->lock);
	}
	pthread_mutex_unlock(&emu->lock);
	return NULL;
}

/* The thread must look sooner than it planned to (called with emu->lock held). */
static void poke_thread(struct devemu *emu, uint64_t wake_ns)
{
	if (wake_ns && wake_ns < emu->thread_wake_ns) {
		emu->thread_wake_ns = wake_ns;
		wake_signal(&emu->bell);
	}
}

/* nproxy_device_sem_add rang: run what the increment unblocked, here. */
void npx_devemu_ring(struct devemu *emu)
{
	if (emu->owner != npx_self_pid())
		return;	/* an inherited region: no device in this process */
	if (pthread_mutex_trylock(&emu->lock) == 0) {
		poke_thread(emu, advance(emu, 0));
		pthread_mutex_unlock(&emu->lock);
		return;
	}
	/* Busy: the holder may be the thread itself; it re-loops on this. */
	wake_signal(&emu->bell);
}

/*
 * After fork() the child has the pages but not the thread, and the lock may
 * have been held by that thread at the fork: the child must touch neither.
 */
static bool inherited(const struct devemu *emu)
{
	if (npx_self_pid() == emu->owner)
		return false;
	nproxy_log(NPROXY_LOG_ERROR,
		   "handshake: the memfd region's emulated device belongs to pid %d, not %d (inherited across fork)",
		   (int)emu->owner, (int)getpid());
	return true;
}

enum nproxy_status npx_devemu_start(const struct devemu_pages *pages, struct devemu **out)
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
	emu->owner = npx_self_pid();
	emu->next_seq = 1;
	emu->thread_wake_ns = UINT64_MAX;

	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_mutex_init(&emu->lock, NULL);
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

void npx_devemu_stop(struct devemu *emu)
{
	if (!emu)
		return;
	if (npx_self_pid() != emu->owner) {
		/* Forked child: no thread to stop, a lock it must not take. */
		free(emu);
		return;
	}
	pthread_mutex_lock(&emu->lock);
	emu->stop = true;	/* a running program ends CANCELLED ("by close") */
	pthread_mutex_unlock(&emu->lock);
	wake_signal(&emu->bell);
	pthread_join(emu->thread, NULL);

	free(emu->steps);
	pthread_cond_destroy(&emu->done_cond);
	pthread_mutex_destroy(&emu->lock);
	free(emu);
}

enum nproxy_status npx_devemu_submit(struct devemu *emu, const struct nproxy_prog_step *steps,
				 uint32_t n_steps, uint64_t *seq)
{
	if (inherited(emu))
		return NPROXY_INVALID_HANDLE;
	pthread_mutex_lock(&emu->lock);
	if (emu->running || emu->finished) {
		pthread_mutex_unlock(&emu->lock);
		return NPROXY_BUSY;
	}
	if (n_steps > emu->cap_steps) {
		struct nproxy_prog_step *grown = realloc(emu->steps, sizeof(*grown) * n_steps);

		if (!grown) {
			pthread_mutex_unlock(&emu->lock);
			return NPROXY_RESOURCE;
		}
		emu->steps = grown;
		emu->cap_steps = n_steps;
	}
	/* Copied: the caller's array may go away at once. */
	memcpy(emu->steps, steps, sizeof(*steps) * n_steps);
	emu->n_steps = n_steps;
	emu->submit_ns = npx_now_ns();
	memset(&emu->result, 0, sizeof(emu->result));
	emu->result.seq = emu->next_seq++;
	emu->cancel_req = false;
	emu->running = true;
	emu->pc = 0;
	emu->step_begun = false;
	__atomic_store_n(&emu->pages.info->prog_seq, emu->result.seq, __ATOMIC_RELAXED);
	__atomic_store_n(&emu->pages.info->prog_step, 0, __ATOMIC_RELAXED);
	info_publish_state(emu, NPROXY_PROG_RUNNING);
	if (seq)
		*seq = emu->result.seq;
	/* What needs no waiting runs now; the thread keeps the time of the rest. */
	poke_thread(emu, advance(emu, emu->submit_ns));
	pthread_mutex_unlock(&emu->lock);
	return NPROXY_SUCCESS;
}

enum nproxy_status npx_devemu_cancel(struct devemu *emu)
{
	uint64_t deadline_ns = npx_now_ns() + DEVEMU_CANCEL_WAIT_NS;
	enum nproxy_status st = NPROXY_SUCCESS;

	if (inherited(emu))
		return NPROXY_INVALID_HANDLE;
	pthread_mutex_lock(&emu->lock);
	if (!emu->running) {
		pthread_mutex_unlock(&emu->lock);
		return NPROXY_INVALID;
	}
	emu->cancel_req = true;
	/* Synchronous, like the module's: once we return the program is over. */
	advance(emu, 0);
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

enum nproxy_status npx_devemu_wait(struct devemu *emu, int timeout_ms,
			       struct nproxy_prog_result *result)
{
	enum nproxy_status st = NPROXY_SUCCESS;
	uint64_t deadline_ns = 0;	/* read only if the program still runs */

	if (inherited(emu))
		return NPROXY_INVALID_HANDLE;
	pthread_mutex_lock(&emu->lock);
	if (!emu->running && !emu->finished) {
		st = NPROXY_INVALID;
		goto out;
	}
	while (emu->running) {
		struct timespec ts;

		if (!deadline_ns)
			deadline_ns = npx_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
		ts = hs_ns_to_timespec(deadline_ns);

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

const volatile uint32_t *npx_devemu_sem_sleepers(struct devemu *emu)
{
	return &emu->wait_armed;
}

void npx_devemu_set_trigger_notify(struct devemu *emu, void (*fn)(void *), void *arg)
{
	if (inherited(emu))
		return;
	/* The thread calls it under the lock: once we return, the old one is done. */
	pthread_mutex_lock(&emu->lock);
	emu->notify_fn = fn;
	emu->notify_arg = arg;
	pthread_mutex_unlock(&emu->lock);
}
