// SPDX-License-Identifier: GPL-2.0
/*
 * Finding every proxy on the host and snapshotting what it publishes.
 *
 * Discovery: a region is an fd of its owner, so /proc/<pid>/fd is the
 * registry -- "anon_inode:[nproxy-region]" (nproxy.ko) or
 * "/memfd:nproxy-hs-r<rank> (deleted)" (the memfd backend).  No file of our
 * own to keep in step, nothing left behind by a process that died.  The fd
 * is duplicated with pidfd_getfd(2) (ptrace access to the owner: root, or
 * the same user under ptrace_scope 0) and its pages are mapped read-only:
 * the proxy-state page, the trigger words, the semaphores and the info
 * page.  A process that exits meanwhile is simply skipped.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "ctl.h"
#include "ctl_proxy.h"

#define KMOD_LINK	"anon_inode:[nproxy-region]"
#define MEMFD_PREFIX	"/memfd:nproxy-hs-"
/* A slot rewritten under us this many times in a row is reported torn. */
#define SEQLOCK_TRIES	16

const char *ctl_task_type_name(uint32_t type)
{
	switch (type) {
	case 1: return "NETWORK";
	case 2: return "BARRIER";
	default: return "UNKNOWN";
	}
}

const char *ctl_run_state_name(uint32_t rs)
{
	static const char *const names[] = { "INIT", "PROGRESSING", "WAITING_DEVICE_TRIGGER",
					     "IDLE", "DONE" };

	return rs < sizeof(names) / sizeof(names[0]) ? names[rs] : "?";
}

const char *ctl_worker_state_name(uint32_t ws)
{
	switch (ws) {
	case NPROXY_WORKER_RUNNING: return "running";
	case NPROXY_WORKER_IDLE: return "idle";
	case NPROXY_WORKER_SLEEPING: return "sleeping";
	case NPROXY_WORKER_STOPPED: return "stopped";
	default: return "none";
	}
}

const char *ctl_step_op_name(uint32_t op)
{
	switch (op) {
	case NPROXY_STEP_WRITE_TRIGGER: return "WRITE_TRIGGER";
	case NPROXY_STEP_WAIT_SEM: return "WAIT_SEM";
	case NPROXY_STEP_DELAY: return "DELAY";
	case NPROXY_STEP_INC_SEM: return "INC_SEM";
	case NPROXY_STEP_SIGNAL_EVENT: return "SIGNAL_EVENT";
	default: return "?";
	}
}

const char *ctl_prog_state_name(uint64_t state)
{
	static const char *const names[] = {
		[NPROXY_PROG_NONE] = "none",
		[NPROXY_PROG_RUNNING] = "running",
		[NPROXY_PROG_DONE] = "done",
		[NPROXY_PROG_TIMEDOUT] = "timedout",
		[NPROXY_PROG_CANCELLED] = "cancelled",
		[NPROXY_PROG_ERROR] = "error",
	};

	if (state < sizeof(names) / sizeof(names[0]))
		return names[state];
	return "unknown";
}

static uint64_t coarse_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double ctl_age_s(const struct ctl_proxy *p, uint64_t ns)
{
	return ns && p->now_ns > ns ? (double)(p->now_ns - ns) / 1e9 : 0.0;
}

void ctl_describe_device(const struct ctl_proxy *p, char *buf, size_t len)
{
	const struct nproxy_prog_step *st;
	uint32_t i = p->info.prog_step;

	switch (p->info.prog_state) {
	case NPROXY_PROG_NONE:
		snprintf(buf, len, "no device program running");
		return;
	case NPROXY_PROG_RUNNING:
		break;
	default:
		snprintf(buf, len, "device program %s at step %u",
			 ctl_prog_state_name(p->info.prog_state), i);
		return;
	}
	if (p->prog_torn || i >= p->ps.prog_n_steps || i >= NPROXY_PROXY_STATE_PROG_STEPS) {
		snprintf(buf, len, "device program at step %u", i);
		return;
	}
	st = &p->ps.prog[i];
	switch (st->op) {
	case NPROXY_STEP_WAIT_SEM:
		snprintf(buf, len, "device program at step %u WAIT_SEM %u >= %llu, sem %u = %llu", i,
			 st->index, (unsigned long long)st->value, st->index,
			 (unsigned long long)(st->index < NPROXY_MAX_SEMS ? p->sems[st->index] : 0));
		break;
	case NPROXY_STEP_DELAY:
		snprintf(buf, len, "device program at step %u DELAY %.3f s", i,
			 (double)st->timeout_ns / 1e9);
		break;
	default:
		snprintf(buf, len, "device program at step %u %s %u %llu", i,
			 ctl_step_op_name(st->op), st->index, (unsigned long long)st->value);
		break;
	}
}

