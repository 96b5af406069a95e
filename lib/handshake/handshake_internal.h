/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy private: the handshake region object and its two backends.
 *
 * handshake.c owns argument checks, backend choice and program validation;
 * handshake_kmod.c and handshake_memfd.c only map pages and move programs;
 * devemu.c is the memfd backend's emulated device.  Nothing here is exported.
 */
#ifndef NPROXY_HANDSHAKE_INTERNAL_H
#define NPROXY_HANDSHAKE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <nproxy/handshake.h>
#include <nproxy/seam.h>
#include "common/common_internal.h"

struct devemu;

/* What a backend does once handshake.c has checked the arguments. */
struct hs_backend_ops {
	enum nproxy_status (*submit)(struct nproxy_hs *hs, const struct nproxy_prog_step *steps,
				     uint32_t n_steps, uint64_t *seq);
	enum nproxy_status (*cancel)(struct nproxy_hs *hs);
	/*
	 * NPROXY_SUCCESS with *result filled once a finished program was
	 * collected (whatever its state); NPROXY_TIMEOUT while it still runs;
	 * NPROXY_INVALID when nothing was submitted.
	 */
	enum nproxy_status (*wait)(struct nproxy_hs *hs, int timeout_ms,
				   struct nproxy_prog_result *result);
	/* Unmap, cancel, join, close: everything open() acquired. */
	void (*close)(struct nproxy_hs *hs);
	/* Wake the device after a semaphore increment (bell.sleepers set). */
	void (*ring)(struct nproxy_hs *hs);
	/* Optional (NULL: NPROXY_UNSUPPORTED): call fn(arg) after every
	 * trigger store; fn NULL removes it, synchronously. */
	enum nproxy_status (*set_trigger_notify)(struct nproxy_hs *hs, void (*fn)(void *),
						 void *arg);
};

struct nproxy_hs {
	enum nproxy_hs_backend backend;	/* KMOD or MEMFD, never AUTO */
	const struct hs_backend_ops *ops;
	uint32_t n_streams;
	uint32_t n_sems;
	uint32_t rank;
	uint32_t gid;
	size_t page_size;
	int fd;				/* region fd (kmod) or memfd */
	volatile uint32_t *triggers;	/* page at NPROXY_OFF_TRIGGERS */
	volatile uint64_t *sems;	/* page at NPROXY_OFF_SEMS */
	const volatile struct nproxy_region_info *info;	/* read-only mapping */
	/* NPROXY_OFF_PROXY / memfd page 3: what the proxy publishes (proxy_state.c);
	 * NULL with a module that has no such page. */
	struct nproxy_proxy_state *proxy_state;
	/* memfd backend only */
	struct nproxy_region_info *info_rw;	/* the emulator's writable view */
	struct devemu *emu;
	/* The device sleeps behind it in WAIT_SEM (bell.sleepers NULL: it
	 * only polls, and nproxy_hs_sem_bell() returns NULL). */
	struct nproxy_sem_bell bell;
	struct npx_errbuf err;		/* last failed call's text: nproxy_hs_strerror() */
};

/* The backends' mappings: one page of hs->fd at byte offset, or NULL. */
static inline void *hs_map_page(struct nproxy_hs *hs, uint64_t offset, int prot)
{
	void *p = mmap(NULL, hs->page_size, prot, MAP_SHARED | MAP_POPULATE, hs->fd,
		       (off_t)offset);

	return p == MAP_FAILED ? NULL : p;
}

static inline void hs_unmap_page(const volatile void *p, size_t len)
{
	if (p)
		munmap((void *)p, len);
}

/* Unmap the pages a backend mapped, then close hs->fd. */
static inline void hs_unmap_and_close(struct nproxy_hs *hs)
{
	hs_unmap_page(hs->triggers, hs->page_size);
	hs_unmap_page(hs->sems, hs->page_size);
	hs_unmap_page(hs->info, hs->page_size);
	hs_unmap_page(hs->info_rw, hs->page_size);
	hs_unmap_page(hs->proxy_state, hs->page_size);
	hs->proxy_state = NULL;
	hs->triggers = NULL;
	hs->sems = NULL;
	hs->info = NULL;
	hs->info_rw = NULL;
	if (hs->fd >= 0)
		close(hs->fd);
	hs->fd = -1;
}

/*
 * Backend constructors: fill hs (backend, ops, fd, pages) from hs->n_streams,
 * n_sems, rank, gid, page_size.  On failure they release everything they
 * took, leave hs->fd == -1 and write a one-line reason into why.
 */
enum nproxy_status npx_hs_kmod_open(struct nproxy_hs *hs, char *why, size_t why_len);
enum nproxy_status npx_hs_memfd_open(struct nproxy_hs *hs, char *why, size_t why_len);

/* handshake_errno.c: map an errno from open/ioctl/mmap to the library status. */
enum nproxy_status npx_hs_status_from_errno(int err);

/* ---- devemu.c: the userspace emulated device ---- */

/*
 * A WAIT_SEM in the emulator ends when a library increment rings the
 * region's semaphore bell (nproxy_device_sem_add), in the ringer's thread.
 * An increment made straight through the mapping rings nothing: the
 * emulator's thread re-checks a pending WAIT_SEM this often.
 */
#define DEVEMU_SEM_POLL_NS	1000000ULL

struct devemu_pages {
	volatile uint32_t *triggers;
	volatile uint64_t *sems;
	struct nproxy_region_info *info;	/* writable view of the info page */
	uint32_t n_streams;
	uint32_t n_sems;
};

/* Starts the "nproxy-dev" thread. */
enum nproxy_status npx_devemu_start(const struct devemu_pages *pages, struct devemu **out);
/* Cancels a running program, joins the thread, frees. NULL is a no-op. */
void npx_devemu_stop(struct devemu *emu);
/* steps were validated by the caller. */
enum nproxy_status npx_devemu_submit(struct devemu *emu, const struct nproxy_prog_step *steps,
				 uint32_t n_steps, uint64_t *seq);
enum nproxy_status npx_devemu_cancel(struct devemu *emu);
enum nproxy_status npx_devemu_wait(struct devemu *emu, int timeout_ms,
			       struct nproxy_prog_result *result);
/* The word that is non-zero while a WAIT_SEM waits (the ring is wanted). */
const volatile uint32_t *npx_devemu_sem_sleepers(struct devemu *emu);
/* A semaphore increment rang the bell: run what it unblocked. */
void npx_devemu_ring(struct devemu *emu);
void npx_devemu_set_trigger_notify(struct devemu *emu, void (*fn)(void *), void *arg);
static inline struct timespec hs_ns_to_timespec(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000ULL),
		.tv_nsec = (long)(ns % 1000000000ULL),
	};

	return ts;
}

#endif
