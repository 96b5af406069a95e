// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy.ko's own fuzzer.  Fixed seeds, NPROXY_FUZZ_THREADS
 * threads (default 4) share a table of /dev/nproxy and region fds that they
 * close, dup2 and re-create under each other, and each drive:
 *
 *  - raw ioctls: every command number and holes, every direction, random
 *    sizes, foreign magics, argument pointers that are valid (random bytes,
 *    or a valid structure with one bit flipped: reserved, pad, flags),
 *    NULL, kernel, a PROT_NONE guard page, or straddling into it;
 *  - region creation with random shapes and flags; trigger and semaphore
 *    ioctls with random indices and pads;
 *  - device programs, valid (short delays, waits, increments, triggers,
 *    signals) and malformed (random steps, counts, pointers), with
 *    submit / cancel / collect / poll racing across threads;
 *  - mmap with random offsets, lengths, protections and flags; touching
 *    what was mapped; mprotect, madvise (every advice but the poisoning
 *    ones), mremap (move, grow, DONTUNMAP), munmap; fork, the child
 *    touching every inherited mapping after a MADV_DONTNEED;
 *  - random generic netlink messages (commands, flags, reserved bytes,
 *    attributes of any type and length) on a raw socket;
 *  - the fault injection knobs (kmod/fault.c), armed at random.
 *
 * The oracle: every call returns success or an errno its interface
 * documents (anything else is logged and fails the run); a collected
 * result's error matches its state; an info page always reads its magic
 * (a mapping that lost its page would SIGBUS and kill the run); every
 * netlink request is answered; and once everything is closed the module's
 * stats (sysfs and netlink GET_STATS) show every region freed.  Kernel
 * splats are caught by scripts/vmtest (exit 120).
 *
 * NPROXY_FUZZ_OPS (default 100000, all threads together), NPROXY_FUZZ_SEED
 * (default 16) and NPROXY_FUZZ_THREADS set the run; `make fuzz` runs a
 * longer one.  It prints operations, time, faults injected and an errno
 * histogram.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "kmod_util.h"
#include "nl_raw.h"

#define NP_DEBUGFS	"/sys/kernel/debug/nproxy/"
#define N_SLOTS		16	/* shared fd table */
#define N_MAPS		8	/* mappings per thread */
#define HOLE_PAGES	N_MAPS	/* per-thread PROT_NONE area mremap moves into */
#define MAX_THREADS	16
#define ARG_BUF		(16384 + 4096)
#define MAX_ERRNO	256

/* ------------------------------------------------------------------ */

struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	/* splitmix64: fixed seeds, the same sequence on every machine. */
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t below(struct rng *r, uint32_t n)
{
	return n ? (uint32_t)(rnd(r) % n) : 0;
}

static bool one_in(struct rng *r, uint32_t n)
{
	return below(r, n) == 0;
}

/* ------------------------------------------------------------------ */

enum op_kind {
	OP_OPEN, OP_CLOSE, OP_DUP2, OP_CREATE, OP_RAW_IOCTL, OP_REGION_IOCTL,
	OP_SUBMIT, OP_SUBMIT_BAD, OP_CANCEL, OP_COLLECT, OP_POLL, OP_MMAP,
	OP_TOUCH, OP_MPROTECT, OP_MADVISE, OP_MREMAP, OP_MUNMAP, OP_FORK,
	OP_GENL, OP_FAULT, OP_KINDS,
};

static const char *const op_names[OP_KINDS] = {
	"open", "close", "dup2", "create", "raw-ioctl", "region-ioctl",
	"submit", "submit-bad", "cancel", "collect", "poll", "mmap",
	"touch", "mprotect", "madvise", "mremap", "munmap", "fork",
	"genl", "fault-arm",
};

/* Relative weights; fork is rare because it is slow under TCG. */
static const uint32_t op_weight[OP_KINDS] = {
	[OP_OPEN] = 4, [OP_CLOSE] = 6, [OP_DUP2] = 3, [OP_CREATE] = 8,
	[OP_RAW_IOCTL] = 25, [OP_REGION_IOCTL] = 14, [OP_SUBMIT] = 8,
	[OP_SUBMIT_BAD] = 5, [OP_CANCEL] = 4, [OP_COLLECT] = 6, [OP_POLL] = 2,
	[OP_MMAP] = 8, [OP_TOUCH] = 14, [OP_MPROTECT] = 3, [OP_MADVISE] = 6,
	[OP_MREMAP] = 3, [OP_MUNMAP] = 4, [OP_FORK] = 0, [OP_GENL] = 10,
	[OP_FAULT] = 0,
};

struct stats {
	atomic_ulong ops[OP_KINDS];
	atomic_ulong errnos[MAX_ERRNO];
	atomic_ulong violations;
	atomic_ulong faults_armed;
};

static struct stats st;
static atomic_int slots[N_SLOTS];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int genl_family;
static long page;

/* Log (the first few) and count a call that broke the contract. */
static void violation(const char *what, long ret, int err)
{
	unsigned long n = atomic_fetch_add(&st.violations, 1);

	if (n < 20) {
		pthread_mutex_lock(&log_lock);
		fprintf(stderr, "# VIOLATION: %s returned %ld errno %d (%s)\n", what, ret, err,
			strerror(err));
		pthread_mutex_unlock(&log_lock);
	}
}

