/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nproxy.ko internals shared between the files of the module.
 *
 * One file per concept: main.c (module init/exit, parameters), dev.c
 * (/dev/nproxy and the ioctl dispatcher), region.c (regions, their fd and
 * mmap), prog.c (the emulated device's program runner), netlink.c (generic
 * netlink family), stats.c (module-wide counters in sysfs), fault.c (fault
 * injection knobs in debugfs).
 */
#ifndef _NPROXY_PRIV_H
#define _NPROXY_PRIV_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/nproxy.h>

/*
 * /dev/nproxy's misc minor: fixed, so that the module can carry the
 * char-major-10-<minor> and devname: aliases that let opening the node load
 * it.  243-254 are "reserved for local use" in devices.txt; dynamic minors
 * never come from there.
 */
#define NPROXY_MISC_MINOR	249

#if BITS_PER_LONG != 64
/* Semaphores are u64 words loaded/stored with single acquire/release ops. */
#error "nproxy needs a 64-bit architecture"
#endif

/* Parameters (main.c). */
extern unsigned int nproxy_sem_poll_ns;

/* A device program as copied in from userspace and validated. */
struct nproxy_prog {
	u32 n_steps;
	u64 seq;
	ktime_t submitted;
	struct nproxy_prog_step steps[];
};

/*
 * One handshake region: one device context (one rank).  Owned by its anon
 * inode file; every mapping holds a reference to that file (vma->vm_file),
 * so ->release runs once the last fd *and* the last mapping are gone.
 */
struct nproxy_region {
	u32 id;
	u32 n_streams;
	u32 n_sems;
	u32 rank;
	u32 gid;
	struct pid *owner;		/* tgid of the creator */

	/* The four separately mapped pages and their kernel addresses. */
	struct page *trigger_page;
	struct page *sem_page;
	struct page *info_page;
	/* Written only by the owner's library (struct nproxy_proxy_state). */
	struct page *proxy_page;
	u32 *triggers;
	u64 *sems;
	struct nproxy_region_info *info;

	/* Serialises submit/cancel/collect and the release path. */
	struct mutex prog_mutex;
	/* Protects the fields below and the info page's counters. */
	spinlock_t lock;
	u32 prog_state;			/* enum nproxy_prog_state */
	u64 prog_seq;			/* last submitted program id */
	bool event_pending;		/* EPOLLPRI until collected */
	struct nproxy_prog_result result;
	struct nproxy_prog *prog;	/* owned by the worker while RUNNING */

	bool cancel;			/* READ_ONCE/WRITE_ONCE: stop the program */
	struct work_struct prog_work;
	wait_queue_head_t doorbell;	/* the worker sleeps here */
	wait_queue_head_t poll_wq;	/* poll() on the region fd */
};

/* dev.c: ioctl dispatch by _IOC_NR through a table. */
struct nproxy_ioctl_desc {
	unsigned int cmd;	/* full command: direction and size checked */
	long (*handler)(struct file *file, void *karg);
	/*
	 * Optional, for a _IOR command whose handler returned >= 0: called
	 * after the copy-out with whether it reached the caller, so that a
	 * result is consumed only once the caller has it (COLLECT_PROG).
	 */
	void (*finish)(struct file *file, void *karg, bool copied);
};

long nproxy_ioctl_dispatch(const struct nproxy_ioctl_desc *table,
			   unsigned int n_entries, struct file *file,
			   unsigned int cmd, unsigned long arg);
/*
 * The file_operations entries every nproxy file shares: the module owns
 * it, its ioctls go to ioctl_fn (a wrapper of nproxy_ioctl_dispatch()),
 * and a 32-bit caller's the same way (every argument is a pointer).
 */
#define NPROXY_IOCTL_FOPS(ioctl_fn)		\
	.owner		= THIS_MODULE,		\
	.unlocked_ioctl	= ioctl_fn,		\
	.compat_ioctl	= compat_ptr_ioctl
int nproxy_dev_register(void);
void nproxy_dev_unregister(void);

/* region.c */
int nproxy_region_create(const struct nproxy_region_create *req);
void nproxy_region_add_trigger(struct nproxy_region *r, u32 stream, u32 value);
void nproxy_region_wake_pollers(struct nproxy_region *r, __poll_t mask);
extern struct mutex nproxy_regions_lock;
struct nproxy_region *nproxy_region_next(int *id);
struct nproxy_region *nproxy_region_find(int id);
int nproxy_regions_init(void);
void nproxy_regions_exit(void);

/* prog.c */
long nproxy_prog_submit(struct nproxy_region *r, struct nproxy_prog_submit *req);
long nproxy_prog_cancel(struct nproxy_region *r);
long nproxy_prog_collect(struct nproxy_region *r, struct nproxy_prog_result *res);
void nproxy_prog_collect_finish(struct nproxy_region *r, bool copied);
void nproxy_prog_region_init(struct nproxy_region *r);
void nproxy_prog_region_release(struct nproxy_region *r);
void nproxy_prog_sem_doorbell(struct nproxy_region *r);
int nproxy_prog_init(void);
void nproxy_prog_exit(void);

/* netlink.c */
struct nproxy_event {
	u32 type;		/* enum nproxy_event_type */
	u32 stream;
	u64 value;
	u64 prog_seq;
	u32 prog_state;
	bool has_stream;
	bool has_value;
	bool has_prog;
};

void nproxy_nl_event(const struct nproxy_region *r, const struct nproxy_event *ev);
int nproxy_nl_init(void);
void nproxy_nl_exit(void);

/* stats.c */
struct nproxy_stats {
	atomic64_t regions_live;
	atomic64_t regions_created;
	atomic64_t progs_run;
	atomic64_t triggers_written;
	atomic64_t timeouts;
	atomic64_t prog_cancels;
};

extern struct nproxy_stats nproxy_stats;
extern const struct attribute_group *nproxy_stats_groups[];
void nproxy_stats_reset(void);

/* fault.c */
enum nproxy_fault {
	NPROXY_FAULT_REGION_ALLOC,	/* any allocation of region creation */
	NPROXY_FAULT_PROG_SUBMIT,	/* a program submission's allocation */
	NPROXY_FAULT_NR,
};

/*
 * Allocations region creation makes, in order: the region, its four
 * pages, its id, its fd, its file.
 */
#define NPROXY_REGION_ALLOC_STEPS	8

bool nproxy_fault_should_fail(enum nproxy_fault site);
void nproxy_fault_init(void);
void nproxy_fault_exit(void);

#endif /* _NPROXY_PRIV_H */
