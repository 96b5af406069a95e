// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The network task: libnrt's enc_network_proxy_task.  Its step() is the
 * 5-state switch whose arms map onto the seam calls:
 *
 *   INIT                   skip policy -> DONE; else start() every basic
 *                          block of every stream, then
 *                          WAITING_DEVICE_TRIGGER (device-wait) or PROGRESSING
 *   WAITING_DEVICE_TRIGGER gate open -> consume it -> PROGRESSING
 *   PROGRESSING / IDLE     progress() the current block of every unfinished
 *                          stream; a drained block is stop()ped
 *                          and the stream moves to its next block
 *   DONE                   must never be stepped: logged
 *
 * Any seam error ends the task (DONE with that status) after stopping
 * every block it started and has not stopped.
 */
#include <stdlib.h>
#include <string.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

struct net_stream {
	struct nproxy_fifo_set *blocks;	/* copied from the op */
	uint32_t n_blocks;
	uint32_t cap_blocks;		/* blocks[] kept across reuses (proxy_cache.c) */
	uint32_t n_started;		/* blocks [0, n_started) were start()ed */
	uint32_t cur_bb;		/* blocks [0, cur_bb) were stop()ped */
};

struct net_task {
	struct proxy_task base;		/* first: the worker sees a proxy_task */
	struct nproxy_seam seam;
	struct nproxy_device_sems dev;
	bool skip, device_wait;
	uint64_t seq;			/* runs when comm->net_turn reaches it */
	struct net_stream streams[NPROXY_PROXY_MAX_STREAMS];
};

static struct net_task *to_net(struct proxy_task *t)
{
	return (struct net_task *)t;
}

/* Stop every started, unstopped block (abort path); keeps the first error. */
static enum nproxy_status net_abort_blocks(struct net_task *nt, enum nproxy_status rc)
{
	uint32_t s;

	for (s = 0; s < nt->base.streams_n; s++) {
		struct net_stream *ns = &nt->streams[s];

		for (; ns->cur_bb < ns->n_started; ns->cur_bb++) {
			enum nproxy_status src = nt->seam.ops->stop(nt->seam.engine, s, ns->cur_bb);

			if (rc == NPROXY_SUCCESS)
				rc = src;
		}
	}
	return rc;
}

/* Every way to DONE: publish, and hand the comm's turn to its next network task. */
static void net_finish(struct net_task *nt, enum nproxy_status rc)
{
	nt->base.comm->net_turn++;
	proxy_status_publish(nt->base.status, rc, NPROXY_TASK_STATE_DONE);
}

static void net_fail(struct net_task *nt, enum nproxy_status rc)
{
	net_finish(nt, net_abort_blocks(nt, rc));
}

/* The seam's `what` (progress, stop) of block bb of stream s failed: say so, end with rc. */
static void net_seam_failed(struct net_task *nt, const char *what, enum nproxy_status rc,
			    uint32_t s, uint32_t bb)
{
	const struct nproxy_comm *comm = nt->base.comm;

	nproxy_log(NPROXY_LOG_ERROR,
		   "[nec_dev %u] network proxy %s returns %d (rank %u stream %u bb %u)",
		   comm->device_index, what, (int)rc, comm->rank, s, bb);
	net_fail(nt, rc);
}

/* libnrt's init_network_proxy: start() every block of every stream. */
static enum nproxy_status net_start_blocks(struct net_task *nt)
{
	const struct nproxy_comm *comm = nt->base.comm;
	uint32_t s;

	for (s = 0; s < nt->base.streams_n; s++) {
		struct net_stream *ns = &nt->streams[s];

		while (ns->n_started < ns->n_blocks) {
			enum nproxy_status rc = nt->seam.ops->start(nt->seam.engine, s, ns->n_started,
								    &ns->blocks[ns->n_started],
								    &nt->dev);
			if (rc != NPROXY_SUCCESS) {
				nproxy_log(NPROXY_LOG_ERROR,
					   "[nec_dev %u] failed to start network proxy ret:%d (rank %u stream %u bb %u)",
					   comm->device_index, (int)rc, comm->rank, s, ns->n_started);
				return rc;
			}
			ns->n_started++;
		}
	}
	return NPROXY_SUCCESS;
}

/* libnrt's proxy_progress, over every unfinished stream. */
static void net_progress(struct net_task *nt)
{
	bool moved = false, all_done = true;
	uint32_t s;

	for (s = 0; s < nt->base.streams_n; s++) {
		struct net_stream *ns = &nt->streams[s];
		bool idle = false, block_done = false, done = false;
		enum nproxy_status rc;
		uint32_t bb = ns->cur_bb;

		if (bb == ns->n_blocks)
			continue;
		rc = nt->seam.ops->progress(nt->seam.engine, s, bb, &idle, &block_done, &done);
		if (rc != NPROXY_SUCCESS) {
			net_seam_failed(nt, "progress", rc, s, bb);
			return;
		}
		if (!idle)
			moved = true;
		if (block_done) {
			/* Basic-block switch: retire the drained block. */
			ns->cur_bb++;
			if (s == 0)
				proxy_state_task_bb(nt->base.status->pub, ns->cur_bb);
			rc = nt->seam.ops->stop(nt->seam.engine, s, bb);
			if (rc != NPROXY_SUCCESS) {
				net_seam_failed(nt, "stop", rc, s, bb);
				return;
			}
			moved = true;
		}
		if (ns->cur_bb != ns->n_blocks)
			all_done = false;
	}
	if (all_done)
		net_finish(nt, NPROXY_SUCCESS);
	else
		proxy_status_set_state(nt->base.status, moved ? NPROXY_TASK_STATE_PROGRESSING
							     : NPROXY_TASK_STATE_IDLE);
}

