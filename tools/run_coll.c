// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: the data path of one process.
 *
 * Setup, per local rank and in parallel (each step is collective):
 *   bananaphone bus (the local-leader rendezvous, nproxy_bp_barrier) ->
 *   libfabric engine (nproxy_net_open; names over the bus, or over TCP at
 *   NPROXY_ROOT_COMM_ID when ranks span hosts) -> handshake region
 *   (nproxy_hs_open: kmod if loaded, else memfd + emulator) -> comm in the
 *   shared proxy registry (nproxy_comm_open, gid = local index / K).
 *
 * One collective op, per local rank (the producer, this thread):
 *   1. build the op's FIFOs: one basic block per ring step, each block
 *      RECV from prev (completion: sem[1+step] += 1) then SEND to next
 *      (precondition: sem[1+step-1] reached, i.e. the chunk it forwards
 *      has arrived);
 *   2. re-arm the trigger word (sentinel) and submit the device program:
 *      DELAY device-delay, WRITE_TRIGGER 0, WAIT_SEM on every step's sem;
 *   3. nproxy_enq_proxy_tasks (network + barrier task).
 * Then the consumer (this thread again) waits for every rank's network and
 * barrier task status and for its device program, and verifies the data.
 *
 * Allreduce = ring reduce-scatter + ring allgather.  The emulated device
 * cannot add buffers, so each reduce-scatter step is its own op (one block:
 * send the partial chunk, receive the neighbour's partial into scratch) and
 * the host adds scratch into the chunk between steps; the allgather phase
 * is one op of W-1 blocks chained by semaphore preconditions.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include <nproxy/proxy.h>
#include "run.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define SEM_OF_STEP(s)	(1 + (s))	/* sem 0 is left unused */

struct rank_ctx {
	const struct run_opts *o;
	const struct run_place *place;
	double deadline;
	uint32_t rank, world, local_idx;
	uint32_t bus_rank, bus_size;	/* bananaphone: 0 size = no bus */
	bool net_over_bus;

	struct nproxy_bp *bp;
	struct nproxy_net *net;
	struct nproxy_hs *hs;
	struct nproxy_comm *comm;

	/* Buffers of the current size. */
	uint32_t *data, *scratch;
	size_t data_len, scratch_len, chunk;	/* bytes */
	uint32_t data_mr, scratch_mr;
	bool data_reg, scratch_reg;

	/* The current op's FIFOs (borrowed by the engine until DONE). */
	struct nproxy_net_op ops[2 * RUN_MAX_RANKS];
	struct nproxy_net_addr src[RUN_MAX_RANKS], dst[RUN_MAX_RANKS];
	struct nproxy_fifo_set blocks[RUN_MAX_RANKS];
	uint32_t n_blocks;
	uint64_t sem_expect[RUN_MAX_RANKS + 1];
	bool sem_used[RUN_MAX_RANKS + 1];
	uint64_t ctx, exec_id;

	/* Local peers in other processes, from the bus: a death is seen at
	 * once instead of at the engine's no-progress deadline. */
	uint32_t n_peers;
	uint32_t peer_rank[RUN_MAX_RANKS];
	uint32_t peer_bus[RUN_MAX_RANKS];	/* its rank on the bus */
	int peer_pid[RUN_MAX_RANKS];
	int peer_pidfd[RUN_MAX_RANKS];

	int rc;			/* run_exit of the setup/teardown thread */
	char err[400];
};

static struct run_proc_record *g_rec;
/* A failure that leaves peers unsure of our state (not a data mismatch). */
static bool g_fatal;
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

/* Record the first error of this process (later ones are usually fallout). */
static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&err_lock);
	if (code != RUN_EXIT_VERIFY)
		g_fatal = true;
	if (!g_rec->error[0]) {
		va_start(ap, fmt);
		vsnprintf(g_rec->error, sizeof(g_rec->error), fmt, ap);
		va_end(ap);
		g_rec->exit_code = code;
	}
	pthread_mutex_unlock(&err_lock);
	return code;
}

static int status_exit(enum nproxy_status st)
{
	switch (st) {
	case NPROXY_SUCCESS: return RUN_EXIT_OK;
	case NPROXY_TIMEOUT: return RUN_EXIT_TIMEOUT;
	case NPROXY_PEER_DEAD:
	case NPROXY_PEER_LEFT: return RUN_EXIT_DEAD;
	case NPROXY_INVALID: return RUN_EXIT_USAGE;
	default: return RUN_EXIT_FAILURE;
	}
}

static int remaining_ms(double deadline)
{
	double left = deadline - run_now();

	if (left <= 0)
		return 0;
	return left > 2e9 / 1000 ? 2000000000 : (int)(left * 1000) + 1;
}

/* ---------------------------------------------------------------- setup */

struct pid_rec {
	uint32_t rank;
	int32_t pid;
};

/* All-gather (global rank, pid) over the bus; watch every other process. */
static enum nproxy_status exchange_pids(struct rank_ctx *rc)
{
	struct pid_rec me = { .rank = rc->rank, .pid = getpid() };
	size_t lens[RUN_MAX_RANKS], offs[RUN_MAX_RANKS];
	enum nproxy_status st;
	void *all = NULL;

