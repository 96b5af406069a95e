/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * nproxy: host-visible device handshake pages for on-device collectives.
 *
 * This header is the whole kernel/user ABI of nproxy.ko and the layout
 * contract libnproxy's memfd fallback reproduces byte for byte.  It is
 * documented in Documentation/uapi.md; keep the two in step.
 *
 * Rules every structure here follows:
 *  - fixed-width types only, explicit padding, 8-byte aligned sizes;
 *  - every reserved/pad field must be zero on input (-EINVAL otherwise);
 *  - every flags field rejects unknown bits (-EINVAL);
 *  - structures only ever grow at the end; the kernel copies them with
 *    copy_struct_from_user() using _IOC_SIZE(cmd), so an older (shorter)
 *    caller keeps working and a newer (longer) caller works as long as the
 *    tail it passes is zero.
 */
#ifndef _UAPI_LINUX_NPROXY_H
#define _UAPI_LINUX_NPROXY_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define NPROXY_ABI_VERSION	1
#define NPROXY_DEVICE_NAME	"nproxy"	/* /dev/nproxy */
#define NPROXY_GENL_NAME	"nproxy"
#define NPROXY_GENL_VERSION	1
#define NPROXY_GENL_MCGRP_EVENTS "events"

/* ---------------------------------------------------------------------- */
/* Limits                                                                  */
/* ---------------------------------------------------------------------- */

/* Trigger words per region: the reference runtime's per-task stream limit. */
#define NPROXY_MAX_STREAMS	4
/* Semaphores per region (u64 each: fits one 4 KiB page). */
#define NPROXY_MAX_SEMS		256
/* Steps in one device program. */
#define NPROXY_MAX_PROG_STEPS	1024
/* Live regions per loaded module (all users together; one worker each). */
#define NPROXY_MAX_REGIONS	512
/* Longest single delay or wait a program may ask for (60 s). */
#define NPROXY_MAX_WAIT_NS	(60ULL * 1000 * 1000 * 1000)

/*
 * Trigger word value meaning "the device has not reached the network stage".
 * Every trigger word of a new region holds it.  Any other value means
 * "go"; the host consumes a trigger by storing 0.
 */
#define NPROXY_TRIGGER_SENTINEL	0xFFFFFFFFU

/* ---------------------------------------------------------------------- */
/* mmap layout of a region fd                                              */
/* ---------------------------------------------------------------------- */
/*
 * A region is four areas, each exactly one page (the system page size)
 * and each mapped separately at its own offset, like IORING_OFF_*:
 *
 *   NPROXY_OFF_TRIGGERS  __u32 trigger[NPROXY_MAX_STREAMS]   read/write
 *       Written by the device (or the emulated device); the host reads with
 *       one acquire load and consumes with a release store of 0.
 *   NPROXY_OFF_SEMS      __u64 sem[NPROXY_MAX_SEMS]          read/write
 *       Incremented by the host with atomic adds (the completion back-edge);
 *       the device waits on them (sem >= value).
 *   NPROXY_OFF_INFO      struct nproxy_region_info           read-only
 *       Written only by the kernel; a PROT_WRITE mapping is refused (-EPERM).
 *   NPROXY_OFF_PROXY     struct nproxy_proxy_state           read/write
 *       Never touched by the kernel: the region owner's proxy library
 *       publishes its host-side state there for tools (nproxyctl top,
 *       hang-report), which map it read-only.
 *
 * Mappings must be MAP_SHARED, exactly one page long, at exactly one of the
 * offsets below; anything else is -EINVAL.  Only the first n_streams
 * trigger words and n_sems semaphores are meaningful; the rest read 0.
 */
#define NPROXY_OFF_TRIGGERS	0x00000000ULL
#define NPROXY_OFF_SEMS		0x10000000ULL
#define NPROXY_OFF_INFO		0x20000000ULL
#define NPROXY_OFF_PROXY	0x30000000ULL

#define NPROXY_REGION_MAGIC	0x4e505258U	/* "NPRX" */

