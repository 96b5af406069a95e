// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * memfd handshake backend: the module's three pages, byte for byte, in a
 * sealed memfd, with the emulated device (devemu.c) playing nproxy.ko.
 *
 * File layout: page 0 triggers, page 1 semaphores, page 2 info, page 3 the
 * proxy state the library publishes for tools (NPROXY_OFF_PROXY).  The memfd
 * is sized once and sealed (no shrink, no grow, no more seals), so a page
 * can never vanish under a mapping.  Users get the info page read-only,
 * like the module's; only the emulator holds a writable view of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "handshake_internal.h"

#define MEMFD_PAGE_TRIGGERS	0
#define MEMFD_PAGE_SEMS		1
#define MEMFD_PAGE_INFO		2
#define MEMFD_PAGE_PROXY	3	/* struct nproxy_proxy_state */
#define MEMFD_N_PAGES		4

/* Region ids only need to be unique within the process for this backend. */
static atomic_uint memfd_next_region_id = 1;

static void *map_page(struct nproxy_hs *hs, unsigned int page, int prot)
{
	return hs_map_page(hs, (uint64_t)page * hs->page_size, prot);
}

static void memfd_release(struct nproxy_hs *hs)
{
	/* Stop the device before its pages go away. */
	npx_devemu_stop(hs->emu);
	hs->emu = NULL;
	hs_unmap_and_close(hs);
}

static enum nproxy_status memfd_submit(struct nproxy_hs *hs, const struct nproxy_prog_step *steps,
				       uint32_t n_steps, uint64_t *seq)
{
	return npx_devemu_submit(hs->emu, steps, n_steps, seq);
}

static enum nproxy_status memfd_cancel(struct nproxy_hs *hs)
{
	return npx_devemu_cancel(hs->emu);
}

static enum nproxy_status memfd_wait(struct nproxy_hs *hs, int timeout_ms,
				     struct nproxy_prog_result *result)
{
	return npx_devemu_wait(hs->emu, timeout_ms, result);
}

static enum nproxy_status memfd_set_trigger_notify(struct nproxy_hs *hs, void (*fn)(void *),
						   void *arg)
{
	npx_devemu_set_trigger_notify(hs->emu, fn, arg);
	return NPROXY_SUCCESS;
}

static void memfd_ring(struct nproxy_hs *hs)
{
	npx_devemu_ring(hs->emu);
}

static const struct hs_backend_ops memfd_ops = {
	.ring = memfd_ring,
	.set_trigger_notify = memfd_set_trigger_notify,
	.submit = memfd_submit,
	.cancel = memfd_cancel,
	.wait = memfd_wait,
	.close = memfd_release,
};

static enum nproxy_status memfd_fail(struct nproxy_hs *hs, const char *what,
				     char *why, size_t why_len)
{
	int err = errno;

	snprintf(why, why_len, "memfd backend: %s: %s", what, strerror(err));
	memfd_release(hs);
	return npx_hs_status_from_errno(err);
}

enum nproxy_status npx_hs_memfd_open(struct nproxy_hs *hs, char *why, size_t why_len)
{
	struct nproxy_region_info *info;
	struct devemu_pages pages;
	enum nproxy_status st;
	char name[32];
	uint32_t i;

	hs->backend = NPROXY_HS_MEMFD;
	hs->ops = &memfd_ops;
	snprintf(name, sizeof(name), "nproxy-hs-r%u", hs->rank);
	hs->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (hs->fd < 0)
		return memfd_fail(hs, "memfd_create", why, why_len);
	if (ftruncate(hs->fd, (off_t)(MEMFD_N_PAGES * hs->page_size)))
		return memfd_fail(hs, "ftruncate", why, why_len);
	if (fcntl(hs->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		return memfd_fail(hs, "F_ADD_SEALS", why, why_len);

	hs->triggers = map_page(hs, MEMFD_PAGE_TRIGGERS, PROT_READ | PROT_WRITE);
	if (!hs->triggers)
		return memfd_fail(hs, "mmap triggers", why, why_len);
	hs->sems = map_page(hs, MEMFD_PAGE_SEMS, PROT_READ | PROT_WRITE);
	if (!hs->sems)
		return memfd_fail(hs, "mmap sems", why, why_len);
	hs->info_rw = map_page(hs, MEMFD_PAGE_INFO, PROT_READ | PROT_WRITE);
	if (!hs->info_rw)
		return memfd_fail(hs, "mmap info (device view)", why, why_len);
	hs->info = map_page(hs, MEMFD_PAGE_INFO, PROT_READ);
	if (!hs->info)
		return memfd_fail(hs, "mmap info", why, why_len);
	hs->proxy_state = map_page(hs, MEMFD_PAGE_PROXY, PROT_READ | PROT_WRITE);
	if (!hs->proxy_state)
		return memfd_fail(hs, "mmap proxy state", why, why_len);

	/* A fresh memfd reads 0: only the meaningful words need setting. */
	for (i = 0; i < hs->n_streams; i++)
		nproxy_trigger_store(&hs->triggers[i], NPROXY_TRIGGER_SENTINEL);
	info = hs->info_rw;
	info->magic = NPROXY_REGION_MAGIC;
	info->abi_version = NPROXY_ABI_VERSION;
	info->region_id = atomic_fetch_add(&memfd_next_region_id, 1);
	info->n_streams = hs->n_streams;
	info->n_sems = hs->n_sems;
	info->prog_state = NPROXY_PROG_NONE;

	pages = (struct devemu_pages){
		.triggers = hs->triggers,
		.sems = hs->sems,
		.info = hs->info_rw,
		.n_streams = hs->n_streams,
		.n_sems = hs->n_sems,
	};
	/* The thread starts after the pages are initialised (pthread_create orders it). */
	st = npx_devemu_start(&pages, &hs->emu);
	if (st == NPROXY_SUCCESS)
		hs->bell = (struct nproxy_sem_bell){ .sleepers = npx_devemu_sem_sleepers(hs->emu),
						     .device = hs };
	if (st != NPROXY_SUCCESS) {
		snprintf(why, why_len, "memfd backend: cannot start the emulated device thread");
		memfd_release(hs);
		return st;
	}
	return NPROXY_SUCCESS;
}
