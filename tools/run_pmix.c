// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: this process's place from the launcher's PMIx server (Open
 * MPI's mpirun, Slurm's srun --mpi=pmix, PRRTE's prterun).  Rank, job size,
 * local rank and local size are PMIx_Get()s; rank 0 reserves a free TCP port
 * on an address the others can reach and publishes "host:port" with
 * PMIx_Put() + PMIx_Commit(); a collecting PMIx_Fence() brings it to every
 * rank, which reads it back with PMIx_Get().  Then PMIx_Finalize(): the job
 * needs nothing more from the launcher.
 *
 * libpmix is loaded with dlopen() (NPROXY_PMIX_LIB, else libpmix.so.2): a
 * host without it still runs nproxy-run, and a PMIx launcher then falls back
 * to its environment variables (run_env.c).  The header comes from
 * libpmix-dev at build time, so every call is checked against the real
 * prototypes; without the header this file builds the fallback only.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "run.h"

/* The root address lives as long as the process (place->root points here). */
static char root_addr[INET_ADDRSTRLEN + 8];
/* Rank 0's hold on the published port until the rendezvous listens on it. */
static int root_port_fd = -1;

void run_pmix_release_root(void)
{
	if (root_port_fd >= 0)
		close(root_port_fd);
	root_port_fd = -1;
}

/* A PMIx server for this process: the variables every PMIx server sets for
 * the clients it starts (a batch script outside srun has none of them). */
bool run_pmix_server_here(void)
{
	return getenv("PMIX_NAMESPACE") && getenv("PMIX_RANK") &&
	       (getenv("PMIX_SERVER_URI41") || getenv("PMIX_SERVER_URI4") ||
		getenv("PMIX_SERVER_URI3") || getenv("PMIX_SERVER_URI21") ||
		getenv("PMIX_SERVER_URI2"));
}

/*
 * The IPv4 address rank 0 publishes: loopback when every rank is on this
 * host, else the address of FI_TCP_IFACE (the interface the tcp provider is
 * pinned to), else of the first interface that is up and not loopback.
 */
static int pick_root_ip(bool one_host, struct in_addr *ip, char *why, size_t why_len)
{
	const char *iface = getenv("FI_TCP_IFACE");
	struct ifaddrs *ifs, *i;
	bool found = false;

	if (one_host) {
		ip->s_addr = htonl(INADDR_LOOPBACK);
		return 0;
	}
	if (getifaddrs(&ifs) < 0) {
		snprintf(why, why_len, "getifaddrs: %s", strerror(errno));
		return -1;
	}
	for (i = ifs; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
			continue;
		if (iface ? strcmp(i->ifa_name, iface) != 0 : (i->ifa_flags & IFF_LOOPBACK) != 0)
			continue;
		*ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		found = true;
	}
	freeifaddrs(ifs);
	if (!found) {
		if (iface)
			snprintf(why, why_len, "FI_TCP_IFACE=%s has no IPv4 address that is up", iface);
		else
			snprintf(why, why_len, "the ranks span hosts but this host has no IPv4 interface that is up besides loopback");
		return -1;
	}
	return 0;
}

/* Bind a free port on ip and keep the socket (SO_REUSEADDR, never
 * listening), so no other process takes the port before the rendezvous
 * binds it with SO_REUSEADDR too. */
