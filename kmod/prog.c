// SPDX-License-Identifier: GPL-2.0
/*
 * The emulated device: runs a region's device program (write trigger, wait
 * for a semaphore, delay, increment a semaphore, signal an event) on a
 * kernel worker, the way the accelerator's sequencer would.
 *
 * One program per region at a time.  States, as published (release) in
 * the info page: NONE -submit-> RUNNING -worker-> DONE | TIMEDOUT |
 * CANCELLED | ERROR -collect-> NONE.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "nproxy_priv.h"

/*
 * Unbound: a waiting program sleeps in its work item, so every live region
 * may need a worker of its own; max_active covers them all.
 */
static struct workqueue_struct *nproxy_wq;

void nproxy_prog_sem_doorbell(struct nproxy_region *r)
{
	if (wq_has_sleeper(&r->doorbell))
		wake_up(&r->doorbell);
}

static bool nproxy_sem_reached(const u64 *sem, u64 value)
{
	/* Pairs with the host's release add: its writes before it are visible. */
	return sem && smp_load_acquire(sem) >= value;
}

/*
 * Wait until *@sem >= @value (or, with @sem NULL, just until the deadline),
 * at most @timeout_ns.  Host increments through the mapping make no
 * syscall, so the semaphore is re-read every sem_poll_ns; the SEM_* ioctls
 * and cancel ring the doorbell and end a nap early.  While it naps the
 * info page's sem_sleepers is 1, so a host library that just added rings
 * (a SEM_INC of 0) only when somebody sleeps.
 */
static int nproxy_step_wait(struct nproxy_region *r, const u64 *sem,
			    u64 value, u64 timeout_ns)
{
	ktime_t deadline = ktime_add_ns(ktime_get(), timeout_ns);

	for (;;) {
		DEFINE_WAIT(wait);
		ktime_t now, until;

		if (nproxy_sem_reached(sem, value)) {
			WRITE_ONCE(r->info->last_wait_done_ns, ktime_get_ns());
			return 0;
		}
		if (READ_ONCE(r->cancel))
			return -ECANCELED;
		now = ktime_get();
		if (ktime_compare(now, deadline) >= 0)
			return sem ? -ETIMEDOUT : 0;
		until = deadline;
		if (sem)
			until = min(deadline,
				    ktime_add_ns(now, READ_ONCE(nproxy_sem_poll_ns)));

		prepare_to_wait(&r->doorbell, &wait, TASK_INTERRUPTIBLE);
		/* Tell the host we sleep, so that it rings after an increment. */
		if (sem) {
			/*
			 * Full barrier between the flag and the re-check below,
			 * pairing with the host's atomic add before its load of
			 * the flag: its add is seen here or our flag there.
			 */
			smp_store_mb(r->info->sem_sleepers, 1);
		}
		/* Re-check after queueing so a doorbell cannot be missed. */
		if (!READ_ONCE(r->cancel) && !nproxy_sem_reached(sem, value))
			schedule_hrtimeout_range(&until, 0, HRTIMER_MODE_ABS);
		if (sem)
			WRITE_ONCE(r->info->sem_sleepers, 0);
		finish_wait(&r->doorbell, &wait);
	}
}

static void nproxy_step_signal(struct nproxy_region *r, u64 value)
{
	struct nproxy_event ev = {
		.type = NPROXY_EVENT_SIGNAL,
		.value = value, .has_value = true,
	};

	spin_lock(&r->lock);
	WRITE_ONCE(r->info->events_signalled, r->info->events_signalled + 1);
	r->event_pending = true;
	spin_unlock(&r->lock);
	nproxy_region_wake_pollers(r, EPOLLPRI);
	nproxy_nl_event(r, &ev);
}

static int nproxy_step_run(struct nproxy_region *r,
			   const struct nproxy_prog_step *step)
{
	switch (step->op) {
	case NPROXY_STEP_WRITE_TRIGGER:
		nproxy_region_add_trigger(r, step->index, (u32)step->value);
		return 0;
	case NPROXY_STEP_WAIT_SEM:
		return nproxy_step_wait(r, &r->sems[step->index], step->value,
					step->timeout_ns ?: NPROXY_MAX_WAIT_NS);
	case NPROXY_STEP_DELAY:
		return nproxy_step_wait(r, NULL, 0, step->timeout_ns);
	case NPROXY_STEP_INC_SEM:
		atomic64_add((s64)step->value,
			     (atomic64_t *)&r->sems[step->index]);
		return 0;
	case NPROXY_STEP_SIGNAL_EVENT:
		nproxy_step_signal(r, step->value);
		return 0;
	}
	/* Validated at submit; reaching here is a bug, reported as ERROR. */
	WARN_ON_ONCE(1);
	return -EINVAL;
}

