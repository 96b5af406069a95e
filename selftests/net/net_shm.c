// SPDX-License-Identifier: GPL-2.0
/*
 * Dead processes' shm regions (libfabric's shm provider names them
 * /dev/shm/<pid>:<uid>:<index>):
 *
 *  - one at this process's own next name (what a SIGKILLed process with
 *    the same PID leaves once PIDs wrap): a full region whose header names
 *    our PID made fi_enable fail with EBUSY, a short file made it die of
 *    SIGBUS; nproxy_net_open() removes it and opens;
 *  - nproxy_net_shm_sweep() removes the files of dead PIDs only: never a
 *    live PID's, never one a live process has mapped or open, nothing in
 *    a dry run, only one PID's with opts.pid, and no other names;
 *    a sweep gives back all the memory it took, also when its list of
 *    candidates cannot grow (a plain build has no leak checker: the
 *    heap's bytes in use are compared).
 */
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include <nproxy/fault.h>
#include <nproxy/log.h>
#include "ring_common.h"

static struct nproxy_net *open_shm(void)
{
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 0, .n_ranks = 1, .timeout_ms = 2000,
				     .provider = "shm" };
	struct nproxy_net *net = NULL;

	return nproxy_net_open(&o, &net) == NPROXY_SUCCESS ? net : NULL;
}

static char warned[512];

static void keep_warning(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= NPROXY_LOG_WARN && strstr(msg, "dead process"))
		snprintf(warned, sizeof(warned), "%s", msg);
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
	char buf[65536];
	ssize_t n;

	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			break;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return in >= 0 && out >= 0 ? 0 : -1;
}

/* In a child: its PID and every file named after it are its own. */
static int own_pid_leftovers(void)
{
	char first[64], busy[64], shortf[64];
	struct nproxy_net *a = NULL, *b = NULL, *c = NULL;
	int pid = getpid(), uid = (int)getuid(), rc = 0;

	setenv("NPROXY_NET_SHM_SWEEP", "0", 1);	/* only the open's own-name check */
	nproxy_log_set_sink(keep_warning, NULL);
	snprintf(first, sizeof(first), "/dev/shm/%d:%d:0", pid, uid);
	/* What a dead process with our PID leaves at our next two names: a
	 * live-looking region (its header holds our PID) and a short file. */
	snprintf(busy, sizeof(busy), "/dev/shm/%d:%d:1", pid, uid);
	snprintf(shortf, sizeof(shortf), "/dev/shm/%d:%d:2", pid, uid);
	a = open_shm();
	if (!a || !exists(first)) {
		rc = 10;
		goto out;
	}
	if (copy_file(first, busy)) {
		rc = 11;
		goto out;
	}
	b = open_shm();
	if (!b || !strstr(warned, busy)) {
		rc = b ? 13 : 12;
		goto out;
	}
	warned[0] = 0;
	close(open(shortf, O_WRONLY | O_CREAT | O_EXCL, 0600));
	c = open_shm();
	if (!c || !strstr(warned, shortf))
		rc = c ? 15 : 14;
out:
	nproxy_net_close(c);
	nproxy_net_close(b);
	nproxy_net_close(a);
	/* Nothing of ours is left behind (and a failed run cleans up too). */
	if (!rc && (exists(first) || exists(busy) || exists(shortf)))
		rc = 16;
	unlink(first);
	unlink(busy);
	unlink(shortf);
	return rc;
}

TEST(own_pid_leftovers_are_removed_at_open)
{
	pid_t pid = fork();
	int status;

	ASSERT_GE(pid, 0);
	if (pid == 0) {
		alarm(60);
		_exit(own_pid_leftovers());
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	/* A signal here is the SIGBUS of touching the short file. */
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("child killed by signal %d", WTERMSIG(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
}

/* A PID that does not exist now: a reaped child's. */
static int dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return kill(pid, 0) && errno == ESRCH ? (int)pid : -1;
}

struct seen {
	int n;
	char path[16][512];
	enum nproxy_shm_verdict v[16];
	int user[16];
};

static void each(const char *path, int pid, enum nproxy_shm_verdict v, int user, int err, void *arg)
{
	struct seen *s = arg;

	(void)pid;
	(void)err;
	if (s->n < 16) {
		snprintf(s->path[s->n], sizeof(s->path[0]), "%s", path);
		s->v[s->n] = v;
		s->user[s->n] = user;
		s->n++;
	}
}

static int verdict_of(const struct seen *s, const char *path)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->path[i], path))
			return (int)s->v[i];
	return -1;
}

