// SPDX-License-Identifier: GPL-2.0
/*
 * Handshake regions: four pages (trigger words, semaphores, read-only
 * info, the library's published proxy state) behind an anon inode fd,
 * mapped one page at a time at the NPROXY_OFF_* offsets, plus the direct
 * ioctls on that fd.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/anon_inodes.h>
#include <linux/compat.h>
#include <linux/fcntl.h>
#include <linux/file.h>
#include <linux/gfp.h>
#include <linux/idr.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>

#include "nproxy_priv.h"

/* Live regions by id; ids are cyclic so a stale id is rarely reused. */
static DEFINE_IDR(nproxy_regions);
/* Protects nproxy_regions; held across netlink dumps of the regions. */
DEFINE_MUTEX(nproxy_regions_lock);

static const struct file_operations nproxy_region_fops;

static struct nproxy_region *file_region(struct file *file)
{
	return file->private_data;
}

/* Caller holds nproxy_regions_lock; returns the first region with id >= *id. */
struct nproxy_region *nproxy_region_next(int *id)
{
	lockdep_assert_held(&nproxy_regions_lock);
	return idr_get_next(&nproxy_regions, id);
}

/* Caller holds nproxy_regions_lock. */
struct nproxy_region *nproxy_region_find(int id)
{
	lockdep_assert_held(&nproxy_regions_lock);
	return idr_find(&nproxy_regions, id);
}

void nproxy_region_wake_pollers(struct nproxy_region *r, __poll_t mask)
{
	wake_up_interruptible_poll(&r->poll_wq, mask);
}

/*
 * Store a trigger word the way the device does: one release store, after
 * the timestamp and before anyone is told.  Used by the program runner and
 * by the WRITE_TRIGGER ioctl.
 */
void nproxy_region_add_trigger(struct nproxy_region *r, u32 stream, u32 value)
{
	struct nproxy_event ev = {
		.type = NPROXY_EVENT_TRIGGER_WRITTEN,
		.stream = stream, .has_stream = true,
		.value = value, .has_value = true,
	};

	spin_lock(&r->lock);
	WRITE_ONCE(r->info->last_trigger_ns, ktime_get_ns());
	WRITE_ONCE(r->info->triggers_written, r->info->triggers_written + 1);
	spin_unlock(&r->lock);
	/* The gate: a host that acquire-loads the word sees all of the above. */
	smp_store_release(&r->triggers[stream], value);
	atomic64_inc(&nproxy_stats.triggers_written);
	nproxy_nl_event(r, &ev);
}

#define NPROXY_REGION_PAGES	4

/* Where the region keeps each of its pages. */
static void nproxy_region_page_slots(struct nproxy_region *r,
				     struct page **slots[NPROXY_REGION_PAGES])
{
	slots[0] = &r->trigger_page;
	slots[1] = &r->sem_page;
	slots[2] = &r->info_page;
	slots[3] = &r->proxy_page;
}

static void nproxy_region_free_pages(struct nproxy_region *r)
{
	struct page **slots[NPROXY_REGION_PAGES];
	size_t i;

	nproxy_region_page_slots(r, slots);
	for (i = 0; i < NPROXY_REGION_PAGES; i++)
		if (*slots[i])
			__free_page(*slots[i]);
}

/* alloc_page(), or NULL when fault injection says so (fault.c). */
static struct page *nproxy_region_alloc_page(void)
{
	if (nproxy_fault_should_fail(NPROXY_FAULT_REGION_ALLOC))
		return NULL;
	return alloc_page(GFP_KERNEL | __GFP_ZERO);
}

/* Every page, or -ENOMEM (the caller frees those it got). */
static int nproxy_region_alloc_pages(struct nproxy_region *r)
{
	struct page **slots[NPROXY_REGION_PAGES];
	u32 i;

	nproxy_region_page_slots(r, slots);
	for (i = 0; i < NPROXY_REGION_PAGES; i++) {
		*slots[i] = nproxy_region_alloc_page();
		if (!*slots[i])
			return -ENOMEM;
	}
	r->triggers = page_address(r->trigger_page);
	r->sems = page_address(r->sem_page);
	r->info = page_address(r->info_page);

	/* Device-side init: no stream has reached the network stage. */
	for (i = 0; i < r->n_streams; i++)
		r->triggers[i] = NPROXY_TRIGGER_SENTINEL;

	r->info->magic = NPROXY_REGION_MAGIC;
	r->info->abi_version = NPROXY_ABI_VERSION;
	r->info->n_streams = r->n_streams;
	r->info->n_sems = r->n_sems;
	r->info->prog_state = NPROXY_PROG_NONE;
	return 0;
}

