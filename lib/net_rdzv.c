// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The TCP rendezvous behind NPROXY_ROOT_COMM_ID=host:port: rank 0 listens,
 * every other rank connects (retrying until the root is up) and says hello;
 * an all-gather is "everyone sends its blob to the root, the root sends the
 * concatenation back".  Every wait is a poll() against one deadline, and a
 * timeout names the ranks that never showed up.
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

#define RDZV_MAGIC	0x6e70727a76303031ull	/* "nprzv001" */
#define RDZV_MAX_BLOB	(1u << 20)

struct rdzv_hello {
	uint64_t magic;
	uint32_t rank;
	uint32_t n_ranks;
};

struct nproxy_rdzv {
	uint32_t rank;
	uint32_t n_ranks;
	int timeout_ms;
	int fd;			/* non-root: socket to the root */
	int *peer_fds;		/* root: socket of rank r (r >= 1) */
	char root[128];
	char err[256];
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

__attribute__((format(printf, 2, 3)))
static void rz_err(struct nproxy_rdzv *rz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rz->err, sizeof(rz->err), fmt, ap);
	va_end(ap);
	nproxy_log(NPROXY_LOG_ERROR, "rendezvous %s rank %u: %s", rz->root, rz->rank, rz->err);
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
	int64_t left = deadline - now_ms();

	return left > 0 ? (int)left : 0;
}

