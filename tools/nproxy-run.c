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
#include "ctl.h"
#include "ctl_proxy.h"
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

/*
 * The job's limit is the engine's (NPROXY_NET_MAX_RANKS); the ranks on one
 * host are limited by the bananaphone bus (RUN_MAX_RANKS).  local_procs:
 * this host's processes (the fork path: all of them).
 */
static int check_world(const struct run_opts *o, uint32_t n_procs, uint32_t local_procs)
{
	uint32_t world = n_procs * o->ranks_per_proc;
	uint32_t local = (local_procs ? local_procs : 1) * o->ranks_per_proc;

	if (world < 2 && o->nccl.on) {
		return run_usage_error("%s needs at least 2 ranks: -g/-t give the ranks of each process (here %u), --procs or a launcher the processes (here %u)",
				       o->nccl.prog, o->ranks_per_proc, n_procs);
	}
	if (world < 2) {
		return run_usage_error("%s needs at least 2 ranks (procs x ranks-per-proc = %u)",
				       run_coll_name(o->coll), world);
	}
	if (world > NPROXY_NET_MAX_RANKS) {
		return run_usage_error("%u ranks: at most %u in a job (procs x ranks-per-proc)",
				       world, NPROXY_NET_MAX_RANKS);
	}
	if (local > RUN_MAX_RANKS) {
		return run_usage_error("%u ranks on this host: at most %u (the local bus)", local,
				       RUN_MAX_RANKS);
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
	code = check_world(o, place->n_procs, place->local_procs);
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
	run_pmix_release_root();
	pt.stop = true;
	if (tid)
		pthread_join(tid, NULL);
	run_progress_finish(&pt.prog);
	if (code == RUN_EXIT_FAILURE && o->provider && strstr(rec->error, "provider"))
		explain_provider(o->provider, rec->error, sizeof(rec->error));
	if (code)
		fprintf(stderr, "nproxy-run: %s\n", rec->error[0] ? rec->error : "failed");
	/* Rank 0 reports what its process measured (ranks time the same ops). */
	if (place->proc_rank == 0) {
		recs[0] = rec;
		run_report(o, place, &pt.table, recs, 1, code, rec->error, run_now() - t0);
	}
	run_crash_forget();
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

/* The self-fork supervisor's view of the job. */
struct supervisor {
	const struct run_opts *o;
	uint32_t P;
	struct run_place place;
	uint8_t *shared;		/* P records of rsz bytes, shared with the ranks */
	size_t rsz;
	struct run_proc_record *recs[RUN_MAX_RANKS];
	struct child kids[RUN_MAX_RANKS];
	uint32_t alive;
	int first_bad;			/* the process to blame, or -1 */
	struct run_progress prog;
	struct run_table table;
	double t0, hard_deadline, grace_until;
	bool teardown_grace;		/* the deadline moved once: every rank tears down */
	char msg[700];			/* why the run stopped, "" if it did not */
	/* Near the deadline: who stalled, and who only waits (see watch_hang). */
	double next_hang_look;
	size_t hang_culprits;
	char stalled[1400], victims[1400];
};

/*
 * The signals that end a job from outside.  A terminal sends them to the
 * whole process group, so each rank receives its own copy: a rank must not
 * die of it (the supervisor would blame it), so ranks keep them blocked
 * from fork on and the supervisor, which gets the same signal, stops them.
 */
static void job_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

/*
 * In a rank: a job signal sent to this process alone (kill PID) is handed
 * to the supervisor, so it ends the job as an interrupt instead of being
 * lost; the copy a group-wide signal also gave the supervisor is harmless.
 */
static pid_t supervisor_pid;

static void *forward_job_signals(void *arg)
{
	sigset_t set;
	int sig;

	(void)arg;
	job_signals(&set);
	for (;;)
		/* Reparented (the supervisor is gone): PDEATHSIG ends us anyway. */
		if (!sigwait(&set, &sig) && getppid() == supervisor_pid)
			kill(supervisor_pid, sig);
	return NULL;
}

/* In the child: one process of the job, never returning. */
static void run_child(struct supervisor *sv, uint32_t p)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	pthread_attr_t attr;
	pthread_t fwd;
	int code;

	/* Still blocked (fork_ranks): every thread of the rank inherits that. */
	sigaction(SIGINT, &dfl, NULL);
	sigaction(SIGTERM, &dfl, NULL);
	sigaction(SIGHUP, &dfl, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!pthread_create(&fwd, &attr, forward_job_signals, NULL))
		pthread_setname_np(fwd, "nproxy-sigfwd");
	pthread_attr_destroy(&attr);
	/* Never outlive the supervisor. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(RUN_EXIT_DEAD);
	if (sv->o->bind == RUN_BIND_CORE)
		bind_to_cpu(p);
	sv->place.proc_rank = p;
	sv->place.local_proc = p;
	run_crash_install(sv->recs[p], false, NULL);
	code = run_job(sv->o, &sv->place, sv->recs[p]);
	sv->recs[p]->state = code ? 2 : 1;
	/* exit(), not _exit(): stdio was flushed before fork, and
	 * sanitizer builds check this rank for leaks. */
	exit(code);
}

/* The shared records, then one child per process; a run_exit code. */
static int fork_ranks(struct supervisor *sv)
{
	sigset_t job_set, old_mask;

	sv->shared = mmap(NULL, sv->rsz * sv->P, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sv->shared == MAP_FAILED) {
		fprintf(stderr, "nproxy-run: mmap of the results area: %s\n", strerror(errno));
		return RUN_EXIT_FAILURE;
	}
	memset(sv->shared, 0, sv->rsz * sv->P);
	fflush(NULL);
	/* Ranks are born with the job signals blocked (see job_signals). */
	supervisor_pid = getpid();
	job_signals(&job_set);
	sigprocmask(SIG_BLOCK, &job_set, &old_mask);
	for (uint32_t p = 0; p < sv->P; p++) {
		sv->recs[p] = (struct run_proc_record *)(sv->shared + p * sv->rsz);
		sv->kids[p] = (struct child){ 0 };
		sv->kids[p].pid = fork();
		if (sv->kids[p].pid == 0)
			run_child(sv, p);
		if (sv->kids[p].pid > 0)
			continue;
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		fprintf(stderr, "nproxy-run: fork of process %u: %s\n", p, strerror(errno));
		for (uint32_t q = 0; q < p; q++)
			kill(sv->kids[q].pid, SIGKILL);
		for (uint32_t q = 0; q < p; q++)
			waitpid(sv->kids[q].pid, NULL, 0);
		munmap(sv->shared, sv->rsz * sv->P);
		return RUN_EXIT_FAILURE;
	}
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	return RUN_EXIT_OK;
}

/* Reap whoever exited; remember the one to blame. */
static void reap_ranks(struct supervisor *sv, double now)
{
	for (uint32_t p = 0; p < sv->P; p++) {
		struct child *k = &sv->kids[p];
		int st;

		if (k->reaped || waitpid(k->pid, &st, WNOHANG) != k->pid)
			continue;
		k->reaped = true;
		k->status = st;
		k->when = now;
		sv->alive--;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			continue;
		if (sv->first_bad < 0 ||
		    culprit_weight(st) > culprit_weight(sv->kids[sv->first_bad].status))
			sv->first_bad = (int)p;
		if (!sv->grace_until)
			sv->grace_until = now + 3;	/* peers notice and exit on their own */
	}
}

/* New rows of the table, and the progress bar at the slowest process. */
static void draw_progress(struct supervisor *sv)
{
	const struct run_opts *o = sv->o;
	uint64_t done = UINT64_MAX;

	for (uint32_t p = 0; p < sv->P; p++) {
		uint64_t d = __atomic_load_n(&sv->recs[p]->progress, __ATOMIC_ACQUIRE);

		if (d < done)
			done = d;
	}
	if (run_sizes_finished(o, sv->recs, sv->P) > sv->table.rows_printed) {
		run_progress_finish(&sv->prog);
		run_table_stream(&sv->table, o, &sv->place, sv->recs, sv->P);
	}
	if (sv->alive && done != UINT64_MAX) {
		uint32_t si = sv->prog.total ? (uint32_t)(done / (o->warmup + o->iters)) : 0;
		char sz[48] = "";

		if (si < o->n_rows) {
			struct run_row row;

			run_row_of(o, si, &row);
			snprintf(sz, sizeof(sz), "%s %llu B", run_coll_name(o->coll),
				 (unsigned long long)row.bytes);
		}
		run_progress_update(&sv->prog, done, sz);
	}
}

/* What a rank's process was doing, as it last said (run_phase). */
static void rank_phase(const struct supervisor *sv, uint32_t p, char *buf, size_t len)
{
	size_t n = len < sizeof(sv->recs[p]->phase) ? len : sizeof(sv->recs[p]->phase);

	memcpy(buf, (const char *)sv->recs[p]->phase, n);
	buf[n - 1] = '\0';
}

/* Interrupted, past the deadline or the grace after a failure: stop them all. */
static void stop_ranks(struct supervisor *sv, double now)
{
	char what[96], phase[64];

	/*
	 * Freeze them all first: a rank still running while another is
	 * killed would see a peer die (the library checks every 10 ms) and
	 * say so, blaming a rank the supervisor stopped.
	 */
	for (uint32_t p = 0; p < sv->P; p++)
		if (!sv->kids[p].reaped)
			kill(sv->kids[p].pid, SIGSTOP);
	for (uint32_t p = 0; p < sv->P; p++)
		if (!sv->kids[p].reaped)
			kill(sv->kids[p].pid, SIGKILL);
	if (interrupted && !sv->msg[0]) {
		snprintf(sv->msg, sizeof(sv->msg), "interrupted by signal %d (SIG%s): ranks stopped",
			 (int)interrupted, sigabbrev_np(interrupted) ?: "?");
	} else if (now >= sv->hard_deadline && !sv->grace_until) {
		int n = snprintf(sv->msg, sizeof(sv->msg), "timeout after %g s: still running:",
				 sv->o->timeout_s);

		for (uint32_t p = 0; p < sv->P && n > 0 && (size_t)n < sizeof(sv->msg); p++) {
			if (sv->kids[p].reaped)
				continue;
			describe_ranks(what, sizeof(what), p, sv->o->ranks_per_proc, sv->kids[p].pid);
			rank_phase(sv, p, phase, sizeof(phase));
			n += snprintf(sv->msg + n, sizeof(sv->msg) - n, " %s%s%s%s", what,
				      phase[0] ? " (" : "", phase, phase[0] ? ")" : "");
		}
	}
	for (uint32_t p = 0; p < sv->P; p++) {
		if (sv->kids[p].reaped)
			continue;
		waitpid(sv->kids[p].pid, &sv->kids[p].status, 0);
		sv->kids[p].reaped = true;
		sv->kids[p].status = -1;	/* killed by us: not the culprit */
	}
	sv->alive = 0;
}

/*
 * In the last stretch before --timeout, while no rank has failed yet, take
 * hang-report's snapshot of the ranks every half second, so that a timeout
 * names the rank that stalled (with its evidence) instead of the first
 * rank whose wait ran out.  A snapshot naming a culprit is kept over a
 * later one that names none (the culprit may be tearing down already).
 */
static void watch_hang(struct supervisor *sv, double now)
{
	double T = sv->o->timeout_s, look_from = sv->t0 + (T - 1 > T * 0.75 ? T - 1 : T * 0.75);
	char stalled[sizeof(sv->stalled)], victims[sizeof(sv->victims)];
	size_t n;

	if (sv->first_bad >= 0 || now < look_from || now < sv->next_hang_look)
		return;
	sv->next_hang_look = now + 0.5;
	/* Stuck for a quarter of the run, at most a second: not a slow op. */
	n = ctl_hang_judge(getpid(), T / 4 < 1 ? T / 4 : 1, stalled, sizeof(stalled), victims,
			   sizeof(victims));
	if (!n && sv->hang_culprits)
		return;
	sv->hang_culprits = n;
	memcpy(sv->stalled, stalled, sizeof(stalled));
	memcpy(sv->victims, victims, sizeof(victims));
}

/*
 * At --timeout, ranks that have run every row and are only tearing down
 * are not stopped: the run is done.  Once, they get the grace a rank's own
 * waits have, and the old backstop's 10 s.
 */
static void extend_for_teardown(struct supervisor *sv, double now)
{
	char phase[64];

	if (sv->teardown_grace || now < sv->hard_deadline || interrupted)
		return;
	for (uint32_t p = 0; p < sv->P; p++) {
		if (sv->kids[p].reaped)
			continue;
		rank_phase(sv, p, phase, sizeof(phase));
		if (strcmp(phase, "teardown"))
			return;
	}
	sv->teardown_grace = true;
	sv->hard_deadline += RUN_SUPERVISED_GRACE_S + 10;
}

/* Reap, draw progress and enforce the deadline until every rank is gone. */
static void supervise(struct supervisor *sv)
{
	run_progress_init(&sv->prog, sv->o, true, isatty(STDERR_FILENO));
	/*
	 * The supervisor enforces --timeout: its ranks run RUN_SUPERVISED_GRACE_S
	 * longer, so they are frozen and stopped here, with hang-report's
	 * snapshot naming the one that stalled, before any of them gives up
	 * and makes the others report a dead peer.
	 */
	sv->hard_deadline = sv->t0 + sv->o->timeout_s;
	sv->alive = sv->P;
	while (sv->alive) {
		double now = run_now();

		reap_ranks(sv, now);
		draw_progress(sv);
		if (!sv->alive)
			break;
		watch_hang(sv, now);
		extend_for_teardown(sv, now);
		if (interrupted || now >= sv->hard_deadline ||
		    (sv->grace_until && now >= sv->grace_until)) {
			stop_ranks(sv, now);
			break;
		}
		sleep_ms(20);
	}
	run_progress_finish(&sv->prog);
}

/* A timeout with a culprit: "timeout after 10 s: rank 1 (pid 42) stalled: ..."
 * (the first stalled rank; the others follow with the victims). */
static void name_stalled(struct supervisor *sv)
{
	char *nl = strchr(sv->stalled, '\n');
	size_t first = nl ? (size_t)(nl - sv->stalled) : strlen(sv->stalled);

	snprintf(sv->msg, sizeof(sv->msg), "timeout after %g s: %.*s", sv->o->timeout_s,
		 (int)first, sv->stalled);
	memmove(sv->stalled, sv->stalled + first + (nl ? 1 : 0),
		strlen(sv->stalled + first + (nl ? 1 : 0)) + 1);
}

/* The job's exit status, and sv->msg naming the culprit. */
static int verdict(struct supervisor *sv)
{
	char what[96], death[400];
	int code, st;

	if (sv->first_bad < 0) {
		if (!sv->msg[0])
			return RUN_EXIT_OK;
		if (interrupted)
			return 128 + (int)interrupted;
		if (sv->hang_culprits)
			name_stalled(sv);
		return RUN_EXIT_TIMEOUT;
	}
	st = sv->kids[sv->first_bad].status;
	describe_ranks(what, sizeof(what), (uint32_t)sv->first_bad, sv->o->ranks_per_proc,
		       sv->kids[sv->first_bad].pid);
	if (WIFSIGNALED(st)) {
		run_describe_death(sv->recs[sv->first_bad], WTERMSIG(st), death, sizeof(death));
		snprintf(sv->msg, sizeof(sv->msg), "%s %s", what, death);
		return RUN_EXIT_DEAD;
	}
	code = WEXITSTATUS(st);
	if (code < RUN_EXIT_VERIFY || code > RUN_EXIT_FAILURE)
		code = RUN_EXIT_FAILURE;
	if (code == RUN_EXIT_TIMEOUT && sv->hang_culprits) {
		name_stalled(sv);
		return code;
	}
	snprintf(sv->msg, sizeof(sv->msg), "%s", sv->recs[sv->first_bad]->error[0]
		 ? sv->recs[sv->first_bad]->error : "failed without a message");
	return code;
}

/* The culprit's message, then other ranks' own view when it adds something
 * (e.g. who saw the death). */
static void print_lines(const char *prefix, const char *lines)
{
	const char *nl;

	for (; *lines; lines = nl + 1) {
		nl = strchr(lines, '\n');
		if (!nl) {
			fprintf(stderr, "%s%s\n", prefix, lines);
			return;
		}
		fprintf(stderr, "%s%.*s\n", prefix, (int)(nl - lines), lines);
	}
}

static void print_errors(const struct supervisor *sv)
{
	if (!sv->msg[0])
		return;
	fprintf(stderr, "nproxy-run: %s\n", sv->msg);
	if (sv->hang_culprits) {
		print_lines("nproxy-run:   ", sv->stalled);
		print_lines("nproxy-run:   ", sv->victims);
	}
	for (uint32_t p = 0; p < sv->P; p++) {
		const struct child *k = &sv->kids[p];

		/* Another rank that died of a signal we did not send (-1): a crash
		 * of its own, often in teardown after the culprit's death. */
		if ((int)p != sv->first_bad && k->status != -1 && WIFSIGNALED(k->status)) {
			char what[96], death[400];

			describe_ranks(what, sizeof(what), p, sv->o->ranks_per_proc, k->pid);
			run_describe_death(sv->recs[p], WTERMSIG(k->status), death, sizeof(death));
			fprintf(stderr, "nproxy-run:   also: %s %s\n", what, death);
			continue;
		}
		/* A judged timeout lists the victims: their "peer died" adds nothing. */
		if (sv->hang_culprits && WIFEXITED(k->status) &&
		    WEXITSTATUS(k->status) == RUN_EXIT_DEAD)
			continue;
		/* A judged timeout replaced the first failed rank's message: keep it. */
		if (((int)p != sv->first_bad || sv->hang_culprits) && sv->recs[p]->error[0] &&
		    k->status != -1 &&
		    !(WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0))
			fprintf(stderr, "nproxy-run:   also: %s\n", sv->recs[p]->error);
	}
}

static int run_forked(const struct run_opts *o)
{
	struct supervisor sv = {
		.o = o, .P = o->procs, .rsz = run_record_size(o), .first_bad = -1,
		.place = { .launched = false, .launcher = "self", .n_procs = o->procs,
			   .local_procs = o->procs },
		.t0 = run_now(),
	};
	struct sigaction sa = { .sa_handler = on_interrupt };
	int code = check_world(o, sv.P, sv.P);

	if (code)
		return code;
	snprintf(sv.place.job_id, sizeof(sv.place.job_id), "nproxy-run-%d-%lx", (int)getpid(),
		 (unsigned long)time(NULL));
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	code = fork_ranks(&sv);
	if (code)
		return code;
	supervise(&sv);
	code = verdict(&sv);
	if (code == RUN_EXIT_FAILURE && o->provider && strstr(sv.msg, "provider"))
		explain_provider(o->provider, sv.msg, sizeof(sv.msg));
	print_errors(&sv);
	/* Every finished size is reported, whatever stopped the run. */
	run_report(o, &sv.place, &sv.table, sv.recs, sv.P, code, sv.msg, run_now() - sv.t0);
	/* A rank that died by a signal could not remove its shm regions. */
	for (uint32_t p = 0; p < sv.P; p++)
		if (sv.kids[p].status == -1 || WIFSIGNALED(sv.kids[p].status))
			sweep_dead_rank(sv.kids[p].pid);
	munmap(sv.shared, sv.rsz * sv.P);
	return code;
}

int main(int argc, char **argv)
{
	struct run_opts o;
	struct run_place place;
	int code;

	ctl_prog = "nproxy-run";
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
			return run_usage_error("--procs conflicts with the launcher (%s: rank %u of %u): the launcher starts the processes",
					       place.launcher, place.proc_rank, place.n_procs);
		}
		return run_launched(&o, &place);
	}
	if (!o.provider && !getenv("FI_PROVIDER"))
		o.provider = "shm";	/* every rank is on this host */
	/* One choice for every forked rank (they inherit it), not one each. */
	nproxy_net_shm_copy();
	return run_forked(&o);
}
