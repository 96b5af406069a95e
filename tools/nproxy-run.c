// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: the main job.  Alone, it forks --procs rank processes and
 * supervises them (a dead or stuck rank is named, the others are stopped);
 * under a launcher it is one rank of the job.  See nproxy-run(1).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/handshake.h>
#include <nproxy/net.h>
#include "run.h"

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * --bind core: forked process i runs on the i-th CPU of the set we may use
 * (round robin), as mpirun binds ranks.  Its threads -- the caller, the
 * proxy worker, the emulated device -- then hand off on one CPU, where a
 * wake-up is a context switch instead of an inter-processor interrupt.
 * Best effort: a failure leaves the process unbound, with a warning.
 */
static void bind_to_cpu(uint32_t index)
{
	cpu_set_t allowed, one;
	int n, cpu;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return;
	n = CPU_COUNT(&allowed);
	if (n <= 1)
		return;
	index %= (uint32_t)n;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		if (!index--)
			break;
	}
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		fprintf(stderr, "nproxy-run: --bind core: CPU %d: %s (running unbound)\n", cpu,
			strerror(errno));
}

static int check_world(const struct run_opts *o, uint32_t n_procs)
{
	uint32_t world = n_procs * o->ranks_per_proc;

	if (world < 2) {
		fprintf(stderr, "nproxy-run: %s needs at least 2 ranks (procs x ranks-per-proc = %u)\nTry 'nproxy-run --help'.\n",
			run_coll_name(o->coll), world);
		return RUN_EXIT_USAGE;
	}
	if (world > RUN_MAX_RANKS) {
		fprintf(stderr, "nproxy-run: %u ranks: at most %u (procs x ranks-per-proc)\nTry 'nproxy-run --help'.\n",
			world, RUN_MAX_RANKS);
		return RUN_EXIT_USAGE;
	}
	return 0;
}

/* Launched mode: progress drawn by rank 0 from a helper thread. */
struct progress_thread {
	struct run_progress prog;
	struct run_proc_record *rec;
	const struct run_opts *o;
	const struct run_place *place;
	struct run_table table;
	volatile bool stop;
};

/* Rank 0 prints its rows as its sizes finish (ranks time the same ops). */
static void *progress_main(void *arg)
{
	struct progress_thread *pt = arg;

	while (!pt->stop) {
		if (run_sizes_finished(pt->o, &pt->rec, 1) > pt->table.rows_printed) {
			run_progress_finish(&pt->prog);
			run_table_stream(&pt->table, pt->o, pt->place, &pt->rec, 1);
		}
		run_progress_update(&pt->prog, __atomic_load_n(&pt->rec->progress, __ATOMIC_ACQUIRE),
				    "");
		sleep_ms(100);
	}
	return NULL;
}

/* A provider the engine could not open: say which ones this host has. */
static void explain_provider(const char *provider, char *msg, size_t len)
{
	char avail[400], quoted[80];
	size_t n = strlen(msg);

	run_list_providers(avail, sizeof(avail));
	snprintf(quoted, sizeof(quoted), "'%s'", provider);
	if (strstr(avail, quoted))
		return;	/* it is there: the failure was something else */
	snprintf(msg + n, len - n, "; provider '%s' is not available here (libfabric offers: %s)",
		 provider, avail[0] ? avail : "none");
}

/*
 * --handshake kmod needs the module: say so before any rank starts, in the
 * user's terms (the library's log names its own option fields).
 */
static int check_handshake(const struct run_opts *o)
{
	int fd;

	if (o->handshake != NPROXY_HS_KMOD)
		return 0;
	if (access("/dev/nproxy", F_OK)) {
		fprintf(stderr, "nproxy-run: --handshake kmod: /dev/nproxy does not exist: the nproxy module is not loaded (modprobe nproxy), or use --handshake memfd or auto\n");
		return RUN_EXIT_FAILURE;
	}
	fd = open("/dev/nproxy", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "nproxy-run: --handshake kmod: cannot open /dev/nproxy: %s%s\n", strerror(errno),
			errno == EACCES || errno == EPERM ?
			" (it is root-only unless the udev rule 60-nproxy.rules gives group nproxy access: join that group)" : "");
		return RUN_EXIT_FAILURE;
	}
	close(fd);
	return 0;
}

