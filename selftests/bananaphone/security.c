// SPDX-License-Identifier: GPL-2.0
/*
 * Bananaphone join security: a process of another uid is refused
 * (SO_PEERCRED), a foreign-uid squatter on the job's socket name is not
 * trusted, and malformed join messages (short, long, garbage, wrong job,
 * ranks out of range, fds attached, early close, silence) are refused or
 * dropped without disturbing the leader or the job.  A client refused with
 * a second message still unread gets the refusal at its first recv(), not
 * ECONNRESET (the leader discards what it did not read before it answers).
 * These tests speak the wire format of lib/bananaphone/bananaphone_internal.h
 * directly.
 */
#include <dlfcn.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "kselftest_harness.h"
#include "bp_test.h"
#include "bananaphone/bananaphone_internal.h"

static uid_t nobody_uid(void)
{
	struct passwd *pw = getpwnam("nobody");

	return pw ? pw->pw_uid : 65534;
}

/*
 * The leader reads each join request LEADER_READS_LATE_MS after it came
 * (armed in rank 0 of job_rank), so that a client's second message is
 * there before the first is answered.  The library's one read of a
 * request is the recv() with MSG_TRUNC (bananaphone_socket.c); libnproxy
 * is linked in statically, so this definition is the one it calls.
 */
#define LEADER_READS_LATE_MS	20
static int leader_reads_late_ms;

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	static ssize_t (*real)(int, void *, size_t, int);

	if (!real)
		real = (ssize_t (*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
	if (leader_reads_late_ms && (flags & MSG_TRUNC))
		bp_t_sleep_ms(leader_reads_late_ms);
	return real(fd, buf, len, flags);
}

static int raw_connect(const char *job, uid_t owner)
{
	struct sockaddr_un sun;
	unsigned int len;
	int fd, tries;

	if (npx_bp_sock_name(job, owner, &sun, &len))
		return -1;
	for (tries = 0; tries < 500; tries++) {
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&sun, len) == 0)
			return fd;
		close(fd);
		bp_t_sleep_ms(5);
	}
	return -1;
}

static void make_hello(struct bp_wire_hello *h, const char *job, uint32_t rank, uint32_t n)
{
	memset(h, 0, sizeof(*h));
	h->magic = BP_MAGIC;
	h->version = BP_VERSION;
	h->type = BP_WIRE_HELLO;
	h->rank = rank;
	h->n_ranks = n;
	h->pid = (uint32_t)getpid();
	memcpy(h->job_id, job, strnlen(job, sizeof(h->job_id) - 1));
}

/* Wait for the leader's reply; -1 if the connection closed without one. */
static int read_reply(int fd, struct bp_wire_reply *reply)
{
	struct timeval tv = { .tv_sec = 10 };
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(reply, 0, sizeof(*reply));
	n = recv(fd, reply, sizeof(*reply), 0);
	if (n < 0 && errno == ECONNRESET)	/* reported ahead of the queued reply */
		n = recv(fd, reply, sizeof(*reply), MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(*reply) || reply->magic != BP_MAGIC)
		return -1;
	return reply->type == BP_WIRE_REFUSE ? reply->status : 0;
}

struct sec_arg {
	char job[96];
	int status[32];		/* per raw client: the REFUSE status seen */
	char text[32][240];
	int leader_fds_before, leader_fds_after;
	int leader_status;
	int expect_clients;	/* the real follower joins once these are answered */
	int answered;
};

static void client_done(struct sec_arg *arg)
{
	__atomic_fetch_add(&arg->answered, 1, __ATOMIC_SEQ_CST);
}

/* The leader's answer on fd (its status and text) into client slot idx; fd is closed. */
static void record_reply(struct sec_arg *arg, uint32_t idx, int fd)
{
	struct bp_wire_reply reply;

	arg->status[idx] = read_reply(fd, &reply);
	snprintf(arg->text[idx], sizeof(arg->text[idx]), "%s", reply.text);
	close(fd);
}