static int user_of(const struct seen *s, const char *path)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->path[i], path))
			return s->user[i];
	return -1;
}

FIXTURE(sweep_dir)
{
	char dir[128];
	char path[8][512];
	int dead, dead_mapped, dead_open;
	void *map;
	int open_fd;
};

FIXTURE_SETUP(sweep_dir)
{
	char n[8][48];
	int fd;

	ASSERT_EQ(0, nproxy_test_tmpdir(self->dir, sizeof(self->dir), "sweep"));
	self->dead = dead_pid();
	self->dead_mapped = dead_pid();
	self->dead_open = dead_pid();
	ASSERT_GT(self->dead, 0);
	ASSERT_GT(self->dead_mapped, 0);
	ASSERT_GT(self->dead_open, 0);
	snprintf(n[0], sizeof(n[0]), "%d:0:0", self->dead);		/* garbage */
	snprintf(n[1], sizeof(n[1]), "%d:0:3_17", self->dead);	/* garbage (mmap file) */
	snprintf(n[2], sizeof(n[2]), "%d:0:0", getpid());		/* live PID */
	snprintf(n[3], sizeof(n[3]), "%d:0:0", self->dead_mapped);	/* mapped by us */
	snprintf(n[4], sizeof(n[4]), "%d:0:0", self->dead_open);	/* open in us */
	snprintf(n[5], sizeof(n[5]), "%d:0:0x", self->dead);		/* not a region name */
	snprintf(n[6], sizeof(n[6]), "nproxy-%d", self->dead);	/* not a region name */
	snprintf(n[7], sizeof(n[7]), "%d", self->dead);			/* not a region name */
	for (int i = 0; i < 8; i++) {
		snprintf(self->path[i], sizeof(self->path[i]), "%s/%s", self->dir, n[i]);
		fd = open(self->path[i], O_RDWR | O_CREAT | O_EXCL, 0600);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(0, ftruncate(fd, 4096));
		close(fd);
	}
	self->open_fd = open(self->path[4], O_RDONLY);
	ASSERT_GE(self->open_fd, 0);
	fd = open(self->path[3], O_RDWR);
	ASSERT_GE(fd, 0);
	self->map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);	/* only the mapping keeps it in use */
	ASSERT_NE(MAP_FAILED, self->map);
}

FIXTURE_TEARDOWN(sweep_dir)
{
	munmap(self->map, 4096);
	close(self->open_fd);
	for (int i = 0; i < 8; i++)
		unlink(self->path[i]);
	nproxy_test_rmtree(self->dir);
}

TEST_F(sweep_dir, dry_run_removes_nothing)
{
	struct seen s = { 0 };
	struct nproxy_shm_sweep_opts o = { .size = sizeof(o), .dir = self->dir, .dry_run = true,
					   .each = each, .arg = &s };
	uint32_t removed = 99;

	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, &removed));
	EXPECT_EQ(0u, removed);
	EXPECT_EQ(4, s.n);
	EXPECT_EQ((int)NPROXY_SHM_WOULD_REMOVE, verdict_of(&s, self->path[0]));
	EXPECT_EQ((int)NPROXY_SHM_WOULD_REMOVE, verdict_of(&s, self->path[1]));
	for (int i = 0; i < 8; i++) {
		EXPECT_TRUE(exists(self->path[i]));
	}
}