/* @ret < 0 must have an errno in @ok (a 0-terminated list). */
static void expect_errno(const char *what, long ret, int err, const int *ok)
{
	if (ret >= 0)
		return;
	if (err > 0 && err < MAX_ERRNO)
		atomic_fetch_add(&st.errnos[err], 1);
	for (; *ok; ok++)
		if (*ok == err)
			return;
	violation(what, ret, err);
}

/* Every errno the ioctls document (uapi.md), plus EBADF for a raced close. */
static const int ioctl_errnos[] = {
	ENOTTY, EINVAL, EFAULT, E2BIG, ENOSPC, ENOMEM, EMFILE, EBUSY, EAGAIN,
	ENOENT, EBADF, 0,
};

/* ------------------------------------------------------------------ */

struct mapping {
	char *addr;		/* NULL: free */
	int prot;
	uint64_t off;		/* which page */
	bool dontfork;
	int hole;		/* index in the thread's hole, or -1 */
};

struct thread {
	int idx;
	struct rng rng;
	unsigned long n_ops;
	int nl;			/* raw genl socket */
	char *arg;		/* ARG_BUF bytes, then a PROT_NONE guard page */
	char *guard;
	char *hole;		/* HOLE_PAGES PROT_NONE pages */
	bool hole_used[HOLE_PAGES];
	struct mapping maps[N_MAPS];
	struct nproxy_prog_step steps[64];
};

/* Take a slot's fd (the caller then owns it), or -1. */
static int slot_take(int i)
{
	return atomic_exchange(&slots[i], -1);
}

/* Put @fd into slot @i, closing what was there. */
static void slot_put(int i, int fd)
{
	int old = atomic_exchange(&slots[i], fd);

	if (old >= 0)
		close(old);
}

/*
 * A slot's fd without taking it: another thread may close it meanwhile.
 * A few tries for a live one; an empty slot (-1) is tried too (EBADF).
 */
static int slot_peek(struct thread *t)
{
	int fd = -1, i;

	for (i = 0; i < 4 && fd < 0; i++)
		fd = atomic_load(&slots[below(&t->rng, N_SLOTS)]);
	return fd;
}

static void op_open(struct thread *t)
{
	int fd = open(NP_DEV_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		violation("open /dev/nproxy", fd, errno);
	else
		slot_put(below(&t->rng, N_SLOTS), fd);
}

static void op_close(struct thread *t)
{
	int fd = slot_take(below(&t->rng, N_SLOTS));

	if (fd >= 0 && close(fd))
		violation("close", -1, errno);
}

static void op_dup2(struct thread *t)
{
	int src = slot_peek(t), j = below(&t->rng, N_SLOTS);
	int dst = slot_take(j);
	static const int ok[] = { EBADF, 0 };

	if (dst < 0)
		return;
	/* dst is ours: src may be closed (EBADF) or replaced under us. */
	if (src >= 0 && dup2(src, dst) < 0)
		expect_errno("dup2", -1, errno, ok);
	slot_put(j, dst);
}

/* A new fd from an ioctl (only CREATE_REGION returns one): keep it. */
static void adopt_fd(struct thread *t, long ret, const char *what)
{
	if (ret > 0) {
		struct nproxy_region_state s;

		/* It must be a region fd. */
		if (ioctl((int)ret, NPROXY_IOC_GET_STATE, &s))
			violation(what, ret, errno);
		slot_put(below(&t->rng, N_SLOTS), (int)ret);
	}
}

static void op_create(struct thread *t)
{
	struct nproxy_region_create req = {
		.n_streams = below(&t->rng, 6),
		.n_sems = one_in(&t->rng, 8) ? below(&t->rng, 400) : below(&t->rng, 257),
		.rank = (uint32_t)rnd(&t->rng),
		.gid = (uint32_t)rnd(&t->rng),
	};
	int fd = slot_peek(t);
	long ret;

	if (one_in(&t->rng, 10))
		req.flags = 1u << below(&t->rng, 32);
	if (one_in(&t->rng, 10))
		req.pad = 1;
	if (one_in(&t->rng, 10))
		req.reserved[below(&t->rng, 2)] = rnd(&t->rng);
	ret = ioctl(fd, NPROXY_IOC_CREATE_REGION, &req);
	if (ret < 0)
		expect_errno("CREATE_REGION", ret, errno, ioctl_errnos);
	else if (ret == 0)
		violation("CREATE_REGION returned fd 0", ret, 0);
	else
		adopt_fd(t, ret, "CREATE_REGION");
}

static const unsigned int known_cmds[] = {
	NPROXY_IOC_GET_INFO, NPROXY_IOC_CREATE_REGION, NPROXY_IOC_WRITE_TRIGGER,
	NPROXY_IOC_SEM_GET, NPROXY_IOC_SEM_SET, NPROXY_IOC_SEM_INC,
	NPROXY_IOC_GET_STATE, NPROXY_IOC_SUBMIT_PROG, NPROXY_IOC_CANCEL_PROG,
	NPROXY_IOC_COLLECT_PROG,
};

/* An argument pointer: mostly our buffer, sometimes a bad one. */
static void *arg_ptr(struct thread *t, size_t size)
{
	switch (below(&t->rng, 10)) {
	case 0:
		return NULL;
	case 1:
		return (void *)0xffff888000000000ULL;	/* kernel */
	case 2:
		return t->guard;
	case 3:	/* the last bytes before the guard: a partial copy faults */
		return t->guard - (size ? 1 + below(&t->rng, size) : 1);
	default:
		return t->arg;
	}
}

static void fill_random(struct thread *t, void *p, size_t n)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)rnd(&t->rng);
}