	st = nproxy_bp_allgather(rc->bp, &me, sizeof(me), &all, lens, offs, remaining_ms(rc->deadline));
	if (st != NPROXY_SUCCESS) {
		snprintf(rc->err, sizeof(rc->err), "rank %u: bananaphone pid exchange: %s (%s)",
			 rc->rank, nproxy_status_str(st), nproxy_bp_strerror(rc->bp));
		return st;
	}
	for (uint32_t b = 0; b < rc->bus_size && b < RUN_MAX_RANKS; b++) {
		struct pid_rec peer;

		if (lens[b] != sizeof(peer))
			continue;
		memcpy(&peer, (char *)all + offs[b], sizeof(peer));
		if (peer.pid == me.pid)
			continue;
		rc->peer_pidfd[rc->n_peers] = (int)syscall(SYS_pidfd_open, peer.pid, 0);
		if (rc->peer_pidfd[rc->n_peers] < 0)
			continue;	/* already gone: the first wait reports it */
		rc->peer_rank[rc->n_peers] = peer.rank;
		rc->peer_bus[rc->n_peers] = b;
		rc->peer_pid[rc->n_peers] = peer.pid;
		rc->n_peers++;
	}
	free(all);
	return NPROXY_SUCCESS;
}

/* Index of a local peer process that has exited, or -1. */
static int dead_peer(const struct rank_ctx *rc)
{
	struct pollfd pfd[RUN_MAX_RANKS];

	for (uint32_t i = 0; i < rc->n_peers; i++)
		pfd[i] = (struct pollfd){ .fd = rc->peer_pidfd[i], .events = POLLIN };
	if (!rc->n_peers || poll(pfd, rc->n_peers, 0) <= 0)
		return -1;
	for (uint32_t i = 0; i < rc->n_peers; i++) {
		uint32_t culprit;

		if (!pfd[i].revents)
			continue;
		/* A peer that gave up because another died names that one. */
		culprit = nproxy_bp_blame(rc->bp, rc->peer_bus[i]);
		for (uint32_t j = 0; j < rc->n_peers; j++)
			if (rc->peer_bus[j] == culprit)
				i = j;
		/* Peers that see us exit now name it, not us. */
		nproxy_bp_abandon(rc->bp, rc->peer_bus[i]);
		return (int)i;
	}
	return -1;
}

/*
 * Wait for one task's status like nproxy_wait_status(), but also watch the
 * local peer processes: the wait is cut into slices of PEER_CHECK_MS, and a
 * dead peer ends it at once.
 */
#define PEER_CHECK_MS	20

static enum nproxy_status wait_task(struct rank_ctx *rc, enum nproxy_task_type type,
				    int timeout_ms, int *dead)
{
	double until = run_now() + timeout_ms / 1000.0;
	enum nproxy_status st, rcode;
	bool done;

	*dead = -1;
	for (;;) {
		double left = until - run_now();
		uint32_t slice = left <= 0 ? 0 : left * 1000 < PEER_CHECK_MS ?
				 (uint32_t)(left * 1000) + 1 : PEER_CHECK_MS;

		rcode = nproxy_await_status(rc->comm, rc->ctx, type, slice, &done, &st);
		if (rcode != NPROXY_SUCCESS)
			return rcode;
		if (done)
			return st;
		*dead = dead_peer(rc);
		if (*dead >= 0)
			return NPROXY_PEER_DEAD;
		if (run_now() >= until)
			return NPROXY_TIMEOUT;
	}
}

/*
 * --one-thread-per-core: the reference runtime's busy spin.  Otherwise the
 * library's default, except that when this host's ranks outnumber its cpus
 * the spin window yields (the peer a worker waits for is then often
 * runnable on its cpu).  NPROXY_IDLE_POLICY, when set, decides.
 */
static enum nproxy_idle_policy idle_policy(const struct rank_ctx *rc)
{
	uint32_t host_ranks = (rc->place->local_procs ?: 1) * rc->o->ranks_per_proc;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (rc->o->one_thread_per_core)
		return NPROXY_IDLE_SPIN;
	if (getenv("NPROXY_IDLE_POLICY") || cpus <= 0 || host_ranks <= (uint32_t)cpus)
		return NPROXY_IDLE_DEFAULT;
	return NPROXY_IDLE_ADAPTIVE_YIELD;
}