static char crash_who[80];

static int run_launched(const struct run_opts *o, struct run_place *place)
{
	struct run_proc_record *rec = calloc(1, run_record_size(o));
	struct run_proc_record *recs[1];
	struct progress_thread pt = { .rec = rec, .o = o, .place = place };
	pthread_t tid = 0;
	double t0 = run_now();
	int code;

	if (!rec) {
		fprintf(stderr, "nproxy-run: out of memory\n");
		return RUN_EXIT_FAILURE;
	}
	code = check_world(o, place->n_procs);
	if (code) {
		free(rec);
		return code;
	}
	/* No supervisor to read the record: a crash reports itself. */
	snprintf(crash_who, sizeof(crash_who), "nproxy-run: process %u (pid %d)", place->proc_rank,
		 (int)getpid());
	run_crash_install(rec, true, crash_who);
	run_progress_init(&pt.prog, o, place->proc_rank == 0, isatty(STDERR_FILENO));
	if (place->proc_rank == 0 && !o->json)
		pthread_create(&tid, NULL, progress_main, &pt);
	code = run_job(o, place, rec);
	pt.stop = true;
	if (tid)
		pthread_join(tid, NULL);
	run_progress_finish(&pt.prog);
	if (code == RUN_EXIT_FAILURE && o->provider && strstr(rec->error, "libfabric engine"))
		explain_provider(o->provider, rec->error, sizeof(rec->error));
	if (code)
		fprintf(stderr, "nproxy-run: %s\n", rec->error[0] ? rec->error : "failed");
	/* Rank 0 reports what its process measured (ranks time the same ops). */
	if (place->proc_rank == 0) {
		recs[0] = rec;
		run_report(o, place, &pt.table, recs, 1, code, rec->error, run_now() - t0);
	}
	free(rec);
	return code;
}

struct child {
	pid_t pid;
	bool reaped;
	int status;
	double when;
};

/* "rank 3 (pid 123)" or "ranks 2-3 (process 1, pid 123)". */
static void describe_ranks(char *buf, size_t len, uint32_t p, uint32_t R, pid_t pid)
{
	if (R == 1)
		snprintf(buf, len, "rank %u (pid %d)", p, (int)pid);
	else
		snprintf(buf, len, "ranks %u-%u (process %u, pid %d)", p * R, p * R + R - 1, p,
			 (int)pid);
}

/* The dead rank's own libfabric shm regions (its PID is reaped: not reused yet). */
static void sweep_dead_rank(pid_t pid)
{
	struct nproxy_shm_sweep_opts so = { .size = sizeof(so), .pid = (int)pid };

	nproxy_net_shm_sweep(&so, NULL);
}

/*
 * Which failed process to blame.  A rank that exits RUN_EXIT_DEAD only saw a
 * peer go away; the peer that went away (by a signal, or by exiting on its
 * own error such as a timeout) is the cause, even when it was reaped second.
 */
static int culprit_weight(int st)
{
	if (WIFSIGNALED(st))
		return 3;
	if (WIFEXITED(st) && WEXITSTATUS(st) == RUN_EXIT_DEAD)
		return 1;
	return 2;
}

