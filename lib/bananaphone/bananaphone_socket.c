// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone join: the leader's abstract Unix socket
 * "\0nproxy-bp/<uid>/<job_id>" (SOCK_SEQPACKET: one message per request,
 * nothing in the filesystem, gone with the last fd).
 *
 * follower                           leader (inside any bp call)
 *   connect (retry until timeout)      accept; SO_PEERCRED uid == ours?
 *   check SO_PEERCRED uid == ours
 *   HELLO {rank, n_ranks, job_id} ->   valid, rank in 1..n-1 and free?
 *                                      pidfd_open(peer pid from SO_PEERCRED)
 *                                      unless it is the leader's own process
 *                                   <- REFUSE {status, text} and close, or,
 *                                      once every rank has joined:
 *                                   <- WELCOME + SCM_RIGHTS {memfd}
 *
 * Every pid is in the segment (npx_bp_rank_ctl.pid); the leader keeps one
 * pidfd per other process, a follower the leader's (see
 * bananaphone_liveness.c), so no message carries more than one fd.
 *
 * The leader never trusts a request: short, long, garbage, wrong job,
 * wrong uid, rank taken or out of range, silent or early-closing clients
 * are refused or dropped without disturbing the job.  The listening socket
 * stays open (the name stays taken) until the leader hangs up, so a second
 * leader for the job id fails to bind; latecomers get a REFUSE.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/log.h>
#include "bananaphone_internal.h"

/* Abstract name; *len counts the leading NUL and excludes any trailing one. */
int npx_bp_sock_name(const char *job_id, uid_t uid, void *sun_, unsigned int *len)
{
	struct sockaddr_un *sun = sun_;
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, BP_SOCK_PREFIX "%u/%s",
		     (unsigned int)uid, job_id);
	if (n < 0 || (size_t)n >= sizeof(sun->sun_path) - 1)
		return -1;
	*len = (unsigned int)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	return 0;
}

static bool peer_cred(int fd, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) == 0 && len == sizeof(*cred);
}

enum nproxy_status npx_bp_listen(struct nproxy_bp *bp)
{
	struct sockaddr_un sun;
	unsigned int len;
	int fd;

	if (npx_bp_sock_name(bp->job_id, geteuid(), &sun, &len))
		return npx_bp_error(bp, NPROXY_INVALID, "job id too long for a socket name");
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return npx_bp_error(bp, NPROXY_RESOURCE, "socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sun, len) < 0) {
		int err = errno;

		close(fd);
		if (err == EADDRINUSE)
			return npx_bp_error(bp, NPROXY_BUSY,
					"job already has a leader: abstract socket '@%s' is taken",
					sun.sun_path + 1);
		return npx_bp_error(bp, NPROXY_FAILURE, "bind '@%s': %s", sun.sun_path + 1,
				strerror(err));
	}
	if (listen(fd, NPROXY_BP_MAX_RANKS) < 0) {
		close(fd);
		return npx_bp_error(bp, NPROXY_FAILURE, "listen: %s", strerror(errno));
	}
	bp->sock = fd;
	return NPROXY_SUCCESS;
}

/* A follower's message of type (HELLO, BYE) for this rank of this job; no pid. */
static void wire_hello(struct bp_wire_hello *h, const struct nproxy_bp *bp,
		       enum bp_wire_type type)
{
	memset(h, 0, sizeof(*h));
	h->magic = BP_MAGIC;
	h->version = BP_VERSION;
	h->type = (uint16_t)type;
	h->rank = bp->rank;
	h->n_ranks = bp->n;
	memcpy(h->job_id, bp->job_id, sizeof(h->job_id));
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int ms_until(uint64_t deadline_ns)
{
	uint64_t now = npx_now_ns();

	if (deadline_ns <= now)
		return 0;
	return (int)((deadline_ns - now + 999999) / 1000000);
}

enum nproxy_status npx_bp_dial(struct nproxy_bp *bp, uint32_t timeout_ms)
{
	uint64_t deadline = npx_deadline_ns((uint64_t)timeout_ms);
	struct bp_wire_hello hello;
	unsigned int len, backoff = 1;
	struct sockaddr_un sun;
	struct ucred cred;
	int fd, err;