/* Full transfer on a (blocking) socket, bounded by the deadline. */
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
			return -ECONNRESET;	/* peer closed */
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static enum nproxy_status root_accept(struct nproxy_rdzv *rz, int lfd, int64_t deadline)
{
	uint32_t joined = 1;

	while (joined < rz->n_ranks) {
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		struct rdzv_hello hello;
		int n = poll(&pfd, 1, remaining(deadline));
		int fd;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			char missing[160] = "";
			size_t off = 0;

			for (uint32_t r = 1; r < rz->n_ranks && off < sizeof(missing) - 12; r++)
				if (rz->peer_fds[r] < 0)
					off += (size_t)snprintf(missing + off, sizeof(missing) - off,
								"%s%u", off ? "," : "", r);
			rz_err(rz, "rank(s) %s of %u never connected within %d ms", missing,
			       rz->n_ranks, rz->timeout_ms);
			return NPROXY_TIMEOUT;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (xfer(fd, &hello, sizeof(hello), false, deadline)) {
			close(fd);
			continue;
		}
		if (hello.magic != RDZV_MAGIC || hello.n_ranks != rz->n_ranks ||
		    hello.rank == 0 || hello.rank >= rz->n_ranks) {
			nproxy_log(NPROXY_LOG_WARN,
				   "rendezvous %s: ignoring a hello (rank %u of %u) that does not fit %u ranks",
				   rz->root, hello.rank, hello.n_ranks, rz->n_ranks);
			close(fd);
			continue;
		}
		if (rz->peer_fds[hello.rank] >= 0) {
			close(fd);
			rz_err(rz, "rank %u connected twice", hello.rank);
			return NPROXY_INVALID;
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
	int64_t deadline = now_ms() + rz->timeout_ms;
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
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* A previous job's socket may still hold the port for a moment. */
	while ((rc = bind(lfd, ai->ai_addr, ai->ai_addrlen)) < 0 && errno == EADDRINUSE &&
	       remaining(deadline) > 0)
		usleep(20000);
	freeaddrinfo(ai);
	if (rc < 0 || listen(lfd, (int)rz->n_ranks) < 0) {
		rz_err(rz, "cannot listen as root: %s", strerror(errno));
		close(lfd);
		return NPROXY_RESOURCE;
	}
	st = root_accept(rz, lfd, deadline);
	close(lfd);
	return st;
}

static enum nproxy_status peer_connect(struct nproxy_rdzv *rz, const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct rdzv_hello hello = { RDZV_MAGIC, rz->rank, rz->n_ranks };
	int64_t deadline = now_ms() + rz->timeout_ms;
	int last_errno = ETIMEDOUT, one = 1;

	for (;;) {
		struct addrinfo *ai;
		int rc = getaddrinfo(host, port, &hints, &ai);

		if (rc == 0) {
			int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

			if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
				freeaddrinfo(ai);
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				if (xfer(fd, &hello, sizeof(hello), true, deadline)) {
					close(fd);
					rz_err(rz, "root (rank 0) dropped the connection during hello");
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

NPROXY_API enum nproxy_status nproxy_rdzv_open(const char *root, uint32_t rank,
					       uint32_t n_ranks, int timeout_ms,
					       struct nproxy_rdzv **out)
{
	char host[128], port[16];
	struct nproxy_rdzv *rz;
	enum nproxy_status st;

	*out = NULL;
	if (!root || !n_ranks || rank >= n_ranks || timeout_ms <= 0) {
		nproxy_log(NPROXY_LOG_ERROR, "rendezvous: bad arguments (root %s, rank %u of %u)",
			   root ? root : "(unset: NPROXY_ROOT_COMM_ID)", rank, n_ranks);
		return NPROXY_INVALID;
	}
	if (parse_root(root, host, sizeof(host), port, sizeof(port))) {
		nproxy_log(NPROXY_LOG_ERROR, "rendezvous: root \"%s\" is not host:port", root);
		return NPROXY_INVALID;
	}
	rz = calloc(1, sizeof(*rz));
	if (!rz)
		return NPROXY_RESOURCE;
	rz->rank = rank;
	rz->n_ranks = n_ranks;
	rz->timeout_ms = timeout_ms;
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
		nproxy_rdzv_close(rz);
		return st;
	}
	*out = rz;
	return NPROXY_SUCCESS;
}

static enum nproxy_status io_fail(struct nproxy_rdzv *rz, int rc, uint32_t peer, const char *what)
{
	if (rc == -ETIMEDOUT) {
		rz_err(rz, "rank %u: no answer within %d ms %s", peer, rz->timeout_ms, what);
		return NPROXY_TIMEOUT;
	}
	rz_err(rz, "rank %u went away %s: %s", peer, what, rc == -EPROTO ? "protocol error" : strerror(-rc));
	return NPROXY_PEER_DEAD;
}

NPROXY_API enum nproxy_status nproxy_rdzv_allgather(struct nproxy_rdzv *rz, const void *data,
						    size_t len, void **out, size_t *lens,
						    size_t *offs)
{
	int64_t deadline = now_ms() + rz->timeout_ms;
	uint32_t n = rz->n_ranks;
	uint64_t *lens64 = NULL;
	char *all = NULL;
	size_t total = 0;
	int rc;

	*out = NULL;
	if (len > RDZV_MAX_BLOB) {
		rz_err(rz, "blob of %zu bytes is over the %u limit", len, RDZV_MAX_BLOB);
		return NPROXY_INVALID;
	}
	lens64 = calloc(n, sizeof(*lens64));
	if (!lens64)
		return NPROXY_RESOURCE;
	lens64[rz->rank] = len;

	if (rz->rank == 0) {
		void **blobs = calloc(n, sizeof(*blobs));

		if (!blobs) {
			free(lens64);
			return NPROXY_RESOURCE;
		}
		/* Gather in rank order: bounded by the one deadline either way. */
		for (uint32_t r = 1; r < n; r++) {
			rc = xfer(rz->peer_fds[r], &lens64[r], sizeof(uint64_t), false, deadline);
			if (!rc && lens64[r] > RDZV_MAX_BLOB)
				rc = -EPROTO;
			if (!rc && !(blobs[r] = malloc(lens64[r] ? lens64[r] : 1)))
				rc = -ENOMEM;
			if (!rc)
				rc = xfer(rz->peer_fds[r], blobs[r], lens64[r], false, deadline);
			if (rc) {
				for (uint32_t i = 0; i < n; i++)
					free(blobs[i]);
				free(blobs);
				free(lens64);
				return io_fail(rz, rc, r, "before sending its blob");
			}
		}
		for (uint32_t r = 0; r < n; r++)
			total += lens64[r];
		all = malloc(total ? total : 1);
		if (all) {
			size_t off = 0;

			for (uint32_t r = 0; r < n; r++) {
				memcpy(all + off, r == 0 ? data : blobs[r], lens64[r]);
				off += lens64[r];
			}
		}
		for (uint32_t i = 0; i < n; i++)
			free(blobs[i]);
		free(blobs);
		if (!all) {
			free(lens64);
			return NPROXY_RESOURCE;
		}
		for (uint32_t r = 1; r < n; r++) {
			rc = xfer(rz->peer_fds[r], lens64, n * sizeof(uint64_t), true, deadline);
			if (!rc)
				rc = xfer(rz->peer_fds[r], all, total, true, deadline);
			if (rc) {
				free(all);
				free(lens64);
				return io_fail(rz, rc, r, "while the root sent it the result");
			}
		}
	} else {
		uint64_t mine = len;

		rc = xfer(rz->fd, &mine, sizeof(mine), true, deadline);
		if (!rc)
			rc = xfer(rz->fd, (void *)data, len, true, deadline);
		if (!rc)
			rc = xfer(rz->fd, lens64, n * sizeof(uint64_t), false, deadline);
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
			free(lens64);
			return io_fail(rz, rc, 0, "(the root) during the all-gather");
		}
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

NPROXY_API const char *nproxy_rdzv_strerror(const struct nproxy_rdzv *rz)
{
	return rz ? rz->err : "";
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