/* A perfect HELLO for rank 1 of 2 on fd, and the answer into slot 0. */
static void hello_and_record(struct sec_arg *arg, int fd)
{
	struct bp_wire_hello h;

	make_hello(&h, arg->job, 1, 2);
	/* May fail with EPIPE if we were refused already: read why anyway. */
	(void)send(fd, &h, sizeof(h), MSG_NOSIGNAL);
	record_reply(arg, 0, fd);
}

/*
 * A new job (name from tag): ranks 0 and 1 of rank_fn and n_clients raw
 * clients client_fn(0..), reaped; expect every one to have exited 0 in
 * time.  The shared arg (munmap() it), or NULL.
 */
static struct sec_arg *run_job_and_clients(struct __test_metadata *_metadata, const char *tag,
					   bp_rank_fn rank_fn, bp_rank_fn client_fn,
					   uint32_t n_clients)
{
	struct sec_arg *arg = bp_t_shared(sizeof(*arg));
	struct bp_run run = { 0 };
	uint32_t i;

	if (!arg)
		return NULL;
	bp_t_job(arg->job, sizeof(arg->job), tag);
	arg->expect_clients = (int)n_clients;
	run.pids[0] = bp_t_spawn(rank_fn, 0, 2, arg);
	run.pids[1] = bp_t_spawn(rank_fn, 1, 2, arg);
	for (i = 0; i < n_clients; i++)
		run.pids[2 + i] = bp_t_spawn(client_fn, i, 0, arg);
	bp_t_reap(&run, 2 + (int)n_clients, 20000);
	EXPECT_EQ(0, run.stragglers);
	for (i = 0; i < 2 + n_clients; i++) {
		EXPECT_EQ(0, run.status[i]) {
			TH_LOG("process %u (2 and up: client %u)", i, i - 2);
		}
	}
	return arg;
}

/* Raw client idx was answered with st (a REFUSE status, or -1 for none). */
static void expect_answer(struct __test_metadata *_metadata, const struct sec_arg *arg,
			  uint32_t idx, int st)
{
	EXPECT_EQ(st, arg->status[idx]) {
		TH_LOG("client %u: status %d '%s'", idx, arg->status[idx], arg->text[idx]);
	}
}

/* Leader + one real follower; the follower joins late so the raw clients get in first. */
static int job_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct sec_arg *arg = varg;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	void *all = NULL;
	struct nproxy_bp *bp;
	int i;

	if (rank == 0) {
		arg->leader_fds_before = bp_t_count_fds();
		leader_reads_late_ms = LEADER_READS_LATE_MS;
	} else {
		uint64_t end = bp_t_now_ms() + 10000;

		while (__atomic_load_n(&arg->answered, __ATOMIC_SEQ_CST) < arg->expect_clients &&
		       bp_t_now_ms() < end)
			bp_t_sleep_ms(5);
	}
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	arg->leader_status = nproxy_bp_allgather(bp, "ok", 2, &all, lens, offs, BP_T_TIMEOUT_MS);
	BP_T_CHECK(arg->leader_status == NPROXY_SUCCESS, "allgather: %s", nproxy_bp_strerror(bp));
	free(all);
	for (i = 0; i < 20; i++)
		BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier %d", i);
	bp_t_leave(bp);
	if (rank == 0)
		arg->leader_fds_after = bp_t_count_fds();
	return 0;
}

/* A child of uid nobody sends a perfect HELLO to root's job: refused. */
static int nobody_client(uint32_t idx, uint32_t n, void *varg)
{
	struct sec_arg *arg = varg;
	uint32_t rank = 0;
	struct nproxy_bp *bp;
	int fd;

	if (setgid(nobody_uid()) || setuid(nobody_uid()))
		return 3;
	BP_T_CHECK(getuid() != 0, "still root");
	/* Through the API it never even finds root's job (name carries the uid). */
	BP_T_CHECK(nproxy_test_bp_open(arg->job, 1, 2, 100, &bp) == NPROXY_TIMEOUT, "found root's job");
	fd = raw_connect(arg->job, 0);
	BP_T_CHECK(fd >= 0, "connect to root's job");
	hello_and_record(arg, fd);
	client_done(arg);
	return 0;
}