TEST_F(sweep_dir, removes_dead_pids_files_only)
{
	struct seen s = { 0 };
	struct nproxy_shm_sweep_opts o = { .size = sizeof(o), .dir = self->dir, .each = each,
					   .arg = &s };
	uint32_t removed = 0;

	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, &removed));
	EXPECT_EQ(2u, removed);
	EXPECT_FALSE(exists(self->path[0]));
	EXPECT_FALSE(exists(self->path[1]));
	/* A live PID's file is not even looked at; in-use ones are reported. */
	EXPECT_TRUE(exists(self->path[2]));
	EXPECT_EQ(-1, verdict_of(&s, self->path[2]));
	EXPECT_TRUE(exists(self->path[3]));
	EXPECT_EQ((int)NPROXY_SHM_IN_USE, verdict_of(&s, self->path[3]));
	EXPECT_EQ(getpid(), user_of(&s, self->path[3]));
	EXPECT_TRUE(exists(self->path[4]));
	EXPECT_EQ((int)NPROXY_SHM_IN_USE, verdict_of(&s, self->path[4]));
	for (int i = 5; i < 8; i++) {
		EXPECT_TRUE(exists(self->path[i]));
	}
}

TEST_F(sweep_dir, one_pid_only)
{
	struct nproxy_shm_sweep_opts o = { .size = sizeof(o), .dir = self->dir, .pid = self->dead };
	uint32_t removed = 0;

	/* A live PID asked for by name is still never touched. */
	o.pid = getpid();
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, &removed));
	EXPECT_EQ(0u, removed);
	EXPECT_TRUE(exists(self->path[2]));
	o.pid = self->dead;
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, &removed));
	EXPECT_EQ(2u, removed);
	EXPECT_TRUE(exists(self->path[3]));
	EXPECT_TRUE(exists(self->path[4]));
}

/* Twice, dry: the first call may set up what lives as long as the process. */
TEST_F(sweep_dir, a_sweep_gives_back_its_memory)
{
	struct nproxy_shm_sweep_opts o = { .size = sizeof(o), .dir = self->dir, .dry_run = true };
	size_t before;

	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, NULL));
	before = mallinfo2().uordblks;
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, NULL));
	EXPECT_EQ(before, mallinfo2().uordblks);
}

/* 17 dead regions: the list of candidates grows once, and that growth fails. */
TEST(a_sweep_out_of_memory_gives_back_its_memory)
{
	struct nproxy_shm_sweep_opts o = { .size = sizeof(o), .dry_run = true };
	char dir[256], path[320];
	int pid = dead_pid();
	size_t before;

	ASSERT_GT(pid, 0);
	ASSERT_EQ(0, nproxy_test_tmpdir(dir, sizeof(dir), "sweep-oom"));
	o.dir = dir;
	for (int i = 0; i < 17; i++) {
		snprintf(path, sizeof(path), "%s/%d:0:%d", dir, pid, i);
		close(open(path, O_RDWR | O_CREAT | O_EXCL, 0600));
	}
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, NULL));
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_fault_set("alloc:2"));
	before = mallinfo2().uordblks;
	EXPECT_EQ((int)NPROXY_RESOURCE, (int)nproxy_net_shm_sweep(&o, NULL));
	EXPECT_EQ(before, mallinfo2().uordblks);
	EXPECT_EQ(1u, nproxy_fault_injected());
	nproxy_fault_set(NULL);
	nproxy_test_rmtree(dir);
}

TEST(bad_arguments)
{
	struct nproxy_shm_sweep_opts o = { .size = sizeof(o) - 1 };

	EXPECT_EQ((int)NPROXY_INVALID, (int)nproxy_net_shm_sweep(&o, NULL));
	o.size = sizeof(o);
	o.dir = "/nonexistent/nproxy-sweep";
	EXPECT_NE((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, NULL));
}

/* The real /dev/shm: a dead PID's region there goes, through the default dir. */
TEST(dev_shm_dead_pid)
{
	struct nproxy_shm_sweep_opts o = { .size = sizeof(o) };
	char path[64];
	uint32_t removed = 0;
	int fd;

	o.pid = dead_pid();
	ASSERT_GT(o.pid, 0);
	snprintf(path, sizeof(path), "/dev/shm/%d:%d:0", o.pid, (int)getuid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	ASSERT_GE(fd, 0);
	close(fd);
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_shm_sweep(&o, &removed));
	EXPECT_EQ(1u, removed);
	EXPECT_FALSE(exists(path));
	unlink(path);
}

TEST_HARNESS_MAIN