static int run_forked(const struct run_opts *o)
{
	uint32_t P = o->procs;
	size_t rsz = run_record_size(o);
	struct run_place place = { .launched = false, .launcher = "self", .n_procs = P,
				   .local_procs = P };
	struct run_proc_record *recs[RUN_MAX_RANKS];
	struct child kids[RUN_MAX_RANKS];
	struct run_progress prog;
	struct run_table table = { 0 };
	struct sigaction sa = { .sa_handler = on_interrupt };
	double t0 = run_now(), hard_deadline, grace_until = 0;
	char what[96], msg[700] = "";
	uint8_t *shared;
	int code, first_bad = -1;
	uint32_t alive;

	code = check_world(o, P);
	if (code)
		return code;
	snprintf(place.job_id, sizeof(place.job_id), "nproxy-run-%d-%lx", (int)getpid(),
		 (unsigned long)time(NULL));
	shared = mmap(NULL, rsz * P, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		fprintf(stderr, "nproxy-run: mmap of the results area: %s\n", strerror(errno));
		return RUN_EXIT_FAILURE;
	}
	memset(shared, 0, rsz * P);
	fflush(NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (uint32_t p = 0; p < P; p++) {
		recs[p] = (struct run_proc_record *)(shared + p * rsz);
		kids[p] = (struct child){ 0 };
		kids[p].pid = fork();
		if (kids[p].pid < 0) {
			fprintf(stderr, "nproxy-run: fork of process %u: %s\n", p, strerror(errno));
			for (uint32_t q = 0; q < p; q++)
				kill(kids[q].pid, SIGKILL);
			for (uint32_t q = 0; q < p; q++)
				waitpid(kids[q].pid, NULL, 0);
			munmap(shared, rsz * P);
			return RUN_EXIT_FAILURE;
		}
		if (kids[p].pid == 0) {
			struct sigaction dfl = { .sa_handler = SIG_DFL };

			sigaction(SIGINT, &dfl, NULL);
			sigaction(SIGTERM, &dfl, NULL);
			/* Never outlive the supervisor. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() == 1)
				_exit(RUN_EXIT_DEAD);
			if (o->bind == RUN_BIND_CORE)
				bind_to_cpu(p);
			place.proc_rank = p;
			place.local_proc = p;
			run_crash_install(recs[p], false, NULL);
			code = run_job(o, &place, recs[p]);
			recs[p]->state = code ? 2 : 1;
			/* exit(), not _exit(): stdio was flushed before fork, and
			 * sanitizer builds check this rank for leaks. */
			exit(code);
		}
	}

	/* Supervise: reap, draw progress, enforce the deadline. */
	run_progress_init(&prog, o, true, isatty(STDERR_FILENO));
	/* Ranks enforce --timeout themselves; this backstop catches a stuck one. */
	hard_deadline = t0 + o->timeout_s + 10;
	alive = P;
	while (alive) {
		uint64_t done = UINT64_MAX;
		double now = run_now();

		for (uint32_t p = 0; p < P; p++) {
			int st;

			if (kids[p].reaped)
				continue;
			if (waitpid(kids[p].pid, &st, WNOHANG) != kids[p].pid)
				continue;
			kids[p].reaped = true;
			kids[p].status = st;
			kids[p].when = now;
			alive--;
			if ((WIFEXITED(st) && WEXITSTATUS(st) == 0))
				continue;
			if (first_bad < 0 ||
			    culprit_weight(st) > culprit_weight(kids[first_bad].status))
				first_bad = (int)p;
			if (!grace_until)
				grace_until = now + 3;	/* peers notice and exit on their own */
		}
		for (uint32_t p = 0; p < P; p++) {
			uint64_t d = __atomic_load_n(&recs[p]->progress, __ATOMIC_ACQUIRE);

			if (d < done)
				done = d;
		}
		if (run_sizes_finished(o, recs, P) > table.rows_printed) {
			run_progress_finish(&prog);
			run_table_stream(&table, o, &place, recs, P);
		}
		if (alive && done != UINT64_MAX) {
			uint32_t si = prog.total ? (uint32_t)(done / (o->warmup + o->iters)) : 0;
			char sz[48] = "";

			if (si < o->n_sizes)
				snprintf(sz, sizeof(sz), "%s %llu B", run_coll_name(o->coll),
					 (unsigned long long)o->sizes[si]);
			run_progress_update(&prog, done, sz);
		}
		if (!alive)
			break;
		if (interrupted || now >= hard_deadline || (grace_until && now >= grace_until)) {
			for (uint32_t p = 0; p < P; p++)
				if (!kids[p].reaped)
					kill(kids[p].pid, SIGKILL);
			if (interrupted && !msg[0])
				snprintf(msg, sizeof(msg), "interrupted by signal %d: ranks stopped",
					 (int)interrupted);
			else if (now >= hard_deadline && !grace_until) {
				int n = snprintf(msg, sizeof(msg), "timeout after %.0f s: still running:",
						 o->timeout_s);

				for (uint32_t p = 0; p < P && n > 0 && (size_t)n < sizeof(msg); p++)
					if (!kids[p].reaped) {
						describe_ranks(what, sizeof(what), p, o->ranks_per_proc,
							       kids[p].pid);
						n += snprintf(msg + n, sizeof(msg) - n, " %s", what);
					}
			}
			for (uint32_t p = 0; p < P; p++) {
				if (kids[p].reaped)
					continue;
				waitpid(kids[p].pid, &kids[p].status, 0);
				kids[p].reaped = true;
				/* Killed by us: not the culprit. */
				kids[p].status = -1;
			}
			alive = 0;
			break;
		}
		sleep_ms(20);
	}
	run_progress_finish(&prog);

	code = RUN_EXIT_OK;
	if (msg[0] && first_bad < 0) {
		code = interrupted ? 128 + (int)interrupted : RUN_EXIT_TIMEOUT;
	} else if (first_bad >= 0) {
		int st = kids[first_bad].status;

		describe_ranks(what, sizeof(what), (uint32_t)first_bad, o->ranks_per_proc,
			       kids[first_bad].pid);
		if (WIFSIGNALED(st)) {
			char death[400];

			code = RUN_EXIT_DEAD;
			run_describe_death(recs[first_bad], WTERMSIG(st), death, sizeof(death));
			snprintf(msg, sizeof(msg), "%s %s", what, death);
		} else {
			code = WEXITSTATUS(st);
			if (code < RUN_EXIT_VERIFY || code > RUN_EXIT_FAILURE)
				code = RUN_EXIT_FAILURE;
			snprintf(msg, sizeof(msg), "%s", recs[first_bad]->error[0]
				 ? recs[first_bad]->error : "failed without a message");
		}
	}
	if (code == RUN_EXIT_FAILURE && o->provider && strstr(msg, "libfabric engine"))
		explain_provider(o->provider, msg, sizeof(msg));
	if (msg[0]) {
		fprintf(stderr, "nproxy-run: %s\n", msg);
		/* Other ranks' own view, when it adds something (e.g. who saw the death). */
		for (uint32_t p = 0; p < P; p++)
			if ((int)p != first_bad && recs[p]->error[0] && kids[p].status != -1 &&
			    !(WIFEXITED(kids[p].status) && WEXITSTATUS(kids[p].status) == 0))
				fprintf(stderr, "nproxy-run:   also: %s\n", recs[p]->error);
	}
	/* Every finished size is reported, whatever stopped the run. */
	run_report(o, &place, &table, recs, P, code, msg, run_now() - t0);
	/* A rank that died by a signal could not remove its shm regions. */
	for (uint32_t p = 0; p < P; p++)
		if (kids[p].status == -1 || WIFSIGNALED(kids[p].status))
			sweep_dead_rank(kids[p].pid);
	munmap(shared, rsz * P);
	return code;
}

int main(int argc, char **argv)
{
	struct run_opts o;
	struct run_place place;
	int code;

	code = run_parse_opts(argc, argv, &o);
	if (code)
		return code;
	code = run_detect_launcher(&place);
	if (code)
		return code;
	code = check_handshake(&o);
	if (code)
		return code;
	if (place.launched) {
		if (o.procs_given) {
			fprintf(stderr, "nproxy-run: --procs conflicts with the launcher (%s: rank %u of %u): the launcher starts the processes\n",
				place.launcher, place.proc_rank, place.n_procs);
			return RUN_EXIT_USAGE;
		}
		return run_launched(&o, &place);
	}
	if (!o.provider && !getenv("FI_PROVIDER"))
		o.provider = "shm";	/* every rank is on this host */
	return run_forked(&o);
}