TEST(wrong_uid_refused)
{
	struct sec_arg *arg;

	if (geteuid() != 0)
		SKIP(return, "needs root to drop to uid nobody");
	arg = run_job_and_clients(_metadata, "uid", job_rank, nobody_client, 1);
	ASSERT_NE(NULL, arg);
	expect_answer(_metadata, arg, 0, NPROXY_PERM);
	EXPECT_NE(NULL, strstr(arg->text[0], "uid"));
	munmap(arg, sizeof(*arg));
}

/* A foreign-uid process holding the job's name is neither joined nor replaced. */
TEST(foreign_squatter_not_trusted)
{
	struct sockaddr_un sun;
	struct bp_run run = { 0 };
	unsigned int len;
	int sync[2];
	char job[96], c;
	struct nproxy_bp *bp;

	if (geteuid() != 0)
		SKIP(return, "needs root to drop to uid nobody");
	bp_t_job(job, sizeof(job), "sq");
	ASSERT_EQ(0, pipe(sync));
	run.pids[0] = fork();
	if (run.pids[0] == 0) {
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (setgid(nobody_uid()) || setuid(nobody_uid()))
			_exit(3);
		/* Squat on root's name for this job. */
		npx_bp_sock_name(job, 0, &sun, &len);
		fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sun, len) || listen(fd, 8))
			_exit(4);
		c = 'x';
		if (write(sync[1], &c, 1) != 1)
			_exit(5);
		pause();
		_exit(0);
	}
	ASSERT_EQ(1, read(sync[0], &c, 1));
	ASSERT_EQ(NPROXY_PERM, nproxy_test_bp_open(job, 1, 2, 1000, &bp));
	ASSERT_NE(NULL, strstr(nproxy_bp_strerror(NULL), "uid")) {
		TH_LOG("%s", nproxy_bp_strerror(NULL));
	}
	ASSERT_EQ(NPROXY_BUSY, nproxy_test_bp_open(job, 0, 2, 0, &bp));
	kill(run.pids[0], SIGKILL);
	bp_t_reap(&run, 1, 5000);
	close(sync[0]);
	close(sync[1]);
}

/* ---- malformed join traffic ---- */

enum bad_kind {
	BAD_SHORT, BAD_LONG, BAD_MAGIC, BAD_VERSION, BAD_TYPE, BAD_RESERVED, BAD_JOB,
	BAD_JOB_NO_NUL, BAD_NRANKS, BAD_RANK0, BAD_RANK_HIGH, BAD_WITH_FDS, BAD_EMPTY,
	BAD_CLOSE_EARLY, BAD_SILENT, BAD_THEN_MORE, BAD_COUNT
};

static const int bad_expect[BAD_COUNT] = {
	[BAD_SHORT] = NPROXY_INVALID, [BAD_LONG] = NPROXY_INVALID,
	[BAD_MAGIC] = NPROXY_INVALID, [BAD_VERSION] = NPROXY_INVALID,
	[BAD_TYPE] = NPROXY_INVALID, [BAD_RESERVED] = NPROXY_INVALID,
	[BAD_JOB] = NPROXY_INVALID, [BAD_JOB_NO_NUL] = NPROXY_INVALID,
	[BAD_NRANKS] = NPROXY_INVALID, [BAD_RANK0] = NPROXY_INVALID,
	[BAD_RANK_HIGH] = NPROXY_INVALID, [BAD_WITH_FDS] = NPROXY_INVALID,
	/* Dropped without a reply: early close, and a zero-length message
	 * (on SOCK_SEQPACKET it reads exactly like a close). */
	[BAD_EMPTY] = -1, [BAD_CLOSE_EARLY] = -1,
	/* Not waited for; told so once the job is complete. */
	[BAD_SILENT] = NPROXY_BUSY,
	/* Answered on the first recv(): -2 there means ECONNRESET came first. */
	[BAD_THEN_MORE] = NPROXY_INVALID,
};