static void *setup_rank(void *arg)
{
	struct rank_ctx *rc = arg;
	const struct run_opts *o = rc->o;
	struct nproxy_net_opts nopts = { .size = sizeof(nopts) };
	struct nproxy_hs_opts hopts = { .size = sizeof(hopts) };
	struct nproxy_comm_opts copts = { .size = sizeof(copts) };
	struct nproxy_bp_opts bopts = NPROXY_BP_OPTS_INIT;
	enum nproxy_status st;
	int tmo = remaining_ms(rc->deadline);

	if (rc->bus_size > 1) {
		run_phase("bananaphone rendezvous (rank %u)", rc->rank);
		run_kill_point(RUN_KILL_RENDEZVOUS, rc->rank);
		bopts.job_id = rc->place->job_id;
		bopts.rank = rc->bus_rank;
		bopts.n_ranks = rc->bus_size;
		bopts.timeout_ms = (uint32_t)tmo;
		st = nproxy_bp_open(&bopts, &rc->bp);
		if (st == NPROXY_SUCCESS) {
			st = nproxy_bp_barrier(rc->bp, remaining_ms(rc->deadline));
			if (st != NPROXY_SUCCESS)
				snprintf(rc->err, sizeof(rc->err), "rank %u: bananaphone rendezvous: %s (%s)",
					 rc->rank, nproxy_status_str(st), nproxy_bp_strerror(rc->bp));
		} else {
			snprintf(rc->err, sizeof(rc->err), "rank %u: bananaphone %s job '%s': %s",
				 rc->rank, rc->bus_rank ? "connect to" : "create", rc->place->job_id,
				 nproxy_status_str(st));
		}
		if (st == NPROXY_SUCCESS)
			st = exchange_pids(rc);
		if (st != NPROXY_SUCCESS) {
			rc->rc = status_exit(st) == RUN_EXIT_USAGE ? RUN_EXIT_FAILURE : status_exit(st);
			return NULL;
		}
	}

	nopts.rank = rc->rank;
	nopts.n_ranks = rc->world;
	nopts.comm_id = 0;
	/* The engine's no-progress deadline: NPROXY_NET_TIMEOUT_MS or its
	 * default, but never past --timeout. */
	nopts.timeout_ms = remaining_ms(rc->deadline);
	if (!getenv("NPROXY_NET_TIMEOUT_MS") && nopts.timeout_ms > NPROXY_NET_DEFAULT_TIMEOUT_MS)
		nopts.timeout_ms = NPROXY_NET_DEFAULT_TIMEOUT_MS;
	else if (getenv("NPROXY_NET_TIMEOUT_MS"))
		nopts.timeout_ms = 0;
	nopts.provider = o->provider;
	nopts.root = rc->place->root;
	nopts.bp = rc->net_over_bus ? rc->bp : NULL;
	run_phase("engine setup (nproxy_net_open, rank %u)", rc->rank);
	run_kill_point(RUN_KILL_ENGINE, rc->rank);
	st = nproxy_net_open(&nopts, &rc->net);
	if (st != NPROXY_SUCCESS) {
		snprintf(rc->err, sizeof(rc->err),
			 "rank %u: libfabric engine (provider %s): %s (see the log above)",
			 rc->rank, o->provider ? o->provider : "default", nproxy_status_str(st));
		rc->rc = st == NPROXY_UNSUPPORTED || st == NPROXY_INVALID ? RUN_EXIT_FAILURE
									  : status_exit(st);
		return NULL;
	}

	hopts.backend = (enum nproxy_hs_backend)o->handshake;
	hopts.n_streams = 1;
	hopts.n_sems = rc->world + 1 > NPROXY_MAX_SEMS ? NPROXY_MAX_SEMS : rc->world + 1;
	hopts.rank = rc->rank;
	hopts.gid = o->ranks_per_proxy ? rc->local_idx / o->ranks_per_proxy : rc->local_idx;
	run_phase("handshake region (rank %u)", rc->rank);
	run_kill_point(RUN_KILL_REGION, rc->rank);
	st = nproxy_hs_open(&hopts, &rc->hs);
	if (st != NPROXY_SUCCESS) {
		snprintf(rc->err, sizeof(rc->err), "rank %u: handshake region (%s): %s", rc->rank,
			 nproxy_hs_backend_name(hopts.backend), nproxy_status_str(st));
		rc->rc = RUN_EXIT_FAILURE;
		return NULL;
	}

	copts.rank = rc->rank;
	copts.n_ranks = rc->world;
	copts.device_index = rc->local_idx;
	copts.ranks_per_proxy = o->ranks_per_proxy;
	copts.flags = NPROXY_COMM_F_DEVICE_WAIT;
	copts.idle_policy = idle_policy(rc);
	copts.hs = rc->hs;
	nproxy_net_seam(rc->net, &copts.seam);
	nproxy_net_host_barrier(rc->net, &copts.barrier);
	copts.timeout_ms = (uint32_t)(o->timeout_s + 1) * 1000u;
	run_phase("proxy comm setup (rank %u)", rc->rank);
	run_kill_point(RUN_KILL_COMM, rc->rank);
	st = nproxy_comm_open(&copts, &rc->comm);
	if (st != NPROXY_SUCCESS) {
		snprintf(rc->err, sizeof(rc->err), "rank %u: proxy comm: %s", rc->rank,
			 nproxy_status_str(st));
		rc->rc = RUN_EXIT_FAILURE;
		return NULL;
	}
	rc->rc = RUN_EXIT_OK;
	return NULL;
}

static void *teardown_rank(void *arg)
{
	struct rank_ctx *rc = arg;

	rc->rc = RUN_EXIT_OK;
	/* Nobody closes its endpoint while a peer may still need it. */
	if (rc->bp && !g_fatal)
		nproxy_bp_barrier(rc->bp, remaining_ms(rc->deadline) ?: 1000);
	/* Aborts unfinished tasks (stopping their blocks) before the MRs go. */
	nproxy_comm_close(rc->comm);
	rc->comm = NULL;
	if (rc->net) {
		if (rc->data_reg)
			nproxy_net_mr_deregister(rc->net, rc->data_mr);
		if (rc->scratch_reg)
			nproxy_net_mr_deregister(rc->net, rc->scratch_mr);
	}
	nproxy_net_close(rc->net);
	rc->net = NULL;
	nproxy_hs_close(rc->hs);
	rc->hs = NULL;
	if (rc->bp) {
		if (g_fatal)
			nproxy_bp_close(rc->bp);	/* abnormal: peers see us die, not leave */
		else {
			nproxy_bp_hangup(rc->bp);
			nproxy_bp_close(rc->bp);
		}
		rc->bp = NULL;
	}
	free(rc->data);
	free(rc->scratch);
	rc->data = rc->scratch = NULL;
	for (uint32_t i = 0; i < rc->n_peers; i++)
		close(rc->peer_pidfd[i]);
	rc->n_peers = 0;
	return NULL;
}