	if (npx_bp_sock_name(bp->job_id, geteuid(), &sun, &len))
		return npx_bp_error(bp, NPROXY_INVALID, "job id too long for a socket name");
	for (;;) {
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return npx_bp_error(bp, NPROXY_RESOURCE, "socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sun, len) == 0)
			break;
		err = errno;
		close(fd);
		/* No leader yet (ECONNREFUSED) or its backlog is full (EAGAIN). */
		if (err != ECONNREFUSED && err != ENOENT && err != EAGAIN)
			return npx_bp_error(bp, NPROXY_FAILURE, "connect to '@%s': %s",
					sun.sun_path + 1, strerror(err));
		if (npx_now_ns() >= deadline)
			return npx_bp_error(bp, NPROXY_TIMEOUT,
					"no leader after %u ms (abstract socket '@%s')",
					timeout_ms, sun.sun_path + 1);
		sleep_ms(backoff);
		if (backoff < 16)
			backoff *= 2;
	}
	bp->sock = fd;
	if (!peer_cred(fd, &cred))
		return npx_bp_error(bp, NPROXY_FAILURE, "SO_PEERCRED: %s", strerror(errno));
	if (cred.uid != geteuid())
		return npx_bp_error(bp, NPROXY_PERM,
				"socket '@%s' is held by pid %d of uid %u, not by our uid %u",
				sun.sun_path + 1, (int)cred.pid, (unsigned int)cred.uid,
				(unsigned int)geteuid());
	bp->pids[0] = cred.pid;
	/* A leader in this very process cannot die without us. */
	bp->pidfds[0] = cred.pid == getpid() ? -1 : npx_bp_pidfd_open(cred.pid);
	if (bp->pidfds[0] < 0 && cred.pid != getpid())
		return npx_bp_error(bp, NPROXY_FAILURE, "pidfd_open of the leader (pid %d): %s",
				(int)cred.pid, strerror(errno));

	wire_hello(&hello, bp, BP_WIRE_HELLO);
	hello.pid = (uint32_t)getpid();
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };

		if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) == (ssize_t)sizeof(hello))
			return NPROXY_SUCCESS;
		/* Refused and closed already: the first collective reads why. */
		if (errno == EPIPE || errno == ECONNRESET)
			return NPROXY_SUCCESS;
		if (errno != EAGAIN && errno != EINTR)
			return npx_bp_error(bp, NPROXY_FAILURE, "sending the join request: %s",
					strerror(errno));
		if (npx_now_ns() >= deadline)
			return npx_bp_error(bp, NPROXY_TIMEOUT, "leader did not take the join request in %u ms",
					timeout_ms);
		poll(&pfd, 1, ms_until(deadline));
	}
}

/* ---- leader side ---- */

