// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The shared queue and its worker thread ("proxy-<tid>"): libnrt's
 * enc_proxy_queue -- start / worker_thread / process / append / destroy.
 *
 * process() is the outer state machine: drain queued tasks into the
 * per-rank active map, step() every active task once, recycle DONE, then
 * sleep on the queue (its wake word, lib/common/common_internal.h) only when nothing is
 * active and nothing queued; when every active task made no progress,
 * apply the idle policy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

/*
 * Adaptive policy (the default): re-tick, yielding, for the spin window,
 * then park on q->wake.  Enqueue, stop and the trigger notifications of
 * memfd regions signal it; completions of the network and triggers written
 * by nproxy.ko do not, so while a task waits for those the park is short:
 * ADAPTIVE_PARK_MIN_NS for the first ADAPTIVE_PARK_FAST_NS of the idle
 * spell, then doubling up to ADAPTIVE_PARK_MAX_NS (bounded latency, and a
 * wake-up rate that falls off when the wait is long).  When every wait is
 * one a signal ends, the park lasts ADAPTIVE_PARK_SIGNALLED_NS, a safety
 * net only.
 */
#define ADAPTIVE_DEFAULT_SPIN_NS	50000ull
/* Pauses between two ticks of the spin window (~1-4 us on x86). */
#define ADAPTIVE_SPIN_PAUSES		32
/* A yield that took this long gave the cpu to somebody else's slice... */
#define ADAPTIVE_YIELD_LOST_NS		200000ull
/* ...and the spin window pauses instead of yielding for this long. */
#define ADAPTIVE_NO_YIELD_NS		1000000000ull
#define ADAPTIVE_MAX_SPIN_NS		100000000ull
#define ADAPTIVE_PARK_MIN_NS		16000ull
#define ADAPTIVE_PARK_MAX_NS		1000000ull
#define ADAPTIVE_PARK_FAST_NS		2000000ull
#define ADAPTIVE_PARK_SIGNALLED_NS	100000000ull
#define ADAPTIVE_TIMER_SLACK_NS		1000UL
/*
 * A consumer waiting for DONE parks at once by default: it usually shares a
 * CPU with the worker that has to produce the DONE, so its spin only delays
 * that (2 ranks, 1 KiB allgather, bound: 9-10 us parked at once, 13-15 us
 * with a 2 us spin, 18-21 us with 10 us).  NPROXY_CONSUMER_SPIN_US sets a
 * window for a consumer that has a CPU of its own.
 */
#define CONSUMER_DEFAULT_SPIN_NS	0ull
/* The cv wait is woken by append/destroy; the timeout is only a safety net. */
#define CV_SAFETY_TIMEOUT_S	1
/*
 * How long the group stays with the thread that drove it last.  A loop of
 * ops waited on by the caller appends its next op well within it, so the
 * worker is neither woken by that append nor hands the group back and
 * forth (each a futex call and a thread switch on a CPU the ranks need):
 * the next wait steps what the last one left.  What nobody comes back for
 * (an op nobody waits on, the rest of a wait that ran out) is the worker's
 * after at most this long.
 */
#define PROXY_DRIVE_GRACE_NS	1000000ull
/* A driver's tick this long is stuck (npx_proxy_set_stall_hook). */
#define PROXY_STALL_NS		1000000000ull
/* The worker parked under a drive looks at its tick at least this often. */
#define PROXY_STALL_LOOK_NS	(PROXY_STALL_NS / 2)

enum nproxy_idle_policy npx_proxy_idle_policy_from_env(void)
{
	/* Indexed by enum nproxy_idle_policy. */
	static const char *const names[] = {
		[NPROXY_IDLE_SPIN] = "spin",
		[NPROXY_IDLE_YIELD] = "yield",
		[NPROXY_IDLE_ADAPTIVE] = "adaptive",
		[NPROXY_IDLE_ADAPTIVE_YIELD] = "adaptive-yield",
	};
	unsigned int policy;
	bool one_per_core;

	if (npx_env_choice("NPROXY_IDLE_POLICY", names, sizeof(names) / sizeof(names[0]),
			   NPROXY_IDLE_ADAPTIVE, &policy) == NPX_ENV_SET)
		return (enum nproxy_idle_policy)policy;
	npx_env_bool("NPROXY_ONE_THREAD_PER_CORE", false, &one_per_core);
	return one_per_core ? NPROXY_IDLE_SPIN : NPROXY_IDLE_ADAPTIVE;
}

enum proxy_caller_drives npx_proxy_caller_drives_from_env(void)
{
	/* Indexed by enum proxy_caller_drives. */
	static const char *const names[] = {
		[PROXY_CALLER_DRIVES_AUTO] = "auto",
		[PROXY_CALLER_DRIVES_ALWAYS] = "always",
		[PROXY_CALLER_DRIVES_NEVER] = "never",
	};
	unsigned int v;

	npx_env_choice("NPROXY_CALLER_DRIVES", names, sizeof(names) / sizeof(names[0]),
		       PROXY_CALLER_DRIVES_AUTO, &v);
	return (enum proxy_caller_drives)v;
}