static void nproxy_region_destroy(struct nproxy_region *r)
{
	nproxy_region_free_pages(r);
	put_pid(r->owner);
	kfree(r);
}

/*
 * Reserve r's id (its idr slot holds NULL until the region is complete, so
 * netlink dumps do not see it yet) and count it live; the id or -errno.
 */
static int nproxy_region_reserve_id(struct nproxy_region *r)
{
	int id;

	mutex_lock(&nproxy_regions_lock);
	if (atomic64_read(&nproxy_stats.regions_live) >= NPROXY_MAX_REGIONS) {
		mutex_unlock(&nproxy_regions_lock);
		return -ENOSPC;
	}
	if (nproxy_fault_should_fail(NPROXY_FAULT_REGION_ALLOC))
		id = -ENOMEM;
	else
		id = idr_alloc_cyclic(&nproxy_regions, NULL, 1, 0, GFP_KERNEL);
	if (id >= 0) {
		r->id = id;
		r->info->region_id = id;
		atomic64_inc(&nproxy_stats.regions_live);
	}
	mutex_unlock(&nproxy_regions_lock);
	return id;
}

int nproxy_region_create(const struct nproxy_region_create *req)
{
	struct nproxy_event ev = { .type = NPROXY_EVENT_REGION_CREATED };
	struct nproxy_region *r;
	struct file *file;
	int id, fd, err;

	if (req->flags || req->pad || req->reserved[0] || req->reserved[1])
		return -EINVAL;
	if (req->n_streams < 1 || req->n_streams > NPROXY_MAX_STREAMS ||
	    req->n_sems > NPROXY_MAX_SEMS)
		return -EINVAL;

	/* Every allocation below may be failed on purpose (fault.c). */
	if (nproxy_fault_should_fail(NPROXY_FAULT_REGION_ALLOC))
		return -ENOMEM;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	r->n_streams = req->n_streams;
	r->n_sems = req->n_sems;
	r->rank = req->rank;
	r->gid = req->gid;
	r->owner = get_task_pid(current, PIDTYPE_TGID);
	spin_lock_init(&r->lock);
	mutex_init(&r->prog_mutex);
	init_waitqueue_head(&r->poll_wq);
	nproxy_prog_region_init(r);

	err = nproxy_region_alloc_pages(r);
	if (err)
		goto err_free;

	id = nproxy_region_reserve_id(r);
	if (id < 0) {
		err = id;
		goto err_free;
	}

	if (nproxy_fault_should_fail(NPROXY_FAULT_REGION_ALLOC))
		fd = -EMFILE;
	else
		fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		err = fd;
		goto err_unpublish;
	}
	/* fops.owner pins the module for as long as the file exists. */
	if (nproxy_fault_should_fail(NPROXY_FAULT_REGION_ALLOC))
		file = ERR_PTR(-ENOMEM);
	else
		file = anon_inode_getfile("[nproxy-region]", &nproxy_region_fops,
					  r, O_RDWR);
	if (IS_ERR(file)) {
		err = PTR_ERR(file);
		put_unused_fd(fd);
		goto err_unpublish;
	}

	/* Complete: netlink dumps may see it from now on. */
	mutex_lock(&nproxy_regions_lock);
	idr_replace(&nproxy_regions, r, id);
	mutex_unlock(&nproxy_regions_lock);
	atomic64_inc(&nproxy_stats.regions_created);
	nproxy_nl_event(r, &ev);
	/* Last: once installed, another thread may close it at any time. */
	fd_install(fd, file);
	return fd;

err_unpublish:
	mutex_lock(&nproxy_regions_lock);
	idr_remove(&nproxy_regions, id);
	atomic64_dec(&nproxy_stats.regions_live);
	mutex_unlock(&nproxy_regions_lock);
err_free:
	nproxy_region_destroy(r);
	return err;
}

/* Last fd closed and last mapping gone. */
static int nproxy_region_release(struct inode *inode, struct file *file)
{
	struct nproxy_event ev = { .type = NPROXY_EVENT_REGION_DESTROYED };
	struct nproxy_region *r = file_region(file);

	/* Closing the region cancels its program (and waits for the worker). */
	nproxy_prog_region_release(r);

	mutex_lock(&nproxy_regions_lock);
	idr_remove(&nproxy_regions, r->id);
	mutex_unlock(&nproxy_regions_lock);

	nproxy_nl_event(r, &ev);
	atomic64_dec(&nproxy_stats.regions_live);
	nproxy_region_destroy(r);
	return 0;
}

