/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nproxyctl top / hang-report: finding every proxy on the host and taking
 * a consistent snapshot of what it publishes (struct nproxy_proxy_state in
 * its handshake region), plus the region's device side (trigger words,
 * semaphores, info page) and what /proc says about the process and its
 * worker thread.  Nothing here blocks: /proc reads, pidfd_getfd(2), mmap of
 * pages that exist, and seqlock reads that give up after a few tries.
 */
#ifndef NPROXY_TOOLS_CTL_PROXY_H
#define NPROXY_TOOLS_CTL_PROXY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/nproxy.h>
#include <nproxy/proxy.h>

enum ctl_proxy_backend { CTL_PROXY_KMOD, CTL_PROXY_MEMFD };

struct ctl_proxy {
	pid_t pid;
	int fd;				/* the region fd number in pid */
	enum ctl_proxy_backend backend;
	char comm[32];			/* the process's name */
	char proc_state;		/* /proc/<pid>/stat state: R, S, T, Z ... */
	char worker_proc_state;		/* the worker thread's, '?' if gone */
	uint64_t worker_cpu_ticks;	/* utime + stime of the worker (clock ticks) */
	struct nproxy_region_info info;
	uint32_t triggers[NPROXY_MAX_STREAMS];
	uint64_t sems[NPROXY_MAX_SEMS];
	struct nproxy_proxy_state ps;	/* tasks[] copied slot by slot (seqlock) */
	bool task_torn[NPROXY_PROXY_STATE_TASKS];	/* slot kept changing: skipped */
	bool prog_torn;
	uint64_t now_ns;		/* CLOCK_MONOTONIC_COARSE at the snapshot */
};

struct ctl_proxy_list {
	struct ctl_proxy *v;
	size_t n, cap;
	int denied;			/* processes whose fds could not be read */
};

/* Every region with published proxy state on the host (only_pid: that
 * process, its children or its parent's job; 0 = all).  0 or -exit_code. */
int ctl_proxy_scan(struct ctl_proxy_list *out, pid_t only_pid);
void ctl_proxy_list_free(struct ctl_proxy_list *l);

const char *ctl_task_type_name(uint32_t type);
const char *ctl_run_state_name(uint32_t rs);
const char *ctl_worker_state_name(uint32_t ws);
const char *ctl_step_op_name(uint32_t op);
/* "step 2 WAIT_SEM 5 >= 3, sem 5 = 2" style text for the device's step. */
void ctl_describe_device(const struct ctl_proxy *p, char *buf, size_t len);
/* Seconds since ns (a CLOCK_MONOTONIC_COARSE stamp of the snapshot). */
double ctl_age_s(const struct ctl_proxy *p, uint64_t ns);

/* Exit status of hang-report when it found a hang. */
#define CTL_HANG_FOUND	5

/*
 * nproxy-run --timeout (ctl_hang.c): the hang-report snapshot of job_pid's
 * ranks, judged.  A rank stalled on its own when a task of it waits for its
 * device (trigger word still at the sentinel) or its process is stopped:
 * one line each in culprits, "rank 1 (pid 42) stalled: task NETWORK of op 2
 * in WAITING_DEVICE_TRIGGER for 8.9 s: <hang-report's evidence>".  Every
 * other rank with a stuck task only waits for them: one line each in
 * victims, "rank 0 (pid 41): waiting on rank 1 (victim): task ...".
 * Only tasks stuck for at least min_age_s count.  Returns the culprits.
 */
size_t ctl_hang_judge(pid_t job_pid, double min_age_s, char *culprits, size_t clen,
		      char *victims, size_t vlen);

/* Subcommands (ctl_top.c, ctl_hang.c): exit codes. */
int cmd_top(bool json, uint64_t count, double interval_s, pid_t only_pid);
int cmd_hang_report(bool json, double min_age_s, pid_t only_pid);

#endif
