// SPDX-License-Identifier: GPL-2.0
/*
 * The shm regions mapped in at open (lib/net/net_shm_prefault.c): after
 * nproxy_net_open() on shm every page of the endpoint's region is in this
 * process's page tables; NPROXY_SHM_PREFAULT_MB=0, or a cap below the
 * regions' size, leaves them to fault in (a cap below them says so in a
 * debug line that names it); a file under /dev/shm that the
 * provider did not name is never touched; and data still arrives whole
 * (populating writes no byte).  Each case runs in a forked child, the
 * setting and the page tables being per process.
 */
#include "kselftest_harness.h"
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include "nproxy_test.h"
#include "self_pair.h"

#define OTHER_BYTES	(1u << 20)

/* Size and Rss (KiB) of the first mapping whose path has prefix, from smaps. */
static int mapping_kb(const char *prefix, unsigned long *size_kb, unsigned long *rss_kb)
{
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");
	bool in = false, found = false;

	*size_kb = *rss_kb = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		/* A mapping's first line, "lo-hi perms offset dev inode [path]",
		 * starts with a lower-case hex digit; its fields ("Rss:") with a
		 * capital. */
		if (isxdigit((unsigned char)line[0]) && !isupper((unsigned char)line[0])) {
			if (found)
				break;
			in = path && !strncmp(path, prefix, strlen(prefix));
			continue;
		}
		if (in && !strncmp(line, "Size:", 5))
			found = sscanf(line + 5, "%lu", size_kb) == 1;
		else if (in && !strncmp(line, "Rss:", 4))
			sscanf(line + 4, "%lu", rss_kb);
	}
	fclose(f);
	return found ? 0 : -1;
}

/* This process's own shm region: "/dev/shm/<pid>:". */
static int own_region_kb(unsigned long *size_kb, unsigned long *rss_kb)
{
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "/dev/shm/%d:", (int)getpid());
	return mapping_kb(prefix, size_kb, rss_kb);
}

/* Open a 1-rank shm engine with NPROXY_SHM_PREFAULT_MB=mb (NULL: unset);
 * 0 when its region is wholly mapped in (want_full) or not (!want_full). */
static int region_after_open(const char *mb, bool want_full)
{
	unsigned long size_kb, rss_kb;
	struct nproxy_net *net;

	if (mb)
		setenv("NPROXY_SHM_PREFAULT_MB", mb, 1);
	else
		unsetenv("NPROXY_SHM_PREFAULT_MB");
	net = open_single();
	if (!net)
		return 1;
	if (own_region_kb(&size_kb, &rss_kb)) {
		nproxy_net_close(net);
		return 2;
	}
	nproxy_net_close(net);
	if (size_kb < 1024)
		return 3;	/* not a provider region */
	if (want_full)
		return rss_kb == size_kb ? 0 : 4;
	return rss_kb < size_kb ? 0 : 5;
}

static int default_maps_in(void)
{
	return region_after_open(NULL, true);
}

static int zero_leaves_it(void)
{
	return region_after_open("0", false);
}

static int a_cap_below_leaves_it(void)
{
	return region_after_open("1", false);
}

static char left_line[512];

static void left_sink(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level == NPROXY_LOG_DEBUG && strstr(msg, "left to fault in"))
		snprintf(left_line, sizeof(left_line), "%s", msg);
}

/* Over the cap, a debug line says the regions were left and names the cap. */
static int a_cap_below_says_so(void)
{
	struct nproxy_net *net;

	setenv("NPROXY_SHM_PREFAULT_MB", "1", 1);
	left_line[0] = 0;
	nproxy_log_set_level(NPROXY_LOG_DEBUG);
	nproxy_log_set_sink(left_sink, NULL);
	net = open_single();
	nproxy_log_set_sink(NULL, NULL);
	if (!net)
		return 1;
	nproxy_net_close(net);
	if (!left_line[0])
		return 2;
	return strstr(left_line, "NPROXY_SHM_PREFAULT_MB=1") ? 0 : 3;
}

/* A file the provider did not name, mapped before the open, stays unmapped in. */
static int other_files_untouched(void)
{
	char path[64], prefix[64];
	unsigned long size_kb, rss_kb;
	struct nproxy_net *net;
	void *p;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/dev/shm/nproxy-prefault-test-%d", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return 1;
	unlink(path);
	if (ftruncate(fd, OTHER_BYTES))
		return 2;
	p = mmap(NULL, OTHER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return 3;
	unsetenv("NPROXY_SHM_PREFAULT_MB");
	net = open_single();
	if (!net)
		return 4;
	snprintf(prefix, sizeof(prefix), "%s", path);
	if (mapping_kb(prefix, &size_kb, &rss_kb))
		rc = 5;
	else if (rss_kb)
		rc = 6;
	else if (own_region_kb(&size_kb, &rss_kb) || rss_kb != size_kb)
		rc = 7;	/* the provider's own region was mapped in beside it */
	nproxy_net_close(net);
	munmap(p, OTHER_BYTES);
	return rc;
}

/* Populating writes nothing: a block still moves its data. */
static int data_still_arrives(void)
{
	struct nproxy_net *net;
	enum nproxy_status st;

	unsetenv("NPROXY_SHM_PREFAULT_MB");
	net = open_single();
	if (!net)
		return 1;
	for (size_t i = 0; i < 1024; i++)
		self_pair_buf[i] = (uint8_t)(i * 7 + 1);
	memset(self_pair_buf + 1024, 0, 1024);
	st = run_pair(net, 0, 1024, 1024);
	nproxy_net_close(net);
	if (st != NPROXY_SUCCESS)
		return 2;
	return memcmp(self_pair_buf, self_pair_buf + 1024, 1024) ? 3 : 0;
}

TEST(open_maps_in_the_whole_region)
{
	ASSERT_EQ(0, in_child(default_maps_in));
}

TEST(prefault_mb_0_leaves_the_region_to_fault_in)
{
	ASSERT_EQ(0, in_child(zero_leaves_it));
}

TEST(a_cap_below_the_regions_leaves_them_to_fault_in)
{
	ASSERT_EQ(0, in_child(a_cap_below_leaves_it));
}

TEST(a_cap_below_the_regions_is_logged_with_the_cap)
{
	ASSERT_EQ(0, in_child(a_cap_below_says_so));
}

TEST(files_the_provider_did_not_name_are_untouched)
{
	ASSERT_EQ(0, in_child(other_files_untouched));
}

TEST(data_arrives_whole_over_a_mapped_in_region)
{
	ASSERT_EQ(0, in_child(data_still_arrives));
}

TEST_HARNESS_MAIN
