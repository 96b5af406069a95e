// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl: naming regions on the command line.
 *
 * A region is an anonymous-inode fd owned by the process that created it;
 * it has no path.  The CLI names it by its region id (or PID:FD) and takes
 * a duplicate of the owner's fd with pidfd_getfd(2), then confirms the
 * match with NPROXY_IOC_GET_STATE.  Operating on the duplicate is exactly
 * operating on the owner's region: same file, same pages.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "cli.h"
#include "ctl.h"
#include "json_writer.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

int ctl_errno_exit(int err, const char *what)
{
	switch (err) {
	case ENOENT:
	case ENODEV:
	case ENXIO:
		ctl_err("%s: %s not found: is nproxy.ko loaded? (modprobe nproxy)",
			what, CTL_DEV_PATH);
		return -CTL_NO_MODULE;
	case EACCES:
	case EPERM:
		ctl_err("%s: permission denied (need root, or access to %s / CAP_NET_ADMIN for admin commands)",
			what, CTL_DEV_PATH);
		return -CTL_DENIED;
	default:
		ctl_err("%s: %s", what, strerror(err));
		return -CTL_FAIL;
	}
}

int ctl_open_dev(void)
{
	int fd = open(CTL_DEV_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return ctl_errno_exit(errno, "open " CTL_DEV_PATH);
	return fd;
}

static int dup_remote_fd(pid_t pid, int fd, int *err)
{
	int pidfd = syscall(SYS_pidfd_open, pid, 0);
	int out;

	if (pidfd < 0) {
		*err = errno;
		return -1;
	}
	out = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	*err = errno;
	close(pidfd);
	return out;
}

/* Does /proc/PID/fd/FD look like an nproxy region (anon inode named nproxy*)? */
static int is_region_link(pid_t pid, const char *fdname)
{
	char path[300], link[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)pid, fdname);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return 0;
	link[n] = '\0';
	return !strncmp(link, "anon_inode:", 11) && strstr(link, "nproxy");
}

static int get_state(int fd, struct nproxy_region_state *st)
{
	memset(st, 0, sizeof(*st));
	return ioctl(fd, NPROXY_IOC_GET_STATE, st);
}

/* Search one process for region `id`; fd or -1 (with *err set on access problems). */
static int search_pid(pid_t pid, uint32_t id, struct nproxy_region_state *st, int *err)
{
	char dirpath[64];
	struct dirent *de;
	DIR *d;
	int found = -1;

	snprintf(dirpath, sizeof(dirpath), "/proc/%d/fd", (int)pid);
	d = opendir(dirpath);
	if (!d) {
		if (errno == EACCES)
			*err = EACCES;
		return -1;
	}
	while ((de = readdir(d)) && found < 0) {
		int fd, e;

		if (!isdigit((unsigned char)de->d_name[0]) || !is_region_link(pid, de->d_name))
			continue;
		fd = dup_remote_fd(pid, atoi(de->d_name), &e);
		if (fd < 0) {
			if (e == EPERM || e == EACCES)
				*err = EPERM;
			continue;
		}
		if (!get_state(fd, st) && st->region_id == id)
			found = fd;
		else
			close(fd);
	}
	closedir(d);
	return found;
}

static int owner_cb(const struct ctl_attrs *a, void *arg)
{
	uint64_t *io = arg;	/* io[0]: id in, io[1]: owner out */

	if (a->present[NPROXY_A_REGION_ID] && a->val[NPROXY_A_REGION_ID] == io[0] &&
	    a->present[NPROXY_A_OWNER_PID])
		io[1] = a->val[NPROXY_A_OWNER_PID];
	return 0;
}

int ctl_region_open(const char *spec, struct nproxy_region_state *st)
{
	const char *colon = strchr(spec, ':');
	int fd = -1, err = 0;

	if (colon) {
		char pid_text[16];
		uint32_t rfd;
		int pid;

		if ((size_t)(colon - spec) >= sizeof(pid_text))
			goto bad;
		snprintf(pid_text, sizeof(pid_text), "%.*s", (int)(colon - spec), spec);
		if (cli_parse_pid("PID", pid_text, &pid, NULL, 0) ||
		    cli_parse_u32("FD", colon + 1, 0, INT32_MAX, &rfd, NULL, 0))
			goto bad;
		fd = dup_remote_fd((pid_t)pid, (int)rfd, &err);
		if (fd < 0) {
			char what[64];

			snprintf(what, sizeof(what), "region %s", spec);
			if (err == ESRCH || err == EBADF) {
				ctl_err("%s: no such process or fd", what);
				return -CTL_FAIL;
			}
			return ctl_errno_exit(err, what);
		}
		if (get_state(fd, st)) {
			err = errno;
			close(fd);
			ctl_err("region %s: fd is not an nproxy region (%s)", spec, strerror(err));
			return -CTL_FAIL;
		}
		return fd;
	} else {
		uint32_t id = 0;
		bool id_ok = !cli_parse_u32("REGION", spec, 0, UINT32_MAX, &id, NULL, 0);
		uint64_t io[2] = { id, 0 };
		struct ctl_nl *nl;
		DIR *d;
		struct dirent *de;

		if (!id_ok)
			goto bad;
		fd = ctl_open_dev();	/* a clear message when the module is missing */
		if (fd < 0)
			return fd;
		close(fd);
		fd = -1;
		/* The module knows the owner: ask it first. */
		if (ctl_nl_open(&nl) == 0) {
			ctl_nl_request(nl, NPROXY_CMD_GET_REGIONS, true, owner_cb, io);
			ctl_nl_close(nl);
		}
		if (io[1]) {
			fd = search_pid((pid_t)io[1], (uint32_t)id, st, &err);
			if (fd >= 0)
				return fd;
		}
		/* Fall back to every process (e.g. regions passed to another process). */
		d = opendir("/proc");
		if (!d)
			return ctl_errno_exit(errno, "/proc");
		while ((de = readdir(d)) && fd < 0) {
			if (isdigit((unsigned char)de->d_name[0]))
				fd = search_pid((pid_t)atoi(de->d_name), (uint32_t)id, st, &err);
		}
		closedir(d);
		if (fd >= 0)
			return fd;
		if (err) {
			ctl_err("region %u: not found among the fds this user may duplicate (permission denied: run as root or as the owner)",
				id);
			return -CTL_DENIED;
		}
		ctl_err("region %u: no such region (see `%s regions`)", id, ctl_prog);
		return -CTL_FAIL;
	}
bad:
	ctl_err("bad region '%s': expected a region id or PID:FD", spec);
	return -CTL_USAGE;
}