/* Program states, as published in nproxy_region_info.prog_state. */
enum nproxy_prog_state {
	NPROXY_PROG_NONE	= 0,	/* nothing submitted since the last collect */
	NPROXY_PROG_RUNNING	= 1,
	NPROXY_PROG_DONE	= 2,	/* every step ran */
	NPROXY_PROG_TIMEDOUT	= 3,	/* a WAIT_SEM step hit its timeout */
	NPROXY_PROG_CANCELLED	= 4,	/* cancelled by ioctl or by close */
	NPROXY_PROG_ERROR	= 5,	/* a step was invalid at run time */
};

/*
 * The read-only info page.  Counters only grow; prog_state/prog_seq are
 * stored with release semantics after the rest of a program's effects.
 */
struct nproxy_region_info {
	__u32 magic;		/* NPROXY_REGION_MAGIC */
	__u32 abi_version;	/* NPROXY_ABI_VERSION */
	__u32 region_id;	/* unique while the module is loaded */
	__u32 n_streams;
	__u32 n_sems;
	__u32 prog_state;	/* enum nproxy_prog_state */
	__u64 prog_seq;		/* id of the last submitted program (1, 2, ...) */
	__u64 triggers_written;	/* WRITE_TRIGGER steps + ioctls */
	__u64 events_signalled;	/* SIGNAL_EVENT steps */
	/*
	 * CLOCK_MONOTONIC ns (ktime_get_ns()) of the last trigger store and of
	 * the last WAIT_SEM step that saw its condition met; 0 = never.
	 * Stored before the trigger word / after the wait, for latency probes.
	 */
	__u64 last_trigger_ns;
	__u64 last_wait_done_ns;
	/*
	 * Non-zero while the device sleeps in a WAIT_SEM step (between two
	 * sem_poll_ns re-reads), published with a full barrier before its
	 * last check of the semaphore: a host that adds to a semaphore with
	 * an atomic read-modify-write and then reads this as non-zero rings
	 * the doorbell (NPROXY_IOC_SEM_INC with value 0) and the device
	 * re-reads at once.  Reads 0 otherwise.
	 */
	__u32 sem_sleepers;
	/*
	 * Index of the step the device is executing (or blocked in) while
	 * prog_state is RUNNING; afterwards the last step it started.
	 */
	__u32 prog_step;
	__u64 reserved[1];
};

/* ---------------------------------------------------------------------- */
/* Device programs                                                         */
/* ---------------------------------------------------------------------- */

enum nproxy_step_op {
	NPROXY_STEP_WRITE_TRIGGER = 1,	/* trigger[index] = value (u32) */
	NPROXY_STEP_WAIT_SEM	  = 2,	/* wait sem[index] >= value, at most timeout_ns */
	NPROXY_STEP_DELAY	  = 3,	/* sleep timeout_ns */
	NPROXY_STEP_INC_SEM	  = 4,	/* sem[index] += value (atomic) */
	NPROXY_STEP_SIGNAL_EVENT  = 5,	/* events_signalled++, EPOLLPRI, event(value) */
};

/* One step: 24 bytes. Fields a step does not use must be zero. */
struct nproxy_prog_step {
	__u16 op;		/* enum nproxy_step_op */
	__u16 flags;		/* none defined: must be 0 */
	__u32 index;		/* stream (WRITE_TRIGGER) or sem (WAIT_SEM, INC_SEM) */
	__u64 value;		/* trigger value, sem threshold, increment or event value */
	__u64 timeout_ns;	/* WAIT_SEM: 0 = NPROXY_MAX_WAIT_NS; DELAY: duration */
};

/* ---------------------------------------------------------------------- */
/* Published proxy state (the NPROXY_OFF_PROXY page)                       */
/* ---------------------------------------------------------------------- */
/*
 * Written only by the process that owns the region (libnproxy, with plain
 * stores at its proxy's state transitions: no syscall, no lock); read by
 * tools that map the page read-only.  The kernel zeroes it at region
 * creation and never reads or writes it afterwards.  All-zero means "no
 * proxy attached"; a reader checks magic and version first.
 *
 * Consistency: each task slot and the header carry a sequence word that is
 * odd while the writer updates them (a seqlock with one writer per slot at
 * a time).  A reader copies the slot, re-reads the word and retries a few
 * times when it changed or is odd; it never waits for the writer.
 * Timestamps are CLOCK_MONOTONIC_COARSE ns (a few ms resolution).
 */
