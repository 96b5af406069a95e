// SPDX-License-Identifier: GPL-2.0
/*
 * The shm provider's large-message copy (nproxy_net_shm_copy(),
 * lib/net/net_shm_copy.c): NPROXY_SHM_CMA=off sets FI_SHM_DISABLE_CMA=1
 * for libfabric, on leaves it unset, a FI_SHM_DISABLE_CMA the user set is
 * never touched, auto measures and reports what it set, the choice is made
 * once per process and before nproxy_net_open()'s first fi_getinfo(), and
 * data arrives whole over either protocol; where a CMA read is refused
 * (seccomp, a container) auto says so and sets nothing.  Each case runs in
 * a forked child: the choice is per process.
 */
#include "kselftest_harness.h"
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nproxy/net.h>
#include "nproxy_test.h"

/* Run fn in a child with NPROXY_SHM_CMA=cma and FI_SHM_DISABLE_CMA=fi (NULL: unset). */
static int in_child(const char *cma, const char *fi, int (*fn)(void))
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		if (cma)
			setenv("NPROXY_SHM_CMA", cma, 1);
		else
			unsetenv("NPROXY_SHM_CMA");
		if (fi)
			setenv("FI_SHM_DISABLE_CMA", fi, 1);
		else
			unsetenv("FI_SHM_DISABLE_CMA");
		_exit(fn());
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 99;
	return WEXITSTATUS(status);
}

/* process_vm_readv() as a seccomp filter or a container answers it, for
 * the one test that sets cma_refused; libc's otherwise (the library is
 * linked in statically: this definition is the one it calls). */
static bool cma_refused;

ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long liovcnt,
			 const struct iovec *remote, unsigned long riovcnt, unsigned long flags)
{
	if (cma_refused) {
		errno = EPERM;
		return -1;
	}
	return syscall(SYS_process_vm_readv, pid, local, liovcnt, remote, riovcnt, flags);
}

static int refused_cma_is_reported(void)
{
	const char *text;

	cma_refused = true;
	text = nproxy_net_shm_copy();
	if (strcmp(text, "CMA unavailable (process_vm_readv failed)"))
		return 1;
	return getenv("FI_SHM_DISABLE_CMA") ? 2 : 0;
}

static int off_sets_the_variable(void)
{
	const char *text = nproxy_net_shm_copy();
	const char *v = getenv("FI_SHM_DISABLE_CMA");

	if (strncmp(text, "CMA off (NPROXY_SHM_CMA)", 24))
		return 1;
	return v && !strcmp(v, "1") ? 0 : 2;
}

static int on_leaves_it_unset(void)
{
	if (strncmp(nproxy_net_shm_copy(), "CMA on (NPROXY_SHM_CMA)", 23))
		return 1;
	return getenv("FI_SHM_DISABLE_CMA") ? 2 : 0;
}

static int the_users_variable_wins(void)
{
	const char *text = nproxy_net_shm_copy();
	const char *v = getenv("FI_SHM_DISABLE_CMA");

	if (!strstr(text, "CMA on") || !strstr(text, "FI_SHM_DISABLE_CMA=0"))
		return 1;
	return v && !strcmp(v, "0") ? 0 : 2;
}

/* libfabric reads "no" as false too: CMA stays on. */
static int the_users_no_wins(void)
{
	const char *text = nproxy_net_shm_copy();

	return strcmp(text, "CMA on (FI_SHM_DISABLE_CMA=No)") ? 1 : 0;
}

static int the_users_yes_wins(void)
{
	const char *text = nproxy_net_shm_copy();

	if (strcmp(text, "CMA off (FI_SHM_DISABLE_CMA=1)"))
		return 1;
	return !strcmp(getenv("FI_SHM_DISABLE_CMA"), "1") ? 0 : 2;
}

/* auto: "CMA off (auto: ...)" exactly when it set the variable. */
static int auto_reports_what_it_set(void)
{
	const char *text = nproxy_net_shm_copy();
	bool off = getenv("FI_SHM_DISABLE_CMA") != NULL;

	if (strstr(text, "CMA unavailable"))
		return off ? 1 : 0;
	if (!strstr(text, "(auto: a CMA read costs "))
		return 2;
	return !strncmp(text, off ? "CMA off" : "CMA on", off ? 7 : 6) ? 0 : 3;
}

/* Decided once: a later change of NPROXY_SHM_CMA changes nothing. */
static int decided_once(void)
{
	const char *first = nproxy_net_shm_copy();

	setenv("NPROXY_SHM_CMA", "on", 1);
	if (strcmp(first, nproxy_net_shm_copy()))
		return 1;
	return getenv("FI_SHM_DISABLE_CMA") ? 0 : 2;
}

/* nproxy_net_open() decides before libfabric reads its settings. */
static int open_decides(void)
{
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 0, .n_ranks = 1,
				     .provider = "shm" };
	struct nproxy_net *net = NULL;
	const char *v;

	if (nproxy_net_open(&o, &net) != NPROXY_SUCCESS)
		return 1;
	v = getenv("FI_SHM_DISABLE_CMA");
	nproxy_net_close(net);
	return v && !strcmp(v, "1") ? 0 : 2;
}

TEST(off_sets_fi_shm_disable_cma)
{
	ASSERT_EQ(0, in_child("off", NULL, off_sets_the_variable));
}

TEST(on_leaves_cma_to_libfabric)
{
	ASSERT_EQ(0, in_child("on", NULL, on_leaves_it_unset));
}

TEST(a_fi_shm_disable_cma_of_the_user_wins)
{
	ASSERT_EQ(0, in_child("off", "0", the_users_variable_wins));
	ASSERT_EQ(0, in_child("off", "No", the_users_no_wins));
	ASSERT_EQ(0, in_child("on", "1", the_users_yes_wins));
}

TEST(auto_reports_what_it_chose)
{
	ASSERT_EQ(0, in_child(NULL, NULL, auto_reports_what_it_set));
	ASSERT_EQ(0, in_child("auto", NULL, auto_reports_what_it_set));
}

TEST(auto_where_a_cma_read_is_refused_says_so_and_sets_nothing)
{
	ASSERT_EQ(0, in_child(NULL, NULL, refused_cma_is_reported));
}

TEST(the_choice_is_made_once_per_process)
{
	ASSERT_EQ(0, in_child("off", NULL, decided_once));
}

TEST(open_chooses_before_libfabric_reads_its_settings)
{
	ASSERT_EQ(0, in_child("off", NULL, open_decides));
}

TEST_HARNESS_MAIN