/*
 * auto: the waiting thread drives the small ops of a 2-rank comm, where it
 * needs no hand-off from another thread at all (2 ranks, 1 KiB allgather:
 * 6 us against 18 us); the worker keeps the rest.  Measured on 2 vCPUs
 * (Documentation/proxy.md): with more ranks than CPUs a driving caller
 * spins against the very ranks it waits for, and an op with large
 * reductions ran slower driven (2 ranks, 1 MiB allreduce: 1.2-2x).  A
 * process with several comms may wait on them in turn from one thread,
 * whose ops need each other's progress: each would wait out the other's
 * grace (1 process of 2 ranks, 1 KiB allgather: 128 us against 23 us),
 * so there the worker keeps every op.
 */
bool npx_proxy_auto_drives(uint32_t n_ranks, uint64_t reduce_bytes, uint32_t comms_open)
{
	return n_ranks <= PROXY_AUTO_DRIVE_MAX_RANKS && reduce_bytes <= PROXY_AUTO_DRIVE_MAX_REDUCE &&
	       comms_open <= 1;
}

bool npx_proxy_queue_caller_drives(const struct proxy_queue *q,
				   const struct proxy_task_status *st)
{
	switch (q->caller_drives) {
	case PROXY_CALLER_DRIVES_ALWAYS:
		return true;
	case PROXY_CALLER_DRIVES_NEVER:
		return false;
	case PROXY_CALLER_DRIVES_AUTO:
	default:
		return st->auto_drive;
	}
}

/* A spin window in microseconds from the environment, in ns. */
static uint64_t spin_ns_from_env(const char *name, uint64_t dflt_ns)
{
	uint64_t us;

	npx_env_u64(name, dflt_ns / 1000, 0, ADAPTIVE_MAX_SPIN_NS / 1000, &us);
	return us * 1000;
}

uint64_t npx_proxy_spin_ns_from_env(void)
{
	return spin_ns_from_env("NPROXY_SPIN_US", ADAPTIVE_DEFAULT_SPIN_NS);
}

uint64_t npx_proxy_consumer_spin_ns_from_env(void)
{
	return spin_ns_from_env("NPROXY_CONSUMER_SPIN_US", CONSUMER_DEFAULT_SPIN_NS);
}

struct proxy_queue *npx_proxy_queue_create(uint32_t gid, enum nproxy_idle_policy policy,
				       uint64_t spin_ns)
{
	struct proxy_queue *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;

	if (!q)
		return NULL;
	pthread_mutex_init(&q->mtx, NULL);
	pthread_mutex_init(&q->state_mtx, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cv, &ca);
	pthread_condattr_destroy(&ca);
	q->status_head.next = q->status_head.prev = &q->status_head;
	q->gid = gid;
	q->idle_policy = policy == NPROXY_IDLE_DEFAULT ? npx_proxy_idle_policy_from_env() : policy;
	q->spin_ns = spin_ns;
	q->caller_drives = npx_proxy_caller_drives_from_env();
	return q;
}

void npx_proxy_queue_kick(void *arg)
{
	struct proxy_queue *q = arg;

	wake_signal(&q->wake);
}

static bool bucket_append(struct proxy_queue *q, struct proxy_task *t)
{
	struct proxy_rank_bucket **pb = &q->active, *b;

	while (*pb && (*pb)->rank < t->rank)
		pb = &(*pb)->next;
	b = *pb;
	if (!b || b->rank != t->rank) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return false;
		b->rank = t->rank;
		b->next = *pb;
		*pb = b;
	}
	t->next = NULL;
	if (b->tail)
		b->tail->next = t;
	else
		b->head = t;
	b->tail = t;
	return true;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Where an idle tick goes: the fixed policies, or the adaptive state. */
struct idle_state {
	uint64_t since_ns;	/* first tick of this idle spell; 0: not idle */
	uint64_t park_ns;	/* the next short park */
	uint64_t no_yield_until_ns; /* ADAPTIVE: a yield lost a time slice */
	/*
	 * A driving consumer's own timer slack, saved before its first park
	 * lowered it (restored when it leaves): IDLE_SLACK_KEEP for the
	 * worker (its slack is set once, at start), IDLE_SLACK_UNTOUCHED
	 * until the consumer parks.  Not before: two prctl() calls per wait
	 * are a measurable part of a small op on a virtual machine.
	 */
	int slack;
};

#define IDLE_SLACK_KEEP		(-2)
#define IDLE_SLACK_UNTOUCHED	(-1)

/* Before a park of the adaptive policies: a consumer's slack as the worker's. */
static void idle_lower_slack(struct idle_state *is)
{
	if (is->slack != IDLE_SLACK_UNTOUCHED)
		return;
	is->slack = prctl(PR_GET_TIMERSLACK);
	if (is->slack >= 0)
		prctl(PR_SET_TIMERSLACK, ADAPTIVE_TIMER_SLACK_NS);
	else
		is->slack = IDLE_SLACK_KEEP;
}

/*
 * ADAPTIVE's spin window, one step.  A sched_yield() lets a thread of ours
 * that is runnable on this cpu (the consumer just woken, the emulated
 * device) run at once, which on a quiet host is the fastest hand-off
 * (2 ranks, 64 KiB allgather: ~20 us against ~28 us with a pause loop).
 * But it hands the cpu to any other runnable process for that process's
 * whole time slice: with one cpu hog beside a 2-rank job on 2 vCPUs every
 * hand-off waited out a slice (64 KiB allgather: 1.5-2 ms per op).  So a
 * yield that took longer than ADAPTIVE_YIELD_LOST_NS (somebody else ran)
 * switches the window to a pause loop for ADAPTIVE_NO_YIELD_NS.
 */