/*
 * The trigger gate: once open, PROGRESSING and the first progress (the
 * op's first posts) in the same step.
 */
static void net_gate(struct net_task *nt)
{
	struct proxy_task *t = &nt->base;

	if (!npx_proxy_task_can_start(t))
		return;
	npx_proxy_task_clear_start_flag(t);
	proxy_status_set_state(t->status, NPROXY_TASK_STATE_PROGRESSING);
	net_progress(nt);
}

/*
 * libnrt's enc_network_proxy_task::step.  A task that started its blocks
 * goes on through the gate in the same step: the device has often written
 * the trigger already (the memfd device runs a program's first steps in
 * the thread that submits it), and a step per state cost two ticks per op
 * before the first post (2 ranks, 1 KiB: ~0.3 us of ~3.5).  Each state is
 * still published on the way.
 */
static void net_step(struct proxy_task *t)
{
	struct net_task *nt = to_net(t);
	enum nproxy_status rc;

	switch ((enum nproxy_task_run_state)proxy_status_run_state(t->status)) {
	case NPROXY_TASK_STATE_INIT:
		if (nt->seq != t->comm->net_turn)
			break;	/* an earlier op of this comm still owns the blocks */
		if (nt->skip) {
			net_finish(nt, NPROXY_SUCCESS);
			break;
		}
		rc = net_start_blocks(nt);
		if (rc != NPROXY_SUCCESS) {
			net_fail(nt, rc);
			break;
		}
		if (nt->device_wait) {
			proxy_status_set_state(t->status, NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER);
			net_gate(nt);
		} else {
			proxy_status_set_state(t->status, NPROXY_TASK_STATE_PROGRESSING);
			net_progress(nt);
		}
		break;
	case NPROXY_TASK_STATE_PROGRESSING:
	case NPROXY_TASK_STATE_IDLE:
		net_progress(nt);
		break;
	case NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER:
		net_gate(nt);
		break;
	case NPROXY_TASK_STATE_DONE:
		nproxy_log(NPROXY_LOG_ERROR, "Task shouldn't be polled after it reached a done state");
		break;
	}
}

void npx_proxy_net_task_release(void *task)
{
	struct net_task *nt = task;
	uint32_t s;

	for (s = 0; s < NPROXY_PROXY_MAX_STREAMS; s++)
		free(nt->streams[s].blocks);
	free(nt);
}

static void net_destroy(struct proxy_task *t)
{
	struct net_task *nt = to_net(t);
	struct nproxy_comm *comm = t->comm;

	if (nt->seam.ops)
		net_abort_blocks(nt, NPROXY_SUCCESS);
	npx_proxy_task_fini(t);
	/* Kept with its block arrays: the comm's next op reuses both. */
	if (!npx_proxy_cache_put(comm, PROXY_CACHE_NET_TASK, nt))
		npx_proxy_net_task_release(nt);
}

/* Called once the op's tasks all exist: take this comm's next network turn. */
void npx_proxy_net_task_commit(struct proxy_task *t)
{
	to_net(t)->seq = __atomic_fetch_add(&t->comm->net_seq, 1, __ATOMIC_RELAXED);
}

static const struct proxy_task_ops net_task_ops = {
	.type = NPROXY_TASK_NETWORK,
	.step = net_step,
	.destroy = net_destroy,
};

/* A task from the comm's cache (block arrays kept, the rest zeroed) or new. */
static struct net_task *net_task_alloc(struct nproxy_comm *comm)
{
	struct net_task *nt = npx_proxy_cache_get(comm, PROXY_CACHE_NET_TASK);
	struct net_stream kept[NPROXY_PROXY_MAX_STREAMS];
	uint32_t s;

	if (!nt)
		return calloc(1, sizeof(*nt));
	memcpy(kept, nt->streams, sizeof(kept));
	memset(nt, 0, sizeof(*nt));
	for (s = 0; s < NPROXY_PROXY_MAX_STREAMS; s++) {
		nt->streams[s].blocks = kept[s].blocks;
		nt->streams[s].cap_blocks = kept[s].cap_blocks;
	}
	return nt;
}

struct proxy_task *npx_proxy_net_task_new(struct nproxy_comm *comm, const struct nproxy_cc_op *op,
				      volatile uint32_t *const *trigger_words,
				      const struct nproxy_device_sems *dev,
				      struct proxy_task_status *st, uint64_t exec_id)
{
	struct net_task *nt = net_task_alloc(comm);
	uint32_t s;

	if (!nt)
		return NULL;
	for (s = 0; s < op->streams_n; s++) {
		const struct nproxy_stream_blocks *sb = &op->streams[s];
		struct net_stream *ns = &nt->streams[s];

		if (!sb->n_blocks)
			continue;
		if (sb->n_blocks > ns->cap_blocks) {
			struct nproxy_fifo_set *grown = realloc(ns->blocks,
								sizeof(*sb->blocks) * sb->n_blocks);

			if (!grown) {
				npx_proxy_net_task_release(nt);
				return NULL;
			}
			ns->blocks = grown;
			ns->cap_blocks = sb->n_blocks;
		}
		memcpy(ns->blocks, sb->blocks, sizeof(*sb->blocks) * sb->n_blocks);
		ns->n_blocks = sb->n_blocks;
	}
	nt->seam = comm->seam;
	nt->dev = *dev;
	nt->skip = comm->flags & NPROXY_COMM_F_SKIP_NET;
	nt->device_wait = comm->flags & NPROXY_COMM_F_DEVICE_WAIT;
	npx_proxy_task_init(&nt->base, &net_task_ops, comm, st, exec_id, op->streams_n, trigger_words);
	return &nt->base;
}