static void op_raw_ioctl(struct thread *t)
{
	unsigned int cmd, nr, dir, size, type = NPROXY_IOC_MAGIC;
	void *arg;
	long ret;

	if (one_in(&t->rng, 2)) {
		cmd = known_cmds[below(&t->rng, sizeof(known_cmds) / sizeof(known_cmds[0]))];
		nr = _IOC_NR(cmd);
		dir = _IOC_DIR(cmd);
		size = _IOC_SIZE(cmd);
		switch (below(&t->rng, 6)) {
		case 0:
			dir = below(&t->rng, 4);
			break;
		case 1:
			size = below(&t->rng, 256);
			break;
		case 2:
			size += 8 * (1 + below(&t->rng, 8));
			break;
		case 3:	/* a foreign magic the VFS does not handle itself */
			type = 0xb0 + below(&t->rng, 16);
			break;
		}
	} else {
		nr = below(&t->rng, 0x30);
		dir = below(&t->rng, 4);
		size = one_in(&t->rng, 8) ? below(&t->rng, 16384) : below(&t->rng, 160);
	}
	if (dir == _IOC_NONE && one_in(&t->rng, 2))
		size = 0;
	cmd = _IOC(dir, type, nr, size);
	/* Random bytes or zeros, sometimes a zero buffer with one bit set. */
	if (one_in(&t->rng, 2)) {
		fill_random(t, t->arg, 256);
	} else {
		memset(t->arg, 0, 256);
		if (one_in(&t->rng, 2))
			t->arg[below(&t->rng, 64)] |= 1 << below(&t->rng, 8);
	}
	arg = arg_ptr(t, size);
	ret = ioctl(slot_peek(t), cmd, arg);
	if (ret < 0)
		expect_errno("raw ioctl", ret, errno, ioctl_errnos);
	else if (ret > 0 && nr == _IOC_NR(NPROXY_IOC_CREATE_REGION))
		adopt_fd(t, ret, "raw CREATE_REGION");
	else if (ret > 0)
		violation("raw ioctl returned > 0", ret, 0);
}

static void op_region_ioctl(struct thread *t)
{
	int fd = slot_peek(t);
	long ret;

	switch (below(&t->rng, 5)) {
	case 0: {
		struct nproxy_trigger_write tw = {
			.stream = below(&t->rng, 6), .value = (uint32_t)rnd(&t->rng),
			.reserved = one_in(&t->rng, 10),
		};

		ret = ioctl(fd, NPROXY_IOC_WRITE_TRIGGER, &tw);
		break;
	}
	case 1:
	case 2:
	case 3: {
		static const unsigned int cmds[] = {
			NPROXY_IOC_SEM_GET, NPROXY_IOC_SEM_SET, NPROXY_IOC_SEM_INC,
		};
		struct nproxy_sem_op op = {
			.sem = one_in(&t->rng, 4) ? below(&t->rng, 300) : below(&t->rng, 4),
			.pad = one_in(&t->rng, 10),
			.value = below(&t->rng, 4),
		};

		ret = ioctl(fd, cmds[below(&t->rng, 3)], &op);
		break;
	}
	default: {
		struct nproxy_region_state s;

		ret = ioctl(fd, NPROXY_IOC_GET_STATE, &s);
		if (ret == 0 && (s.n_streams < 1 || s.n_streams > NPROXY_MAX_STREAMS ||
				 s.prog_state > NPROXY_PROG_ERROR))
			violation("GET_STATE shape", 0, 0);
		break;
	}
	}
	if (ret < 0)
		expect_errno("region ioctl", ret, errno, ioctl_errnos);
	else if (ret > 0)
		violation("region ioctl returned > 0", ret, 0);
}

/* A valid program for a region with at least 1 stream and @n_sems sems. */
static uint32_t valid_prog(struct thread *t, uint32_t n_sems)
{
	uint32_t n = 1 + below(&t->rng, 6), i;

	for (i = 0; i < n; i++) {
		struct nproxy_prog_step *s = &t->steps[i];

		memset(s, 0, sizeof(*s));
		switch (below(&t->rng, n_sems ? 5 : 3)) {
		case 0:
			s->op = NPROXY_STEP_WRITE_TRIGGER;
			s->value = (uint32_t)rnd(&t->rng);
			break;
		case 1:
			s->op = NPROXY_STEP_DELAY;
			s->timeout_ns = below(&t->rng, 200000);
			break;
		case 2:
			s->op = NPROXY_STEP_SIGNAL_EVENT;
			s->value = rnd(&t->rng);
			break;
		case 3:
			s->op = NPROXY_STEP_INC_SEM;
			s->index = below(&t->rng, n_sems);
			s->value = below(&t->rng, 3);
			break;
		default:
			s->op = NPROXY_STEP_WAIT_SEM;
			s->index = below(&t->rng, n_sems);
			s->value = below(&t->rng, 4);
			s->timeout_ns = 1 + below(&t->rng, 500000);
			break;
		}
	}
	return n;
}