#define NPROXY_PROXY_STATE_MAGIC	0x4e505053U	/* "NPPS" */
#define NPROXY_PROXY_STATE_VERSION	1
/* Task slots: the most recent tasks of the comm, reused round robin. */
#define NPROXY_PROXY_STATE_TASKS	16
/* Steps of the last submitted device program kept for the evidence. */
#define NPROXY_PROXY_STATE_PROG_STEPS	64
#define NPROXY_PROXY_STATE_SEMS		4

/* Worker states (nproxy_proxy_state.worker_state). */
enum nproxy_worker_state {
	NPROXY_WORKER_NONE	= 0,	/* no worker started yet */
	NPROXY_WORKER_RUNNING	= 1,	/* stepping tasks */
	NPROXY_WORKER_IDLE	= 2,	/* every task waits: spinning or parked briefly */
	NPROXY_WORKER_SLEEPING	= 3,	/* nothing queued: asleep until an enqueue */
	NPROXY_WORKER_STOPPED	= 4,	/* the comm was freed */
};

/* One task: 72 bytes. type 0 = slot never used. */
struct nproxy_proxy_task {
	__u32 seq;		/* odd while written */
	__u16 type;		/* libnproxy's enum nproxy_task_type (1 NETWORK, 2 BARRIER) */
	__u16 run_state;	/* enum nproxy_task_run_state (0 INIT .. 4 DONE) */
	__u64 ctx;		/* the op's ctx */
	__u64 exec_id;
	__u64 enqueue_ns;
	__u64 state_ns;		/* when run_state was entered */
	__u64 progress_ns;	/* last state change or basic-block switch */
	__u32 trigger_mask;	/* bit s: waits on trigger word s of this region */
	__u32 bb;		/* basic block in progress (stream 0) */
	__u8 n_sems;		/* barrier: device semaphores it increments */
	__u8 flags;		/* NPROXY_PROXY_TASK_F_* */
	__u8 pad8[2];		/* zero */
	__s32 status;		/* enum nproxy_status once DONE */
	/* sem indices */
	__u16 sems[NPROXY_PROXY_STATE_SEMS];
};

/*
 * nproxy_proxy_task.flags.  DEFERRED: a host barrier that waits, by design,
 * for its comm's next op: for the application to start it (its age is the
 * application's time between ops, not a stall), then, when that op carries
 * it, for that op's receives (a stall there shows on that op's own tasks).
 * Cleared, and progress_ns restamped, once it leaves that wait.
 */
#define NPROXY_PROXY_TASK_F_DEFERRED	(1U << 0)

struct nproxy_proxy_state {
	__u32 magic;		/* NPROXY_PROXY_STATE_MAGIC, stored last at attach */
	__u32 version;		/* NPROXY_PROXY_STATE_VERSION */
	__u32 size;		/* sizeof(struct nproxy_proxy_state) of the writer */
	__u32 pid;		/* the owner process (its pid namespace) */
	__u32 ppid;		/* its parent: tools group a job's ranks by it */
	__u32 rank;
	__u32 n_ranks;
	__u32 gid;		/* proxy group (one worker thread per group) */
	__u32 device_index;
	__u32 timeout_s;	/* the comm's watchdog */
	__u32 flags;		/* NPROXY_PROXY_STATE_F_* */
	__s32 worker_tid;
	__u32 worker_state;	/* enum nproxy_worker_state */
	__u32 pad;		/* zero */
	__u64 worker_state_ns;	/* when worker_state was entered */
	__u64 attach_ns;	/* comm creation */
	__u64 ops_enqueued;	/* network tasks enqueued (one per op) */
	__u64 next_slot;	/* slot of the next task: tasks[next_slot % TASKS] */
	__u64 prog_seq;		/* the library's count of submitted programs */
	__u32 prog_n_steps;	/* steps of the last program (kept: at most PROG_STEPS) */
	__u32 prog_seqlock;	/* odd while prog[] is rewritten */
	__u64 reserved[7];	/* zero */
	struct nproxy_prog_step prog[NPROXY_PROXY_STATE_PROG_STEPS];
	struct nproxy_proxy_task tasks[NPROXY_PROXY_STATE_TASKS];
};