/*
 * A bad request and a second one that the leader, reading requests
 * LEADER_READS_LATE_MS late, never reads.  One recv(), once the leader
 * closed its end: a close with data unread makes it ECONNRESET, a close
 * after a drain leaves the reply.  The answer goes into slot kind.
 */
static void then_more_client(struct sec_arg *arg, uint32_t kind, int fd, struct bp_wire_hello *h)
{
	struct iovec iov[2] = { { h, sizeof(*h) }, { h, sizeof(*h) } };
	struct mmsghdr two[2] = { { .msg_hdr = { .msg_iov = &iov[0], .msg_iovlen = 1 } },
				  { .msg_hdr = { .msg_iov = &iov[1], .msg_iovlen = 1 } } };
	struct pollfd pfd = { .fd = -1 };
	struct bp_wire_reply reply;
	ssize_t got;

	h->magic = 0xdeadbeef;
	if (sendmmsg(fd, two, 2, MSG_NOSIGNAL) != 2) {
		fprintf(stderr, "# client %u: sendmmsg: %s\n", kind, strerror(errno));
		arg->status[kind] = -3;
		close(fd);
		client_done(arg);
		return;
	}
	for (int ms = 0; ms < 10000 && !(pfd.revents & POLLHUP); ms += 10) {
		pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
		poll(&pfd, 1, 10);
	}
	memset(&reply, 0, sizeof(reply));
	got = recv(fd, &reply, sizeof(reply), MSG_DONTWAIT);
	arg->status[kind] = got == (ssize_t)sizeof(reply) && reply.magic == BP_MAGIC &&
			    reply.type == BP_WIRE_REFUSE ? reply.status : -2;
	snprintf(arg->text[kind], sizeof(arg->text[kind]), "%s",
		 got < 0 ? strerror(errno) : reply.text);
	close(fd);
	client_done(arg);
}

static int bad_client(uint32_t kind, uint32_t n, void *varg)
{
	struct sec_arg *arg = varg;
	struct bp_wire_reply reply;
	struct bp_wire_hello h;
	char big[4096];
	uint32_t rank = 100 + kind;	/* for BP_T_CHECK's messages */
	int fd = raw_connect(arg->job, geteuid());

	BP_T_CHECK(fd >= 0, "connect");
	make_hello(&h, arg->job, 1, 2);
	switch (kind) {
	case BAD_SHORT:
		BP_T_CHECK(send(fd, "abc", 3, 0) == 3, "send");
		break;
	case BAD_LONG:
		memset(big, 0x5a, sizeof(big));
		memcpy(big, &h, sizeof(h));
		BP_T_CHECK(send(fd, big, sizeof(big), 0) == (ssize_t)sizeof(big), "send");
		break;
	case BAD_EMPTY:
		BP_T_CHECK(send(fd, big, 0, 0) == 0, "send");
		break;
	case BAD_CLOSE_EARLY:
		close(fd);
		arg->status[kind] = -1;
		client_done(arg);
		return 0;
	case BAD_THEN_MORE:
		then_more_client(arg, kind, fd, &h);
		return 0;
	case BAD_SILENT:
		/* Hold the connection open saying nothing; the leader must not
		 * wait for us, and refuses us once the job is complete. */
		client_done(arg);
		arg->status[kind] = read_reply(fd, &reply);
		close(fd);
		return 0;
	case BAD_WITH_FDS: {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		int leak = 0;	/* stdin, passed to the leader: must be dropped */

		h.n_ranks = 99;	/* and refused */
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &leak, sizeof(int));
		BP_T_CHECK(sendmsg(fd, &msg, 0) == (ssize_t)sizeof(h), "sendmsg");
		break;
	}
	default:
		if (kind == BAD_MAGIC)
			h.magic = 0xdeadbeef;
		if (kind == BAD_VERSION)
			h.version = 77;
		if (kind == BAD_TYPE)
			h.type = BP_WIRE_WELCOME;
		if (kind == BAD_RESERVED)
			h.reserved = 1;
		if (kind == BAD_JOB)
			snprintf(h.job_id, sizeof(h.job_id), "some-other-job");
		if (kind == BAD_JOB_NO_NUL)
			memset(h.job_id, 'j', sizeof(h.job_id));
		if (kind == BAD_NRANKS)
			h.n_ranks = 3;
		if (kind == BAD_RANK0)
			h.rank = 0;
		if (kind == BAD_RANK_HIGH)
			h.rank = 2;
		BP_T_CHECK(send(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h), "send");
		break;
	}
	record_reply(arg, kind, fd);
	client_done(arg);
	return 0;
}

