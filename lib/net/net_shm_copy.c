// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * How libfabric's shm provider moves a large message: one copy by the
 * receiver with process_vm_readv() (CMA), or two, through the shared
 * region's bounce buffers, that the sender and the receiver make at once
 * (SAR).  CMA copies once but pins every page of the peer's buffer as it
 * goes; where pinning is cheap (bare metal, a hypervisor with hardware
 * page tables) it wins, where it is dear SAR does.  On the VMs these
 * numbers come from, a CMA read of a process's own 1 MiB costs 3.3x a
 * memcpy of it, and a 2-rank 1 MiB allreduce takes 358-491 us over CMA
 * against 179-266 us over SAR (Open MPI's vader alike: 219 against 138
 * us with its single copy off).
 *
 * So, once per process and before libfabric reads its settings (the first
 * fi_getinfo()), NPROXY_SHM_CMA decides:
 *   auto (default)  time a CMA read of this process's own memory against
 *                   a memcpy of it; more than SHM_CMA_MAX_RATIO (1.6)
 *                   times slower: FI_SHM_DISABLE_CMA=1, else leave it on
 *   on | off        CMA on (libfabric's default) or off, unmeasured
 * A FI_SHM_DISABLE_CMA the user set wins over all of it.  The choice is
 * nproxy_net_shm_copy() (nproxy-run prints it; bench/coll_run.sh gives
 * Open MPI's vader the same single-copy mechanism).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include "common/common_internal.h"
#include "net_internal.h"

#define SHM_CMA_PROBE_BYTES	(1u << 20)
#define SHM_CMA_PROBE_ROUNDS	9
/*
 * SAR makes two copies, but on two cpus at once, plus the hand-offs of its
 * bounce buffers: CMA wins while its read costs well under two copies.  The
 * line sits below 2 because a loaded host narrows the measured gap (here:
 * 2.9-3.3x quiet, 2.0x beside a busy test suite), and the best of the
 * rounds is taken for each side for the same reason.
 */
#define SHM_CMA_MAX_RATIO	1.6

static pthread_once_t shm_copy_once = PTHREAD_ONCE_INIT;
static char shm_copy_text[96];

/* Best of a few rounds, ns, of a memcpy and of a CMA read of len bytes; 0 when CMA fails. */
static void probe(char *from, char *to, size_t len, uint64_t *memcpy_ns, uint64_t *cma_ns)
{
	struct iovec local = { .iov_base = to, .iov_len = len };
	struct iovec remote = { .iov_base = from, .iov_len = len };

	*memcpy_ns = *cma_ns = UINT64_MAX;
	for (int i = 0; i < SHM_CMA_PROBE_ROUNDS; i++) {
		uint64_t t = npx_now_ns();

		memcpy(to, from, len);
		t = npx_now_ns() - t;
		if (t < *memcpy_ns)
			*memcpy_ns = t;
		t = npx_now_ns();
		if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)len) {
			*cma_ns = 0;	/* not permitted here (seccomp, a container): libfabric finds out too */
			return;
		}
		t = npx_now_ns() - t;
		if (t < *cma_ns)
			*cma_ns = t;
	}
}

/* libfabric's false for a boolean setting (fi_param_get_bool()). */
static bool says_no(const char *v)
{
	static const char *const no[] = { "0", "false", "no", "off" };

	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (!strcasecmp(v, no[i]))
			return true;
	return false;
}

static void choose(void)
{
	static const char *const modes[] = { "auto", "on", "off" };
	const char *user = getenv("FI_SHM_DISABLE_CMA");
	uint64_t memcpy_ns, cma_ns;
	unsigned int mode;
	char *a, *b;

	if (user) {
		snprintf(shm_copy_text, sizeof(shm_copy_text), "CMA %s (FI_SHM_DISABLE_CMA=%s)",
			 says_no(user) ? "on" : "off", user);
		return;
	}
	npx_env_choice("NPROXY_SHM_CMA", modes, 3, 0, &mode);
	if (mode) {
		snprintf(shm_copy_text, sizeof(shm_copy_text), "CMA %s (NPROXY_SHM_CMA)",
			 modes[mode]);
		if (mode == 2)
			setenv("FI_SHM_DISABLE_CMA", "1", 0);
		return;
	}
	a = aligned_alloc(4096, SHM_CMA_PROBE_BYTES);
	b = aligned_alloc(4096, SHM_CMA_PROBE_BYTES);
	if (!a || !b) {
		free(a);
		free(b);
		snprintf(shm_copy_text, sizeof(shm_copy_text), "CMA on (not measured: no memory)");
		return;
	}
	memset(a, 0x5a, SHM_CMA_PROBE_BYTES);
	memset(b, 0xa5, SHM_CMA_PROBE_BYTES);
	probe(a, b, SHM_CMA_PROBE_BYTES, &memcpy_ns, &cma_ns);
	free(a);
	free(b);
	if (!cma_ns) {
		snprintf(shm_copy_text, sizeof(shm_copy_text), "CMA unavailable (process_vm_readv failed)");
		return;
	}
	if (!memcpy_ns)
		memcpy_ns = 1;
	if ((double)cma_ns > SHM_CMA_MAX_RATIO * (double)memcpy_ns)
		setenv("FI_SHM_DISABLE_CMA", "1", 0);
	snprintf(shm_copy_text, sizeof(shm_copy_text), "CMA %s (auto: a CMA read costs %.1fx a memcpy)",
		 (double)cma_ns > SHM_CMA_MAX_RATIO * (double)memcpy_ns ? "off" : "on",
		 (double)cma_ns / (double)memcpy_ns);
	nproxy_log(NPROXY_LOG_INFO, "shm: %s", shm_copy_text);
}

void npx_net_shm_pick_copy(void)
{
	pthread_once(&shm_copy_once, choose);
}

const char *nproxy_net_shm_copy(void)
{
	npx_net_shm_pick_copy();
	return shm_copy_text;
}