/* Run fn on every local rank in its own thread (collective setup steps). */
static int for_each_rank_parallel(struct rank_ctx *ranks, uint32_t n, void *(*fn)(void *))
{
	pthread_t tids[RUN_MAX_RANKS];
	int worst = RUN_EXIT_OK;

	for (uint32_t i = 0; i < n; i++) {
		ranks[i].rc = RUN_EXIT_FAILURE;
		if (pthread_create(&tids[i], NULL, fn, &ranks[i])) {
			snprintf(ranks[i].err, sizeof(ranks[i].err),
				 "rank %u: cannot start a setup thread", ranks[i].rank);
			tids[i] = 0;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (tids[i])
			pthread_join(tids[i], NULL);
		if (ranks[i].rc != RUN_EXIT_OK && worst == RUN_EXIT_OK) {
			worst = ranks[i].rc;
			fail(worst, "%s", ranks[i].err);
		}
	}
	return worst;
}

/* ------------------------------------------------------------ buffers */

static uint32_t pattern(uint32_t rank, size_t elem, uint64_t iter)
{
	uint32_t x = 0x9E3779B9u * (rank + 1) ^ (uint32_t)elem * 0x85EBCA6Bu ^
		     ((uint32_t)iter * 0xC2B2AE35u + 0x27D4EB2Fu);

	return x ^ (x >> 15);
}

static int alloc_buffers(struct rank_ctx *rc, uint64_t size)
{
	const struct run_opts *o = rc->o;
	size_t chunk, data_len, scratch_len;
	enum nproxy_status st;

	if (o->coll == RUN_SENDRECV) {
		chunk = size / 4 * 4;
		data_len = scratch_len = chunk;
	} else {
		chunk = size / rc->world / 4 * 4;
		data_len = chunk * rc->world;
		scratch_len = o->coll == RUN_ALLREDUCE ? chunk : 0;
	}
	if (!chunk)
		chunk = 4, data_len = o->coll == RUN_SENDRECV ? 4 : 4 * rc->world,
		scratch_len = o->coll == RUN_ALLGATHER ? 0 : 4;
	rc->chunk = chunk;
	rc->data_len = data_len;
	rc->scratch_len = scratch_len;
	if (posix_memalign((void **)&rc->data, 4096, data_len) ||
	    (scratch_len && posix_memalign((void **)&rc->scratch, 4096, scratch_len)))
		return fail(RUN_EXIT_FAILURE, "rank %u: out of memory for %zu-byte buffers",
			    rc->rank, data_len);
	memset(rc->data, 0, data_len);
	if (scratch_len)
		memset(rc->scratch, 0, scratch_len);
	st = nproxy_net_mr_register(rc->net, rc->data, data_len, &rc->data_mr);
	if (st == NPROXY_SUCCESS) {
		rc->data_reg = true;
		if (scratch_len) {
			st = nproxy_net_mr_register(rc->net, rc->scratch, scratch_len, &rc->scratch_mr);
			rc->scratch_reg = st == NPROXY_SUCCESS;
		}
	}
	if (st != NPROXY_SUCCESS)
		return fail(RUN_EXIT_FAILURE, "rank %u: registering %zu bytes with the engine: %s (%s)",
			    rc->rank, data_len, nproxy_status_str(st), nproxy_net_strerror(rc->net));
	return RUN_EXIT_OK;
}

static void free_buffers(struct rank_ctx *rc)
{
	if (rc->data_reg)
		nproxy_net_mr_deregister(rc->net, rc->data_mr);
	if (rc->scratch_reg)
		nproxy_net_mr_deregister(rc->net, rc->scratch_mr);
	rc->data_reg = rc->scratch_reg = false;
	free(rc->data);
	free(rc->scratch);
	rc->data = rc->scratch = NULL;
}

static void fill_inputs(struct rank_ctx *rc, uint64_t iter)
{
	size_t n = rc->chunk / 4;

	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		/* Poison every chunk, then write our own: stale data cannot pass. */
		memset(rc->data, 0xA5, rc->data_len);
		for (size_t e = 0; e < n; e++)
			rc->data[rc->rank * n + e] = pattern(rc->rank, rc->rank * n + e, iter);
		break;
	case RUN_ALLREDUCE:
		for (size_t e = 0; e < n * rc->world; e++)
			rc->data[e] = pattern(rc->rank, e, iter);
		memset(rc->scratch, 0xA5, rc->scratch_len);
		break;
	case RUN_SENDRECV:
		for (size_t e = 0; e < n; e++)
			rc->data[e] = pattern(rc->rank, e, iter);
		memset(rc->scratch, 0xA5, rc->scratch_len);
		break;
	}
}

/* The word element e of the result should hold (iteration iter). */
static uint32_t expected_word(const struct rank_ctx *rc, size_t e, size_t n, uint64_t iter)
{
	uint32_t want = 0;

	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		return pattern((uint32_t)(e / n), e, iter);
	case RUN_ALLREDUCE:
		for (uint32_t r = 0; r < rc->world; r++)
			want += pattern(r, e, iter);
		return want;
	default:
		return pattern((rc->rank + rc->world - 1) % rc->world, e, iter);
	}
}

/*
 * Wrong words in [lo, hi) whose expected value pattern(r, e, iter) comes
 * from one rank r: a branch-free loop the compiler vectorizes (checking is
 * outside the timing, but on an oversubscribed host a rank that checks
 * takes cpu from the ranks still transferring).
 */
static uint64_t count_wrong(const uint32_t *got, uint32_t r, size_t lo, size_t hi, uint64_t iter)
{
	uint64_t bad = 0;

	for (size_t e = lo; e < hi; e++)
		bad += got[e] != pattern(r, e, iter);
	return bad;
}

