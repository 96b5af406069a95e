/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Generic netlink over a raw socket, for tests that need what libnl hides:
 * the extack message (NLMSGERR_ATTR_MSG) and the error a dump reports in
 * its NLMSG_DONE, or messages libnl cannot build (bad headers, flags,
 * attributes).  Every receive is bounded by a poll() timeout.
 */
#ifndef NPROXY_NL_RAW_H
#define NPROXY_NL_RAW_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif

#define NP_NL_BUF	32768
#define NP_NL_WAIT_MS	5000

/* What one request got back. */
struct np_nl_reply {
	int error;		/* 0 or -errno, from NLMSG_ERROR or NLMSG_DONE */
	int n_msgs;		/* data messages (family replies) */
	char msg[256];		/* extack message, "" if none */
};

static inline int np_nl_raw_socket(void)
{
	int one = 1;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	return fd;
}

static inline int np_nl_put_attr(char *buf, size_t cap, size_t *len, uint16_t type,
				 const void *data, uint16_t dlen)
{
	struct nlattr *a = (struct nlattr *)(buf + *len);

	if (*len + NLA_ALIGN(NLA_HDRLEN + dlen) > cap)
		return -1;
	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + dlen;
	memcpy(a + 1, data, dlen);
	memset((char *)(a + 1) + dlen, 0, NLA_ALIGN(a->nla_len) - a->nla_len);
	*len += NLA_ALIGN(a->nla_len);
	return 0;
}

/* The extack message in an NLMSG_ERROR / NLMSG_DONE carrying NLM_F_ACK_TLVS. */
static inline void np_nl_extack(const struct nlmsghdr *nh, const void *tlvs, int tlv_len,
				struct np_nl_reply *r)
{
	const struct nlattr *a = tlvs;

	if (!(nh->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	while (tlv_len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= tlv_len) {
		if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
			size_t n = a->nla_len - NLA_HDRLEN;

			if (n >= sizeof(r->msg))
				n = sizeof(r->msg) - 1;
			memcpy(r->msg, a + 1, n);
			r->msg[n] = 0;
		}
		tlv_len -= NLA_ALIGN(a->nla_len);
		a = (const struct nlattr *)((const char *)a + NLA_ALIGN(a->nla_len));
	}
}

/*
 * Receive until the request's NLMSG_ERROR (ack) or NLMSG_DONE; -ETIMEDOUT if
 * nothing ends it within NP_NL_WAIT_MS.  @cb (may be NULL) sees each data
 * message.
 */
static inline int np_nl_recv(int fd, uint32_t seq, struct np_nl_reply *r,
			     void (*cb)(const struct nlmsghdr *, void *), void *arg)
{
	static __thread char buf[NP_NL_BUF];

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct nlmsghdr *nh;
		ssize_t n;

		if (poll(&pfd, 1, NP_NL_WAIT_MS) != 1)
			return -ETIMEDOUT;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			return -errno;
		for (nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
			if (nh->nlmsg_seq != seq)
				continue;	/* a late answer to an earlier request */
			if (nh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(nh);
				int off = sizeof(*e);

				/* Without NETLINK_CAP_ACK the request is echoed. */
				if (!(nh->nlmsg_flags & NLM_F_CAPPED))
					off += e->msg.nlmsg_len - sizeof(e->msg);
				r->error = e->error;
				if ((int)nh->nlmsg_len > (int)NLMSG_HDRLEN + off)
					np_nl_extack(nh, (const char *)e + off,
						     nh->nlmsg_len - NLMSG_HDRLEN - off, r);
				return 0;
			}
			if (nh->nlmsg_type == NLMSG_DONE) {
				int err = 0;

				if (nh->nlmsg_len >= NLMSG_LENGTH(sizeof(int)))
					memcpy(&err, NLMSG_DATA(nh), sizeof(int));
				r->error = err;
				if (nh->nlmsg_len > NLMSG_LENGTH(sizeof(int)))
					np_nl_extack(nh, (const char *)NLMSG_DATA(nh) + sizeof(int),
						     nh->nlmsg_len - NLMSG_LENGTH(sizeof(int)), r);
				return 0;
			}
			r->n_msgs++;
			if (cb)
				cb(nh, arg);
		}
	}
}

/*
 * Send one generic netlink request: @attrs/@attrs_len are raw attribute
 * bytes; NLM_F_ACK is added so that every request ends with an answer.
 * Returns 0 with @r filled, or -errno if it could not be sent / answered.
 */
static inline int np_nl_raw_request(int fd, uint16_t family, uint8_t cmd, uint16_t flags,
				    uint16_t reserved, const void *attrs, size_t attrs_len,
				    struct np_nl_reply *r,
				    void (*cb)(const struct nlmsghdr *, void *), void *arg)
{
	static __thread uint32_t seq;
	char buf[NLMSG_SPACE(GENL_HDRLEN + 1024)];
	struct nlmsghdr *nh = (struct nlmsghdr *)buf;
	struct genlmsghdr *gh = NLMSG_DATA(nh);

	memset(r, 0, sizeof(*r));
	if (attrs_len > 1024)
		return -EINVAL;
	memset(buf, 0, sizeof(buf));
	nh->nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN + attrs_len);
	nh->nlmsg_type = family;
	nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	nh->nlmsg_seq = ++seq + ((uint32_t)gettid() << 16);
	gh->cmd = cmd;
	gh->version = 1;
	gh->reserved = reserved;
	memcpy((char *)gh + GENL_HDRLEN, attrs, attrs_len);
	if (send(fd, buf, nh->nlmsg_len, 0) < 0)
		return -errno;
	return np_nl_recv(fd, nh->nlmsg_seq, r, cb, arg);
}

static void np_nl_family_cb(const struct nlmsghdr *nh, void *arg)
{
	const struct nlattr *a = (const void *)((const char *)NLMSG_DATA(nh) + GENL_HDRLEN);
	int len = nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

	while (len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= len) {
		if (a->nla_type == CTRL_ATTR_FAMILY_ID)
			memcpy(arg, a + 1, sizeof(uint16_t));
		len -= NLA_ALIGN(a->nla_len);
		a = (const struct nlattr *)((const char *)a + NLA_ALIGN(a->nla_len));
	}
}

/* The id of generic netlink family @name, or -errno. */
static inline int np_nl_family_id(int fd, const char *name)
{
	char attrs[64];
	size_t len = 0;
	uint16_t id = 0;
	struct np_nl_reply r;
	int err;

	if (np_nl_put_attr(attrs, sizeof(attrs), &len, CTRL_ATTR_FAMILY_NAME, name,
			   strlen(name) + 1))
		return -EINVAL;
	err = np_nl_raw_request(fd, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0, 0, attrs, len, &r,
				np_nl_family_cb, &id);
	if (err)
		return err;
	if (r.error)
		return r.error;
	return id ? id : -ENOENT;
}

/* One request with at most one attribute (@alen bytes of @val); returns r.error. */
static inline int np_nl_req1(int fd, uint16_t family, uint8_t cmd, uint16_t flags,
			     uint16_t attr, const void *val, uint16_t alen,
			     struct np_nl_reply *r)
{
	char attrs[64];
	size_t len = 0;
	int err;

	if (attr && np_nl_put_attr(attrs, sizeof(attrs), &len, attr, val, alen))
		return -EINVAL;
	err = np_nl_raw_request(fd, family, cmd, flags, 0, attrs, len, r, NULL, NULL);
	return err ? err : r->error;
}

#endif /* NPROXY_NL_RAW_H */