/* The page behind mapping offset @pgoff, or NULL for any other offset. */
static struct page *nproxy_region_page(struct nproxy_region *r,
				       unsigned long pgoff)
{
	switch (pgoff) {
	case NPROXY_OFF_TRIGGERS >> PAGE_SHIFT:
		return r->trigger_page;
	case NPROXY_OFF_SEMS >> PAGE_SHIFT:
		return r->sem_page;
	case NPROXY_OFF_INFO >> PAGE_SHIFT:
		return r->info_page;
	case NPROXY_OFF_PROXY >> PAGE_SHIFT:
		return r->proxy_page;
	}
	return NULL;
}

/*
 * Pages are handed out on fault, not inserted once at mmap time, so a
 * mapping stays valid whatever the process does to its page tables:
 * MADV_DONTNEED, a fork (the child's copy starts without PTEs), an mremap
 * move.  The reference taken here belongs to the PTE the core installs
 * and is dropped when that PTE is zapped, the way relay, perf and uio map
 * kernel pages.  The region cannot go away under the fault: the VMA holds
 * the region's file (vma->vm_file), and ->release runs only after the
 * last VMA is gone.
 */
static vm_fault_t nproxy_region_fault(struct vm_fault *vmf)
{
	struct nproxy_region *r = file_region(vmf->vma->vm_file);
	struct page *page = nproxy_region_page(r, vmf->pgoff);

	if (!page)
		return VM_FAULT_SIGBUS;
	get_page(page);
	vmf->page = page;
	return 0;
}

static const struct vm_operations_struct nproxy_region_vm_ops = {
	.fault = nproxy_region_fault,
};

/*
 * One page per mapping, MAP_SHARED only, at exactly one of the NPROXY_OFF_*
 * offsets.  The info page is written only by the kernel: no PROT_WRITE
 * now, no mprotect() to it later.  Nothing here is executable.
 * VM_DONTEXPAND keeps mremap() from growing the mapping (and makes it
 * VM_SPECIAL: never mlocked, never merged).
 */
static int nproxy_region_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct nproxy_region *r = file_region(file);

	if (vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	if (!nproxy_region_page(r, vma->vm_pgoff))
		return -EINVAL;
	if (vma->vm_pgoff == NPROXY_OFF_INFO >> PAGE_SHIFT) {
		if (vma->vm_flags & VM_WRITE)
			return -EPERM;
		vma->vm_flags &= ~VM_MAYWRITE;
	}

	vma->vm_flags &= ~VM_MAYEXEC;
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
	vma->vm_ops = &nproxy_region_vm_ops;
	return 0;
}

static __poll_t nproxy_region_poll(struct file *file, poll_table *wait)
{
	struct nproxy_region *r = file_region(file);
	__poll_t mask = 0;
	u32 state;

	poll_wait(file, &r->poll_wq, wait);
	spin_lock(&r->lock);
	state = r->prog_state;
	if (state != NPROXY_PROG_NONE && state != NPROXY_PROG_RUNNING)
		mask |= EPOLLIN | EPOLLRDNORM;
	if (r->event_pending)
		mask |= EPOLLPRI;
	spin_unlock(&r->lock);
	return mask;
}

static long nproxy_ioc_write_trigger(struct file *file, void *karg)
{
	struct nproxy_region *r = file_region(file);
	struct nproxy_trigger_write *tw = karg;

	if (tw->reserved)
		return -EINVAL;
	if (tw->stream >= r->n_streams)
		return -EINVAL;
	nproxy_region_add_trigger(r, tw->stream, tw->value);
	return 0;
}

/* The semaphore word op names, or NULL when the op is malformed or out of range. */
static u64 *nproxy_sem_of(struct nproxy_region *r, const struct nproxy_sem_op *op)
{
	if (op->pad || op->sem >= r->n_sems)
		return NULL;
	return &r->sems[op->sem];
}

static long nproxy_ioc_sem_get(struct file *file, void *karg)
{
	struct nproxy_sem_op *op = karg;
	u64 *sem = nproxy_sem_of(file_region(file), op);

	if (!sem)
		return -EINVAL;
	/* Pairs with release adds from the host's mapping. */
	op->value = smp_load_acquire(sem);
	return 0;
}