/* Count wrong words; describe the first.  Returns mismatches. */
static uint64_t verify(struct rank_ctx *rc, uint64_t iter, uint64_t size, char *msg, size_t len)
{
	size_t n = rc->chunk / 4, total;
	const uint32_t *got;
	uint64_t bad = 0;
	uint32_t prev = (rc->rank + rc->world - 1) % rc->world;

	got = rc->o->coll == RUN_SENDRECV ? rc->scratch : rc->data;
	total = rc->o->coll == RUN_SENDRECV ? n : n * rc->world;
	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		for (uint32_t r = 0; r < rc->world; r++)
			bad += count_wrong(got, r, r * n, (r + 1) * n, iter);
		break;
	case RUN_ALLREDUCE:
		for (size_t e = 0; e < total; e++) {
			uint32_t want = 0;

			for (uint32_t r = 0; r < rc->world; r++)
				want += pattern(r, e, iter);
			bad += got[e] != want;
		}
		break;
	default:
		bad = count_wrong(got, prev, 0, n, iter);
	}
	if (!bad)
		return 0;
	for (size_t e = 0; e < total; e++) {
		uint32_t want = expected_word(rc, e, n, iter);

		if (got[e] == want)
			continue;
		snprintf(msg, len,
			 "rank %u: %s %" PRIu64 " B iteration %" PRIu64 ": verification error at byte %zu (chunk of rank %zu): got 0x%08x, expected 0x%08x",
			 rc->rank, run_coll_name(rc->o->coll), size, iter, e * 4,
			 rc->o->coll == RUN_SENDRECV ? (size_t)prev : e / n, got[e], want);
		break;
	}
	return bad;
}

/* ------------------------------------------------------------ one op */

static void op_reset(struct rank_ctx *rc)
{
	rc->n_blocks = 0;
	memset(rc->sem_used, 0, sizeof(rc->sem_used));
}

/*
 * Append one ring step as a basic block: RECV chunk recv_idx from prev into
 * (scratch ? scratch : data[recv_idx]), SEND data[send_idx] to next.
 * chain: the SEND waits for the previous block's RECV (it forwards it).
 */
static void op_add_step(struct rank_ctx *rc, uint32_t step, uint32_t send_idx,
			uint32_t recv_idx, bool to_scratch, bool chain)
{
	uint32_t b = rc->n_blocks++, sem = SEM_OF_STEP(step);
	uint32_t next = (rc->rank + 1) % rc->world, prev = (rc->rank + rc->world - 1) % rc->world;
	struct nproxy_net_op *recv = &rc->ops[2 * b], *send = &rc->ops[2 * b + 1];

	rc->sem_expect[sem]++;
	rc->sem_used[sem] = true;
	*recv = (struct nproxy_net_op){
		.kind = NPROXY_NET_OP_RECV, .flags = NPROXY_NET_OP_F_COMPLETE, .peer = prev,
		.addr_idx = 0, .len = (uint32_t)rc->chunk, .post_sem = (uint16_t)sem, .post_inc = 1,
	};
	*send = (struct nproxy_net_op){
		.kind = NPROXY_NET_OP_SEND, .peer = next, .addr_idx = 0, .len = (uint32_t)rc->chunk,
	};
	if (chain) {
		uint32_t psem = SEM_OF_STEP(step - 1);

		send->flags = NPROXY_NET_OP_F_PRECOND;
		send->pre_sem = (uint16_t)psem;
		send->pre_value = rc->sem_expect[psem];
	}
	rc->src[b] = (struct nproxy_net_addr){ .mr = rc->data_mr, .offset = (uint64_t)send_idx * rc->chunk };
	if (to_scratch)
		rc->dst[b] = (struct nproxy_net_addr){ .mr = rc->scratch_mr, .offset = 0 };
	else
		rc->dst[b] = (struct nproxy_net_addr){ .mr = rc->data_mr,
						       .offset = (uint64_t)recv_idx * rc->chunk };
	rc->blocks[b] = (struct nproxy_fifo_set){
		.ops = &rc->ops[2 * b], .n_ops = 2,
		.src = &rc->src[b], .n_src = 1, .dst = &rc->dst[b], .n_dst = 1,
	};
}

enum op_kind { OP_ALLGATHER, OP_RS_STEP, OP_AR_ALLGATHER, OP_SENDRECV };

static void op_build(struct rank_ctx *rc, enum op_kind kind, uint32_t rs_step)
{
	uint32_t W = rc->world, r = rc->rank;

	op_reset(rc);
	switch (kind) {
	case OP_ALLGATHER:
		for (uint32_t s = 0; s + 1 < W; s++)
			op_add_step(rc, s, (r + W - s) % W, (r + 2 * W - s - 1) % W, false, s > 0);
		break;
	case OP_RS_STEP:
		op_add_step(rc, rs_step, (r + W - rs_step) % W, (r + 2 * W - rs_step - 1) % W,
			    true, false);
		break;
	case OP_AR_ALLGATHER:
		for (uint32_t s = 0; s + 1 < W; s++)
			op_add_step(rc, s, (r + 1 + W - s) % W, (r + W - s) % W, false, s > 0);
		break;
	case OP_SENDRECV:
		op_add_step(rc, 0, 0, 0, true, false);
		break;
	}
}

