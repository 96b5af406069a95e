// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection for tests: debugfs knobs that make the Nth allocation of
 * region creation, or the Nth program submission, fail as if the memory
 * (or the fd table) had run out, so every error path can be driven on
 * purpose.  The kernel's own fault-injection framework is not built into
 * the kernels we ship for (Debian 6.1: CONFIG_FAULT_INJECTION unset).
 *
 *   /sys/kernel/debug/nproxy/fail_region_alloc   N: the Nth allocation made
 *       while creating regions, counting from the write, fails (each
 *       creation makes NPROXY_REGION_ALLOC_STEPS of them); 0 = off
 *   /sys/kernel/debug/nproxy/fail_prog_submit    N: the Nth program
 *       submission from the write fails with -ENOMEM; 0 = off
 *   /sys/kernel/debug/nproxy/faults_injected     faults injected so far
 *
 * A knob disarms itself (reads 0) once its fault is injected.
 */
#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/limits.h>

#include "nproxy_priv.h"

static atomic_t nproxy_fail_nth[NPROXY_FAULT_NR];
static atomic64_t nproxy_faults_injected;
static struct dentry *nproxy_debugfs_dir;

/*
 * Count an armed knob down; the call that takes it from 1 to 0 fails.
 * Lock-free so that racing callers count each call exactly once.
 */
bool nproxy_fault_should_fail(enum nproxy_fault site)
{
	atomic_t *nth = &nproxy_fail_nth[site];
	int old = atomic_read(nth);

	do {
		if (old <= 0)
			return false;
	} while (!atomic_try_cmpxchg(nth, &old, old - 1));
	if (old != 1)
		return false;
	atomic64_inc(&nproxy_faults_injected);
	return true;
}

static int nproxy_fail_nth_get(void *data, u64 *val)
{
	*val = atomic_read((atomic_t *)data);
	return 0;
}

static int nproxy_fail_nth_set(void *data, u64 val)
{
	if (val > INT_MAX)
		return -EINVAL;
	atomic_set((atomic_t *)data, (int)val);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE(nproxy_fail_nth_fops, nproxy_fail_nth_get,
			 nproxy_fail_nth_set, "%llu\n");

static int nproxy_faults_injected_get(void *data, u64 *val)
{
	*val = atomic64_read(&nproxy_faults_injected);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE(nproxy_faults_injected_fops,
			 nproxy_faults_injected_get, NULL, "%llu\n");

/* debugfs errors are not fatal: the module works without the knobs. */
void nproxy_fault_init(void)
{
	nproxy_debugfs_dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file_unsafe("fail_region_alloc", 0600, nproxy_debugfs_dir,
				   &nproxy_fail_nth[NPROXY_FAULT_REGION_ALLOC],
				   &nproxy_fail_nth_fops);
	debugfs_create_file_unsafe("fail_prog_submit", 0600, nproxy_debugfs_dir,
				   &nproxy_fail_nth[NPROXY_FAULT_PROG_SUBMIT],
				   &nproxy_fail_nth_fops);
	debugfs_create_file_unsafe("faults_injected", 0400, nproxy_debugfs_dir,
				   NULL, &nproxy_faults_injected_fops);
}

void nproxy_fault_exit(void)
{
	debugfs_remove_recursive(nproxy_debugfs_dir);
}