static void adaptive_spin_step(struct idle_state *is, uint64_t now)
{
	uint64_t after;

	if (now < is->no_yield_until_ns) {
		for (int i = 0; i < ADAPTIVE_SPIN_PAUSES; i++)
			wake_cpu_relax();
		return;
	}
	sched_yield();
	after = npx_now_ns();
	if (after - now > ADAPTIVE_YIELD_LOST_NS)
		is->no_yield_until_ns = after + ADAPTIVE_NO_YIELD_NS;
}

/*
 * Called without mtx after a tick on which nothing moved.  seen is the
 * wake sequence read before the tick: a signal since then ends the park at
 * once.  polled: some task waits for something no signal announces.
 * No park lasts longer than cap_ns (a driving consumer's deadline).
 */
static void idle_wait(struct proxy_queue *q, struct idle_state *is, uint32_t seen, bool polled,
		      uint64_t cap_ns)
{
	uint64_t now;

	switch (q->idle_policy) {
	case NPROXY_IDLE_SPIN:
		return;
	case NPROXY_IDLE_YIELD:
		sched_yield();
		return;
	case NPROXY_IDLE_ADAPTIVE:
	case NPROXY_IDLE_ADAPTIVE_YIELD:
	default:
		break;
	}
	now = npx_now_ns();
	if (!is->since_ns) {
		is->since_ns = now;
		is->park_ns = ADAPTIVE_PARK_MIN_NS;
	}
	/*
	 * The spin window.  ADAPTIVE yields between ticks unless a yield
	 * recently lost a time slice (adaptive_spin_step); then it spins with
	 * a pause loop only while something must be polled (the network: a
	 * peer on another cpu answers within the window), and what a signal
	 * ends is waited for parked at once, because whoever signals (the
	 * emulated device ending a DELAY, the producer) may be runnable on
	 * this very cpu and would wait out a pause loop (2 ranks, 1 KiB,
	 * device delay 10 us: 65-69 us per op, 20-21 us parked).
	 * ADAPTIVE_YIELD always yields: when the job's own ranks outnumber
	 * the cpus the peer we wait for is often runnable right here (4 ranks
	 * on 2 cpus: ~200 us instead of ~1 ms), and long yields are the norm.
	 */
	if (now - is->since_ns < q->spin_ns) {
		if (q->idle_policy == NPROXY_IDLE_ADAPTIVE_YIELD) {
			sched_yield();
			return;
		}
		if (polled || now >= is->no_yield_until_ns) {
			adaptive_spin_step(is, now);
			return;
		}
	}
	__atomic_add_fetch(&q->stat_idle_parks, 1, __ATOMIC_RELAXED);
	idle_lower_slack(is);
	if (!polled) {
		wake_wait(&q->wake, seen, min_u64(ADAPTIVE_PARK_SIGNALLED_NS, cap_ns));
		if (wake_seq(&q->wake) == seen &&
		    npx_now_ns() - now >= ADAPTIVE_PARK_SIGNALLED_NS)
			__atomic_add_fetch(&q->stat_safety_timeouts, 1, __ATOMIC_RELAXED);
		return;
	}
	wake_wait(&q->wake, seen, min_u64(is->park_ns, cap_ns));
	/* Short parks for the first ADAPTIVE_PARK_FAST_NS of the spell: a
	 * peer's message is seen within one of them. */
	if (is->park_ns < ADAPTIVE_PARK_MAX_NS && now - is->since_ns >= ADAPTIVE_PARK_FAST_NS)
		is->park_ns *= 2;
}

/*
 * Producers push onto q->incoming without any lock (a Treiber stack);
 * the worker takes the whole stack under mtx and appends it, oldest first,
 * to q->queue_head/tail.  Called with mtx held.
 */
static void take_incoming(struct proxy_queue *q)
{
	struct proxy_task *t = __atomic_exchange_n(&q->incoming, NULL, __ATOMIC_ACQUIRE);
	struct proxy_task *fifo = NULL, *last = t;

	while (t) {
		struct proxy_task *next = t->next;

		t->next = fifo;
		fifo = t;
		t = next;
	}
	if (!fifo)
		return;
	if (q->queue_tail)
		q->queue_tail->next = fifo;
	else
		q->queue_head = fifo;
	q->queue_tail = last;
}

static void (*stall_hook)(void);

void npx_proxy_set_stall_hook(void (*hook)(void))
{
	__atomic_store_n(&stall_hook, hook, __ATOMIC_RELEASE);
}

/* A driver inside one tick for PROXY_STALL_NS: the hook, once per such tick. */
static void look_for_stalled_drive(struct proxy_queue *q, uint64_t *seen_since)
{
	uint64_t since = __atomic_load_n(&q->drive_tick_since_ns, __ATOMIC_ACQUIRE);
	void (*hook)(void) = __atomic_load_n(&stall_hook, __ATOMIC_ACQUIRE);

	if (!hook || !since || since == *seen_since || npx_now_ns() - since < PROXY_STALL_NS)
		return;
	*seen_since = since;
	nproxy_log(NPROXY_LOG_WARN, "proxy group %u: a waiting thread has been inside one step for %llu ms: looking for a dead peer's locks",
		   q->gid, (unsigned long long)((npx_now_ns() - since) / 1000000));
	hook();
}