/*
 * NPROXY_RUN_HANG=RANK:OP:KIND (selftests of nproxyctl hang-report): op OP
 * (1, 2, ...) of RANK hangs.  KIND trigger: its device program starts with
 * a 60 s DELAY, so the trigger stays at the sentinel; sem: it starts with
 * a WAIT_SEM on the last semaphore for a value nobody ever adds; stop: the
 * process hosting RANK stops itself (SIGSTOP) before the op, so its peers
 * wait on the network.  Returns the kind ('t', 's', 'p') or 0.
 */
static char hang_hook(const struct rank_ctx *rc)
{
	const char *v = getenv("NPROXY_RUN_HANG");
	unsigned int r;
	unsigned long long op;
	char kind[16];

	if (!v || sscanf(v, "%u:%llu:%15s", &r, &op, kind) != 3 || r != rc->rank ||
	    op != rc->exec_id + 1)
		return 0;
	if (!strcmp(kind, "trigger"))
		return 't';
	if (!strcmp(kind, "sem"))
		return 's';
	return !strcmp(kind, "stop") ? 'p' : 0;
}

/* Producer half: re-arm the gate, start the device program, enqueue. */
static int op_start(struct rank_ctx *rc, double deadline)
{
	char hang = hang_hook(rc);
	struct nproxy_prog_step prog[RUN_MAX_RANKS + 5];
	struct nproxy_cc_op op = { .size = sizeof(op) };
	uint64_t wait_ns = (uint64_t)remaining_ms(deadline) * 1000000ull;
	uint32_t n = 0;
	enum nproxy_status st;

	if (wait_ns > NPROXY_MAX_WAIT_NS)
		wait_ns = NPROXY_MAX_WAIT_NS;
	if (!wait_ns)
		return fail(RUN_EXIT_TIMEOUT, "rank %u: timeout (--timeout %.0f s) before op %" PRIu64,
			    rc->rank, rc->o->timeout_s, rc->exec_id);
	memset(prog, 0, sizeof(prog));
	if (hang == 'p')
		raise(SIGSTOP);
	if (hang == 't')
		prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_DELAY,
			.timeout_ns = NPROXY_MAX_WAIT_NS };
	if (hang == 's')
		prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM,
			.index = nproxy_hs_n_sems(rc->hs) - 1, .value = 1ull << 40,
			.timeout_ns = NPROXY_MAX_WAIT_NS };
	if (rc->o->device_delay_us)
		prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_DELAY,
			.timeout_ns = (uint64_t)rc->o->device_delay_us * 1000 };
	prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WRITE_TRIGGER, .index = 0, .value = 1 };
	for (uint32_t s = 0; s <= RUN_MAX_RANKS; s++)
		if (rc->sem_used[s])
			prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM, .index = s,
				.value = rc->sem_expect[s], .timeout_ns = wait_ns };

	/* The device has not reached the net stage of this op yet. */
	nproxy_trigger_store(nproxy_hs_trigger(rc->hs, 0), NPROXY_TRIGGER_SENTINEL);
	st = nproxy_hs_submit(rc->hs, prog, n, NULL);
	if (st != NPROXY_SUCCESS)
		return fail(status_exit(st) == RUN_EXIT_USAGE ? RUN_EXIT_FAILURE : status_exit(st),
			    "rank %u: device program submit (%s handshake): %s", rc->rank,
			    nproxy_hs_backend_name(nproxy_hs_backend_of(rc->hs)), nproxy_status_str(st));

	op.streams_n = 1;
	op.streams[0].blocks = rc->blocks;
	op.streams[0].n_blocks = rc->n_blocks;
	rc->exec_id++;
	st = nproxy_enq_proxy_tasks(rc->comm, &op, rc->exec_id, &rc->ctx);
	if (st != NPROXY_SUCCESS) {
		nproxy_hs_cancel(rc->hs);
		nproxy_hs_wait(rc->hs, 1000, NULL);
		return fail(RUN_EXIT_FAILURE, "rank %u: enqueue proxy tasks for op %" PRIu64 ": %s",
			    rc->rank, rc->exec_id, nproxy_status_str(st));
	}
	run_kill_point(RUN_KILL_TRIGGER, rc->rank);
	return RUN_EXIT_OK;
}

/* Consumer half: both task statuses, then the device program's result. */
static int op_finish(struct rank_ctx *rc, double deadline)
{
	static const enum nproxy_task_type types[] = { NPROXY_TASK_NETWORK, NPROXY_TASK_BARRIER };
	struct nproxy_prog_result res;
	enum nproxy_status st;
	int code = RUN_EXIT_OK;

	run_kill_point(RUN_KILL_TRANSFER, rc->rank);
	for (int i = 0; i < 2; i++) {
		int ms = remaining_ms(deadline);

		/* After a failure only look briefly: comm_free aborts the rest. */
		if (code != RUN_EXIT_OK && ms > 1000)
			ms = 1000;

		int dead = -1;

		st = ms ? wait_task(rc, types[i], ms, &dead) : NPROXY_TIMEOUT;
		if (dead >= 0 && code == RUN_EXIT_OK) {
			code = fail(RUN_EXIT_DEAD,
				    "rank %u: peer rank %u (pid %d) died during op %" PRIu64,
				    rc->rank, rc->peer_rank[dead], rc->peer_pid[dead], rc->exec_id);
			continue;
		}
		if (st != NPROXY_SUCCESS && code == RUN_EXIT_OK) {
			code = fail(status_exit(st) == RUN_EXIT_USAGE ? RUN_EXIT_FAILURE : status_exit(st),
				    "rank %u: %s task of op %" PRIu64 " failed: %s%s%s%s", rc->rank,
				    nproxy_task_type_str(types[i]), rc->exec_id, nproxy_status_str(st),
				    st == NPROXY_TIMEOUT ? " (--timeout reached)" : "",
				    *nproxy_net_strerror(rc->net) ? ": " : "",
				    nproxy_net_strerror(rc->net));
		}
	}
	if (code != RUN_EXIT_OK)
		nproxy_hs_cancel(rc->hs);
	memset(&res, 0, sizeof(res));
	st = nproxy_hs_wait(rc->hs, code ? 2000 : (remaining_ms(deadline) ?: 1), &res);
	if (code != RUN_EXIT_OK)
		return code;
	if (st != NPROXY_SUCCESS)
		return fail(status_exit(st) == RUN_EXIT_USAGE ? RUN_EXIT_FAILURE : status_exit(st),
			    "rank %u: device program of op %" PRIu64 ": %s", rc->rank, rc->exec_id,
			    nproxy_status_str(st));
	if (res.state != NPROXY_PROG_DONE)
		return fail(res.state == NPROXY_PROG_TIMEDOUT ? RUN_EXIT_TIMEOUT : RUN_EXIT_FAILURE,
			    "rank %u: device program of op %" PRIu64 " ended in state %u at step %u (error %d)",
			    rc->rank, rc->exec_id, res.state, res.failed_step, res.error);
	return RUN_EXIT_OK;
}