static void op_submit(struct thread *t, bool malformed)
{
	struct nproxy_prog_submit req = { 0 };
	int fd = slot_peek(t);
	long ret;

	/* Valid for any region: stream 0, and semaphore 0 only if it exists. */
	req.n_steps = valid_prog(t, one_in(&t->rng, 2) ? 1 : 0);
	req.steps = (uintptr_t)t->steps;
	if (malformed) {
		switch (below(&t->rng, 6)) {
		case 0:
			fill_random(t, t->steps, sizeof(t->steps));
			req.n_steps = 1 + below(&t->rng, 64);
			break;
		case 1:
			req.n_steps = one_in(&t->rng, 2) ? 0 : NPROXY_MAX_PROG_STEPS + 1 +
							      below(&t->rng, 100);
			break;
		case 2:
			req.steps = (uintptr_t)arg_ptr(t, sizeof(t->steps[0]) * req.n_steps);
			break;
		case 3:
			req.flags = 1u << below(&t->rng, 32);
			break;
		case 4:
			req.reserved[below(&t->rng, 2)] = 1 + below(&t->rng, 100);
			break;
		default:
			t->steps[below(&t->rng, req.n_steps)].flags = 1 + below(&t->rng, 100);
			break;
		}
	}
	ret = ioctl(fd, NPROXY_IOC_SUBMIT_PROG, &req);
	if (ret < 0)
		expect_errno(malformed ? "SUBMIT (malformed)" : "SUBMIT", ret, errno,
			     ioctl_errnos);
	else if (ret > 0)
		violation("SUBMIT returned > 0", ret, 0);
}

static void op_cancel(struct thread *t)
{
	long ret = ioctl(slot_peek(t), NPROXY_IOC_CANCEL_PROG);

	if (ret < 0)
		expect_errno("CANCEL", ret, errno, ioctl_errnos);
}

/* Collect into a buffer we know and check state against error. */
static void op_collect_checked(struct thread *t)
{
	struct nproxy_prog_result res;
	long ret;

	if (one_in(&t->rng, 5)) {
		/* A bad or short buffer: EFAULT, and the result stays collectable. */
		ret = ioctl(slot_peek(t), NPROXY_IOC_COLLECT_PROG, arg_ptr(t, sizeof(res)));
		if (ret < 0)
			expect_errno("COLLECT (bad buffer)", ret, errno, ioctl_errnos);
		return;
	}
	memset(&res, 0xa5, sizeof(res));
	ret = ioctl(slot_peek(t), NPROXY_IOC_COLLECT_PROG, &res);
	if (ret < 0) {
		expect_errno("COLLECT", ret, errno, ioctl_errnos);
		return;
	}
	switch (res.state) {
	case NPROXY_PROG_DONE:
		if (res.error)
			violation("COLLECT: DONE with an error", res.error, 0);
		break;
	case NPROXY_PROG_TIMEDOUT:
		if (res.error != -ETIMEDOUT)
			violation("COLLECT: TIMEDOUT without -ETIMEDOUT", res.error, 0);
		break;
	case NPROXY_PROG_CANCELLED:
		if (res.error != -ECANCELED)
			violation("COLLECT: CANCELLED without -ECANCELED", res.error, 0);
		break;
	default:
		violation("COLLECT: state", res.state, 0);
	}
}

static void op_poll(struct thread *t)
{
	int r = np_poll(slot_peek(t), POLLIN | POLLPRI, 0);

	if (r < 0)
		violation("poll", r, -r);
}

static struct mapping *free_map(struct thread *t)
{
	int i;

	for (i = 0; i < N_MAPS; i++)
		if (!t->maps[i].addr)
			return &t->maps[i];
	return NULL;
}

static struct mapping *some_map(struct thread *t)
{
	struct mapping *m = &t->maps[below(&t->rng, N_MAPS)];

	return m->addr ? m : NULL;
}

