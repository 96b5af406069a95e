// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The TCP rendezvous behind NPROXY_ROOT_COMM_ID=host:port: rank 0 listens,
 * every other rank connects (retrying until the root is up) and says hello;
 * an all-gather is "everyone sends its blob to the root, the root sends the
 * concatenation back".  Every wait is a poll() against one deadline, and a
 * timeout names the ranks that never showed up.
 *
 * A failure is never silent: whoever gives up first (the root on a timeout
 * or a dead rank, any rank on a local error through nproxy_rdzv_abort())
 * sends an abort frame with its status and reason, and the root relays it
 * to every other rank, so each one reports the real cause rather than "the
 * root went away".  Sockets are closed only once the peer has had the
 * chance to read what was sent: closing with unread input makes the kernel
 * send a reset, which destroys the abort frame still in flight.
 *
 * Wire format (host byte order: every rank runs the same build):
 *   hello       u64 RDZV_MAGIC, u32 rank, u32 n_ranks          (peer -> root)
 *   all-gather  u64 len, len bytes                              (peer -> root)
 *               u64 lens[n_ranks], the concatenation            (root -> peer)
 *   abort       u64 RDZV_ABORT, u32 status, u32 len, len bytes  (either way,
 *               in place of a length)
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include "common/common_internal.h"

#define RDZV_MAGIC	0x6e70727a76303031ull	/* "nprzv001" */
#define RDZV_ABORT	0x6e70727a61626f72ull	/* "nprzabor": never a valid length */
#define RDZV_MAX_BLOB	(1u << 20)
#define RDZV_MAX_TEXT	240
/* How long a closing side waits for its peers to read an abort frame. */
#define RDZV_LINGER_MS	500
/*
 * A rank waiting for the root's answer gives it this much longer than its
 * own deadline: the root's deadline for the same step started no later
 * than ours, so its verdict ("rank 3 never connected") arrives first and
 * every rank reports the cause, not "no answer from the root".
 */
#define RDZV_PEER_GRACE_MS 1000
/* A connection that says nothing is dropped after this (not the whole deadline). */
#define RDZV_HELLO_MS	3000
/* The port may be held for a moment by a previous root that is exiting;
 * anything longer is another live process, and waiting for it silently
 * would let our ranks talk to it meanwhile. */
#define RDZV_BIND_RETRY_MS 2000

/* xfer(): the peer closed the connection cleanly (not an errno). */
#define XFER_EOF	1

struct rdzv_hello {
	uint64_t magic;
	uint32_t rank;
	uint32_t n_ranks;
};

struct rdzv_abort_hdr {
	uint32_t status;
	uint32_t len;
};

struct nproxy_rdzv {
	uint32_t rank;
	uint32_t n_ranks;
	int timeout_ms;
	int fd;			/* non-root: socket to the root */
	int *peer_fds;		/* root: socket of rank r (r >= 1) */
	bool failed;		/* an abort was sent or received: no more all-gathers */
	enum nproxy_status fail_st;
	char root[128];
	char why[NPX_ERR_LEN];		/* the last failure, unprefixed: sent to the peers */
	struct npx_errbuf err;		/* "rendezvous ROOT rank N: why" */
};

__attribute__((format(printf, 2, 3)))
static void rz_err(struct nproxy_rdzv *rz, const char *fmt, ...)
{
	char who[192];
	va_list ap;

	snprintf(who, sizeof(who), "rendezvous %s rank %u", rz->root, rz->rank);
	va_start(ap, fmt);
	vsnprintf(rz->why, sizeof(rz->why), fmt, ap);
	va_end(ap);
	npx_err_set(&rz->err, NPX_ERR_RDZV, NPROXY_LOG_ERROR, NPROXY_SUCCESS, who, "%s", rz->why);
}

