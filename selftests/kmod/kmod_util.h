/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the nproxy.ko selftests (selftests/kmod/NAME.vm.c).  They
 * run inside the VM with the module loaded; without /dev/nproxy every test
 * skips and says why.
 */
#ifndef NPROXY_KMOD_UTIL_H
#define NPROXY_KMOD_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/nproxy.h>
#include "nproxy_test.h"

#define NP_DEV_PATH	"/dev/nproxy"
#define NP_STATS_DIR	"/sys/class/misc/nproxy/stats/"
#define NP_MS		1000000ULL

/*
 * Skip the current test from a FIXTURE_SETUP or a TEST body.  The 6.1
 * harness runs a TEST_F body even after its setup skipped, so end the test
 * child here: exit status 255 is the harness's "skipped".
 */
#define NP_SKIP(fmt, ...) SKIP(_exit(255), fmt, ##__VA_ARGS__)

/* Skip unless the module is loaded. */
#define NP_OPEN_DEV_OR_SKIP(fd) do {					\
	(fd) = open(NP_DEV_PATH, O_RDWR | O_CLOEXEC);			\
	if ((fd) < 0)							\
		NP_SKIP(NP_DEV_PATH ": %s (nproxy.ko not loaded: run under scripts/vmtest)", \
			strerror(errno));				\
} while (0)

/*
 * A fixture whose whole state is /dev/nproxy open in self->dev (the test
 * skips without the module), closed at teardown.
 */
#define NP_DEV_FIXTURE(name)						\
	FIXTURE(name) {							\
		int dev;						\
	};								\
	FIXTURE_SETUP(name)						\
	{								\
		NP_OPEN_DEV_OR_SKIP(self->dev);				\
	}								\
	FIXTURE_TEARDOWN(name)						\
	{								\
		if (self->dev >= 0)					\
			close(self->dev);				\
	}

static inline long np_page_size(void)
{
	return sysconf(_SC_PAGESIZE);
}

static inline uint64_t np_now_ns(void)
{
	return nproxy_test_now_ns();	/* testlib/nproxy_test.h */
}

static inline uint32_t np_load_acquire32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline uint64_t np_load_acquire64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Returns the region fd or -errno. */
static inline int np_create(int dev, uint32_t n_streams, uint32_t n_sems)
{
	struct nproxy_region_create req = {
		.n_streams = n_streams, .n_sems = n_sems, .rank = 3, .gid = 7,
	};
	int fd = ioctl(dev, NPROXY_IOC_CREATE_REGION, &req);

	return fd < 0 ? -errno : fd;
}

/* Returns the mapping or NULL with errno set. */
static inline void *np_map(int rfd, uint64_t off, int prot)
{
	void *p = mmap(NULL, np_page_size(), prot, MAP_SHARED, rfd, off);

	return p == MAP_FAILED ? NULL : p;
}

static inline struct nproxy_prog_step np_step(uint16_t op, uint32_t index,
					      uint64_t value, uint64_t timeout_ns)
{
	struct nproxy_prog_step s = {
		.op = op, .index = index, .value = value, .timeout_ns = timeout_ns,
	};

	return s;
}

/* Returns 0 or -errno; *seq gets the program id. */
static inline int np_submit(int rfd, const struct nproxy_prog_step *steps,
			    uint32_t n, uint64_t *seq)
{
	struct nproxy_prog_submit req = {
		.n_steps = n, .steps = (uintptr_t)steps,
	};

	if (ioctl(rfd, NPROXY_IOC_SUBMIT_PROG, &req))
		return -errno;
	if (seq)
		*seq = req.seq;
	return 0;
}

/* poll() for @events; returns revents, 0 on timeout, -errno on error. */
static inline int np_poll(int fd, short events, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int n = poll(&pfd, 1, timeout_ms);

	if (n < 0)
		return -errno;
	return n ? pfd.revents : 0;
}

/* Wait (bounded) for the program to finish and collect it; -errno on error. */
static inline int np_wait_collect(int rfd, int timeout_ms,
				  struct nproxy_prog_result *res)
{
	int ev = np_poll(rfd, POLLIN, timeout_ms);

	if (ev < 0)
		return ev;
	if (!(ev & POLLIN))
		return -ETIMEDOUT;
	memset(res, 0, sizeof(*res));
	return ioctl(rfd, NPROXY_IOC_COLLECT_PROG, res) ? -errno : 0;
}

/* A module-wide counter from sysfs, or -1. */
/* The number a sysfs or debugfs file holds, or -1 when it cannot be read. */
static inline long long np_read_ll(const char *path)
{
	char buf[32];
	long long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = strtoll(buf, NULL, 10);
	fclose(f);
	return v;
}

static inline long long np_stat(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), NP_STATS_DIR "%s", name);
	return np_read_ll(path);
}

/* One byte with room for one fd (SCM_RIGHTS): what np_send_fd/np_recv_fd carry. */
struct np_fd_msg {
	char byte;
	struct iovec iov;
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg;
};

static inline void np_fd_msg_init(struct np_fd_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->byte = 'F';
	m->iov = (struct iovec){ .iov_base = &m->byte, .iov_len = 1 };
	m->msg.msg_iov = &m->iov;
	m->msg.msg_iovlen = 1;
	m->msg.msg_control = m->ctl.buf;
	m->msg.msg_controllen = sizeof(m->ctl.buf);
}

static inline int np_send_fd(int sock, int fd)
{
	struct np_fd_msg m;
	struct cmsghdr *c;

	np_fd_msg_init(&m);
	c = CMSG_FIRSTHDR(&m.msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &m.msg, 0) == 1 ? 0 : -errno;
}

static inline int np_recv_fd(int sock)
{
	struct np_fd_msg m;
	struct cmsghdr *c;
	int fd;

	np_fd_msg_init(&m);
	if (recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&m.msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

#endif /* NPROXY_KMOD_UTIL_H */
