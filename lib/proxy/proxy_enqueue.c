// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The producer: libnrt's enc_enq_proxy_tasks.  One CC op becomes one
 * network task and one barrier task, each appended with its status
 * published first.
 */
#include <stddef.h>
#include <string.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

/* Is (comm, ctx) still published?  Two live ops with one ctx would make
 * the consumer's lookup ambiguous. */
static bool ctx_in_use(struct proxy_queue *q, const struct nproxy_comm *comm, uint64_t ctx)
{
	struct proxy_task_status *st;
	bool found = false;

	pthread_mutex_lock(&q->state_mtx);
	for (st = q->status_head.next; st != &q->status_head; st = st->next) {
		if (st->comm == comm && st->enc_ctx == ctx) {
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&q->state_mtx);
	return found;
}

static enum nproxy_status resolve_op(struct nproxy_comm *comm, const struct nproxy_cc_op *op,
				     volatile uint32_t **words, bool *words_from_hs,
				     struct nproxy_device_sems *dev)
{
	uint32_t i, n_null = 0;

	if (op->streams_n < 1 || op->streams_n > NPROXY_PROXY_MAX_STREAMS ||
	    op->n_barrier_sems > NPROXY_PROXY_MAX_BARRIER_SEMS)
		return NPROXY_INVALID;
	for (i = 0; i < op->streams_n; i++) {
		const struct nproxy_stream_blocks *sb = &op->streams[i];

		if (sb->reserved || (sb->n_blocks && !sb->blocks))
			return NPROXY_INVALID;
		if (!op->trigger_words[i])
			n_null++;
		words[i] = op->trigger_words[i];
	}
	/* Only the first streams_n entries are looked at, ever. */
	*words_from_hs = n_null == op->streams_n;
	if (n_null == op->streams_n) {
		if (!comm->hs)
			return NPROXY_INVALID;
		for (i = 0; i < op->streams_n; i++) {
			words[i] = nproxy_hs_trigger(comm->hs, i);
			if (!words[i])
				return NPROXY_INVALID;
		}
	} else if (n_null) {
		return NPROXY_INVALID;
	}
	*dev = op->dev;
	if (!dev->sems) {
		if (dev->n_sems)
			return NPROXY_INVALID;
		if (comm->hs) {
			dev->n_sems = nproxy_hs_n_sems(comm->hs);
			dev->sems = dev->n_sems ? nproxy_hs_sem(comm->hs, 0) : NULL;
			dev->bell = nproxy_hs_sem_bell(comm->hs);
		}
	}
	for (i = 0; i < op->n_barrier_sems; i++)
		if (op->barrier_sems[i] >= dev->n_sems)
			return NPROXY_INVALID;
	return NPROXY_SUCCESS;
}

/* The bytes op's REDUCE steps combine, over every stream and block. */
static uint64_t reduce_bytes(const struct nproxy_cc_op *op)
{
	uint64_t bytes = 0;

	/* Not validated yet (the seam's start does): look only where it can. */
	for (uint32_t s = 0; s < op->streams_n; s++)
		for (uint32_t b = 0; op->streams[s].blocks && b < op->streams[s].n_blocks; b++) {
			const struct nproxy_fifo_set *f = &op->streams[s].blocks[b];

			for (uint32_t i = 0; f->ops && i < f->n_ops; i++)
				if (f->ops[i].kind == NPROXY_NET_OP_REDUCE)
					bytes += f->ops[i].len;
		}
	return bytes;
}

enum nproxy_status nproxy_enq_proxy_tasks(struct nproxy_comm *comm, const struct nproxy_cc_op *in,
					  uint64_t exec_id, uint64_t *ctx_out)
{
	volatile uint32_t *words[NPROXY_PROXY_MAX_STREAMS] = { NULL };
	struct proxy_task_status *net_st = NULL, *bar_st = NULL;
	struct proxy_task *net = NULL, *bar = NULL;
	struct nproxy_device_sems dev;
	struct nproxy_cc_op op;
	bool words_from_hs;
	enum nproxy_status rc;
	uint64_t ctx;

	if (!comm)
		return NPROXY_INVALID;
	if (NPX_OPTS_CHECK(in, "nproxy_enq_proxy_tasks"))
		return npx_comm_err(comm, NPROXY_INVALID, "nproxy_enq_proxy_tasks: bad op size");
	memcpy(&op, in, sizeof(op));
	rc = resolve_op(comm, &op, words, &words_from_hs, &dev);
	if (rc != NPROXY_SUCCESS) {
		return npx_comm_err(comm, rc, "invalid CC op (streams_n %u, trigger words, sems)",
				    op.streams_n);
	}
	ctx = op.ctx ? op.ctx : __atomic_fetch_add(&comm->next_ctx, 1, __ATOMIC_RELAXED);
	if (op.ctx && ctx_in_use(comm->queue, comm, ctx)) {
		return npx_comm_err(comm, NPROXY_BUSY, "ctx %llu is still in use",
				    (unsigned long long)ctx);
	}

	net_st = npx_proxy_status_new(comm, ctx, NPROXY_TASK_NETWORK);
	bar_st = npx_proxy_status_new(comm, ctx, NPROXY_TASK_BARRIER);
	if (!net_st || !bar_st)
		goto err;
	/* Only auto reads the rule: never and always need no walk of the ops. */
	net_st->auto_drive = bar_st->auto_drive =
		comm->queue->caller_drives == PROXY_CALLER_DRIVES_AUTO &&
		npx_proxy_auto_drives(comm->n_ranks, reduce_bytes(&op), npx_proxy_comms_open());
	net = npx_proxy_net_task_new(comm, &op, words, &dev, net_st, exec_id);
	if (!net)
		goto err;
	bar = npx_proxy_barrier_task_new(comm, &op, words, &dev, bar_st, exec_id);
	if (!bar)
		goto err;
	/* A parked worker is woken by the device only for its own words;
	 * words the caller brought are polled. */
	net->trigger_notified = bar->trigger_notified = words_from_hs && comm->trigger_notify;
	npx_proxy_net_task_commit(net);
	npx_proxy_barrier_task_commit(bar);
	/* A caller that will drive the op keeps the worker off it meanwhile. */
	if (npx_proxy_queue_caller_drives(comm->queue, net_st)) {
		npx_proxy_thread_drives(comm->queue);
		npx_proxy_queue_expect_driver(comm->queue);
	}
	/* The creator's status references become the status list's. */
	npx_proxy_queue_append(comm->queue, (struct proxy_task *const[]){ net, bar }, 2);
	if (ctx_out)
		*ctx_out = ctx;
	return NPROXY_SUCCESS;
err:
	if (net)
		net->ops->destroy(net);
	npx_proxy_status_put(net_st);
	npx_proxy_status_put(bar_st);
	return NPROXY_RESOURCE;
}