/*
 * The worker takes mtx back after a wait.  A driver holds it for the whole
 * of its step, so while the worker waits for it, it looks every
 * PROXY_STALL_LOOK_NS at whether that step is stuck.  (Not announced as a
 * lock waiter: a driver does not let go for the worker.)
 */
static void worker_relock(struct proxy_queue *q)
{
	uint64_t seen_since = 0;
	struct timespec until;

	while (pthread_mutex_trylock(&q->mtx)) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += PROXY_STALL_LOOK_NS % 1000000000ull;
		until.tv_sec += PROXY_STALL_LOOK_NS / 1000000000ull + until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		if (!pthread_mutex_timedlock(&q->mtx, &until))
			return;
		look_for_stalled_drive(q, &seen_since);
	}
}

/*
 * True quiescence: the reference runtime's cv.wait, on q->wake.  seen was
 * read before the tick that found nothing to do, so an append (which
 * signals q->wake after its push) is never missed.  Called with mtx held.
 */
static void quiescent_wait(struct proxy_queue *q, uint32_t seen)
{
	pthread_mutex_unlock(&q->mtx);
	wake_wait(&q->wake, seen, CV_SAFETY_TIMEOUT_S * 1000000000ull);
	worker_relock(q);
}

/* What one tick saw. */
struct tick_counts {
	uint64_t active;	/* tasks stepped */
	uint64_t idle;		/* ... of which nothing moved */
	uint64_t done;		/* ... of which finished (recycled) */
	bool polled;		/* one of them waits on something that announces nothing */
	uint64_t announced;	/* ... IDLE on what nproxy_comm_kick() announces */
};

/* (1) DRAIN the queued tasks into the per-rank active map. */
static void drain_queued(struct proxy_queue *q)
{
	take_incoming(q);
	while (q->queue_head) {
		struct proxy_task *t = q->queue_head;
		struct proxy_task *next = t->next;

		if (!bucket_append(q, t))
			break;	/* out of memory: leave it queued, retry next tick */
		q->queue_head = next;
		if (!next)
			q->queue_tail = NULL;
	}
}

/* Step one task; true when it is DONE (the caller unlinks it). */
static bool step_task(struct proxy_task *t, struct tick_counts *c)
{
	uint32_t rs, before = proxy_status_run_state(t->status);

	c->active++;
	t->ops->step(t);
	rs = proxy_status_run_state(t->status);
	if (rs == NPROXY_TASK_STATE_DONE)
		return true;
	/*
	 * Nothing moved: IDLE (in flight), a closed trigger
	 * gate, or INIT held behind an earlier op.  A task that
	 * just left INIT moved: it started its blocks and only
	 * then looks at a trigger the device may have written
	 * before this tick, which no signal announces again.
	 */
	if (rs != NPROXY_TASK_STATE_PROGRESSING &&
	    !(before == NPROXY_TASK_STATE_INIT && rs != NPROXY_TASK_STATE_INIT))
		c->idle++;
	if (rs == NPROXY_TASK_STATE_IDLE && t->idle_announced)
		c->announced++;
	/* Network and barrier progress, and the module's
	 * trigger words, announce nothing: poll them. */
	if (rs == NPROXY_TASK_STATE_PROGRESSING ||
	    (rs == NPROXY_TASK_STATE_IDLE && !t->idle_announced) ||
	    (rs == NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER &&
	     !t->trigger_notified))
		c->polled = true;
	return false;
}

/* Step the active tasks of one kind (barrier or not) once; recycle DONE only. */
static void step_pass(struct proxy_queue *q, struct tick_counts *c, bool barriers)
{
	struct proxy_rank_bucket **pb;

	for (pb = &q->active; *pb;) {
		struct proxy_rank_bucket *b = *pb;
		struct proxy_task **pt = &b->head, *prev = NULL;

		while (*pt) {
			struct proxy_task *t = *pt;

			if ((t->ops->type == NPROXY_TASK_BARRIER) != barriers) {
				prev = t;
				pt = &t->next;
				continue;
			}
			if (step_task(t, c)) {
				*pt = t->next;
				if (b->tail == t)
					b->tail = prev;
				t->ops->destroy(t);
				c->done++;
				continue;
			}
			prev = t;
			pt = &t->next;
		}
		if (!b->head) {
			*pb = b->next;
			free(b);
		} else {
			pb = &b->next;
		}
	}
}

/*
 * (2) STEP every active task once, network tasks before barrier tasks.  A
 * barrier decides on what the network steps did: a barrier carried on the
 * next op's data is done once that op's receives are in (lib/rank), and a
 * barrier held behind it arrives once it is.  Stepped after the network
 * task that finished the op, both happen in that op's last tick, and the
 * thread that waits on the op leaves with it (2 ranks, 1 KiB: one tick,
 * about 0.2 us, less per op).  FIFO per rank within each kind.
 */
