// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The process's own pid, without a system call per look.  glibc does not
 * cache getpid(), and the emulated device asks on every program step it is
 * handed ("is this region mine, or inherited across fork?"): on a virtual
 * machine whose system calls cost a microsecond that is a measurable part
 * of a small op.  The cache is dropped in the child of every fork() (a
 * pthread_atfork() handler), so a child asks the kernel again.
 */
#include <pthread.h>
#include <unistd.h>
#include "common_internal.h"

static pid_t self_pid;
static pthread_once_t self_pid_once = PTHREAD_ONCE_INIT;

/* In the child, before fork() returns: it has one thread, the caller. */
static void self_pid_forget(void)
{
	__atomic_store_n(&self_pid, 0, __ATOMIC_RELAXED);
}

static void self_pid_register(void)
{
	pthread_atfork(NULL, NULL, self_pid_forget);
}

pid_t npx_self_pid(void)
{
	pid_t pid = __atomic_load_n(&self_pid, __ATOMIC_RELAXED);

	if (pid)
		return pid;
	pthread_once(&self_pid_once, self_pid_register);
	pid = getpid();
	__atomic_store_n(&self_pid, pid, __ATOMIC_RELAXED);
	return pid;
}
