// SPDX-License-Identifier: GPL-2.0
/*
 * proxy_thread_count: worker threads ("proxy-*" in /proc/self/task) for
 * 1, 4 and 16 comms, one per device index, at 1 and 4 ranks per proxy --
 * against the per-comm design (one thread per comm) as the baseline.
 * Also reports what a comm_init costs when it creates a group (thread
 * start) vs when it joins one (refcount only).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"

int main(void)
{
	static const unsigned int n_comms[] = { 1, 4, 16 }, rpps[] = { 1, 4 };
	uint64_t create_ns = 0, join_ns = 0, n_create = 0, n_join = 0;
	size_t a, b;

	printf("| comms | ranks/proxy | groups | proxy threads | per-comm design |\n");
	printf("|-------|-------------|--------|---------------|-----------------|\n");
	for (b = 0; b < sizeof(rpps) / sizeof(rpps[0]); b++) {
		for (a = 0; a < sizeof(n_comms) / sizeof(n_comms[0]); a++) {
			struct nproxy_comm *c[16];
			unsigned int i, n = n_comms[a];

			for (i = 0; i < n; i++) {
				struct nproxy_comm_opts o;
				uint32_t before = nproxy_proxy_group_count();
				uint64_t t0;

				memset(&o, 0, sizeof(o));
				o.size = sizeof(o);
				o.n_ranks = 1;
				o.device_index = i;
				o.ranks_per_proxy = rpps[b];
				o.flags = NPROXY_COMM_F_SKIP_NET;
				t0 = nproxy_test_now_ns();
				if (nproxy_comm_open(&o, &c[i]))
					return 1;
				t0 = nproxy_test_now_ns() - t0;
				if (nproxy_proxy_group_count() > before) {
					create_ns += t0;
					n_create++;
				} else {
					join_ns += t0;
					n_join++;
				}
			}
			printf("| %5u | %11u | %6u | %13d | %15u |\n", n, rpps[b],
			       nproxy_proxy_group_count(), nproxy_test_count_threads_named("proxy-", true), n);
			for (i = 0; i < n; i++)
				nproxy_comm_close(c[i]);
		}
	}
	printf("\ncomm_init: creating a group (thread start) %.1f us avg over %llu, "
	       "joining one (refcount) %.2f us avg over %llu\n",
	       n_create ? create_ns / 1e3 / n_create : 0.0, (unsigned long long)n_create,
	       n_join ? join_ns / 1e3 / n_join : 0.0, (unsigned long long)n_join);
	return 0;
}