static const u32 nproxy_event_of_state[] = {
	[NPROXY_PROG_DONE]	= NPROXY_EVENT_PROG_DONE,
	[NPROXY_PROG_TIMEDOUT]	= NPROXY_EVENT_PROG_TIMEDOUT,
	[NPROXY_PROG_CANCELLED]	= NPROXY_EVENT_PROG_CANCELLED,
	[NPROXY_PROG_ERROR]	= NPROXY_EVENT_PROG_ERROR,
};

static void nproxy_prog_finish(struct nproxy_region *r,
			       struct nproxy_prog *prog, int err, u32 steps_done)
{
	struct nproxy_event ev = { .prog_seq = prog->seq, .has_prog = true };
	u32 state;

	switch (err) {
	case 0:
		state = NPROXY_PROG_DONE;
		break;
	case -ETIMEDOUT:
		state = NPROXY_PROG_TIMEDOUT;
		atomic64_inc(&nproxy_stats.timeouts);
		break;
	case -ECANCELED:
		state = NPROXY_PROG_CANCELLED;
		atomic64_inc(&nproxy_stats.prog_cancels);
		break;
	default:
		state = NPROXY_PROG_ERROR;
		break;
	}

	spin_lock(&r->lock);
	memset(&r->result, 0, sizeof(r->result));
	r->result.seq = prog->seq;
	r->result.state = state;
	r->result.failed_step = err ? steps_done : 0;
	r->result.error = err;
	r->result.steps_done = steps_done;
	r->result.elapsed_ns = ktime_to_ns(ktime_sub(ktime_get(), prog->submitted));
	r->prog = NULL;
	r->prog_state = state;
	/* After every effect of the program: pairs with userspace acquire. */
	smp_store_release(&r->info->prog_state, state);
	spin_unlock(&r->lock);

	kvfree(prog);
	nproxy_region_wake_pollers(r, EPOLLIN | EPOLLRDNORM);
	ev.type = nproxy_event_of_state[state];
	ev.prog_state = state;
	nproxy_nl_event(r, &ev);
}

static void nproxy_prog_work(struct work_struct *work)
{
	struct nproxy_region *r = container_of(work, struct nproxy_region,
					       prog_work);
	struct nproxy_prog *prog;
	int err = 0;
	u32 i;

	spin_lock(&r->lock);
	prog = r->prog;
	spin_unlock(&r->lock);
	if (WARN_ON_ONCE(!prog))
		return;

	for (i = 0; i < prog->n_steps; i++) {
		if (READ_ONCE(r->cancel)) {
			err = -ECANCELED;
			break;
		}
		/* For tools: the step the device is in (hang evidence). */
		WRITE_ONCE(r->info->prog_step, i);
		err = nproxy_step_run(r, &prog->steps[i]);
		if (err)
			break;
	}
	nproxy_prog_finish(r, prog, err, i);
}

/* Every field a step does not use must be zero; indices in range. */
static int nproxy_step_check(const struct nproxy_region *r,
			     const struct nproxy_prog_step *s)
{
	if (s->flags)
		return -EINVAL;
	switch (s->op) {
	case NPROXY_STEP_WRITE_TRIGGER:
		if (s->index >= r->n_streams || s->value > U32_MAX ||
		    s->timeout_ns)
			return -EINVAL;
		return 0;
	case NPROXY_STEP_WAIT_SEM:
		if (s->index >= r->n_sems || s->timeout_ns > NPROXY_MAX_WAIT_NS)
			return -EINVAL;
		return 0;
	case NPROXY_STEP_DELAY:
		if (s->index || s->value || s->timeout_ns > NPROXY_MAX_WAIT_NS)
			return -EINVAL;
		return 0;
	case NPROXY_STEP_INC_SEM:
		if (s->index >= r->n_sems || s->timeout_ns)
			return -EINVAL;
		return 0;
	case NPROXY_STEP_SIGNAL_EVENT:
		if (s->index || s->timeout_ns)
			return -EINVAL;
		return 0;
	}
	return -EINVAL;
}