static void op_mmap(struct thread *t)
{
	static const uint64_t offs[] = {
		NPROXY_OFF_TRIGGERS, NPROXY_OFF_SEMS, NPROXY_OFF_INFO, NPROXY_OFF_PROXY,
	};
	static const int ok[] = { EINVAL, EPERM, EACCES, ENODEV, EBADF, ENOMEM, EOVERFLOW, 0 };
	struct mapping *m = free_map(t);
	uint64_t off = offs[below(&t->rng, 4)];
	size_t len = page;
	int prot = below(&t->rng, 8), flags = MAP_SHARED;
	void *p;

	if (!m)
		return;
	if (one_in(&t->rng, 8))
		off = one_in(&t->rng, 2) ? off + page * (1 + below(&t->rng, 4)) : rnd(&t->rng) & ~0xfffULL;
	if (one_in(&t->rng, 8))
		len = page * below(&t->rng, 4);
	if (one_in(&t->rng, 8))
		flags = MAP_PRIVATE;
	if (one_in(&t->rng, 4))
		flags |= MAP_POPULATE;
	p = mmap(NULL, len, prot, flags, slot_peek(t), (off_t)off);
	if (p == MAP_FAILED) {
		expect_errno("mmap", -1, errno, ok);
		return;
	}
	if (len != (size_t)page || !(flags & MAP_SHARED) || (prot & PROT_EXEC) ||
	    (off == NPROXY_OFF_INFO && (prot & PROT_WRITE)) ||
	    (off != NPROXY_OFF_TRIGGERS && off != NPROXY_OFF_SEMS && off != NPROXY_OFF_INFO &&
	     off != NPROXY_OFF_PROXY)) {
		violation("mmap accepted a mapping uapi.md refuses", (long)off, prot);
		munmap(p, len);
		return;
	}
	*m = (struct mapping){ .addr = p, .prot = prot, .off = off, .hole = -1 };
}

/* Read (and write, where allowed) a mapping; the info page reads its magic. */
static int touch(struct mapping *m)
{
	if (!(m->prot & (PROT_READ | PROT_WRITE)))
		return 0;
	if (m->off == NPROXY_OFF_INFO) {
		const struct nproxy_region_info *info = (const void *)m->addr;

		if (info->magic != NPROXY_REGION_MAGIC || info->n_streams < 1 ||
		    info->n_streams > NPROXY_MAX_STREAMS)
			return 1;
		return 0;
	}
	if (m->off == NPROXY_OFF_SEMS) {
		uint64_t *sems = (uint64_t *)m->addr;

		(void)np_load_acquire64(&sems[0]);
		if (m->prot & PROT_WRITE)
			__atomic_fetch_add(&sems[0], 1, __ATOMIC_RELEASE);
		return 0;
	}
	(void)np_load_acquire32((uint32_t *)m->addr);
	if (m->prot & PROT_WRITE)
		__atomic_store_n((uint32_t *)m->addr + NPROXY_MAX_STREAMS, 1, __ATOMIC_RELEASE);
	return 0;
}

static void op_touch(struct thread *t)
{
	struct mapping *m = some_map(t);

	if (m && touch(m))
		violation("info page lost its magic", (long)(uintptr_t)m->addr, 0);
}

static void op_mprotect(struct thread *t)
{
	static const int ok[] = { EACCES, 0 };
	struct mapping *m = some_map(t);
	int prot = below(&t->rng, 8);

	if (!m)
		return;
	if (mprotect(m->addr, page, prot)) {
		expect_errno("mprotect", -1, errno, ok);
		return;
	}
	if ((prot & PROT_EXEC) || (m->off == NPROXY_OFF_INFO && (prot & PROT_WRITE)))
		violation("mprotect granted what VM_MAY* forbids", prot, 0);
	m->prot = prot;
}

static void op_madvise(struct thread *t)
{
	/* Every advice but HWPOISON / SOFT_OFFLINE (they poison real pages). */
	static const int advice[] = {
		MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_WILLNEED, MADV_DONTNEED,
		MADV_DONTNEED, MADV_DONTNEED, MADV_FREE, MADV_REMOVE, MADV_DONTFORK,
		MADV_DOFORK, MADV_MERGEABLE, MADV_UNMERGEABLE, MADV_HUGEPAGE,
		MADV_NOHUGEPAGE, MADV_DONTDUMP, MADV_DODUMP, MADV_WIPEONFORK,
		MADV_KEEPONFORK, 20 /* COLD */, 21 /* PAGEOUT */,
		22 /* POPULATE_READ */, 23 /* POPULATE_WRITE */,
	};
	/* ENODEV: MADV_REMOVE's fallocate on a file that is not regular. */
	static const int ok[] = {
		EINVAL, EPERM, EACCES, EFAULT, ENOMEM, EOPNOTSUPP, EAGAIN, EBUSY, EIO,
		ENODEV, 0,
	};
	struct mapping *m = some_map(t);
	int adv = advice[below(&t->rng, sizeof(advice) / sizeof(advice[0]))];

	if (!m)
		return;
	if (madvise(m->addr, page, adv)) {
		expect_errno("madvise", -1, errno, ok);
		return;
	}
	if (adv == MADV_DONTFORK)
		m->dontfork = true;
	else if (adv == MADV_DOFORK)
		m->dontfork = false;
	if (touch(m))
		violation("info page lost its magic after madvise", adv, 0);
}

/* Unmap; a mapping living in the hole is replaced by PROT_NONE again. */
static void unmap(struct thread *t, struct mapping *m)
{
	if (m->hole >= 0) {
		if (mmap(m->addr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) == MAP_FAILED)
			violation("re-reserving the hole", -1, errno);
		t->hole_used[m->hole] = false;
	} else if (munmap(m->addr, page)) {
		violation("munmap", -1, errno);
	}
	m->addr = NULL;
}