/* The comm's ops wait for device triggers (NPROXY_COMM_F_DEVICE_WAIT). */
#define NPROXY_PROXY_STATE_F_DEVICE_WAIT	(1U << 0)
/* The comm skips the network (NPROXY_COMM_F_SKIP_NET). */
#define NPROXY_PROXY_STATE_F_SKIP_NET		(1U << 1)

/* ---------------------------------------------------------------------- */
/* ioctls                                                                  */
/* ---------------------------------------------------------------------- */

#define NPROXY_IOC_MAGIC	0xB8

/* On /dev/nproxy. */
struct nproxy_info {
	__u32 abi_version;
	__u32 max_streams;
	__u32 max_sems;
	__u32 max_prog_steps;
	__u64 max_wait_ns;
	__u32 page_size;
	__u32 sem_poll_ns;	/* the emulated device's semaphore poll interval */
	__u64 reserved[4];
};

struct nproxy_region_create {
	__u32 flags;		/* NPROXY_REGION_F_*: must be 0 */
	__u32 n_streams;	/* 1..NPROXY_MAX_STREAMS */
	__u32 n_sems;		/* 0..NPROXY_MAX_SEMS */
	__u32 rank;		/* informational: shown in dumps and events */
	__u32 gid;		/* informational */
	__u32 pad;		/* must be 0 */
	__u64 reserved[2];	/* must be 0 */
};

/* On a region fd. */
struct nproxy_trigger_write {
	__u32 stream;
	__u32 value;
	__u64 reserved;		/* must be 0 */
};

struct nproxy_sem_op {
	__u32 sem;
	__u32 pad;		/* must be 0 */
	__u64 value;		/* SET: new value, INC: addend, GET: out */
};

struct nproxy_prog_submit {
	__u32 n_steps;		/* 1..NPROXY_MAX_PROG_STEPS */
	__u32 flags;		/* must be 0 */
	__u64 steps;		/* user pointer to struct nproxy_prog_step[n_steps] */
	__u64 seq;		/* out: the program's id (info.prog_seq) */
	__u64 reserved[2];	/* must be 0 */
};

struct nproxy_prog_result {
	__u64 seq;		/* which program */
	__u32 state;		/* enum nproxy_prog_state */
	__u32 failed_step;	/* index of the step that timed out/failed, else 0 */
	__s32 error;		/* 0, -ETIMEDOUT, -ECANCELED, -EINVAL ... */
	__u32 steps_done;
	__u64 elapsed_ns;	/* submit to finish */
	__u64 reserved[2];
};

struct nproxy_region_state {
	__u32 region_id;
	__u32 owner_pid;	/* tgid of the creator, in the caller's pid ns */
	__u32 n_streams;
	__u32 n_sems;
	__u32 rank;
	__u32 gid;
	__u32 triggers[NPROXY_MAX_STREAMS];
	__u32 prog_state;
	__u32 pad;
	__u64 prog_seq;
	__u64 triggers_written;
	__u64 events_signalled;
	__u64 reserved[2];
};

#define NPROXY_IOC_GET_INFO	 _IOR(NPROXY_IOC_MAGIC, 0x00, struct nproxy_info)
/* Returns a new region fd (O_CLOEXEC) as the ioctl's return value. */
#define NPROXY_IOC_CREATE_REGION _IOW(NPROXY_IOC_MAGIC, 0x01, struct nproxy_region_create)