/* Copy one seqlock-protected object; false if it never held still. */
static bool seq_copy(void *dst, const volatile void *src, size_t len, const volatile uint32_t *seq)
{
	for (int i = 0; i < SEQLOCK_TRIES; i++) {
		uint32_t s1 = __atomic_load_n(seq, __ATOMIC_ACQUIRE), s2;

		if (s1 & 1)
			continue;
		memcpy(dst, (const void *)src, len);
#ifdef __SANITIZE_THREAD__
		__atomic_signal_fence(__ATOMIC_ACQUIRE);	/* TSan has no thread fence */
#else
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
		s2 = __atomic_load_n(seq, __ATOMIC_RELAXED);
		if (s1 == s2)
			return true;
	}
	return false;
}

/* /proc/<pid>[/task/<tid>]/stat: name, state, utime + stime. */
static bool read_stat(const char *path, char *name, size_t name_len, char *state,
		      uint64_t *ticks)
{
	char buf[1024], *open_p, *close_p;
	unsigned long long ut = 0, stt = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	open_p = strchr(buf, '(');
	close_p = strrchr(buf, ')');
	if (!open_p || !close_p || close_p[1] != ' ')
		return false;
	if (name) {
		size_t l = (size_t)(close_p - open_p - 1);

		if (l >= name_len)
			l = name_len - 1;
		memcpy(name, open_p + 1, l);
		name[l] = '\0';
	}
	*state = close_p[2];
	/* Fields after the state: ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime stime. */
	if (ticks && sscanf(close_p + 4, "%*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			    &ut, &stt) == 2)
		*ticks = ut + stt;
	return true;
}

static const void *map_ro(int fd, off_t off, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);

	return p == MAP_FAILED ? NULL : p;
}

/* Map the four pages of a duplicated region fd and copy them out. */
static bool snapshot_region(int fd, enum ctl_proxy_backend be, struct ctl_proxy *p)
{
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	const volatile struct nproxy_proxy_state *ps;
	const volatile struct nproxy_region_info *info;
	const volatile uint32_t *trig;
	const volatile uint64_t *sems;
	off_t off[4];
	bool ok = false;

	if (be == CTL_PROXY_KMOD) {
		off[0] = NPROXY_OFF_TRIGGERS;
		off[1] = NPROXY_OFF_SEMS;
		off[2] = NPROXY_OFF_INFO;
		off[3] = NPROXY_OFF_PROXY;
	} else {
		struct stat sb;

		/*
		 * Touching a page past the end of a memfd is SIGBUS: a region
		 * still being set up (not yet sized) or an older library's
		 * three-page memfd is not ours to read.  Sealed once sized, it
		 * never shrinks after this check.
		 */
		if (fstat(fd, &sb) || sb.st_size < (off_t)(4 * psz) ||
		    !(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK))
			return false;
		for (int i = 0; i < 4; i++)
			off[i] = (off_t)(i * psz);
	}
	trig = map_ro(fd, off[0], psz);
	sems = map_ro(fd, off[1], psz);
	info = map_ro(fd, off[2], psz);
	ps = map_ro(fd, off[3], psz);
	if (!trig || !sems || !info || !ps || sizeof(*ps) > psz)
		goto out;
	if (__atomic_load_n(&ps->magic, __ATOMIC_ACQUIRE) != NPROXY_PROXY_STATE_MAGIC ||
	    ps->version != NPROXY_PROXY_STATE_VERSION || info->magic != NPROXY_REGION_MAGIC)
		goto out;	/* a region no proxy publishes into (e.g. `nproxyctl create`) */
	p->now_ns = coarse_now_ns();
	memcpy(&p->info, (const void *)info, sizeof(p->info));
	for (uint32_t s = 0; s < NPROXY_MAX_STREAMS; s++)
		p->triggers[s] = __atomic_load_n(&trig[s], __ATOMIC_ACQUIRE);
	for (uint32_t s = 0; s < NPROXY_MAX_SEMS; s++)
		p->sems[s] = __atomic_load_n(&sems[s], __ATOMIC_ACQUIRE);
	/* Header words are single stores: a plain copy; then the parts with seqlocks. */
	memcpy(&p->ps, (const void *)ps, offsetof(struct nproxy_proxy_state, prog));
	p->prog_torn = !seq_copy(p->ps.prog, ps->prog, sizeof(p->ps.prog), &ps->prog_seqlock);
	for (int t = 0; t < NPROXY_PROXY_STATE_TASKS; t++) {
		p->task_torn[t] = !seq_copy(&p->ps.tasks[t], &ps->tasks[t], sizeof(p->ps.tasks[t]),
					    &ps->tasks[t].seq);
		if (p->task_torn[t])
			memset(&p->ps.tasks[t], 0, sizeof(p->ps.tasks[t]));
	}
	p->backend = be;
	ok = true;
out:
	if (trig)
		munmap((void *)trig, psz);
	if (sems)
		munmap((void *)sems, psz);
	if (info)
		munmap((void *)info, psz);
	if (ps)
		munmap((void *)ps, psz);
	return ok;
}

static bool list_push(struct ctl_proxy_list *l, const struct ctl_proxy *p)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct ctl_proxy *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return false;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *p;
	return true;
}