static void step_active(struct proxy_queue *q, struct tick_counts *c)
{
	step_pass(q, c, false);
	step_pass(q, c, true);
}

/* Add to a counter only the mtx holder writes; readers load it relaxed. */
static inline void stat_add(uint64_t *counter, uint64_t n)
{
	__atomic_store_n(counter, *counter + n, __ATOMIC_RELAXED);
}

/*
 * One tick of the group, the same for the worker and a driving consumer:
 * drain -> step -> recycle, then count it.  Called with mtx held (the
 * right to step the group).  True when every active task is idle.
 */
static bool queue_tick(struct proxy_queue *q, struct tick_counts *c, bool by_caller)
{
	bool all_idle;

	drain_queued(q);
	step_active(q, c);
	all_idle = c->active && c->idle == c->active;
	stat_add(&q->stat_ticks, 1);
	stat_add(&q->stat_steps, c->active);
	stat_add(&q->stat_tasks_done, c->done);
	if (all_idle)
		stat_add(&q->stat_idle_ticks, 1);
	if (by_caller)
		stat_add(&q->stat_caller_ticks, 1);
	__atomic_store_n(&q->stat_tasks_active, c->active - c->done, __ATOMIC_RELAXED);
	return all_idle;
}

/* Anything left for the worker: active, queued or appended tasks.  Under mtx. */
static bool queue_has_work(struct proxy_queue *q)
{
	return q->active || q->queue_head || __atomic_load_n(&q->incoming, __ATOMIC_SEQ_CST);
}

/*
 * 0 when the group is nobody's but the worker's, else how long the worker
 * leaves it alone before it looks again: the grace while a consumer drives
 * (a driver leaving work behind does not signal), what is left of it after
 * the last one left.
 */
static uint64_t driven_for_ns(struct proxy_queue *q)
{
	uint64_t until, now;

	if (__atomic_load_n(&q->drivers, __ATOMIC_SEQ_CST))
		return PROXY_DRIVE_GRACE_NS;
	until = __atomic_load_n(&q->driven_until_ns, __ATOMIC_SEQ_CST);
	if (!until)
		return 0;
	now = npx_now_ns();
	if (until > now)
		return until - now;
	/* Over: clear it, so the worker's later passes read no clock for it
	 * (a driver that set a new grace meanwhile keeps its own). */
	__atomic_compare_exchange_n(&q->driven_until_ns, &until, 0, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	return 0;
}

/*
 * A consumer drives, or drove within the grace: park until the last driver
 * leaves and its grace ends (it signals handback when it leaves work and
 * no grace; an append signals it while nobody drives and no grace runs).
 * The park doubles as the quiescent wait.  Called and returns with mtx held.
 */
static void worker_park_while_driven(struct proxy_queue *q)
{
	uint32_t epoch = __atomic_load_n(&q->drive_epoch, __ATOMIC_SEQ_CST);
	uint64_t park_ns = PROXY_DRIVE_GRACE_NS, seen_since = 0;

	pthread_mutex_unlock(&q->mtx);
	while (!__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
		uint32_t seen = wake_seq(&q->handback);
		uint64_t left = driven_for_ns(q);
		bool driven = __atomic_load_n(&q->drivers, __ATOMIC_SEQ_CST);

		if (!left)
			break;
		wake_wait(&q->handback, seen, driven ? park_ns : left);
		/*
		 * The same drive still on after a whole park: it has lasted at
		 * least the grace, so its driver signals handback when it
		 * leaves, and the next park may be longer (a long wait, such as
		 * a device taking 200 ms, costs a few wake-ups, not one a ms).
		 */
		if (__atomic_load_n(&q->drivers, __ATOMIC_SEQ_CST) &&
		    __atomic_load_n(&q->drive_epoch, __ATOMIC_SEQ_CST) == epoch) {
			if (park_ns < PROXY_STALL_LOOK_NS)
				park_ns *= 2;
			look_for_stalled_drive(q, &seen_since);
		} else {
			park_ns = PROXY_DRIVE_GRACE_NS;
			epoch = __atomic_load_n(&q->drive_epoch, __ATOMIC_SEQ_CST);
		}
	}
	worker_relock(q);
}

/* The reference runtime's enc_proxy_queue::process. */
static void queue_process(struct proxy_queue *q)
{
	struct idle_state is = { 0, 0, 0, IDLE_SLACK_KEEP };

	/*
	 * Not a plain lock: the open has returned by now, and its caller's
	 * first wait may already drive the group and be stuck in that step
	 * (seen in a loaded CI run: the worker blocked here for the whole of
	 * a 2.5 s step and never called the stall hook).
	 */
	worker_relock(q);
	while (!__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
		struct tick_counts c = { 0 };
		/* Before the tick: whatever is signalled after this re-ticks. */
		uint32_t seen = wake_seq(&q->wake);
		bool all_idle, idle;

		/* A waiting consumer holds the step right: do not fight for it. */
		if (driven_for_ns(q)) {
			is.since_ns = 0;
			worker_park_while_driven(q);
			continue;
		}
		all_idle = queue_tick(q, &c, false);

		/* (3) BLOCK only on true quiescence (after seen: no lost wakeup). */
		if (!queue_has_work(q)) {
			is.since_ns = 0;
			if (__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE))
				break;
			stat_add(&q->stat_cv_waits, 1);
			proxy_state_worker(&q->pub, q->tid, NPROXY_WORKER_SLEEPING);
			quiescent_wait(q, seen);
			continue;
		}
		idle = all_idle && !q->queue_head;	/* read under mtx */
		if (!idle)
			is.since_ns = 0;
		proxy_state_worker(&q->pub, q->tid, idle ? NPROXY_WORKER_IDLE : NPROXY_WORKER_RUNNING);
		pthread_mutex_unlock(&q->mtx);
		/*
		 * An append since seen makes the park return at once.  Tasks
		 * that all wait for a kick (a deferred barrier between a coll's
		 * ops) are quiescence to this thread: no spin, no yields (the
		 * host's other ranks may need the cpu), a park until the kick.
		 */
		if (idle && c.announced == c.active)
			wake_wait(&q->wake, seen, ADAPTIVE_PARK_SIGNALLED_NS);
		else if (idle)
			idle_wait(q, &is, seen, c.polled, UINT64_MAX);
		/* nproxy_comm_close/destroy wait for mtx: let them in before re-ticking. */
		while (__atomic_load_n(&q->lock_waiters, __ATOMIC_RELAXED))
			sched_yield();
		worker_relock(q);
	}
	pthread_mutex_unlock(&q->mtx);
}