#define NPROXY_IOC_WRITE_TRIGGER _IOW(NPROXY_IOC_MAGIC, 0x10, struct nproxy_trigger_write)
#define NPROXY_IOC_SEM_GET	 _IOWR(NPROXY_IOC_MAGIC, 0x11, struct nproxy_sem_op)
#define NPROXY_IOC_SEM_SET	 _IOW(NPROXY_IOC_MAGIC, 0x12, struct nproxy_sem_op)
#define NPROXY_IOC_SEM_INC	 _IOW(NPROXY_IOC_MAGIC, 0x13, struct nproxy_sem_op)
#define NPROXY_IOC_GET_STATE	 _IOR(NPROXY_IOC_MAGIC, 0x14, struct nproxy_region_state)
/* -EBUSY while a program runs or a finished one is not collected. */
#define NPROXY_IOC_SUBMIT_PROG	 _IOWR(NPROXY_IOC_MAGIC, 0x20, struct nproxy_prog_submit)
/* -ENOENT when no program is running. */
#define NPROXY_IOC_CANCEL_PROG	 _IO(NPROXY_IOC_MAGIC, 0x21)
/*
 * Collect a finished program's result and reset prog_state to NONE;
 * -EAGAIN while it runs, -ENOENT when nothing was submitted.
 * poll(): EPOLLIN when a finished program awaits collection,
 *         EPOLLPRI after a SIGNAL_EVENT step (cleared by collect).
 */
#define NPROXY_IOC_COLLECT_PROG	 _IOR(NPROXY_IOC_MAGIC, 0x22, struct nproxy_prog_result)

/* ---------------------------------------------------------------------- */
/* Generic netlink family "nproxy"                                         */
/* ---------------------------------------------------------------------- */

enum nproxy_genl_cmd {
	NPROXY_CMD_UNSPEC,
	NPROXY_CMD_GET_INFO,	/* do: module info */
	NPROXY_CMD_GET_REGIONS,	/* dump: one message per live region */
	NPROXY_CMD_GET_STATS,	/* do: module-wide counters */
	NPROXY_CMD_RESET_STATS,	/* do, GENL_ADMIN_PERM: zero the resettable counters */
	NPROXY_CMD_EVENT,	/* multicast on "events" only */
	__NPROXY_CMD_MAX,
};

#define NPROXY_CMD_MAX (__NPROXY_CMD_MAX - 1)

enum nproxy_event_type {
	NPROXY_EVENT_REGION_CREATED	= 1,
	NPROXY_EVENT_REGION_DESTROYED	= 2,
	NPROXY_EVENT_TRIGGER_WRITTEN	= 3,
	NPROXY_EVENT_PROG_DONE		= 4,
	NPROXY_EVENT_PROG_TIMEDOUT	= 5,
	NPROXY_EVENT_PROG_CANCELLED	= 6,
	NPROXY_EVENT_PROG_ERROR		= 7,
	NPROXY_EVENT_SIGNAL		= 8,
};

enum nproxy_attr {
	NPROXY_A_UNSPEC,
	NPROXY_A_ABI_VERSION,		/* u32 */
	NPROXY_A_MAX_STREAMS,		/* u32 */
	NPROXY_A_MAX_SEMS,		/* u32 */
	NPROXY_A_MAX_PROG_STEPS,	/* u32 */
	NPROXY_A_REGION_ID,		/* u32 */
	NPROXY_A_OWNER_PID,		/* u32 */
	NPROXY_A_RANK,			/* u32 */
	NPROXY_A_GID,			/* u32 */
	NPROXY_A_N_STREAMS,		/* u32 */
	NPROXY_A_N_SEMS,		/* u32 */
	NPROXY_A_PROG_STATE,		/* u32, enum nproxy_prog_state */
	NPROXY_A_PROG_SEQ,		/* u64 */
	NPROXY_A_EVENT_TYPE,		/* u32, enum nproxy_event_type */
	NPROXY_A_STREAM,		/* u32 */
	NPROXY_A_VALUE,			/* u64 */
	NPROXY_A_STAT_REGIONS_LIVE,	/* u64 */
	NPROXY_A_STAT_REGIONS_CREATED,	/* u64 */
	NPROXY_A_STAT_PROGS_RUN,	/* u64 */
	NPROXY_A_STAT_TRIGGERS_WRITTEN,	/* u64 */
	NPROXY_A_STAT_TIMEOUTS,		/* u64 */
	NPROXY_A_STAT_CANCELS,		/* u64 */
	NPROXY_A_PAD,
	__NPROXY_A_MAX,
};

#define NPROXY_A_MAX (__NPROXY_A_MAX - 1)

#endif /* _UAPI_LINUX_NPROXY_H */