/* One op on every local rank: start all, then finish all. */
static int run_op(struct rank_ctx *ranks, uint32_t n, enum op_kind kind, uint32_t rs_step,
		  double deadline)
{
	uint32_t started = 0;
	int code = RUN_EXIT_OK;

	for (uint32_t i = 0; i < n; i++) {
		op_build(&ranks[i], kind, rs_step);
		code = op_start(&ranks[i], deadline);
		if (code)
			break;
		started++;
	}
	for (uint32_t i = 0; i < started; i++) {
		int c = op_finish(&ranks[i], deadline);

		if (!code)
			code = c;
	}
	return code;
}

static void reduce_step(struct rank_ctx *rc, uint32_t rs_step)
{
	uint32_t W = rc->world, idx = (rc->rank + 2 * W - rs_step - 1) % W;
	size_t n = rc->chunk / 4;
	uint32_t *dst = rc->data + idx * n;

	for (size_t e = 0; e < n; e++)
		dst[e] += rc->scratch[e];
}

static int run_iteration(struct rank_ctx *ranks, uint32_t n, double deadline)
{
	int code;

	switch (ranks[0].o->coll) {
	case RUN_ALLGATHER:
		return run_op(ranks, n, OP_ALLGATHER, 0, deadline);
	case RUN_SENDRECV:
		return run_op(ranks, n, OP_SENDRECV, 0, deadline);
	case RUN_ALLREDUCE:
		for (uint32_t s = 0; s + 1 < ranks[0].world; s++) {
			code = run_op(ranks, n, OP_RS_STEP, s, deadline);
			if (code)
				return code;
			for (uint32_t i = 0; i < n; i++)
				reduce_step(&ranks[i], s);
		}
		return run_op(ranks, n, OP_AR_ALLGATHER, 0, deadline);
	}
	return RUN_EXIT_FAILURE;
}

/*
 * Before each iteration, outside its timing (as OSU and nccl-tests time a
 * collective): every rank of the bus arrives, so an iteration measures the
 * collective and not how far one process lags behind in its verification
 * of the last one.  Without a bus spanning the job (ranks on several hosts)
 * there is none, and the times include that skew.
 */
static int start_barrier(struct rank_ctx *ranks, uint32_t n, double deadline)
{
	enum nproxy_status st = NPROXY_SUCCESS;

	for (uint32_t i = 0; i < n; i++)
		run_kill_point(RUN_KILL_BARRIER, ranks[i].rank);
	if (!ranks[0].bp || ranks[0].bus_size != ranks[0].world)
		return RUN_EXIT_OK;
	/* Our other local ranks arrive without waiting; rank 0 waits (parked) for all. */
	for (uint32_t i = 1; i < n && st == NPROXY_SUCCESS; i++)
		st = nproxy_bp_barrier_arrive(ranks[i].bp, nproxy_bp_barrier_next_seq(ranks[i].bp));
	if (st == NPROXY_SUCCESS)
		st = nproxy_bp_barrier(ranks[0].bp, remaining_ms(deadline) ?: 1);
	if (st == NPROXY_SUCCESS)
		return RUN_EXIT_OK;
	for (uint32_t i = 0; i < n; i++) {
		int dead = dead_peer(&ranks[i]);

		if (dead >= 0)
			return fail(RUN_EXIT_DEAD, "rank %u: peer rank %u (pid %d) died before op %" PRIu64,
				    ranks[i].rank, ranks[i].peer_rank[dead], ranks[i].peer_pid[dead],
				    ranks[i].exec_id + 1);
	}
	return fail(status_exit(st) == RUN_EXIT_USAGE ? RUN_EXIT_FAILURE : status_exit(st),
		    "rank %u: barrier before an iteration: %s (%s)", ranks[0].rank,
		    nproxy_status_str(st), nproxy_bp_strerror(ranks[0].bp));
}

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ test hooks */

/* NPROXY_RUN_CORRUPT=RANK: flip one received byte of RANK's first timed
 * iteration, to prove that verification catches it (selftests). */
static int corrupt_rank(void)
{
	const char *v = getenv("NPROXY_RUN_CORRUPT");

	return v && *v ? atoi(v) : -1;
}

