// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone segment: one sealed memfd holding the control block, one
 * npx_bp_rank_ctl per rank and one ring per rank.  The leader creates it; a
 * follower attaches to the fd it got over SCM_RIGHTS after checking that
 * it is sealed against resizing (a shrink would SIGBUS us) and that its
 * layout is the one this library computes for the job.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bananaphone_internal.h"

#define BP_SEALS (F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

static size_t ranks_off(void)
{
	return align_up(sizeof(struct bp_ctl), BP_CACHELINE);
}

static size_t rings_off(uint32_t n)
{
	return align_up(ranks_off() + n * sizeof(struct npx_bp_rank_ctl), 4096);
}

static size_t ring_stride(uint32_t n)
{
	size_t hdr = align_up(sizeof(struct bp_counter) * (1 + n), BP_CACHELINE);

	return align_up(hdr + (size_t)BP_RING_SLOTS * BP_SLOT_SIZE, 4096);
}

static size_t ring_slots_off(uint32_t n)
{
	return align_up(sizeof(struct bp_counter) * (1 + n), BP_CACHELINE);
}

size_t npx_bp_segment_size(uint32_t n)
{
	return rings_off(n) + n * ring_stride(n);
}

struct npx_bp_rank_ctl *npx_bp_rank_ctl(struct nproxy_bp *bp, uint32_t rank)
{
	return (struct npx_bp_rank_ctl *)((char *)bp->seg + ranks_off()) + rank;
}

struct bp_ring_hdr *npx_bp_ring(struct nproxy_bp *bp, uint32_t rank)
{
	return (struct bp_ring_hdr *)((char *)bp->seg + rings_off(bp->n) +
				      rank * ring_stride(bp->n));
}

void *npx_bp_slot(struct nproxy_bp *bp, uint32_t rank, uint64_t idx)
{
	return (char *)npx_bp_ring(bp, rank) + ring_slots_off(bp->n) +
	       (size_t)(idx % BP_RING_SLOTS) * BP_SLOT_SIZE;
}

static enum nproxy_status map_segment(struct nproxy_bp *bp, int fd, size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return npx_bp_error(bp, NPROXY_RESOURCE, "mmap of the %zu-byte segment: %s",
				size, strerror(errno));
	bp->seg = p;
	bp->seg_size = size;
	bp->ctl = p;
	return NPROXY_SUCCESS;
}

enum nproxy_status npx_bp_segment_create(struct nproxy_bp *bp)
{
	size_t size = npx_bp_segment_size(bp->n);
	struct bp_ctl *ctl;
	enum nproxy_status st;
	int fd;

	fd = memfd_create("nproxy-bp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return npx_bp_error(bp, NPROXY_RESOURCE, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)size) < 0) {
		st = npx_bp_error(bp, NPROXY_RESOURCE, "ftruncate of the segment to %zu bytes: %s",
			      size, strerror(errno));
		goto fail;
	}
	if (fcntl(fd, F_ADD_SEALS, BP_SEALS) < 0) {
		st = npx_bp_error(bp, NPROXY_RESOURCE, "sealing the segment: %s", strerror(errno));
		goto fail;
	}
	st = map_segment(bp, fd, size);
	if (st)
		goto fail;
	ctl = bp->ctl;
	ctl->version = BP_VERSION;
	ctl->n_ranks = bp->n;
	ctl->ring_slots = BP_RING_SLOTS;
	ctl->slot_size = BP_SLOT_SIZE;
	ctl->leader_pid = (uint32_t)getpid();
	ctl->seg_size = size;
	ctl->ranks_off = ranks_off();
	ctl->rings_off = rings_off(bp->n);
	ctl->ring_stride = ring_stride(bp->n);
	memcpy(ctl->job_id, bp->job_id, sizeof(ctl->job_id));
	npx_bp_rank_ctl(bp, 0)->pid = (uint32_t)getpid();
	/* The memfd is zero-filled: every counter, flag and bell starts at 0.
	 * Followers see these stores: the fd reaches them via a syscall. */
	ctl->magic = BP_MAGIC;
	bp->memfd = fd;
	return NPROXY_SUCCESS;
fail:
	close(fd);
	return st;
}

enum nproxy_status npx_bp_segment_attach(struct nproxy_bp *bp, int fd)
{
	size_t size = npx_bp_segment_size(bp->n);
	const struct bp_ctl *ctl;
	enum nproxy_status st;
	struct stat sb;
	int seals;

	if (fstat(fd, &sb) < 0 || (size_t)sb.st_size != size)
		return npx_bp_fail(bp, NPROXY_FAILURE,
			       "segment from the leader is %lld bytes, expected %zu",
			       (long long)sb.st_size, size);
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & BP_SEALS) != BP_SEALS)
		return npx_bp_fail(bp, NPROXY_FAILURE,
			       "segment from the leader is not sealed against resizing (seals 0x%x)",
			       seals);
	st = map_segment(bp, fd, size);
	if (st)
		return npx_bp_break(bp, st);	/* map_segment() said why */
	ctl = bp->ctl;
	if (ctl->magic != BP_MAGIC || ctl->version != BP_VERSION || ctl->n_ranks != bp->n ||
	    ctl->ring_slots != BP_RING_SLOTS || ctl->slot_size != BP_SLOT_SIZE ||
	    ctl->seg_size != size || strncmp(ctl->job_id, bp->job_id, sizeof(ctl->job_id)))
		return npx_bp_fail(bp, NPROXY_FAILURE,
			       "segment from the leader has a foreign layout (magic 0x%x version %u, %u ranks, job '%.64s')",
			       ctl->magic, ctl->version, ctl->n_ranks, ctl->job_id);
	return NPROXY_SUCCESS;
}

void npx_bp_segment_unmap(struct nproxy_bp *bp)
{
	if (bp->seg)
		munmap(bp->seg, bp->seg_size);
	bp->seg = NULL;
	bp->ctl = NULL;
}
