// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * kmod handshake backend: a region of nproxy.ko.
 *
 * /dev/nproxy is only needed to check the ABI and create the region; the
 * region fd then holds everything (pages, program, poll), so the device fd
 * is closed straight away.  Pages are mapped at the uapi offsets, one page
 * each, MAP_SHARED | MAP_POPULATE; the info page read-only (the module
 * refuses a writable one).  Programs run in the module's kernel worker;
 * wait is poll(POLLIN) on the region fd, then NPROXY_IOC_COLLECT_PROG.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <nproxy/log.h>
#include "handshake_internal.h"

#define KMOD_DEV_PATH	"/dev/" NPROXY_DEVICE_NAME

static void kmod_release(struct nproxy_hs *hs)
{
	/* Closing the region fd cancels a running program in the module. */
	hs_unmap_and_close(hs);
}

static enum nproxy_status kmod_submit(struct nproxy_hs *hs, const struct nproxy_prog_step *steps,
				      uint32_t n_steps, uint64_t *seq)
{
	struct nproxy_prog_submit sub = {
		.n_steps = n_steps,
		.steps = (__u64)(uintptr_t)steps,
	};

	if (ioctl(hs->fd, NPROXY_IOC_SUBMIT_PROG, &sub) < 0) {
		int err = errno;

		if (err == EBUSY)
			return NPROXY_BUSY;
		nproxy_log(NPROXY_LOG_ERROR, "handshake region %u (rank %u): NPROXY_IOC_SUBMIT_PROG: %s",
			   hs->info->region_id, hs->rank, strerror(err));
		return npx_hs_status_from_errno(err);
	}
	if (seq)
		*seq = sub.seq;
	return NPROXY_SUCCESS;
}

static enum nproxy_status kmod_cancel(struct nproxy_hs *hs)
{
	if (ioctl(hs->fd, NPROXY_IOC_CANCEL_PROG) < 0) {
		int err = errno;

		if (err == ENOENT)	/* nothing running */
			return NPROXY_INVALID;
		nproxy_log(NPROXY_LOG_ERROR, "handshake region %u (rank %u): NPROXY_IOC_CANCEL_PROG: %s",
			   hs->info->region_id, hs->rank, strerror(err));
		return npx_hs_status_from_errno(err);
	}
	return NPROXY_SUCCESS;
}

static enum nproxy_status kmod_wait(struct nproxy_hs *hs, int timeout_ms,
				    struct nproxy_prog_result *result)
{
	uint64_t deadline_ns = npx_now_ns() + (uint64_t)timeout_ms * 1000000ULL;

	for (;;) {
		struct pollfd pfd = { .fd = hs->fd, .events = POLLIN };
		uint64_t now_ns;
		int left_ms, err;

		memset(result, 0, sizeof(*result));
		if (ioctl(hs->fd, NPROXY_IOC_COLLECT_PROG, result) == 0)
			return NPROXY_SUCCESS;
		err = errno;
		if (err == ENOENT)
			return NPROXY_INVALID;
		if (err != EAGAIN && err != EINTR) {
			nproxy_log(NPROXY_LOG_ERROR,
				   "handshake region %u (rank %u): NPROXY_IOC_COLLECT_PROG: %s",
				   hs->info->region_id, hs->rank, strerror(err));
			return npx_hs_status_from_errno(err);
		}
		now_ns = npx_now_ns();
		if (now_ns >= deadline_ns)
			return NPROXY_TIMEOUT;
		/* Round up: never spin on a sub-millisecond remainder. */
		left_ms = (int)((deadline_ns - now_ns + 999999) / 1000000);
		if (poll(&pfd, 1, left_ms) < 0 && errno != EINTR) {
			err = errno;
			nproxy_log(NPROXY_LOG_ERROR, "handshake region %u (rank %u): poll: %s",
				   hs->info->region_id, hs->rank, strerror(err));
			return npx_hs_status_from_errno(err);
		}
		if (pfd.revents & (POLLERR | POLLNVAL)) {
			nproxy_log(NPROXY_LOG_ERROR, "handshake region %u (rank %u): poll revents 0x%x",
				   hs->info->region_id, hs->rank, (unsigned int)pfd.revents);
			return NPROXY_FAILURE;
		}
	}
}

/* The device sleeps in WAIT_SEM (info->sem_sleepers): ring its doorbell. */
static void kmod_ring(struct nproxy_hs *hs)
{
	struct nproxy_sem_op op = { .sem = 0, .value = 0 };

	/* Best effort: the module re-reads the semaphore every sem_poll_ns anyway. */
	(void)ioctl(hs->fd, NPROXY_IOC_SEM_INC, &op);
}