/* NPROXY_RUN_KILL=RANK:ITER: the process hosting RANK dies by SIGKILL
 * before its ITER-th iteration (counted over all sizes, warmup included). */
static int kill_hook(uint32_t *iter)
{
	const char *v = getenv("NPROXY_RUN_KILL");
	unsigned int r, it;

	if (!v || sscanf(v, "%u:%u", &r, &it) != 2)
		return -1;
	*iter = it;
	return (int)r;
}

/* ------------------------------------------------------------ the job */

int run_job(const struct run_opts *o, const struct run_place *place, struct run_proc_record *rec)
{
	uint32_t R = o->ranks_per_proc, world = place->n_procs * R;
	struct rank_ctx *ranks = calloc(R, sizeof(*ranks));
	double deadline = run_now() + o->timeout_s;
	int code, corrupt = corrupt_rank(), kill_rank, crash_rank, crash_sig = 0;
	uint32_t kill_iter = 0, crash_iter = 0;
	uint64_t global_iter = 0;

	g_rec = rec;
	if (!ranks)
		return fail(RUN_EXIT_FAILURE, "out of memory");
	kill_rank = kill_hook(&kill_iter);
	crash_rank = run_crash_hook(&crash_iter, &crash_sig);
	for (uint32_t i = 0; i < R; i++) {
		struct rank_ctx *rc = &ranks[i];

		rc->o = o;
		rc->place = place;
		rc->deadline = deadline;
		rc->rank = place->proc_rank * R + i;
		rc->world = world;
		rc->local_idx = i;
		if (!place->launched) {
			/* Every rank is on this host: the bus spans the comm. */
			rc->bus_rank = rc->rank;
			rc->bus_size = world;
			rc->net_over_bus = true;
		} else if (place->local_procs) {
			rc->bus_rank = place->local_proc * R + i;
			rc->bus_size = place->local_procs * R;
			rc->net_over_bus = rc->bus_size == world;
		}
	}
	code = for_each_rank_parallel(ranks, R, setup_rank);
	if (code)
		goto out;
	rec->proxy_threads = nproxy_proxy_group_count();
	snprintf(rec->provider, sizeof(rec->provider), "%s", nproxy_net_provider(ranks[0].net));
	snprintf(rec->handshake, sizeof(rec->handshake), "%s",
		 nproxy_hs_backend_name(nproxy_hs_backend_of(ranks[0].hs)));

	for (uint32_t si = 0; si < o->n_sizes && !code; si++) {
		struct run_size_result *sr = &rec->sizes[si];
		bool verify_failed = false;

		run_phase("%s %" PRIu64 " B", run_coll_name(o->coll), o->sizes[si]);
		for (uint32_t i = 0; i < R && !code; i++)
			code = alloc_buffers(&ranks[i], o->sizes[si]);
		if (code)
			break;
		sr->bytes = o->coll == RUN_SENDRECV ? ranks[0].chunk : ranks[0].chunk * world;
		for (uint32_t it = 0; it < o->warmup + o->iters && !code; it++) {
			bool timed = it >= o->warmup;
			double t0, c0, t1;

			if (kill_rank >= 0 && global_iter == kill_iter &&
			    (uint32_t)kill_rank / R == place->proc_rank)
				raise(SIGKILL);
			if (crash_rank >= 0 && global_iter == crash_iter &&
			    (uint32_t)crash_rank / R == place->proc_rank)
				run_crash_now(crash_sig);
			for (uint32_t i = 0; i < R; i++)
				fill_inputs(&ranks[i], global_iter);
			code = start_barrier(ranks, R, deadline);
			if (code)
				break;
			c0 = cpu_now();
			t0 = run_now();
			code = run_iteration(ranks, R, deadline);
			t1 = run_now();
			if (code)
				break;
			if (timed) {
				rec->lat_us[si * o->iters + (it - o->warmup)] = (t1 - t0) * 1e6;
				sr->wall_s += t1 - t0;
				sr->cpu_s += cpu_now() - c0;
			}
			for (uint32_t i = 0; i < R; i++) {
				char msg[400];
				uint64_t bad;

				if (timed && si == 0 && it == o->warmup && (int)ranks[i].rank == corrupt) {
					uint8_t *p = ranks[i].o->coll == RUN_SENDRECV
						? (uint8_t *)ranks[i].scratch
						: (uint8_t *)ranks[i].data +
						  ((ranks[i].rank + 1) % world) * ranks[i].chunk;
					p[0] ^= 0x40;
				}
				bad = verify(&ranks[i], global_iter, sr->bytes, msg, sizeof(msg));
				if (bad) {
					if (!verify_failed)
						sr->verify_errors++;
					verify_failed = true;
					fail(RUN_EXIT_VERIFY, "%s (%" PRIu64 " wrong words)", msg, bad);
				}
			}
			verify_failed = false;
			if (timed)
				sr->iters++;
			global_iter++;
			__atomic_add_fetch(&rec->progress, 1, __ATOMIC_RELEASE);
		}
		/* On failure the buffers may still be in started blocks: teardown frees them. */
		for (uint32_t i = 0; i < R && !code; i++)
			free_buffers(&ranks[i]);
	}
out:
	run_phase("teardown");
	for (uint32_t i = 0; i < R; i++)
		run_kill_point(RUN_KILL_TEARDOWN, ranks[i].rank);
	for_each_rank_parallel(ranks, R, teardown_rank);
	free(ranks);
	if (!code && rec->error[0])
		code = rec->exit_code;
	if (code && !rec->exit_code)
		rec->exit_code = code;
	return code;
}