long nproxy_prog_submit(struct nproxy_region *r, struct nproxy_prog_submit *req)
{
	struct nproxy_prog *prog;
	long err;
	u32 i;

	/* req->seq is output only; its input value is ignored. */
	if (req->flags || req->reserved[0] || req->reserved[1])
		return -EINVAL;
	if (!req->n_steps || req->n_steps > NPROXY_MAX_PROG_STEPS)
		return -EINVAL;

	if (nproxy_fault_should_fail(NPROXY_FAULT_PROG_SUBMIT))
		return -ENOMEM;
	prog = kvmalloc(struct_size(prog, steps, req->n_steps), GFP_KERNEL);
	if (!prog)
		return -ENOMEM;
	prog->n_steps = req->n_steps;
	if (copy_from_user(prog->steps, u64_to_user_ptr(req->steps),
			   array_size(req->n_steps, sizeof(prog->steps[0])))) {
		err = -EFAULT;
		goto err_free;
	}
	for (i = 0; i < prog->n_steps; i++) {
		err = nproxy_step_check(r, &prog->steps[i]);
		if (err)
			goto err_free;
	}

	mutex_lock(&r->prog_mutex);
	spin_lock(&r->lock);
	if (r->prog_state != NPROXY_PROG_NONE) {
		spin_unlock(&r->lock);
		mutex_unlock(&r->prog_mutex);
		err = -EBUSY;
		goto err_free;
	}
	prog->seq = ++r->prog_seq;
	prog->submitted = ktime_get();
	r->prog = prog;
	r->prog_state = NPROXY_PROG_RUNNING;
	WRITE_ONCE(r->cancel, false);
	WRITE_ONCE(r->info->prog_seq, prog->seq);
	WRITE_ONCE(r->info->prog_step, 0);
	/* prog_seq first: a reader that sees RUNNING sees the new seq. */
	smp_store_release(&r->info->prog_state, NPROXY_PROG_RUNNING);
	req->seq = prog->seq;
	spin_unlock(&r->lock);
	queue_work(nproxy_wq, &r->prog_work);
	mutex_unlock(&r->prog_mutex);

	atomic64_inc(&nproxy_stats.progs_run);
	return 0;

err_free:
	kvfree(prog);
	return err;
}

/*
 * Synchronous: when this returns 0 the worker has stopped and the program
 * is CANCELLED (or DONE/TIMEDOUT if it finished first), ready to collect.
 */
long nproxy_prog_cancel(struct nproxy_region *r)
{
	bool running;

	mutex_lock(&r->prog_mutex);
	spin_lock(&r->lock);
	running = r->prog_state == NPROXY_PROG_RUNNING;
	if (running)
		WRITE_ONCE(r->cancel, true);
	spin_unlock(&r->lock);
	if (running) {
		wake_up(&r->doorbell);
		flush_work(&r->prog_work);
	}
	mutex_unlock(&r->prog_mutex);
	return running ? 0 : -ENOENT;
}

/*
 * COLLECT_PROG in two halves around the copy-out: the result is read here
 * and consumed by nproxy_prog_collect_finish() only once the caller has
 * it.  prog_mutex, held from one to the other, keeps submit, cancel,
 * another collect and release out in between (a finished program's state
 * changes under it only).
 */
long nproxy_prog_collect(struct nproxy_region *r, struct nproxy_prog_result *res)
{
	long err = 0;

	mutex_lock(&r->prog_mutex);
	spin_lock(&r->lock);
	switch (r->prog_state) {
	case NPROXY_PROG_NONE:
		err = -ENOENT;
		break;
	case NPROXY_PROG_RUNNING:
		err = -EAGAIN;
		break;
	default:
		*res = r->result;
		break;
	}
	spin_unlock(&r->lock);
	if (err)
		mutex_unlock(&r->prog_mutex);
	return err;
}

void nproxy_prog_collect_finish(struct nproxy_region *r, bool copied)
{
	if (copied) {
		spin_lock(&r->lock);
		r->prog_state = NPROXY_PROG_NONE;
		r->event_pending = false;
		/* Pairs with userspace acquire loads of the info page. */
		smp_store_release(&r->info->prog_state, NPROXY_PROG_NONE);
		spin_unlock(&r->lock);
	}
	mutex_unlock(&r->prog_mutex);
}

void nproxy_prog_region_init(struct nproxy_region *r)
{
	INIT_WORK(&r->prog_work, nproxy_prog_work);
	init_waitqueue_head(&r->doorbell);
}

/* The region is going away: stop its program and wait for the worker. */
void nproxy_prog_region_release(struct nproxy_region *r)
{
	WRITE_ONCE(r->cancel, true);
	wake_up(&r->doorbell);
	/* flush, not cancel: a queued program must still run to CANCELLED. */
	flush_work(&r->prog_work);
}

int nproxy_prog_init(void)
{
	BUILD_BUG_ON(NPROXY_MAX_REGIONS > WQ_MAX_ACTIVE);
	nproxy_wq = alloc_workqueue("nproxy_dev", WQ_UNBOUND, NPROXY_MAX_REGIONS);
	return nproxy_wq ? 0 : -ENOMEM;
}

void nproxy_prog_exit(void)
{
	destroy_workqueue(nproxy_wq);
}