static void op_mremap(struct thread *t)
{
	static const int ok[] = { EFAULT, EINVAL, ENOMEM, 0 };
	struct mapping *m = some_map(t);
	void *p;
	int k;

	if (!m)
		return;
	switch (below(&t->rng, 3)) {
	case 0:	/* grow: refused (VM_DONTEXPAND) */
		p = mremap(m->addr, page, 2 * page, MREMAP_MAYMOVE);
		if (p != MAP_FAILED) {
			violation("mremap grew a region mapping", 0, 0);
			munmap(p, 2 * page);
			m->addr = NULL;
			return;
		}
		expect_errno("mremap grow", -1, errno, ok);
		return;
	case 1:	/* DONTUNMAP: refused */
		p = mremap(m->addr, page, page, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
		if (p != MAP_FAILED) {
			violation("mremap DONTUNMAP accepted", 0, 0);
			munmap(p, page);
			return;
		}
		expect_errno("mremap dontunmap", -1, errno, ok);
		return;
	}
	/*
	 * Move into a free page of the hole.  Only a mapping outside the hole
	 * moves: re-reserving a hole page after moving out of it would leave
	 * a window in which another thread's mmap(NULL) lands there, and the
	 * MAP_FIXED reservation would then wipe that thread's mapping.
	 */
	if (m->hole >= 0)
		return;
	for (k = 0; k < HOLE_PAGES && t->hole_used[k]; k++)
		;
	if (k == HOLE_PAGES)
		return;
	p = mremap(m->addr, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, t->hole + k * page);
	if (p == MAP_FAILED) {
		expect_errno("mremap move", -1, errno, ok);
		/*
		 * MREMAP_FIXED may have unmapped the target before failing;
		 * whatever lands there now is not ours: never use it again.
		 */
		t->hole_used[k] = true;
		return;
	}
	t->hole_used[k] = true;
	m->addr = p;
	m->hole = k;
	if (touch(m))
		violation("info page lost its magic after mremap", 0, 0);
}

static void op_munmap(struct thread *t)
{
	struct mapping *m = some_map(t);

	if (m)
		unmap(t, m);
}

/*
 * Fork: the child drops every inherited mapping's pages, touches each
 * (a lost page is a SIGBUS), drives one ioctl and exits.  Bounded wait.
 */
static void op_fork(struct thread *t)
{
	uint64_t deadline;
	int status, i;
	pid_t child = fork();

	if (child < 0) {
		violation("fork", -1, errno);
		return;
	}
	if (child == 0) {
		int bad = 0;

		for (i = 0; i < N_MAPS; i++) {
			struct mapping *m = &t->maps[i];

			if (!m->addr || m->dontfork)
				continue;
			bad |= touch(m);
			madvise(m->addr, page, MADV_DONTNEED);
			bad |= touch(m);
		}
		ioctl(slot_peek(t), NPROXY_IOC_CANCEL_PROG);
		_exit(bad);
	}
	deadline = np_now_ns() + 30000 * NP_MS;
	while (waitpid(child, &status, WNOHANG) == 0) {
		if (np_now_ns() > deadline) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			violation("fork child hung", child, 0);
			return;
		}
		usleep(1000);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		violation(WIFSIGNALED(status) ? "fork child killed by a signal" :
			  "fork child saw a wrong page", WIFSIGNALED(status) ? WTERMSIG(status) :
			  WEXITSTATUS(status), 0);
}

static void op_genl(struct thread *t)
{
	static const uint16_t flag_set[] = {
		0, 0, NLM_F_DUMP, NLM_F_DUMP, NLM_F_ECHO, NLM_F_ROOT, NLM_F_EXCL,
		NLM_F_CREATE, NLM_F_APPEND, 0x800,
	};
	static const int ok[] = { EINVAL, ERANGE, EOPNOTSUPP, ENOENT, EPERM, EMSGSIZE, 0 };
	char attrs[256];
	size_t len = 0;
	int n = below(&t->rng, 4), i, err;
	struct np_nl_reply r;

	for (i = 0; i < n; i++) {
		uint8_t val[16];
		uint16_t type = below(&t->rng, NPROXY_A_MAX + 4);
		uint16_t alen = one_in(&t->rng, 2) ? 4 : below(&t->rng, 16);

		if (one_in(&t->rng, 8))
			type |= NLA_F_NESTED;
		fill_random(t, val, sizeof(val));
		if (one_in(&t->rng, 2))
			memset(val, 0, 4);
		np_nl_put_attr(attrs, sizeof(attrs), &len, type, val, alen);
	}
	err = np_nl_raw_request(t->nl, genl_family, below(&t->rng, NPROXY_CMD_MAX + 3),
				flag_set[below(&t->rng, 10)], one_in(&t->rng, 10) ? 1 : 0,
				attrs, len, &r, NULL, NULL);
	if (err) {
		violation("genl request not answered", err, -err);
		return;
	}
	if (r.error)
		expect_errno("genl", r.error, -r.error, ok);
}

static void op_fault(struct thread *t)
{
	const char *knob = one_in(&t->rng, 2) ? NP_DEBUGFS "fail_region_alloc" :
						NP_DEBUGFS "fail_prog_submit";
	char buf[16];
	int fd = open(knob, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	snprintf(buf, sizeof(buf), "%u\n", 1 + below(&t->rng, 20));
	if (write(fd, buf, strlen(buf)) > 0)
		atomic_fetch_add(&st.faults_armed, 1);
	close(fd);
}

static uint32_t weights[OP_KINDS];
static uint32_t weight_total;
static __thread struct thread *cur_thread;
static __thread int cur_op = -1;

/*
 * A SIGBUS (a mapping that lost its page) or SIGSEGV ends the run; say
 * where first: the address, the operation, the thread's mappings.  Then
 * the default action kills the test and the harness reports the signal.
 */
static void crash_report(int sig, siginfo_t *si, void *uc)
{
	struct thread *t = cur_thread;
	char line[160];
	int i, n;

	n = snprintf(line, sizeof(line), "# fuzz: signal %d at %p during %s (thread %d)\n",
		     sig, si->si_addr, cur_op >= 0 ? op_names[cur_op] : "setup",
		     t ? t->idx : -1);
	if (write(2, line, n) < 0)
		_exit(3);
	for (i = 0; t && i < N_MAPS; i++) {
		if (!t->maps[i].addr)
			continue;
		n = snprintf(line, sizeof(line),
			     "#   map %d: %p prot %d off %#llx hole %d dontfork %d\n", i,
			     t->maps[i].addr, t->maps[i].prot,
			     (unsigned long long)t->maps[i].off, t->maps[i].hole,
			     t->maps[i].dontfork);
		if (write(2, line, n) < 0)
			break;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void op_submit_good(struct thread *t)
{
	op_submit(t, false);
}

static void op_submit_bad(struct thread *t)
{
	op_submit(t, true);
}

/* Every kind's op, in enum op_kind order (each entry set: run_op() calls it). */
static void (*const op_fns[OP_KINDS])(struct thread *t) = {
	[OP_OPEN] = op_open, [OP_CLOSE] = op_close, [OP_DUP2] = op_dup2,
	[OP_CREATE] = op_create, [OP_RAW_IOCTL] = op_raw_ioctl,
	[OP_REGION_IOCTL] = op_region_ioctl, [OP_SUBMIT] = op_submit_good,
	[OP_SUBMIT_BAD] = op_submit_bad, [OP_CANCEL] = op_cancel,
	[OP_COLLECT] = op_collect_checked, [OP_POLL] = op_poll, [OP_MMAP] = op_mmap,
	[OP_TOUCH] = op_touch, [OP_MPROTECT] = op_mprotect, [OP_MADVISE] = op_madvise,
	[OP_MREMAP] = op_mremap, [OP_MUNMAP] = op_munmap, [OP_FORK] = op_fork,
	[OP_GENL] = op_genl, [OP_FAULT] = op_fault,
};

static void run_op(struct thread *t)
{
	uint32_t w = below(&t->rng, weight_total);
	int k;

	for (k = 0; k < OP_KINDS - 1 && w >= weights[k]; k++)
		w -= weights[k];
	cur_op = k;
	op_fns[k](t);
	atomic_fetch_add(&st.ops[k], 1);
}

static void *thread_main(void *arg)
{
	struct thread *t = arg;
	unsigned long i;
	int k;

	cur_thread = t;
	for (i = 0; i < t->n_ops; i++)
		run_op(t);
	for (k = 0; k < N_MAPS; k++)
		if (t->maps[k].addr)
			unmap(t, &t->maps[k]);
	return NULL;
}

static unsigned long env_ul(const char *name, unsigned long def)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : def;
}

static void regions_live_cb(const struct nlmsghdr *nh, void *arg)
{
	const struct nlattr *a = (const void *)((const char *)NLMSG_DATA(nh) + GENL_HDRLEN);
	int len = nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

	while (len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= len) {
		if (a->nla_type == NPROXY_A_STAT_REGIONS_LIVE)
			memcpy(arg, a + 1, sizeof(long long));
		len -= NLA_ALIGN(a->nla_len);
		a = (const void *)((const char *)a + NLA_ALIGN(a->nla_len));
	}
}

/* regions_live as netlink GET_STATS reports it, or -1. */
static long long genl_regions_live(int nl)
{
	struct np_nl_reply r;
	long long live = -1;

	if (np_nl_raw_request(nl, genl_family, NPROXY_CMD_GET_STATS, 0, 0, NULL, 0, &r,
			      regions_live_cb, &live) || r.error)
		return -1;
	return live;
}

static void knob_set(const char *name, int v)
{
	char buf[16];
	int fd = open(name, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	snprintf(buf, sizeof(buf), "%d\n", v);
	if (write(fd, buf, strlen(buf)) < 0)
		fprintf(stderr, "# %s: %s\n", name, strerror(errno));
	close(fd);
}

TEST(fuzz_abi)
{
	unsigned long ops = env_ul("NPROXY_FUZZ_OPS", 100000);
	unsigned long seed = env_ul("NPROXY_FUZZ_SEED", 16);
	unsigned long n_threads = env_ul("NPROXY_FUZZ_THREADS", 4);
	bool faults = np_read_ll(NP_DEBUGFS "faults_injected") >= 0;
	long long live0, injected0 = np_read_ll(NP_DEBUGFS "faults_injected");
	static struct thread threads[MAX_THREADS];
	pthread_t tids[MAX_THREADS];
	unsigned long total = 0, i;
	uint64_t t0, t1, deadline;
	int dev, k, nl;

	NP_OPEN_DEV_OR_SKIP(dev);
	close(dev);
	{
		struct sigaction sa = { .sa_sigaction = crash_report, .sa_flags = SA_SIGINFO };

		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
	}
	if (n_threads < 1 || n_threads > MAX_THREADS)
		n_threads = 4;
	page = np_page_size();
	nl = np_nl_raw_socket();
	ASSERT_LE(0, nl);
	genl_family = np_nl_family_id(nl, NPROXY_GENL_NAME);
	ASSERT_LT(0, genl_family);
	live0 = np_stat("regions_live");
	ASSERT_LE(0, live0);

	memcpy(weights, op_weight, sizeof(weights));
	weights[OP_FORK] = 1;	/* about 1 in 150 operations */
	weights[OP_FAULT] = faults ? 1 : 0;
	for (k = 0; k < OP_KINDS; k++) {
		ASSERT_NE(NULL, op_fns[k]) TH_LOG("no op for kind %s", op_names[k]);
		weight_total += weights[k];
	}
	for (k = 0; k < N_SLOTS; k++)
		atomic_store(&slots[k], -1);

	for (i = 0; i < n_threads; i++) {
		struct thread *t = &threads[i];
		char *buf;

		t->idx = i;
		t->rng.s = seed * 0x100000001b3ULL + i;
		t->n_ops = ops / n_threads + (i < ops % n_threads);
		t->nl = np_nl_raw_socket();
		ASSERT_LE(0, t->nl);
		buf = mmap(NULL, ARG_BUF + page, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ASSERT_NE(MAP_FAILED, buf);
		t->arg = buf;
		t->guard = buf + ARG_BUF;
		ASSERT_EQ(0, mprotect(t->guard, page, PROT_NONE));
		t->hole = mmap(NULL, HOLE_PAGES * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		ASSERT_NE(MAP_FAILED, t->hole);
		for (k = 0; k < N_MAPS; k++)
			t->maps[k].hole = -1;
	}
	TH_LOG("seed %lu, %lu operations, %lu threads, fault injection %s", seed, ops,
	       n_threads, faults ? "on" : "off (no debugfs knobs)");

	t0 = np_now_ns();
	for (i = 0; i < n_threads; i++)
		ASSERT_EQ(0, pthread_create(&tids[i], NULL, thread_main, &threads[i]));
	for (i = 0; i < n_threads; i++)
		pthread_join(tids[i], NULL);
	t1 = np_now_ns();

	for (k = 0; k < N_SLOTS; k++) {
		int fd = slot_take(k);

		if (fd >= 0)
			close(fd);
	}
	if (faults) {
		knob_set(NP_DEBUGFS "fail_region_alloc", 0);
		knob_set(NP_DEBUGFS "fail_prog_submit", 0);
	}

	for (k = 0; k < OP_KINDS; k++)
		total += st.ops[k];
	TH_LOG("%lu operations in %.1f s (%.0f/s)", total, (t1 - t0) / 1e9,
	       total / ((t1 - t0) / 1e9));
	for (k = 0; k < OP_KINDS; k++)
		TH_LOG("  %-13s %lu", op_names[k], (unsigned long)st.ops[k]);
	for (k = 1; k < MAX_ERRNO; k++)
		if (st.errnos[k])
			TH_LOG("  errno %-12s %lu", strerrorname_np(k) ?: "?",
			       (unsigned long)st.errnos[k]);
	if (faults)
		TH_LOG("fault knobs armed %lu times, faults injected %lld",
		       (unsigned long)st.faults_armed,
		       np_read_ll(NP_DEBUGFS "faults_injected") - injected0);

	EXPECT_EQ(ops, total);
	EXPECT_EQ(0, st.violations);

	/* Every fd and mapping is gone: every region must be freed, now. */
	deadline = np_now_ns() + 10000 * NP_MS;
	while (np_stat("regions_live") != live0 && np_now_ns() < deadline)
		usleep(10000);
	EXPECT_EQ(live0, np_stat("regions_live"));
	EXPECT_EQ(live0, genl_regions_live(nl));
	close(nl);
	for (i = 0; i < n_threads; i++)
		close(threads[i].nl);
}

/*
 * The test runs in a child the harness forks; if it dies (a SIGBUS, the
 * timeout), the knobs it armed would fail the next program's calls.  The
 * harness's own process disarms them when it exits, whatever happened.
 */
static void __attribute__((destructor)) fuzz_disarm(void)
{
	if (np_read_ll(NP_DEBUGFS "faults_injected") >= 0) {
		knob_set(NP_DEBUGFS "fail_region_alloc", 0);
		knob_set(NP_DEBUGFS "fail_prog_submit", 0);
	}
}

/*
 * The harness gives a TEST 30 s; the run's own bound comes from
 * NPROXY_FUZZ_TIMEOUT (default 240 s, inside run-tests' 300 s), set on the
 * harness's metadata object for fuzz_abi before main() runs the tests.
 */
static void __attribute__((constructor)) fuzz_timeout(void)
{
	_fuzz_abi_object.timeout = (int)env_ul("NPROXY_FUZZ_TIMEOUT", 240);
}

TEST_HARNESS_MAIN