/*
 * A task of st's op (same comm and ctx) other than st that ticking may
 * finish?  Not one IDLE on what a kick announces (a barrier whose decision
 * comes with the next op).  Under mtx.
 */
static bool op_sibling_active(struct proxy_queue *q, const struct proxy_task_status *st)
{
	const struct proxy_rank_bucket *b;
	const struct proxy_task *t;

	for (b = q->active; b; b = b->next)
		for (t = b->head; t; t = t->next)
			if (t->status != st && t->status->comm == st->comm &&
			    t->status->enc_ctx == st->enc_ctx && !t->idle_announced)
				return true;
	return false;
}

/*
 * The consumer's side of the hand-off.  Announce (drivers + 1), take the
 * step right (mtx), tick until st is DONE; between idle ticks wait exactly
 * as the worker would (idle_wait: bounded spin, then park on q->wake), so a
 * long wait burns no core.  Leaving, under mtx: the last driver hands the
 * group back to the worker when work is left (a task nobody waits for, or
 * the rest of an op whose wait ran out).
 */
void npx_proxy_queue_drive(struct proxy_queue *q, const struct proxy_task_status *st,
			   uint64_t timeout_ns)
{
	struct idle_state is = { 0, 0, 0, IDLE_SLACK_UNTOUCHED };
	uint64_t start = npx_now_ns(), done_ns = 0, left_ns;

	is.no_yield_until_ns = __atomic_load_n(&q->drive_no_yield_until_ns, __ATOMIC_RELAXED);
	__atomic_add_fetch(&q->drive_epoch, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&q->drivers, 1, __ATOMIC_SEQ_CST);
	npx_proxy_queue_lock(q);
	while (!__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
		struct tick_counts c = { 0 };
		uint32_t seen = wake_seq(&q->wake);
		/* One clock read a tick (~30 ns each on a VM's kvm-clock). */
		uint64_t now = npx_now_ns(), spent = now - start;
		bool idle;

		if (proxy_status_run_state(st) == NPROXY_TASK_STATE_DONE) {
			/*
			 * The caller's next wait is almost always on the other
			 * task of the same op: finish it here for up to the spin
			 * window rather than hand it to the worker and back.
			 */
			if (!done_ns)
				done_ns = now;
			if (now - done_ns >= q->spin_ns || !op_sibling_active(q, st))
				break;
		}
		__atomic_store_n(&q->drive_tick_since_ns, now, __ATOMIC_RELEASE);
		idle = queue_tick(q, &c, true) && !q->queue_head;
		__atomic_store_n(&q->drive_tick_since_ns, 0, __ATOMIC_RELAXED);
		/* Another driver parked in idle_wait may wait for what this tick finished. */
		if (c.done && __atomic_load_n(&q->drivers, __ATOMIC_RELAXED) > 1)
			wake_signal(&q->wake);
		/* As of the tick's start: a timeout ends the drive a tick late at most. */
		if (spent >= timeout_ns)
			break;
		if (!idle || done_ns) {
			is.since_ns = 0;
			if (!__atomic_load_n(&q->lock_waiters, __ATOMIC_RELAXED))
				continue;
		}
		pthread_mutex_unlock(&q->mtx);
		/* The worker's short parks (and its 1 us timer slack). */
		if (idle)
			idle_wait(q, &is, seen, c.polled, timeout_ns - spent);
		while (__atomic_load_n(&q->lock_waiters, __ATOMIC_RELAXED))
			sched_yield();
		npx_proxy_queue_lock(q);
	}
	if (is.no_yield_until_ns > __atomic_load_n(&q->drive_no_yield_until_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&q->drive_no_yield_until_ns, is.no_yield_until_ns, __ATOMIC_RELAXED);
	/* Before the decrement: the worker that sees no driver sees the grace. */
	left_ns = npx_now_ns();
	__atomic_store_n(&q->driven_until_ns, left_ns + PROXY_DRIVE_GRACE_NS, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&q->drivers, 1, __ATOMIC_SEQ_CST);
	npx_proxy_queue_unlock(q);
	if (is.slack >= 0)
		prctl(PR_SET_TIMERSLACK, (unsigned long)is.slack);
	/*
	 * No signal after a short drive: the worker parked on handback looks
	 * again within the grace by itself (its first park under a drive is
	 * that long), or is still in an idle or quiescent park it began
	 * before this driver came, which an append ended or its own bound
	 * ends.  Either way what is left is its within the grace, unless the
	 * next wait steps it first.  A drive of a grace or more may have let
	 * the worker's parks grow (worker_park_while_driven): one signal.
	 */
	if (left_ns - start >= PROXY_DRIVE_GRACE_NS)
		wake_signal(&q->handback);
}

/*
 * The thread that left q in its grace drives another group now: it is not
 * coming back to q soon, so the worker takes what is left at once (a
 * thread that waits on several comms in turn, whose ops need each other,
 * would otherwise wait out each grace).  Called under the registry's lock,
 * which keeps q alive.
 */
void npx_proxy_queue_end_grace(struct proxy_queue *q)
{
	if (__atomic_exchange_n(&q->driven_until_ns, 0, __ATOMIC_SEQ_CST))
		wake_signal(&q->handback);
}

/* libnrt's worker_thread: name the thread after its tid, then process(). */
static void *queue_worker(void *arg)
{
	struct proxy_queue *q = arg;
	int tid = (int)syscall(SYS_gettid);
	char name[16];
	int rc;

	npx_err_on_library_thread();
	snprintf(name, sizeof(name), "proxy-%d", tid);
	rc = pthread_setname_np(pthread_self(), name);
	if (rc)
		nproxy_log(NPROXY_LOG_WARN, "Cannot set thread name: %d", rc);
	/* The adaptive policy's short parks: keep the kernel's default 50 us
	 * timer slack from multiplying them. */
	if (q->idle_policy == NPROXY_IDLE_ADAPTIVE || q->idle_policy == NPROXY_IDLE_ADAPTIVE_YIELD)
		prctl(PR_SET_TIMERSLACK, ADAPTIVE_TIMER_SLACK_NS);
	pthread_mutex_lock(&q->mtx);
	__atomic_store_n(&q->tid, tid, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mtx);
	queue_process(q);
	return NULL;
}

/* libnrt's enc_proxy_queue::start. */
enum nproxy_status npx_proxy_queue_start(struct proxy_queue *q, const cpu_set_t *cpus)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	if (cpus) {
		rc = pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus);
		if (rc) {
			pthread_attr_destroy(&attr);
			nproxy_log(NPROXY_LOG_ERROR, "[gid %u] cannot set worker affinity: %d",
				   q->gid, rc);
			return NPROXY_INVALID;
		}
	}
	/* NPROXY_FAULT=thread:N fails this (common/fault_wrap.h): the tests' way in. */
	rc = pthread_create(&q->thread, &attr, queue_worker, q);
	pthread_attr_destroy(&attr);
	if (rc) {
		nproxy_log(NPROXY_LOG_ERROR, "Failed to create worker thread: %d", rc);
		return NPROXY_RESOURCE;
	}
	q->started = true;
	/* Return with the worker named and its tid known (tools, tests). */
	pthread_mutex_lock(&q->mtx);
	while (!__atomic_load_n(&q->tid, __ATOMIC_ACQUIRE))
		pthread_cond_wait(&q->cv, &q->mtx);
	pthread_mutex_unlock(&q->mtx);
	return NPROXY_SUCCESS;
}