static const struct hs_backend_ops kmod_ops = {
	.ring = kmod_ring,
	.submit = kmod_submit,
	.cancel = kmod_cancel,
	.wait = kmod_wait,
	.close = kmod_release,
};

static enum nproxy_status kmod_fail(struct nproxy_hs *hs, int dev_fd, int err, char *why,
				    size_t why_len, const char *what)
{
	snprintf(why, why_len, "%s: %s: %s", KMOD_DEV_PATH, what, strerror(err));
	if (dev_fd >= 0)
		close(dev_fd);
	kmod_release(hs);
	return npx_hs_status_from_errno(err);
}

enum nproxy_status npx_hs_kmod_open(struct nproxy_hs *hs, char *why, size_t why_len)
{
	struct nproxy_region_create create = {
		.n_streams = hs->n_streams,
		.n_sems = hs->n_sems,
		.rank = hs->rank,
		.gid = hs->gid,
	};
	struct nproxy_info dev_info = { 0 };
	int dev_fd, fd;

	hs->backend = NPROXY_HS_KMOD;
	hs->ops = &kmod_ops;
	hs->fd = -1;

	dev_fd = open(KMOD_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (dev_fd < 0) {
		int err = errno;

		snprintf(why, why_len, "%s: %s%s", KMOD_DEV_PATH, strerror(err),
			 err == ENOENT || err == ENXIO || err == ENODEV ?
			 " (is nproxy.ko loaded?)" : "");
		return npx_hs_status_from_errno(err);
	}
	if (ioctl(dev_fd, NPROXY_IOC_GET_INFO, &dev_info) < 0)
		return kmod_fail(hs, dev_fd, errno, why, why_len, "NPROXY_IOC_GET_INFO");
	if (dev_info.abi_version != NPROXY_ABI_VERSION) {
		snprintf(why, why_len, "%s: module ABI version %u, libnproxy speaks %u",
			 KMOD_DEV_PATH, dev_info.abi_version, NPROXY_ABI_VERSION);
		close(dev_fd);
		return NPROXY_UNSUPPORTED;
	}
	if (dev_info.page_size != hs->page_size) {
		snprintf(why, why_len, "%s: module page size %u, process page size %zu",
			 KMOD_DEV_PATH, dev_info.page_size, hs->page_size);
		close(dev_fd);
		return NPROXY_UNSUPPORTED;
	}
	if (hs->n_streams > dev_info.max_streams || hs->n_sems > dev_info.max_sems) {
		snprintf(why, why_len, "%s: module allows %u streams and %u sems, asked %u and %u",
			 KMOD_DEV_PATH, dev_info.max_streams, dev_info.max_sems,
			 hs->n_streams, hs->n_sems);
		close(dev_fd);
		return NPROXY_UNSUPPORTED;
	}

	fd = ioctl(dev_fd, NPROXY_IOC_CREATE_REGION, &create);
	if (fd < 0)
		return kmod_fail(hs, dev_fd, errno, why, why_len, "NPROXY_IOC_CREATE_REGION");
	hs->fd = fd;
	close(dev_fd);

	hs->triggers = hs_map_page(hs, NPROXY_OFF_TRIGGERS, PROT_READ | PROT_WRITE);
	if (!hs->triggers)
		return kmod_fail(hs, -1, errno, why, why_len, "mmap NPROXY_OFF_TRIGGERS");
	hs->sems = hs_map_page(hs, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	if (!hs->sems)
		return kmod_fail(hs, -1, errno, why, why_len, "mmap NPROXY_OFF_SEMS");
	hs->info = hs_map_page(hs, NPROXY_OFF_INFO, PROT_READ);
	if (!hs->info)
		return kmod_fail(hs, -1, errno, why, why_len, "mmap NPROXY_OFF_INFO");
	if (hs->info->magic != NPROXY_REGION_MAGIC || hs->info->abi_version != NPROXY_ABI_VERSION) {
		snprintf(why, why_len, "%s: region info page has magic 0x%x abi %u", KMOD_DEV_PATH,
			 hs->info->magic, hs->info->abi_version);
		kmod_release(hs);
		return NPROXY_UNSUPPORTED;
	}
	/* Optional: a module without the page only means nothing is published. */
	if (sizeof(struct nproxy_proxy_state) <= hs->page_size)
		hs->proxy_state = hs_map_page(hs, NPROXY_OFF_PROXY, PROT_READ | PROT_WRITE);
	hs->bell = (struct nproxy_sem_bell){ .sleepers = &hs->info->sem_sleepers, .device = hs };
	return NPROXY_SUCCESS;
}