static void send_reply(int fd, enum bp_wire_type type, enum nproxy_status st, const char *text,
		       const int *fds, uint32_t n_fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct bp_wire_reply reply;
	struct iovec iov = { .iov_base = &reply, .iov_len = sizeof(reply) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n_fds > 1)
		n_fds = 1;
	memset(&reply, 0, sizeof(reply));
	reply.magic = BP_MAGIC;
	reply.version = BP_VERSION;
	reply.type = (uint16_t)type;
	reply.status = (int32_t)st;
	reply.n_fds = n_fds;
	snprintf(reply.text, sizeof(reply.text), "%s", text ? text : "");
	if (n_fds) {
		struct cmsghdr *cm;

		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
	}
	/* Best effort for REFUSE: the client may already be gone. */
	(void)sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/*
 * Read and discard what a refused client sent: closing a unix socket with
 * unread data makes the peer's next recv() fail with ECONNRESET ahead of
 * our queued reply.  Bounded: a flooding client cannot keep us here.
 */
static void drain(int fd)
{
	char buf[256];
	int i;

	for (i = 0; i < 16; i++)
		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			return;
}

static void conn_drop(struct nproxy_bp *bp, uint32_t i)
{
	struct bp_conn *c = &bp->conns[i];

	if (c->fd >= 0)
		close(c->fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	bp->conns[i] = bp->conns[--bp->n_conns];
	bp->conns[bp->n_conns].fd = -1;
	bp->conns[bp->n_conns].pidfd = -1;
	bp->conns[bp->n_conns].joined = false;
}

static void conn_refuse(struct nproxy_bp *bp, uint32_t i, enum nproxy_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void conn_refuse(struct nproxy_bp *bp, uint32_t i, enum nproxy_status st, const char *fmt, ...)
{
	char text[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	nproxy_log(NPROXY_LOG_WARN, "bananaphone job '%s' leader: refused a join request: %s (%s)",
		   bp->job_id, text, nproxy_status_str(st));
	drain(bp->conns[i].fd);
	send_reply(bp->conns[i].fd, BP_WIRE_REFUSE, st, text, NULL, 0);
	conn_drop(bp, i);
}

/*
 * Out of descriptors, a join request could only wait in the backlog until
 * every rank's timeout: end the join now, telling everyone why.
 */
static enum nproxy_status accept_all(struct nproxy_bp *bp)
{
	for (;;) {
		struct ucred cred;
		int fd = accept4(bp->sock, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct bp_conn *c;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			char text[200];

			snprintf(text, sizeof(text),
				 "leader (pid %d) cannot accept a join request: %s (ulimit -n %ld)",
				 (int)getpid(), strerror(errno), sysconf(_SC_OPEN_MAX));
			npx_bp_join_abort(bp, NPROXY_RESOURCE, text);
			return npx_bp_fail(bp, NPROXY_RESOURCE, "%s", text);
		}
		if (fd < 0)
			return NPROXY_SUCCESS;	/* EAGAIN, or a client that already went away */
		if (bp->n_conns == BP_MAX_CONNS) {
			send_reply(fd, BP_WIRE_REFUSE, NPROXY_BUSY,
				   "leader has too many pending join connections", NULL, 0);
			close(fd);
			continue;
		}
		c = &bp->conns[bp->n_conns++];
		c->fd = fd;
		c->pidfd = -1;
		c->joined = false;
		c->pid = 0;
		if (!peer_cred(fd, &cred)) {
			conn_refuse(bp, bp->n_conns - 1, NPROXY_FAILURE, "no SO_PEERCRED");
			continue;
		}
		c->pid = cred.pid;
		if (cred.uid != geteuid())
			conn_refuse(bp, bp->n_conns - 1, NPROXY_PERM,
				    "pid %d has uid %u; job '%s' belongs to uid %u", (int)cred.pid,
				    (unsigned int)cred.uid, bp->job_id, (unsigned int)geteuid());
	}
}

static enum nproxy_status follower_lost(struct nproxy_bp *bp, uint32_t i, bool said_bye);

static void take_hello(struct nproxy_bp *bp, uint32_t i, const struct bp_wire_hello *h, ssize_t n)
{
	struct bp_conn *c = &bp->conns[i];
	uint32_t j;

	if (n != (ssize_t)sizeof(*h) || h->magic != BP_MAGIC)
		return conn_refuse(bp, i, NPROXY_INVALID,
				   "malformed join request from pid %d: %zd bytes, magic 0x%x",
				   (int)c->pid, n, n >= 4 ? h->magic : 0);
	if (h->version != BP_VERSION || h->type != BP_WIRE_HELLO || h->reserved)
		return conn_refuse(bp, i, NPROXY_INVALID,
				   "join request from pid %d: version %u type %u reserved %u, expected version %u type %u reserved 0",
				   (int)c->pid, h->version, h->type, h->reserved, BP_VERSION,
				   BP_WIRE_HELLO);
	if (memchr(h->job_id, 0, sizeof(h->job_id)) == NULL ||
	    strcmp(h->job_id, bp->job_id))
		return conn_refuse(bp, i, NPROXY_INVALID,
				   "pid %d asked for job '%.64s', this is job '%s'", (int)c->pid,
				   memchr(h->job_id, 0, sizeof(h->job_id)) ? h->job_id : "?",
				   bp->job_id);
	if (h->n_ranks != bp->n)
		return conn_refuse(bp, i, NPROXY_INVALID,
				   "pid %d expects %u ranks, job '%s' has %u", (int)c->pid,
				   h->n_ranks, bp->job_id, bp->n);
	if (h->rank == 0 || h->rank >= bp->n)
		return conn_refuse(bp, i, NPROXY_INVALID,
				   "pid %d claims rank %u, followers are ranks 1..%u", (int)c->pid,
				   h->rank, bp->n - 1);
	for (j = 0; j < bp->n_conns; j++)
		if (bp->conns[j].joined && bp->conns[j].rank == h->rank)
			return conn_refuse(bp, i, NPROXY_BUSY,
					   "pid %d claims rank %u, already taken by pid %d",
					   (int)c->pid, h->rank, (int)bp->conns[j].pid);
	/* A rank of this process is never watched: its death is ours. */
	c->pidfd = c->pid == getpid() ? -1 : npx_bp_pidfd_open(c->pid);
	if (c->pidfd < 0 && c->pid != getpid() && errno != ESRCH)
		return conn_refuse(bp, i, NPROXY_FAILURE, "pidfd_open(%d): %s", (int)c->pid,
				   strerror(errno));
	c->rank = h->rank;
	c->joined = true;
	bp->n_joined++;
	/* ESRCH: it asked to join and died (and was reaped) before we got to
	 * it; conn_input() reports it as this rank's death. */
}

/* Joined follower went away before the welcome: nobody can complete the job. */
static enum nproxy_status follower_lost(struct nproxy_bp *bp, uint32_t i, bool said_bye)
{
	struct bp_conn *c = &bp->conns[i];
	struct pollfd pfd = { .fd = c->pidfd, .events = POLLIN };
	enum nproxy_status st;
	char text[200];

	/* The socket closes in do_exit() before the pidfd turns readable:
	 * give a dying process a moment to finish dying. */
	if (!said_bye && ((c->pidfd < 0 && c->pid != getpid()) || poll(&pfd, 1, 100) == 1)) {
		st = NPROXY_PEER_DEAD;
		snprintf(text, sizeof(text), "rank %u (pid %d) died before every rank joined",
			 c->rank, (int)c->pid);
	} else {
		st = NPROXY_PEER_LEFT;
		snprintf(text, sizeof(text), "rank %u (pid %d) left before every rank joined",
			 c->rank, (int)c->pid);
	}
	npx_bp_join_abort(bp, st, text);
	return npx_bp_fail(bp, st, "%s", text);
}

static enum nproxy_status conn_input(struct nproxy_bp *bp, uint32_t i, short revents)
{
	struct bp_conn *c = &bp->conns[i];
	union {
		struct bp_wire_hello hello;
		char raw[sizeof(struct bp_wire_hello) + 64];
	} buf;
	ssize_t n;

	memset(&buf, 0, sizeof(buf));
	/* MSG_TRUNC: the real length even if the message was longer.  No
	 * control buffer, so fds a client tries to pass are discarded. */
	n = recv(c->fd, &buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		if (!(revents & (POLLHUP | POLLERR)))
			return NPROXY_SUCCESS;
	}
	if (n <= 0) {
		if (c->joined)
			return follower_lost(bp, i, false);
		conn_drop(bp, i);
		return NPROXY_SUCCESS;
	}
	if (!c->joined) {
		take_hello(bp, i, &buf.hello, n);
		if (i < bp->n_conns && bp->conns[i].joined && bp->conns[i].pidfd < 0 &&
		    bp->conns[i].pid != getpid())
			return follower_lost(bp, i, false);
		return NPROXY_SUCCESS;
	}
	if (n == (ssize_t)sizeof(buf.hello) && buf.hello.magic == BP_MAGIC &&
	    buf.hello.type == BP_WIRE_BYE)
		return follower_lost(bp, i, true);
	nproxy_log(NPROXY_LOG_WARN,
		   "bananaphone job '%s' leader: ignored a %zd-byte message from rank %u (pid %d)",
		   bp->job_id, n, c->rank, (int)c->pid);
	return NPROXY_SUCCESS;
}

static enum nproxy_status send_welcomes(struct nproxy_bp *bp)
{
	uint32_t i, r;

	bp->pids[0] = getpid();
	npx_bp_rank_ctl(bp, 0)->pid = (uint32_t)getpid();
	for (i = 0; i < bp->n_conns; i++) {
		struct bp_conn *c = &bp->conns[i];

		if (!c->joined)
			continue;
		bp->pids[c->rank] = c->pid;
		npx_bp_rank_ctl(bp, c->rank)->pid = (uint32_t)c->pid;
	}
	for (i = 0; i < bp->n_conns; i++) {
		struct bp_conn *c = &bp->conns[i];

		if (c->joined)
			send_reply(c->fd, BP_WIRE_WELCOME, NPROXY_SUCCESS, bp->job_id, &bp->memfd, 1);
	}
	/* Keep one follower pidfd per process; drop the connections,
	 * answering any that never made a valid request. */
	for (i = 0; i < bp->n_conns; i++) {
		struct bp_conn *c = &bp->conns[i];
		bool dup = false;

		if (!c->joined || c->pidfd < 0)
			continue;
		for (r = 1; r < bp->n && !dup; r++)
			dup = bp->pidfds[r] >= 0 && bp->pids[r] == c->pid;
		if (!dup) {
			bp->pidfds[c->rank] = c->pidfd;
			c->pidfd = -1;
		}
	}
	while (bp->n_conns) {
		if (!bp->conns[bp->n_conns - 1].joined)
			conn_refuse(bp, bp->n_conns - 1, NPROXY_BUSY,
				    "job '%s' is complete: all %u ranks joined", bp->job_id, bp->n);
		else
			conn_drop(bp, bp->n_conns - 1);
	}
	close(bp->memfd);
	bp->memfd = -1;
	bp->state = BP_S_READY;
	npx_bp_refuse_late(bp);
	/* A follower that died between its HELLO and now shows up here. */
	return npx_bp_check_dead(bp);
}

static enum nproxy_status leader_join_step(struct nproxy_bp *bp, uint64_t deadline_ns)
{
	struct pollfd pfd[1 + BP_MAX_CONNS];
	enum nproxy_status st;
	uint32_t i, n_fds;
	int ret;

	if (bp->n_joined == bp->n - 1)
		return send_welcomes(bp);
	pfd[0].fd = bp->sock;
	pfd[0].events = POLLIN;
	for (i = 0; i < bp->n_conns; i++) {
		pfd[1 + i].fd = bp->conns[i].fd;
		pfd[1 + i].events = POLLIN;
	}
	n_fds = 1 + bp->n_conns;
	ret = poll(pfd, n_fds, ms_until(deadline_ns) > 50 ? 50 : ms_until(deadline_ns));
	if (ret < 0 && errno != EINTR)
		return npx_bp_fail(bp, NPROXY_FAILURE, "poll on the join socket: %s", strerror(errno));
	/* Connections first (indices shift when one is dropped: walk backwards). */
	for (i = n_fds - 1; ret > 0 && i >= 1; i--) {
		if (!pfd[i].revents)
			continue;
		st = conn_input(bp, i - 1, pfd[i].revents);
		if (st)
			return st;
	}
	if (ret > 0 && pfd[0].revents) {
		st = accept_all(bp);
		if (st)
			return st;
	}
	if (bp->n_joined == bp->n - 1)
		return send_welcomes(bp);
	if (!deadline_ns)
		return NPROXY_TIMEOUT;	/* a non-blocking poll: not an error worth a text */
	if (npx_now_ns() >= deadline_ns) {
		char missing[200] = "";
		size_t off = 0;
		uint32_t r;

		for (r = 1; r < bp->n && off < sizeof(missing) - 8; r++) {
			bool have = false;

			for (i = 0; i < bp->n_conns; i++)
				have |= bp->conns[i].joined && bp->conns[i].rank == r;
			if (!have)
				off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%u",
							off ? "," : "", r);
		}
		return npx_bp_error(bp, NPROXY_TIMEOUT,
				"leader timed out with %u of %u ranks joined; missing ranks %s",
				bp->n_joined + 1, bp->n, missing);
	}
	return NPROXY_SUCCESS;
}

/* ---- follower side ---- */

static enum nproxy_status leader_lost(struct nproxy_bp *bp)
{
	struct pollfd pfd = { .fd = bp->pidfds[0], .events = POLLIN };

	/* As in follower_lost(): the socket closes before the pidfd fires. */
	if (poll(&pfd, 1, 100) == 1)
		return npx_bp_fail(bp, NPROXY_PEER_DEAD,
			       "leader (rank 0, pid %d) died before every rank joined",
			       (int)bp->pids[0]);
	return npx_bp_fail(bp, NPROXY_PEER_LEFT,
		       "leader (rank 0, pid %d) closed the join connection before the welcome",
		       (int)bp->pids[0]);
}

static enum nproxy_status take_welcome(struct nproxy_bp *bp, const struct bp_wire_reply *reply,
				       const int *fds, uint32_t n_fds)
{
	enum nproxy_status st;
	uint32_t r;

	if (n_fds != 1 || reply->n_fds != 1)
		return npx_bp_fail(bp, NPROXY_FAILURE,
			       "leader's welcome carried %u fds (says %u), expected 1", n_fds,
			       reply->n_fds);
	st = npx_bp_segment_attach(bp, fds[0]);
	if (st)
		return st;
	for (r = 1; r < bp->n; r++)
		if (r != bp->rank)
			bp->pids[r] = (pid_t)npx_bp_rank_ctl(bp, r)->pid;
	/* The leader's pidfd was opened at connect already. */
	close(fds[0]);
	close(bp->sock);
	bp->sock = -1;
	bp->state = BP_S_READY;
	return npx_bp_check_dead(bp);
}

/* The fds a message carried, at most max of them (the rest closed). */
static uint32_t passed_fds(struct msghdr *msg, int *fds, uint32_t max)
{
	struct cmsghdr *cm;
	uint32_t n_fds = 0;

	for (cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		size_t cnt;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t k = 0; k < cnt; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
			if (n_fds < max)
				fds[n_fds++] = fd;
			else
				close(fd);
		}
	}
	return n_fds;
}

/* The kernel drops passed fds a full descriptor table cannot take. */
static enum nproxy_status welcome_cut_off(struct nproxy_bp *bp)
{
	return npx_bp_fail(bp, NPROXY_RESOURCE,
		       "the leader's welcome lost its file descriptor (MSG_CTRUNC): this process is out of file descriptors (Too many open files, ulimit -n %ld)",
		       sysconf(_SC_OPEN_MAX));
}

static enum nproxy_status follower_join_step(struct nproxy_bp *bp, uint64_t deadline_ns)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cbuf;
	struct pollfd pfd = { .fd = bp->sock, .events = POLLIN };
	struct bp_wire_reply reply;
	struct iovec iov = { .iov_base = &reply, .iov_len = sizeof(reply) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[4];
	enum nproxy_status st;
	uint32_t n_fds = 0, k;
	ssize_t n;
	int ret;

	ret = poll(&pfd, 1, ms_until(deadline_ns) > 50 ? 50 : ms_until(deadline_ns));
	if (ret == 0) {
		if (npx_now_ns() < deadline_ns)
			return NPROXY_SUCCESS;
		if (!deadline_ns)
			return NPROXY_TIMEOUT;	/* a non-blocking poll */
		/* The leader may also be gone while its socket lingers. */
		st = npx_bp_check_dead(bp);
		if (st)
			return st;
		return npx_bp_error(bp, NPROXY_TIMEOUT,
				"timed out waiting for the leader (pid %d) to admit every rank",
				(int)bp->pids[0]);
	}
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	memset(&reply, 0, sizeof(reply));
	n = recvmsg(bp->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	/* ECONNRESET is reported ahead of a reply still queued: look again. */
	if (n < 0 && errno == ECONNRESET) {
		msg.msg_controllen = sizeof(cbuf.buf);
		n = recvmsg(bp->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return NPROXY_SUCCESS;
	if (n >= 0)
		n_fds = passed_fds(&msg, fds, 4);
	if (n <= 0)
		st = leader_lost(bp);
	else if (msg.msg_flags & MSG_CTRUNC)
		st = welcome_cut_off(bp);
	else if (n != (ssize_t)sizeof(reply) || reply.magic != BP_MAGIC ||
		 reply.version != BP_VERSION || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		st = npx_bp_fail(bp, NPROXY_FAILURE, "malformed reply from the leader (pid %d), %zd bytes",
			     (int)bp->pids[0], n);
	else if (reply.type == BP_WIRE_REFUSE) {
		st = reply.status > NPROXY_SUCCESS && reply.status <= NPROXY_CANCELLED ?
			     (enum nproxy_status)reply.status : NPROXY_FAILURE;
		reply.text[sizeof(reply.text) - 1] = 0;
		st = npx_bp_fail(bp, st, "leader (pid %d) refused: %s", (int)bp->pids[0], reply.text);
	} else if (reply.type == BP_WIRE_WELCOME) {
		st = take_welcome(bp, &reply, fds, n_fds);
		if (bp->state == BP_S_READY)
			return st;
	} else {
		st = npx_bp_fail(bp, NPROXY_FAILURE, "unknown reply type %u from the leader",
			     reply.type);
	}
	for (k = 0; k < n_fds; k++)
		close(fds[k]);
	return st;
}

/* Make join progress until the deadline (0: poll once); SUCCESS may still be JOINING. */
enum nproxy_status npx_bp_join_step(struct nproxy_bp *bp, uint64_t deadline_ns)
{
	if (bp->state != BP_S_JOINING)
		return NPROXY_SUCCESS;
	if (bp->leader)
		return leader_join_step(bp, deadline_ns);
	return follower_join_step(bp, deadline_ns);
}

/* Tell everyone in the join phase that it is over; release the name. */
void npx_bp_join_abort(struct nproxy_bp *bp, enum nproxy_status st, const char *text)
{
	if (bp->leader) {
		while (bp->n_conns) {
			send_reply(bp->conns[bp->n_conns - 1].fd, BP_WIRE_REFUSE, st, text, NULL, 0);
			conn_drop(bp, bp->n_conns - 1);
		}
	} else if (bp->sock >= 0 && bp->state == BP_S_JOINING) {
		struct bp_wire_hello bye;

		wire_hello(&bye, bp, BP_WIRE_BYE);
		(void)send(bp->sock, &bye, sizeof(bye), MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	if (bp->sock >= 0)
		close(bp->sock);
	bp->sock = -1;
}

/* Leader, job complete: answer latecomers instead of leaving them hanging. */
void npx_bp_refuse_late(struct nproxy_bp *bp)
{
	for (;;) {
		int fd = accept4(bp->sock, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		char text[120];

		if (fd < 0)
			return;
		snprintf(text, sizeof(text), "job '%s' is complete: all %u ranks joined",
			 bp->job_id, bp->n);
		drain(fd);
		send_reply(fd, BP_WIRE_REFUSE, NPROXY_BUSY, text, NULL, 0);
		close(fd);
	}
}

void npx_bp_close_join(struct nproxy_bp *bp)
{
	while (bp->n_conns)
		conn_drop(bp, bp->n_conns - 1);
}