/*
 * The thread that enqueues an op it will wait on and drive holds the
 * worker off for a grace, as a driver that leaves does (the grace is
 * never shortened).  Without it, an enqueue woke a worker parked with
 * nothing to do, which started the op itself; on the enqueuer's cpu it
 * ran the whole op while the enqueuer was preempted, and an op nobody
 * drove left no grace for the next one: 2 ranks, 1 KiB allgather, 12 us
 * per op against 3 for stretches of a run (in 3 of 40 runs of 12 ops; of
 * 20,000 ops, 400 to 1900 ran on the worker, 0 to 2 with the grace).  An op
 * its enqueuer does not wait on after all is the worker's once the grace
 * is over.
 */
void npx_proxy_queue_expect_driver(struct proxy_queue *q)
{
	uint64_t until = npx_now_ns() + PROXY_DRIVE_GRACE_NS;
	uint64_t cur = __atomic_load_n(&q->driven_until_ns, __ATOMIC_SEQ_CST);

	while (cur < until && !__atomic_compare_exchange_n(&q->driven_until_ns, &cur, until, true,
							   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
}

/*
 * The reference runtime's append_task: status first (state_mtx), then the
 * task, then notify.  The tasks go onto q->incoming with one CAS each: no
 * lock the worker holds, so a producer never waits for a tick (or for a
 * worker preempted in the middle of one).  An op's tasks are appended
 * together and notified once: a parked worker woken by the first task's
 * signal has not run yet when the second comes, so a signal per task
 * costs a FUTEX_WAKE per task for one wake-up.
 */
void npx_proxy_queue_append(struct proxy_queue *q, struct proxy_task *const *tasks, uint32_t n)
{
	pthread_mutex_lock(&q->state_mtx);
	for (uint32_t i = 0; i < n; i++) {
		struct proxy_task_status *st = tasks[i]->status;

		st->prev = q->status_head.prev;
		st->next = &q->status_head;
		q->status_head.prev->next = st;
		q->status_head.prev = st;
	}
	pthread_mutex_unlock(&q->state_mtx);

	for (uint32_t i = 0; i < n; i++) {
		struct proxy_task *task = tasks[i];

		task->next = __atomic_load_n(&q->incoming, __ATOMIC_RELAXED);
		while (!__atomic_compare_exchange_n(&q->incoming, &task->next, task, true,
						    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			;
	}
	wake_signal(&q->wake);
	/*
	 * A worker parked on handback after the last driver left with nothing
	 * to do: this is its work.  While somebody drives, that driver ticks
	 * the task, and the last one to leave sees it (the push above and its
	 * drivers - 1 are both sequentially consistent: one sees the other).
	 */
	if (!driven_for_ns(q))
		wake_signal(&q->handback);
}

static void status_unlink_matching(struct proxy_queue *q, const struct nproxy_comm *comm)
{
	struct proxy_task_status *st, *next, *dropped = NULL;

	pthread_mutex_lock(&q->state_mtx);
	for (st = q->status_head.next; st != &q->status_head; st = next) {
		next = st->next;
		if (comm && st->comm != comm)
			continue;
		st->prev->next = st->next;
		st->next->prev = st->prev;
		st->prev = NULL;
		st->next = dropped;	/* reuse the link for the drop list */
		dropped = st;
	}
	pthread_mutex_unlock(&q->state_mtx);
	while (dropped) {
		st = dropped;
		dropped = st->next;
		npx_proxy_status_put(st);
	}
}

/* Cancel and destroy the tasks of comm (all when NULL) in the list *head .. *tail. */
static void list_drop_matching(struct proxy_task **head, struct proxy_task **tail,
			       const struct nproxy_comm *comm)
{
	struct proxy_task **pt, *t, *prev = NULL;

	for (pt = head; (t = *pt);) {
		if (comm && t->comm != comm) {
			prev = t;
			pt = &t->next;
			continue;
		}
		*pt = t->next;
		if (*tail == t)
			*tail = prev;
		proxy_status_publish(t->status, NPROXY_CANCELLED, NPROXY_TASK_STATE_DONE);
		t->ops->destroy(t);
	}
}

/* Called with mtx held: abort (destroy) every task of comm (all when NULL). */
static void tasks_drop_matching(struct proxy_queue *q, const struct nproxy_comm *comm)
{
	struct proxy_rank_bucket **pb;

	take_incoming(q);
	list_drop_matching(&q->queue_head, &q->queue_tail, comm);
	for (pb = &q->active; *pb;) {
		struct proxy_rank_bucket *b = *pb;

		list_drop_matching(&b->head, &b->tail, comm);
		if (!b->head) {
			*pb = b->next;
			free(b);
		} else {
			pb = &b->next;
		}
	}
}

void npx_proxy_queue_drop_comm(struct proxy_queue *q, const struct nproxy_comm *comm)
{
	/* Under mtx the worker is between ticks: no step() runs concurrently. */
	npx_proxy_queue_lock(q);
	tasks_drop_matching(q, comm);
	npx_proxy_queue_unlock(q);
	status_unlink_matching(q, comm);
}

/* libnrt's ~enc_proxy_queue: stop, notify, join (only if started). */
void npx_proxy_queue_destroy(struct proxy_queue *q)
{
	if (!q)
		return;
	npx_proxy_queue_lock(q);
	__atomic_store_n(&q->stop, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&q->cv);
	npx_proxy_queue_unlock(q);
	wake_signal(&q->wake);
	wake_signal(&q->handback);
	if (q->started)
		pthread_join(q->thread, NULL);
	tasks_drop_matching(q, NULL);
	status_unlink_matching(q, NULL);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mtx);
	pthread_mutex_destroy(&q->state_mtx);
	free(q);
}

void npx_proxy_queue_stats(struct proxy_queue *q, struct nproxy_proxy_stats *out)
{
	out->ticks = __atomic_load_n(&q->stat_ticks, __ATOMIC_RELAXED);
	out->steps = __atomic_load_n(&q->stat_steps, __ATOMIC_RELAXED);
	out->idle_ticks = __atomic_load_n(&q->stat_idle_ticks, __ATOMIC_RELAXED);
	out->cv_waits = __atomic_load_n(&q->stat_cv_waits, __ATOMIC_RELAXED);
	out->tasks_done = __atomic_load_n(&q->stat_tasks_done, __ATOMIC_RELAXED);
	out->tasks_active = __atomic_load_n(&q->stat_tasks_active, __ATOMIC_RELAXED);
	out->worker_tid = __atomic_load_n(&q->tid, __ATOMIC_ACQUIRE);
	out->idle_parks = __atomic_load_n(&q->stat_idle_parks, __ATOMIC_RELAXED);
	out->safety_timeouts = __atomic_load_n(&q->stat_safety_timeouts, __ATOMIC_RELAXED);
	out->idle_policy = q->idle_policy;
}
