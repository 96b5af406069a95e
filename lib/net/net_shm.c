// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libfabric's shm provider keeps each endpoint's region in a tmpfs file
 * named after the process: /dev/shm/<pid>:<uid>:<index> (index counts the
 * process's shm endpoints from 0).  A process that dies by SIGKILL -- an
 * OOM kill, a supervisor's kill -- cannot remove its files, and once PIDs
 * wrap (pid_max is often 32768) a later process with the same PID finds
 * one at its own name: libfabric then refuses the endpoint (fi_enable:
 * EBUSY, because the region's header names a live PID: ours) or, for a
 * file shorter than the header, dies of SIGBUS reading it.
 *
 * Two things here:
 *  - npx_net_shm_clear_own(): between fi_endpoint() and fi_enable(), a file at
 *    this endpoint's name can only be a dead process's (the name holds our
 *    PID and an index no endpoint of ours has used yet): remove it.
 *  - nproxy_net_shm_sweep(): remove the files of PIDs that no longer exist
 *    and that no live process has open or mapped; never a live process's.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/fi_cm.h>
#include <nproxy/log.h>
#include "common/common_internal.h"
#include "net_internal.h"

#define SHM_DIR		"/dev/shm"
#define SHM_SCHEME	"fi_shm://"

/* Digits, then `stop`; returns the position after stop or NULL. */
static const char *digits_then(const char *s, char stop, long *val)
{
	char *end;

	if (!isdigit((unsigned char)*s))
		return NULL;
	errno = 0;
	*val = strtol(s, &end, 10);
	if (errno || *end != stop)
		return NULL;
	return end + 1;
}

/*
 * "<pid>:<uid>:<index>", optionally "_<n>" (the provider's per-message
 * mmap files carry the endpoint name as a prefix): the pid, or -1 for any
 * other name (never ours to touch).
 */
long npx_net_shm_name_pid(const char *name)
{
	const char *p = name;
	long pid, uid, idx;
	char *end;

	p = digits_then(p, ':', &pid);
	if (p)
		p = digits_then(p, ':', &uid);
	if (!p || !isdigit((unsigned char)*p))
		return -1;
	idx = strtol(p, &end, 10);
	(void)idx;
	if (*end == '_') {
		if (!isdigit((unsigned char)end[1]))
			return -1;
		strtol(end + 1, &end, 10);
	}
	if (*end || pid <= 0 || pid > 0x3fffffff || uid < 0)
		return -1;
	return pid;
}

void npx_net_shm_clear_own(struct nproxy_net *net)
{
	char name[256], path[sizeof(SHM_DIR) + 256];
	size_t len = sizeof(name);
	const char *base;

	if (strcmp(net->prov, "shm") || fi_getname(&net->ep->fid, name, &len) ||
	    len > sizeof(name))
		return;
	name[sizeof(name) - 1] = 0;
	base = strncmp(name, SHM_SCHEME, strlen(SHM_SCHEME)) ? name : name + strlen(SHM_SCHEME);
	/* Only a name the provider derived from our PID (not a chosen one). */
	if (npx_net_shm_name_pid(base) != (long)getpid() || strchr(base, '_'))
		return;
	snprintf(path, sizeof(path), SHM_DIR "/%s", base);
	if (unlink(path) == 0)
		nproxy_log(NPROXY_LOG_WARN,
			   "net rank %u: removed %s, left by a dead process that had our pid %d (it would make fi_enable fail or crash)",
			   net->rank, path, (int)getpid());
	else if (errno != ENOENT)
		nproxy_log(NPROXY_LOG_WARN,
			   "net rank %u: %s is left by a dead process that had our pid %d, and cannot be removed: %s",
			   net->rank, path, (int)getpid(), strerror(errno));
}

static bool pid_alive(long pid)
{
	/* EPERM: it exists, it is just not ours. */
	return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

struct sweep_cand {
	char name[256];
	long pid;
	long user;		/* a live process that has it open or mapped, or 0 */
};

/* Does `line` (a /proc/PID/maps line) map `path`? */
static bool maps_line_is(const char *line, const char *path)
{
	const char *p = strchr(line, '/');
	size_t n = strlen(path);

	return p && !strncmp(p, path, n) && (p[n] == '\n' || p[n] == 0 || p[n] == ' ');
}

/*
 * Who still uses a candidate: every process's mappings and open files.
 * A process we cannot inspect counts as using nothing we can see; the
 * PID check already spared every process in our PID namespace.
 */
static void find_users(const char *dir, struct sweep_cand *c, size_t n)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;

	if (!proc)
		return;
	while ((de = readdir(proc))) {
		long pid = strtol(de->d_name, NULL, 10);
		char file[64], line[512], link[512], target[512];
		struct dirent *fde;
		DIR *fds;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(file, sizeof(file), "/proc/%ld/maps", pid);
		f = fopen(file, "re");
		while (f && fgets(line, sizeof(line), f)) {
			if (!strstr(line, dir))
				continue;
			for (size_t i = 0; i < n; i++) {
				char path[512];

				snprintf(path, sizeof(path), "%s/%s", dir, c[i].name);
				if (!c[i].user && maps_line_is(line, path))
					c[i].user = pid;
			}
		}
		if (f)
			fclose(f);
		snprintf(file, sizeof(file), "/proc/%ld/fd", pid);
		fds = opendir(file);
		while (fds && (fde = readdir(fds))) {
			ssize_t len;

			if (fde->d_name[0] == '.')
				continue;
			snprintf(link, sizeof(link), "%s/%s", file, fde->d_name);
			len = readlink(link, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = 0;
			for (size_t i = 0; i < n; i++) {
				char path[512];

				snprintf(path, sizeof(path), "%s/%s", dir, c[i].name);
				if (!c[i].user && !strncmp(target, path, strlen(path)))
					c[i].user = pid;
			}
		}
		if (fds)
			closedir(fds);
	}
	closedir(proc);
}

NPROXY_API enum nproxy_status nproxy_net_shm_sweep(const struct nproxy_shm_sweep_opts *o,
						   uint32_t *n_removed)
{
	const char *dir = o && o->dir ? o->dir : SHM_DIR;
	struct sweep_cand *c = NULL;
	size_t n = 0, cap = 0;
	uint32_t removed = 0;
	struct dirent *de;
	DIR *d;

	if (n_removed)
		*n_removed = 0;
	if (o && NPX_OPTS_CHECK(o, "shm sweep"))
		return NPROXY_INVALID;
	d = opendir(dir);
	if (!d) {
		nproxy_log(NPROXY_LOG_WARN, "shm sweep: cannot read %s: %s", dir, strerror(errno));
		return errno == EACCES ? NPROXY_PERM : NPROXY_INVALID;
	}
	while ((de = readdir(d))) {
		long pid = npx_net_shm_name_pid(de->d_name);

		if (pid < 0 || (o && o->pid && pid != o->pid) || pid_alive(pid))
			continue;
		if (strlen(de->d_name) >= sizeof(c->name))
			continue;
		if (n == cap) {
			struct sweep_cand *bigger = realloc(c, (cap ? 2 * cap : 16) * sizeof(*c));

			if (!bigger) {
				closedir(d);
				free(c);
				return NPROXY_RESOURCE;
			}
			c = bigger;
			cap = cap ? 2 * cap : 16;
		}
		snprintf(c[n].name, sizeof(c[n].name), "%s", de->d_name);
		c[n].pid = pid;
		c[n].user = 0;
		n++;
	}
	closedir(d);
	if (n)
		find_users(dir, c, n);
	for (size_t i = 0; i < n; i++) {
		enum nproxy_shm_verdict v;
		char path[512];
		int err = 0;

		snprintf(path, sizeof(path), "%s/%s", dir, c[i].name);
		if (c[i].user) {
			v = NPROXY_SHM_IN_USE;
		} else if (pid_alive(c[i].pid)) {
			/* The PID came back while we looked: its name again. */
			v = NPROXY_SHM_IN_USE;
		} else if (o && o->dry_run) {
			v = NPROXY_SHM_WOULD_REMOVE;
		} else if (unlink(path) == 0 || errno == ENOENT) {
			v = NPROXY_SHM_REMOVED;
			removed++;
		} else {
			v = NPROXY_SHM_FAILED;
			err = errno;
		}
		if (o && o->each)
			o->each(path, (int)c[i].pid, v, (int)c[i].user, err, o->arg);
	}
	free(c);
	if (n_removed)
		*n_removed = removed;
	return NPROXY_SUCCESS;
}

NPROXY_API const char *nproxy_shm_verdict_str(enum nproxy_shm_verdict v)
{
	switch (v) {
	case NPROXY_SHM_REMOVED: return "removed";
	case NPROXY_SHM_WOULD_REMOVE: return "would remove";
	case NPROXY_SHM_IN_USE: return "kept (in use)";
	case NPROXY_SHM_FAILED: return "cannot remove";
	}
	return "?";
}

/* At shm engine open: other dead processes' regions, unless turned off. */
void npx_net_shm_sweep_at_open(struct nproxy_net *net)
{
	uint32_t removed = 0;
	bool sweep;

	if (strcmp(net->prov, "shm"))
		return;
	npx_env_bool("NPROXY_NET_SHM_SWEEP", true, &sweep);
	if (!sweep)
		return;
	if (nproxy_net_shm_sweep(NULL, &removed) == NPROXY_SUCCESS && removed)
		nproxy_log(NPROXY_LOG_INFO, "net rank %u: removed %u shm region(s) of dead processes from " SHM_DIR,
			   net->rank, removed);
}