static bool seen_region(const struct ctl_proxy_list *l, pid_t pid, const struct ctl_proxy *p)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].pid == pid && l->v[i].backend == p->backend &&
		    l->v[i].info.region_id == p->info.region_id)
			return true;
	return false;
}

static void scan_pid(struct ctl_proxy_list *l, pid_t pid, struct ctl_proxy *tmp)
{
	char path[64], link[128];
	struct dirent *de;
	int pidfd = -1;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d) {
		if (errno == EACCES)
			l->denied++;
		return;
	}
	while ((de = readdir(d))) {
		enum ctl_proxy_backend be;
		char fdpath[320];
		ssize_t n;
		int fd, local;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, de->d_name);
		n = readlink(fdpath, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (!strcmp(link, KMOD_LINK))
			be = CTL_PROXY_KMOD;
		else if (!strncmp(link, MEMFD_PREFIX, strlen(MEMFD_PREFIX)))
			be = CTL_PROXY_MEMFD;
		else
			continue;
		fd = atoi(de->d_name);
		if (pidfd < 0)
			pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (pidfd < 0)
			break;
		local = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
		if (local < 0) {
			if (errno == EPERM || errno == EACCES)
				l->denied++;
			continue;
		}
		memset(tmp, 0, sizeof(*tmp));
		if (snapshot_region(local, be, tmp) && !seen_region(l, pid, tmp)) {
			char statp[64];

			tmp->pid = pid;
			tmp->fd = fd;
			tmp->proc_state = '?';
			tmp->worker_proc_state = '?';
			snprintf(statp, sizeof(statp), "/proc/%d/stat", (int)pid);
			read_stat(statp, tmp->comm, sizeof(tmp->comm), &tmp->proc_state, NULL);
			if (tmp->ps.worker_tid > 0) {
				snprintf(statp, sizeof(statp), "/proc/%d/task/%d/stat", (int)pid,
					 tmp->ps.worker_tid);
				read_stat(statp, NULL, 0, &tmp->worker_proc_state,
					  &tmp->worker_cpu_ticks);
			}
			list_push(l, tmp);
		}
		close(local);
	}
	if (pidfd >= 0)
		close(pidfd);
	closedir(d);
}

static int by_job_rank(const void *a, const void *b)
{
	const struct ctl_proxy *x = a, *y = b;

	if (x->ps.ppid != y->ps.ppid)
		return x->ps.ppid < y->ps.ppid ? -1 : 1;
	if (x->ps.rank != y->ps.rank)
		return x->ps.rank < y->ps.rank ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Keep the job only_pid belongs to: itself, its ranks, or the launcher's children. */
static void keep_job(struct ctl_proxy_list *l, pid_t only_pid)
{
	uint32_t job = (uint32_t)only_pid;
	size_t i, o = 0;

	for (i = 0; i < l->n; i++)
		if (l->v[i].pid == only_pid)
			job = l->v[i].ps.ppid;
	for (i = 0; i < l->n; i++)
		if (l->v[i].pid == only_pid || l->v[i].ps.ppid == job)
			l->v[o++] = l->v[i];
	l->n = o;
}

int ctl_proxy_scan(struct ctl_proxy_list *out, pid_t only_pid)
{
	struct ctl_proxy *tmp = malloc(sizeof(*tmp));
	struct dirent *de;
	DIR *d;

	memset(out, 0, sizeof(*out));
	if (!tmp)
		return -CTL_FAIL;
	d = opendir("/proc");
	if (!d) {
		ctl_err("/proc: %s", strerror(errno));
		free(tmp);
		return -CTL_FAIL;
	}
	while ((de = readdir(d))) {
		pid_t pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (pid == getpid())
			continue;
		scan_pid(out, pid, tmp);
	}
	closedir(d);
	free(tmp);
	if (only_pid)
		keep_job(out, only_pid);
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), by_job_rank);
	return 0;
}

void ctl_proxy_list_free(struct ctl_proxy_list *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}