static int reserve_root(bool one_host, char *why, size_t why_len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	char host[INET_ADDRSTRLEN];
	int one = 1, fd;

	if (pick_root_ip(one_host, &sa.sin_addr, why, why_len))
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
		snprintf(why, why_len, "cannot reserve a port on %s: %s", host, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
	snprintf(root_addr, sizeof(root_addr), "%s:%u", host, ntohs(sa.sin_port));
	root_port_fd = fd;
	return 0;
}

#if __has_include(<pmix.h>)
#include <pmix.h>

#define ROOT_KEY	"nproxy.root"
/* Every rank reaches the fence within the launcher's start-up skew. */
#define FENCE_TIMEOUT_S	60

struct pmix_api {
	__typeof__(PMIx_Init) *init;
	__typeof__(PMIx_Finalize) *finalize;
	__typeof__(PMIx_Get) *get;
	__typeof__(PMIx_Put) *put;
	__typeof__(PMIx_Commit) *commit;
	__typeof__(PMIx_Fence) *fence;
	__typeof__(PMIx_Error_string) *error_string;
	__typeof__(PMIx_Value_destruct) *value_destruct;
};

/*
 * The library stays loaded after PMIx_Finalize(): its plugins and
 * destructors outlive the client, and unloading it buys nothing.
 */
static int load_api(struct pmix_api *api, char *why, size_t why_len)
{
	const char *path = getenv("NPROXY_PMIX_LIB");
	void *lib;

	if (!path || !*path)
		path = "libpmix.so.2";
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(why, why_len, "cannot load %s: %s", path, dlerror());
		return -1;
	}
#define SYM(field, name)						\
	do {								\
		*(void **)&api->field = dlsym(lib, #name);		\
		if (!api->field) {					\
			snprintf(why, why_len, "%s has no %s", path, #name); \
			return -1;					\
		}							\
	} while (0)
	SYM(init, PMIx_Init);
	SYM(finalize, PMIx_Finalize);
	SYM(get, PMIx_Get);
	SYM(put, PMIx_Put);
	SYM(commit, PMIx_Commit);
	SYM(fence, PMIx_Fence);
	SYM(error_string, PMIx_Error_string);
	SYM(value_destruct, PMIx_Value_destruct);
#undef SYM
	return 0;
}

static void free_value(const struct pmix_api *api, pmix_value_t *v)
{
	api->value_destruct(v);
	free(v);	/* pmix_free() is free() */
}

/* A count or index, whatever integer type this server stores it as. */
static pmix_status_t get_u32(const struct pmix_api *api, const pmix_proc_t *who,
			     const char *key, uint32_t *out)
{
	pmix_value_t *v = NULL;
	pmix_status_t rc = api->get(who, key, NULL, 0, &v);
	uint64_t x;

	if (rc != PMIX_SUCCESS)
		return rc;
	switch (v->type) {
	case PMIX_UINT32: x = v->data.uint32; break;
	case PMIX_UINT16: x = v->data.uint16; break;
	case PMIX_UINT64: x = v->data.uint64; break;
	case PMIX_UINT:	  x = v->data.uint; break;
	case PMIX_SIZE:	  x = v->data.size; break;
	case PMIX_PROC_RANK: x = v->data.rank; break;
	case PMIX_INT:	  x = v->data.integer < 0 ? UINT64_MAX : (uint64_t)v->data.integer; break;
	default:	  x = UINT64_MAX; break;
	}
	free_value(api, v);
	if (x > UINT32_MAX)
		return PMIX_ERR_BAD_PARAM;
	*out = (uint32_t)x;
	return PMIX_SUCCESS;
}

static void set_info(pmix_info_t *info, const char *key)
{
	memset(info, 0, sizeof(*info));
	snprintf(info->key, sizeof(info->key), "%s", key);
}

/* Rank 0 publishes the root address; every rank reads it after the fence. */
static int exchange_root(const struct pmix_api *api, const pmix_proc_t *me, bool one_host,
			 char *why, size_t why_len)
{
	pmix_proc_t root_proc = *me;
	pmix_info_t fence_info[2];
	pmix_value_t val, *got = NULL;
	pmix_status_t rc;

	if (me->rank == 0) {
		if (reserve_root(one_host, why, why_len))
			return -1;
		memset(&val, 0, sizeof(val));
		val.type = PMIX_STRING;
		val.data.string = root_addr;
		rc = api->put(PMIX_GLOBAL, ROOT_KEY, &val);
		if (rc == PMIX_SUCCESS)
			rc = api->commit();
		if (rc != PMIX_SUCCESS) {
			snprintf(why, why_len, "PMIx_Put of the root address: %s",
				 api->error_string(rc));
			return -1;
		}
	}
	set_info(&fence_info[0], PMIX_COLLECT_DATA);
	fence_info[0].value.type = PMIX_BOOL;
	fence_info[0].value.data.flag = true;
	set_info(&fence_info[1], PMIX_TIMEOUT);
	fence_info[1].value.type = PMIX_INT;
	fence_info[1].value.data.integer = FENCE_TIMEOUT_S;
	/* NULL procs: every process of this namespace. */
	rc = api->fence(NULL, 0, fence_info, 2);
	if (rc != PMIX_SUCCESS) {
		snprintf(why, why_len, "PMIx_Fence (every rank publishing, %d s deadline): %s",
			 FENCE_TIMEOUT_S, api->error_string(rc));
		return -1;
	}
	root_proc.rank = 0;
	rc = api->get(&root_proc, ROOT_KEY, NULL, 0, &got);
	if (rc != PMIX_SUCCESS || got->type != PMIX_STRING || !got->data.string ||
	    strlen(got->data.string) >= sizeof(root_addr)) {
		snprintf(why, why_len, "PMIx_Get of rank 0's root address: %s",
			 rc != PMIX_SUCCESS ? api->error_string(rc) : "not a host:port string");
		if (got)
			free_value(api, got);
		return -1;
	}
	if (me->rank != 0)
		snprintf(root_addr, sizeof(root_addr), "%s", got->data.string);
	free_value(api, got);
	return 0;
}

/* Between PMIx_Init and PMIx_Finalize: everything the place needs. */
static int query(const struct pmix_api *api, const pmix_proc_t *me, struct run_place *p,
		 char *why, size_t why_len)
{
	pmix_proc_t job = *me;
	uint32_t size, lrank, lsize;
	pmix_status_t rc;
	const char *what;

	job.rank = PMIX_RANK_WILDCARD;
	what = PMIX_JOB_SIZE;
	rc = get_u32(api, &job, PMIX_JOB_SIZE, &size);
	if (rc == PMIX_SUCCESS) {
		what = PMIX_LOCAL_RANK;
		rc = get_u32(api, me, PMIX_LOCAL_RANK, &lrank);
	}
	if (rc == PMIX_SUCCESS) {
		what = PMIX_LOCAL_SIZE;
		rc = get_u32(api, &job, PMIX_LOCAL_SIZE, &lsize);
	}
	if (rc != PMIX_SUCCESS) {
		snprintf(why, why_len, "PMIx_Get(%s) for rank %u of namespace %s: %s", what,
			 me->rank, me->nspace, api->error_string(rc));
		return -1;
	}
	if (!size || me->rank >= size || !lsize || lrank >= lsize || lsize > size) {
		snprintf(why, why_len, "PMIx gives rank %u of %u, local rank %u of %u: inconsistent",
			 me->rank, size, lrank, lsize);
		return -1;
	}
	p->proc_rank = me->rank;
	p->n_procs = size;
	p->local_proc = lrank;
	p->local_procs = lsize;
	/* A root given by hand wins; one process needs none. */
	if (p->root || size == 1)
		return 0;
	if (exchange_root(api, me, lsize == size, why, why_len))
		return -1;
	p->root = root_addr;
	return 0;
}

int run_pmix_place(struct run_place *p, char *why, size_t why_len)
{
	struct pmix_api api;
	pmix_proc_t me;
	pmix_status_t rc;
	int err;

	if (load_api(&api, why, why_len))
		return RUN_PMIX_UNAVAILABLE;
	memset(&me, 0, sizeof(me));
	rc = api.init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		/* Not a fallback to the environment: a failed PMIx_Init may leave
		 * libpmix's progress thread behind, and self-fork mode must not
		 * fork a process with a foreign thread in it. */
		snprintf(why, why_len, "PMIx_Init: %s: no PMIx server answers at the PMIX_SERVER_URI* address (PMIX_NAMESPACE=%s: variables left from another job? unset them, or start nproxy-run with mpirun or srun --mpi=pmix)",
			 api.error_string(rc), getenv("PMIX_NAMESPACE"));
		return RUN_PMIX_FAILED;
	}
	err = query(&api, &me, p, why, why_len);
	/* Finalize on every path: a launcher reports a client that exits
	 * without it as a failed job. */
	rc = api.finalize(NULL, 0);
	if (err) {
		run_pmix_release_root();
		return RUN_PMIX_FAILED;
	}
	if (rc != PMIX_SUCCESS) {
		snprintf(why, why_len, "PMIx_Finalize: %s", api.error_string(rc));
		run_pmix_release_root();
		return RUN_PMIX_FAILED;
	}
	p->launched = true;
	p->launcher = "pmix";
	return RUN_PMIX_OK;
}

#else /* no <pmix.h> at build time */

int run_pmix_place(struct run_place *p, char *why, size_t why_len)
{
	(void)p;
	(void)reserve_root;
	snprintf(why, why_len, "nproxy-run was built without <pmix.h> (libpmix-dev)");
	return RUN_PMIX_UNAVAILABLE;
}

#endif