TEST(malformed_join_messages)
{
	struct sec_arg *arg = run_job_and_clients(_metadata, "mal", job_rank, bad_client, BAD_COUNT);

	ASSERT_NE(NULL, arg);
	EXPECT_EQ(NPROXY_SUCCESS, arg->leader_status);
	EXPECT_EQ(arg->leader_fds_before, arg->leader_fds_after);
	for (uint32_t k = 0; k < BAD_COUNT; k++)
		expect_answer(_metadata, arg, k, bad_expect[k]);
	munmap(arg, sizeof(*arg));
}

/* After the job is complete, a latecomer gets an answer, not silence. */
static int late_client(uint32_t idx, uint32_t n, void *varg)
{
	struct sec_arg *arg = varg;
	uint64_t end = bp_t_now_ms() + 10000;
	uint32_t rank = idx;
	int fd;

	/* Only once the job is complete (its ranks passed a barrier). */
	while (!__atomic_load_n(&arg->answered, __ATOMIC_ACQUIRE) && bp_t_now_ms() < end)
		bp_t_sleep_ms(5);
	fd = raw_connect(arg->job, geteuid());
	BP_T_CHECK(fd >= 0, "connect");
	hello_and_record(arg, fd);
	__atomic_store_n(&arg->status[1], 1, __ATOMIC_RELEASE);
	return 0;
}

/* Barriers until the latecomer got its answer; the leader decides when to
 * stop and tells everyone with a bcast, so all ranks stop together. */
static int busy_job_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct sec_arg *arg = varg;
	uint64_t end = bp_t_now_ms() + 10000;
	struct nproxy_bp *bp;

	BP_T_CHECK(bp_t_join_all(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	__atomic_store_n(&arg->answered, 1, __ATOMIC_RELEASE);	/* the job is complete */
	for (;;) {
		int stop = __atomic_load_n(&arg->status[1], __ATOMIC_ACQUIRE) ||
			   bp_t_now_ms() > end;
		void *out = NULL;
		size_t len;

		BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier");
		BP_T_CHECK(nproxy_bp_bcast(bp, &stop, sizeof(stop), &out, &len, BP_T_TIMEOUT_MS) ==
				   NPROXY_SUCCESS && len == sizeof(stop), "bcast: %s",
			   nproxy_bp_strerror(bp));
		memcpy(&stop, out, sizeof(stop));
		free(out);
		if (stop)
			break;
	}
	bp_t_leave(bp);
	return 0;
}

TEST(latecomer_refused)
{
	struct sec_arg *arg = run_job_and_clients(_metadata, "late", busy_job_rank, late_client, 1);

	ASSERT_NE(NULL, arg);
	expect_answer(_metadata, arg, 0, NPROXY_BUSY);
	munmap(arg, sizeof(*arg));
}

TEST_HARNESS_MAIN