/* Split "host:port" / "[v6]:port". */
static int parse_root(const char *root, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon;
	size_t n;

	if (root[0] == '[') {
		const char *end = strchr(root, ']');

		if (!end || end[1] != ':')
			return -1;
		n = (size_t)(end - root - 1);
		if (n == 0 || n >= hlen)
			return -1;
		memcpy(host, root + 1, n);
		colon = end + 1;
	} else {
		colon = strrchr(root, ':');
		if (!colon)
			return -1;
		n = (size_t)(colon - root);
		if (n == 0 || n >= hlen)
			return -1;
		memcpy(host, root, n);
	}
	host[n] = 0;
	if (!colon[1] || strlen(colon + 1) >= plen || strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return -1;
	strcpy(port, colon + 1);
	return 0;
}

static int remaining(int64_t deadline)
{
	int64_t left = deadline - npx_now_ms();

	return left > 0 ? (int)left : 0;
}

/*
 * Full transfer on a socket, bounded by the deadline: 0, XFER_EOF when
 * the peer closed cleanly before all of it arrived, or -errno.
 */
static int xfer(int fd, void *buf, size_t len, bool out, int64_t deadline)
{
	char *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = out ? POLLOUT : POLLIN };
		int left = remaining(deadline);
		ssize_t n;

		if (left == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		if (out)
			n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			n = recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return XFER_EOF;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static const char *xfer_str(int rc)
{
	if (rc == XFER_EOF)
		return "closed the connection";
	if (rc == -EPROTO)
		return "protocol error";
	return strerror(-rc);
}

static bool known_status(uint32_t st)
{
	return st > NPROXY_SUCCESS && st <= NPROXY_CANCELLED;
}

/* Best effort: the peer may be gone already. */
static void send_abort(int fd, enum nproxy_status st, const char *why)
{
	size_t len = strnlen(why, RDZV_MAX_TEXT);
	char frame[sizeof(uint64_t) + sizeof(struct rdzv_abort_hdr) + RDZV_MAX_TEXT];
	uint64_t magic = RDZV_ABORT;
	struct rdzv_abort_hdr hdr = { (uint32_t)st, (uint32_t)len };

	memcpy(frame, &magic, sizeof(magic));
	memcpy(frame + sizeof(magic), &hdr, sizeof(hdr));
	memcpy(frame + sizeof(magic) + sizeof(hdr), why, len);
	xfer(fd, frame, sizeof(magic) + sizeof(hdr) + len, true, npx_now_ms() + RDZV_LINGER_MS);
}

/* After the RDZV_ABORT word: status and reason.  Returns the status. */
static enum nproxy_status read_abort(int fd, char *why, size_t why_len, int64_t deadline)
{
	struct rdzv_abort_hdr hdr;
	char text[RDZV_MAX_TEXT + 1];

	snprintf(why, why_len, "(no reason given)");
	if (xfer(fd, &hdr, sizeof(hdr), false, deadline) || hdr.len > RDZV_MAX_TEXT)
		return NPROXY_PEER_DEAD;
	if (xfer(fd, text, hdr.len, false, deadline))
		return NPROXY_PEER_DEAD;
	text[hdr.len] = 0;
	snprintf(why, why_len, "%s", text);
	return known_status(hdr.status) ? (enum nproxy_status)hdr.status : NPROXY_PEER_DEAD;
}

/*
 * Close a set of sockets so that what we sent reaches the other side:
 * shut down our direction, then read and drop whatever they still send
 * until they close too (they do, once they have read our abort) or the
 * linger time is up.
 */
static void close_lingering(int *fds, uint32_t n, int linger_ms)
{
	int64_t until = npx_now_ms() + linger_ms;
	struct pollfd pfd[64];

	for (uint32_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			shutdown(fds[i], SHUT_WR);
	for (uint32_t base = 0; base < n; base += 64) {
		uint32_t m = n - base < 64 ? n - base : 64;

		for (;;) {
			uint32_t open = 0;

			for (uint32_t i = 0; i < m; i++) {
				pfd[i] = (struct pollfd){ .fd = fds[base + i], .events = POLLIN };
				open += fds[base + i] >= 0;
			}
			if (!open || poll(pfd, m, remaining(until)) <= 0)
				break;
			for (uint32_t i = 0; i < m; i++) {
				char sink[512];

				if (!pfd[i].revents)
					continue;
				while (recv(pfd[i].fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
					;
				if (pfd[i].revents & (POLLHUP | POLLERR) ||
				    recv(pfd[i].fd, sink, 1, MSG_DONTWAIT | MSG_PEEK) == 0) {
					close(fds[base + i]);
					fds[base + i] = -1;
				}
			}
		}
	}
	for (uint32_t i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* Root: tell every connected rank why the rendezvous is over, then close. */
static void root_abort_all(struct nproxy_rdzv *rz, enum nproxy_status st, const char *why)
{
	rz->failed = true;
	rz->fail_st = st;
	for (uint32_t r = 1; r < rz->n_ranks; r++)
		if (rz->peer_fds[r] >= 0)
			send_abort(rz->peer_fds[r], st, why);
	close_lingering(rz->peer_fds + 1, rz->n_ranks - 1, RDZV_LINGER_MS);
}

/* A live connection has neither hung up nor been reset. */
static bool conn_alive(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };

	return poll(&pfd, 1, 0) == 0;
}

static enum nproxy_status root_accept(struct nproxy_rdzv *rz, int lfd, int64_t deadline)
{
	uint32_t joined = 1, dropped = 0;

	while (joined < rz->n_ranks) {
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		struct rdzv_hello hello;
		int n = poll(&pfd, 1, remaining(deadline));
		int64_t hello_by;
		int fd, rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			char missing[160] = "", extra[80] = "";
			size_t off = 0;

			for (uint32_t r = 1; r < rz->n_ranks && off < sizeof(missing) - 12; r++)
				if (rz->peer_fds[r] < 0)
					off += (size_t)snprintf(missing + off, sizeof(missing) - off,
								"%s%u", off ? "," : "", r);
			if (dropped)
				snprintf(extra, sizeof(extra),
					 " (%u connection(s) closed before saying which rank)", dropped);
			rz_err(rz, "rank(s) %s of %u never connected within %d ms%s", missing,
			       rz->n_ranks, rz->timeout_ms, extra);
			root_abort_all(rz, NPROXY_TIMEOUT, rz->why);
			return NPROXY_TIMEOUT;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		/* One silent connection must not hold up the ranks behind it. */
		hello_by = npx_now_ms() + RDZV_HELLO_MS < deadline ? npx_now_ms() + RDZV_HELLO_MS : deadline;
		rc = xfer(fd, &hello, sizeof(hello), false, hello_by);
		if (rc) {
			nproxy_log(NPROXY_LOG_WARN, "rendezvous %s: dropping a connection that %s before its hello",
				   rz->root, rc == -ETIMEDOUT ? "said nothing" : xfer_str(rc));
			dropped++;
			close(fd);
			continue;
		}
		if (hello.magic != RDZV_MAGIC) {
			nproxy_log(NPROXY_LOG_WARN, "rendezvous %s: dropping a connection that does not speak the rendezvous protocol",
				   rz->root);
			close(fd);
			continue;
		}
		if (hello.n_ranks != rz->n_ranks || hello.rank == 0 || hello.rank >= rz->n_ranks) {
			char why[sizeof(rz->root) + 96];

			/* Another job at the same address: tell it, keep ours going. */
			snprintf(why, sizeof(why), "the root at %s gathers %u ranks; this is rank %u of %u",
				 rz->root, rz->n_ranks, hello.rank, hello.n_ranks);
			nproxy_log(NPROXY_LOG_WARN, "rendezvous %s: refusing a hello from rank %u of %u (not one of our %u ranks)",
				   rz->root, hello.rank, hello.n_ranks, rz->n_ranks);
			send_abort(fd, NPROXY_INVALID, why);
			close_lingering(&fd, 1, RDZV_LINGER_MS);
			continue;
		}
		if (rz->peer_fds[hello.rank] >= 0) {
			if (!conn_alive(rz->peer_fds[hello.rank])) {
				/* The first one died (and was restarted): take the new one. */
				nproxy_log(NPROXY_LOG_WARN, "rendezvous %s: rank %u reconnected after its first connection closed",
					   rz->root, hello.rank);
				close(rz->peer_fds[hello.rank]);
				rz->peer_fds[hello.rank] = fd;
				continue;
			}
			nproxy_log(NPROXY_LOG_WARN, "rendezvous %s: refusing a second connection claiming rank %u (another job at this address?)",
				   rz->root, hello.rank);
			send_abort(fd, NPROXY_INVALID, "this rank is already connected to the root (another job at the same NPROXY_ROOT_COMM_ID?)");
			close_lingering(&fd, 1, RDZV_LINGER_MS);
			continue;
		}
		rz->peer_fds[hello.rank] = fd;
		joined++;
	}
	return NPROXY_SUCCESS;
}

static enum nproxy_status root_listen(struct nproxy_rdzv *rz, const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai;
	int64_t deadline = npx_now_ms() + rz->timeout_ms;
	int64_t bind_until = npx_now_ms() + RDZV_BIND_RETRY_MS;
	enum nproxy_status st;
	int lfd = -1, one = 1, rc;

	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		rz_err(rz, "cannot resolve root: %s", gai_strerror(rc));
		return NPROXY_INVALID;
	}
	lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0) {
		freeaddrinfo(ai);
		rz_err(rz, "socket: %s", strerror(errno));
		return NPROXY_RESOURCE;
	}
	/* TIME_WAIT leftovers of a previous job must not keep us off the port. */
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	while ((rc = bind(lfd, ai->ai_addr, ai->ai_addrlen)) < 0 && errno == EADDRINUSE &&
	       remaining(bind_until) > 0 && remaining(deadline) > 0)
		usleep(20000);
	freeaddrinfo(ai);
	if (rc < 0 && errno == EADDRINUSE) {
		rz_err(rz, "cannot listen as root: %s is in use by another process (a previous job's root still running?)",
		       rz->root);
		close(lfd);
		return NPROXY_RESOURCE;
	}
	if (rc < 0 || listen(lfd, (int)rz->n_ranks) < 0) {
		rz_err(rz, "cannot listen as root: %s", strerror(errno));
		close(lfd);
		return NPROXY_RESOURCE;
	}
	st = root_accept(rz, lfd, deadline);
	/* Connections still queued here are reset by the close: nobody we
	 * wait for is among them (every rank we wait for is accepted). */
	close(lfd);
	return st;
}

static enum nproxy_status peer_connect(struct nproxy_rdzv *rz, const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct rdzv_hello hello = { RDZV_MAGIC, rz->rank, rz->n_ranks };
	int64_t deadline = npx_now_ms() + rz->timeout_ms;
	int last_errno = ETIMEDOUT, one = 1;

	for (;;) {
		struct addrinfo *ai;
		int rc = getaddrinfo(host, port, &hints, &ai);

		if (rc == 0) {
			int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

			if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
				freeaddrinfo(ai);
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				rc = xfer(fd, &hello, sizeof(hello), true, deadline);
				if (rc) {
					close(fd);
					rz_err(rz, "root (rank 0) dropped the connection during hello: %s",
					       xfer_str(rc));
					return NPROXY_PEER_LEFT;
				}
				rz->fd = fd;
				return NPROXY_SUCCESS;
			}
			last_errno = errno;
			if (fd >= 0)
				close(fd);
			freeaddrinfo(ai);
		}
		if (remaining(deadline) == 0)
			break;
		usleep(20000);	/* the root is not listening yet */
	}
	rz_err(rz, "could not reach the root (rank 0) within %d ms: %s", rz->timeout_ms,
	       strerror(last_errno));
	return NPROXY_TIMEOUT;
}

NPROXY_API enum nproxy_status nproxy_rdzv_open(const struct nproxy_rdzv_opts *opts,
					       struct nproxy_rdzv **out)
{
	uint32_t rank, n_ranks, timeout_ms;
	char host[128], port[16];
	struct nproxy_rdzv *rz;
	enum nproxy_status st;
	const char *root;

	npx_err_clear_open(NPX_ERR_RDZV);
	if (!out)
		return npx_err_set(NULL, NPX_ERR_RDZV, NPROXY_LOG_ERROR, NPROXY_INVALID, NULL,
				   "rendezvous: open: out is NULL");
	*out = NULL;
	if (NPX_OPTS_CHECK(opts, "rendezvous: open"))
		return npx_err_set(NULL, NPX_ERR_RDZV, NPX_LOG_NONE, NPROXY_INVALID, NULL,
				   "rendezvous: open: options NULL or of a wrong size (see the log)");
	root = opts->root;
	rank = opts->rank;
	n_ranks = opts->n_ranks;
	timeout_ms = opts->timeout_ms ? opts->timeout_ms : NPROXY_NET_DEFAULT_RDZV_TIMEOUT_MS;
	/* Kept as int inside (deadline arithmetic on int64_t milliseconds). */
	if (timeout_ms > INT32_MAX)
		timeout_ms = INT32_MAX;
	if (!root || !n_ranks || rank >= n_ranks)
		return npx_err_set(NULL, NPX_ERR_RDZV, NPROXY_LOG_ERROR, NPROXY_INVALID, NULL,
				   "rendezvous: bad arguments (root %s, rank %u of %u)",
				   root ? root : "(unset: NPROXY_ROOT_COMM_ID)", rank, n_ranks);
	if (parse_root(root, host, sizeof(host), port, sizeof(port)))
		return npx_err_set(NULL, NPX_ERR_RDZV, NPROXY_LOG_ERROR, NPROXY_INVALID, NULL,
				   "rendezvous: root \"%s\" is not host:port", root);
	rz = calloc(1, sizeof(*rz));
	if (!rz)
		return npx_err_set(NULL, NPX_ERR_RDZV, NPROXY_LOG_ERROR, NPROXY_RESOURCE, NULL,
				   "rendezvous: rank %u: out of memory", rank);
	rz->rank = rank;
	rz->n_ranks = n_ranks;
	rz->timeout_ms = (int)timeout_ms;
	rz->fd = -1;
	snprintf(rz->root, sizeof(rz->root), "%s", root);
	if (rank == 0) {
		rz->peer_fds = malloc(n_ranks * sizeof(int));
		if (!rz->peer_fds) {
			free(rz);
			return NPROXY_RESOURCE;
		}
		for (uint32_t r = 0; r < n_ranks; r++)
			rz->peer_fds[r] = -1;
		st = n_ranks > 1 ? root_listen(rz, host, port) : NPROXY_SUCCESS;
	} else {
		st = peer_connect(rz, host, port);
	}
	if (st != NPROXY_SUCCESS) {
		npx_err_keep_open(NPX_ERR_RDZV, &rz->err);
		nproxy_rdzv_close(rz);
		return st;
	}
	*out = rz;
	return NPROXY_SUCCESS;
}

/* Root: rank `peer` failed; every other rank learns why. */
static enum nproxy_status root_fail(struct nproxy_rdzv *rz, int rc, uint32_t peer, const char *what)
{
	enum nproxy_status st = NPROXY_PEER_DEAD;

	if (rc == -ETIMEDOUT) {
		rz_err(rz, "rank %u: no answer within %d ms %s", peer, rz->timeout_ms, what);
		st = NPROXY_TIMEOUT;
	} else {
		rz_err(rz, "rank %u went away %s: %s", peer, what, xfer_str(rc));
	}
	close(rz->peer_fds[peer]);
	rz->peer_fds[peer] = -1;
	root_abort_all(rz, st, rz->why);
	return st;
}

/* Root: read rank r's blob length, or the reason it gave up. */
static enum nproxy_status root_read_len(struct nproxy_rdzv *rz, uint32_t r, uint64_t *len,
					int64_t deadline)
{
	int rc = xfer(rz->peer_fds[r], len, sizeof(*len), false, deadline);
	enum nproxy_status st;
	char why[RDZV_MAX_TEXT + 1], relay[RDZV_MAX_TEXT + 32];

	if (rc)
		return root_fail(rz, rc, r, "before sending its blob");
	if (*len == RDZV_ABORT) {
		st = read_abort(rz->peer_fds[r], why, sizeof(why), deadline);
		rz_err(rz, "rank %u gave up: %s", r, why);
		close(rz->peer_fds[r]);
		rz->peer_fds[r] = -1;
		snprintf(relay, sizeof(relay), "rank %u: %s", r, why);
		root_abort_all(rz, st, relay);
		return st;
	}
	if (*len > RDZV_MAX_BLOB)
		return root_fail(rz, -EPROTO, r, "before sending its blob");
	return NPROXY_SUCCESS;
}

static enum nproxy_status root_allgather(struct nproxy_rdzv *rz, const void *data,
					 uint64_t *lens64, char **all_out, size_t *total_out,
					 int64_t deadline)
{
	uint32_t n = rz->n_ranks;
	void **blobs = calloc(n, sizeof(*blobs));
	enum nproxy_status st = NPROXY_SUCCESS;
	size_t total = 0, off = 0;
	char *all = NULL;
	int rc;

	if (!blobs)
		return NPROXY_RESOURCE;
	/* Gather in rank order: bounded by the one deadline either way. */
	for (uint32_t r = 1; r < n && st == NPROXY_SUCCESS; r++) {
		st = root_read_len(rz, r, &lens64[r], deadline);
		if (st != NPROXY_SUCCESS)
			break;
		blobs[r] = malloc(lens64[r] ? lens64[r] : 1);
		if (!blobs[r]) {
			st = NPROXY_RESOURCE;
			root_abort_all(rz, st, "the root is out of memory");
			break;
		}
		rc = xfer(rz->peer_fds[r], blobs[r], lens64[r], false, deadline);
		if (rc)
			st = root_fail(rz, rc, r, "while sending its blob");
	}
	if (st == NPROXY_SUCCESS) {
		for (uint32_t r = 0; r < n; r++)
			total += lens64[r];
		all = malloc(total ? total : 1);
		if (!all) {
			st = NPROXY_RESOURCE;
			root_abort_all(rz, st, "the root is out of memory");
		}
	}
	for (uint32_t r = 0; all && r < n; r++) {
		memcpy(all + off, r == 0 ? data : blobs[r], lens64[r]);
		off += lens64[r];
	}
	for (uint32_t r = 0; r < n; r++)
		free(blobs[r]);
	free(blobs);
	for (uint32_t r = 1; st == NPROXY_SUCCESS && r < n; r++) {
		rc = xfer(rz->peer_fds[r], lens64, n * sizeof(uint64_t), true, deadline);
		if (!rc)
			rc = xfer(rz->peer_fds[r], all, total, true, deadline);
		if (rc)
			st = root_fail(rz, rc, r, "while the root sent it the result");
	}
	if (st != NPROXY_SUCCESS) {
		free(all);
		return st;
	}
	*all_out = all;
	*total_out = total;
	return NPROXY_SUCCESS;
}

static enum nproxy_status peer_allgather(struct nproxy_rdzv *rz, const void *data, size_t len,
					 uint64_t *lens64, char **all_out, size_t *total_out,
					 int64_t deadline)
{
	uint32_t n = rz->n_ranks;
	uint64_t mine = len;
	size_t total = 0;
	char *all = NULL;
	int rc;

	rc = xfer(rz->fd, &mine, sizeof(mine), true, deadline);
	if (!rc)
		rc = xfer(rz->fd, (void *)data, len, true, deadline);
	/* The root's first word: lens[0], or RDZV_ABORT and its reason. */
	deadline += RDZV_PEER_GRACE_MS;
	if (!rc)
		rc = xfer(rz->fd, lens64, sizeof(uint64_t), false, deadline);
	if (!rc && lens64[0] == RDZV_ABORT) {
		char why[RDZV_MAX_TEXT + 1];
		enum nproxy_status st = read_abort(rz->fd, why, sizeof(why), deadline);

		rz->failed = true;
		rz->fail_st = st;
		rz_err(rz, "the root (rank 0) ended the rendezvous: %s", why);
		return st;
	}
	if (!rc && n > 1)
		rc = xfer(rz->fd, lens64 + 1, (n - 1) * sizeof(uint64_t), false, deadline);
	for (uint32_t r = 0; !rc && r < n; r++) {
		if (lens64[r] > RDZV_MAX_BLOB)
			rc = -EPROTO;
		total += lens64[r];
	}
	if (!rc && !(all = malloc(total ? total : 1)))
		rc = -ENOMEM;
	if (!rc)
		rc = xfer(rz->fd, all, total, false, deadline);
	if (rc) {
		free(all);
		rz->failed = true;
		rz->fail_st = rc == -ETIMEDOUT ? NPROXY_TIMEOUT : rc == -ENOMEM ? NPROXY_RESOURCE :
			      NPROXY_PEER_DEAD;
		if (rc == -ETIMEDOUT) {
			rz_err(rz, "the root (rank 0): no answer within %d ms during the all-gather",
			       rz->timeout_ms);
			return NPROXY_TIMEOUT;
		}
		rz_err(rz, "the root (rank 0) went away during the all-gather: %s", xfer_str(rc));
		return rc == -ENOMEM ? NPROXY_RESOURCE : NPROXY_PEER_DEAD;
	}
	*all_out = all;
	*total_out = total;
	return NPROXY_SUCCESS;
}

NPROXY_API enum nproxy_status nproxy_rdzv_allgather(struct nproxy_rdzv *rz, const void *data,
						    size_t len, void **out, size_t *lens,
						    size_t *offs)
{
	int64_t deadline = npx_now_ms() + rz->timeout_ms;
	uint32_t n = rz->n_ranks;
	enum nproxy_status st;
	uint64_t *lens64;
	char *all = NULL;
	size_t total = 0;

	*out = NULL;
	if (rz->failed)
		return rz->fail_st;	/* the first error's text stays */
	if (len > RDZV_MAX_BLOB) {
		rz_err(rz, "blob of %zu bytes is over the %u limit", len, RDZV_MAX_BLOB);
		nproxy_rdzv_abort(rz, NPROXY_INVALID, rz->why);
		return NPROXY_INVALID;
	}
	lens64 = calloc(n, sizeof(*lens64));
	if (!lens64)
		return NPROXY_RESOURCE;
	lens64[rz->rank] = len;
	if (rz->rank == 0)
		st = root_allgather(rz, data, lens64, &all, &total, deadline);
	else
		st = peer_allgather(rz, data, len, lens64, &all, &total, deadline);
	if (st != NPROXY_SUCCESS) {
		free(lens64);
		return st;
	}
	for (uint32_t r = 0, off = 0; r < n; r++) {
		lens[r] = lens64[r];
		offs[r] = off;
		off += (uint32_t)lens64[r];
	}
	free(lens64);
	*out = all;
	return NPROXY_SUCCESS;
}

NPROXY_API void nproxy_rdzv_abort(struct nproxy_rdzv *rz, enum nproxy_status st,
				  const char *why)
{
	if (!rz || rz->failed)
		return;
	if (!known_status(st))
		st = NPROXY_FAILURE;
	rz->failed = true;
	rz->fail_st = st;
	if (!why || !*why)
		why = nproxy_status_str(st);
	if (rz->rank == 0 && rz->peer_fds) {
		root_abort_all(rz, st, why);
	} else if (rz->fd >= 0) {
		/* The root relays it to everyone else, then closes. */
		send_abort(rz->fd, st, why);
		close_lingering(&rz->fd, 1, RDZV_LINGER_MS);
	}
}

NPROXY_API const char *nproxy_rdzv_strerror(const struct nproxy_rdzv *rz)
{
	return npx_err_text(rz ? &rz->err : NULL, NPX_ERR_RDZV);
}

NPROXY_API void nproxy_rdzv_close(struct nproxy_rdzv *rz)
{
	if (!rz)
		return;
	if (rz->fd >= 0)
		close(rz->fd);
	if (rz->peer_fds)
		for (uint32_t r = 0; r < rz->n_ranks; r++)
			if (rz->peer_fds[r] >= 0)
				close(rz->peer_fds[r]);
	free(rz->peer_fds);
	free(rz);
}