/* SEM_SET (add false) and SEM_INC (add true); both ring the doorbell. */
static long nproxy_sem_write(struct file *file, const struct nproxy_sem_op *op, bool add)
{
	struct nproxy_region *r = file_region(file);
	u64 *sem = nproxy_sem_of(r, op);

	if (!sem)
		return -EINVAL;
	if (add)
		/* Same atomic add userspace does through its mapping. */
		atomic64_add((s64)op->value, (atomic64_t *)sem);
	else
		/* Pairs with the device's (and the host's) acquire loads. */
		smp_store_release(sem, op->value);
	nproxy_prog_sem_doorbell(r);
	return 0;
}

static long nproxy_ioc_sem_set(struct file *file, void *karg)
{
	return nproxy_sem_write(file, karg, false);
}

static long nproxy_ioc_sem_inc(struct file *file, void *karg)
{
	return nproxy_sem_write(file, karg, true);
}

static long nproxy_ioc_get_state(struct file *file, void *karg)
{
	struct nproxy_region *r = file_region(file);
	struct nproxy_region_state *st = karg;
	u32 i;

	st->region_id = r->id;
	st->owner_pid = pid_vnr(r->owner);
	st->n_streams = r->n_streams;
	st->n_sems = r->n_sems;
	st->rank = r->rank;
	st->gid = r->gid;
	for (i = 0; i < r->n_streams; i++)
		/* Same one-load read of the gate the host does. */
		st->triggers[i] = smp_load_acquire(&r->triggers[i]);
	spin_lock(&r->lock);
	st->prog_state = r->prog_state;
	st->prog_seq = r->prog_seq;
	st->triggers_written = r->info->triggers_written;
	st->events_signalled = r->info->events_signalled;
	spin_unlock(&r->lock);
	return 0;
}

static long nproxy_ioc_submit(struct file *file, void *karg)
{
	return nproxy_prog_submit(file_region(file), karg);
}

static long nproxy_ioc_cancel(struct file *file, void *karg)
{
	return nproxy_prog_cancel(file_region(file));
}

static long nproxy_ioc_collect(struct file *file, void *karg)
{
	return nproxy_prog_collect(file_region(file), karg);
}

static void nproxy_ioc_collect_finish(struct file *file, void *karg, bool copied)
{
	nproxy_prog_collect_finish(file_region(file), copied);
}

static const struct nproxy_ioctl_desc nproxy_region_ioctls[] = {
	[_IOC_NR(NPROXY_IOC_WRITE_TRIGGER)] = {
		NPROXY_IOC_WRITE_TRIGGER, nproxy_ioc_write_trigger },
	[_IOC_NR(NPROXY_IOC_SEM_GET)] = { NPROXY_IOC_SEM_GET, nproxy_ioc_sem_get },
	[_IOC_NR(NPROXY_IOC_SEM_SET)] = { NPROXY_IOC_SEM_SET, nproxy_ioc_sem_set },
	[_IOC_NR(NPROXY_IOC_SEM_INC)] = { NPROXY_IOC_SEM_INC, nproxy_ioc_sem_inc },
	[_IOC_NR(NPROXY_IOC_GET_STATE)] = { NPROXY_IOC_GET_STATE, nproxy_ioc_get_state },
	[_IOC_NR(NPROXY_IOC_SUBMIT_PROG)] = { NPROXY_IOC_SUBMIT_PROG, nproxy_ioc_submit },
	[_IOC_NR(NPROXY_IOC_CANCEL_PROG)] = { NPROXY_IOC_CANCEL_PROG, nproxy_ioc_cancel },
	[_IOC_NR(NPROXY_IOC_COLLECT_PROG)] = {
		NPROXY_IOC_COLLECT_PROG, nproxy_ioc_collect, nproxy_ioc_collect_finish },
};

static long nproxy_region_ioctl(struct file *file, unsigned int cmd,
				unsigned long arg)
{
	return nproxy_ioctl_dispatch(nproxy_region_ioctls,
				     ARRAY_SIZE(nproxy_region_ioctls), file,
				     cmd, arg);
}

static const struct file_operations nproxy_region_fops = {
	NPROXY_IOCTL_FOPS(nproxy_region_ioctl),
	.release	= nproxy_region_release,
	.mmap		= nproxy_region_mmap,
	.poll		= nproxy_region_poll,
	.llseek		= noop_llseek,
};

int nproxy_regions_init(void)
{
	return 0;
}

void nproxy_regions_exit(void)
{
	WARN_ON(!idr_is_empty(&nproxy_regions));
	idr_destroy(&nproxy_regions);
}
