// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl hang-report: for every job on the host (ranks grouped by their
 * launcher, the published ppid), every task that has been in flight without
 * progress for at least --min-age seconds, and the evidence of what it
 * waits for:
 *   WAITING_DEVICE_TRIGGER  the trigger words still at the sentinel and the
 *                           device program's current step (WAIT_SEM with
 *                           the semaphore's value, DELAY, ...);
 *   PROGRESSING / IDLE      the network or the host barrier: which peer
 *                           ranks are stopped, gone, or have not reached
 *                           the op;
 *   INIT                    an earlier task of the comm holding the turn.
 * One snapshot; the ages come from the library's own time stamps.
 * Exit status CTL_HANG_FOUND when any task is stuck, 0 otherwise.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/net.h>
#include "ctl.h"
#include "ctl_proxy.h"
#include "json_writer.h"

struct job {
	uint32_t ppid;
	size_t first, n;	/* l->v[first .. first+n) (sorted by job, rank) */
	uint32_t n_ranks;	/* at most NPROXY_NET_MAX_RANKS */
	bool n_ranks_bad;	/* a page claimed more than that */
};

/* The newest op (exec_id) a proxy has enqueued, from its slots. */
static uint64_t latest_exec(const struct ctl_proxy *p)
{
	uint64_t e = 0;

	for (int t = 0; t < NPROXY_PROXY_STATE_TASKS; t++)
		if (p->ps.tasks[t].type && p->ps.tasks[t].exec_id > e)
			e = p->ps.tasks[t].exec_id;
	return e;
}

static bool proc_stopped(char st)
{
	return st == 'T' || st == 't';
}

static bool proc_dead(char st)
{
	return st == 'Z' || st == 'X' || st == '?';
}

static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* A peer whose task of the same op still waits for its device: the culprit. */
static bool peer_waits_device(const struct ctl_proxy *q, uint64_t exec_id, char *buf, size_t len)
{
	for (int t = 0; t < NPROXY_PROXY_STATE_TASKS; t++) {
		const struct nproxy_proxy_task *o = &q->ps.tasks[t];

		if (o->type == 1 && o->exec_id == exec_id &&
		    (o->run_state == NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER ||
		     o->run_state == NPROXY_TASK_STATE_INIT)) {
			append(buf, len, "; rank %u (pid %d) has not started op %llu: its task %s is in %s",
			       q->ps.rank, (int)q->pid, (unsigned long long)exec_id,
			       ctl_task_type_name(o->type), ctl_run_state_name(o->run_state));
			return true;
		}
	}
	return false;
}

/* What peers of the job say about a task waiting on the network/barrier. */
static void peer_evidence(const struct ctl_proxy_list *l, const struct job *j,
			  const struct ctl_proxy *self, const struct nproxy_proxy_task *task,
			  char *buf, size_t len)
{
	bool any = false;

	for (size_t i = j->first; i < j->first + j->n; i++) {
		const struct ctl_proxy *q = &l->v[i];
		uint64_t e;

		if (q == self)
			continue;
		e = latest_exec(q);
		if (proc_stopped(q->proc_state)) {
			append(buf, len, "; rank %u (pid %d) is stopped (state %c), its latest op %llu",
			       q->ps.rank, (int)q->pid, q->proc_state, (unsigned long long)e);
			any = true;
		} else if (proc_dead(q->proc_state)) {
			append(buf, len, "; rank %u (pid %d) is dead (state %c)", q->ps.rank,
			       (int)q->pid, q->proc_state);
			any = true;
		} else if (peer_waits_device(q, task->exec_id, buf, len)) {
			any = true;
		} else if (e < task->exec_id) {
			append(buf, len, "; rank %u (pid %d) has not reached op %llu (its latest op %llu)",
			       q->ps.rank, (int)q->pid, (unsigned long long)task->exec_id,
			       (unsigned long long)e);
			any = true;
		}
	}
	/* Bounded by the job size and by the room left in the text. */
	for (uint32_t r = 0; r < j->n_ranks && strlen(buf) + 1 < len; r++) {
		bool found = false;

		for (size_t i = j->first; i < j->first + j->n; i++)
			found |= l->v[i].ps.rank == r;
		if (!found) {
			append(buf, len, "; rank %u has no live proxy on this host (dead, or remote)", r);
			any = true;
		}
	}
	if (!any)
		append(buf, len, "; every local peer has reached this op");
}

static bool has_older_inflight(const struct ctl_proxy *p, const struct nproxy_proxy_task *task)
{
	for (int t = 0; t < NPROXY_PROXY_STATE_TASKS; t++) {
		const struct nproxy_proxy_task *o = &p->ps.tasks[t];

		if (o != task && o->type == task->type && o->run_state != NPROXY_TASK_STATE_DONE &&
		    o->exec_id < task->exec_id)
			return true;
	}
	return false;
}

/* The evidence text of one stuck task (after "...for N s"). */
static void task_evidence(const struct ctl_proxy_list *l, const struct job *j,
			  const struct ctl_proxy *p, const struct nproxy_proxy_task *task,
			  char *buf, size_t len)
{
	char dev[160];

	buf[0] = '\0';
	switch (task->run_state) {
	case NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER: {
		bool listed = false;

		ctl_describe_device(p, dev, sizeof(dev));
		for (uint32_t s = 0; s < NPROXY_MAX_STREAMS; s++) {
			if (!(task->trigger_mask & (1u << s)))
				continue;
			if (p->triggers[s] == NPROXY_TRIGGER_SENTINEL) {
				append(buf, len, "%sstream %u trigger still 0x%08X", listed ? ", " : "",
				       s, p->triggers[s]);
				listed = true;
			}
		}
		if (!listed)
			append(buf, len, task->trigger_mask ?
			       "trigger words set, not yet consumed (worker %s, thread state %c)" :
			       "trigger words outside the region (worker %s, thread state %c)",
			       ctl_worker_state_name(p->ps.worker_state), p->worker_proc_state);
		append(buf, len, " (%s)", dev);
		break;
	}
	case NPROXY_TASK_STATE_PROGRESSING:
	case NPROXY_TASK_STATE_IDLE:
		append(buf, len, "%s at bb %u", task->type == 2 ? "waiting at the host barrier"
							       : "waiting on the network", task->bb);
		peer_evidence(l, j, p, task, buf, len);
		break;
	case NPROXY_TASK_STATE_INIT:
		if (has_older_inflight(p, task))
			append(buf, len, "not started: an earlier op of this comm holds the turn");
		else
			append(buf, len, "not started by the worker (worker %s, thread state %c)",
			       ctl_worker_state_name(p->ps.worker_state), p->worker_proc_state);
		break;
	default:
		append(buf, len, "unknown state %u", task->run_state);
		break;
	}
	if (proc_stopped(p->proc_state))
		append(buf, len, " [its own process is stopped, state %c]", p->proc_state);
}

static size_t group_jobs(const struct ctl_proxy_list *l, struct job *jobs)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++) {
		if (!n || jobs[n - 1].ppid != l->v[i].ps.ppid)
			jobs[n++] = (struct job){ .ppid = l->v[i].ps.ppid, .first = i };
		jobs[n - 1].n++;
		/*
		 * Any process may write a proxy-state page: a job is never
		 * larger than the library opens (NPROXY_NET_MAX_RANKS).
		 */
		if (l->v[i].ps.n_ranks > NPROXY_NET_MAX_RANKS)
			jobs[n - 1].n_ranks_bad = true;
		else if (l->v[i].ps.n_ranks > jobs[n - 1].n_ranks)
			jobs[n - 1].n_ranks = l->v[i].ps.n_ranks;
	}
	return n;
}

/* One stuck task, as one object of the "stuck" array. */
static void stuck_task_json(struct json_writer *w, const struct job *j, const struct ctl_proxy *p,
			    const struct nproxy_proxy_task *task, double age, const char *ev)
{
	json_obj_begin(w, NULL);
	json_u64(w, "launcher_pid", j->ppid);
	json_u64(w, "rank", p->ps.rank);
	json_u64(w, "pid", (uint64_t)p->pid);
	json_str(w, "backend", p->backend == CTL_PROXY_KMOD ? "kmod" : "memfd");
	json_str(w, "task", ctl_task_type_name(task->type));
	json_str(w, "state", ctl_run_state_name(task->run_state));
	json_double(w, "for_s", age);
	json_u64(w, "op", task->exec_id);
	json_u64(w, "bb", task->bb);
	json_u64(w, "trigger_mask", task->trigger_mask);
	json_arr_begin(w, "triggers");
	for (uint32_t s = 0; s < p->info.n_streams && s < NPROXY_MAX_STREAMS; s++)
		json_u64(w, NULL, p->triggers[s]);
	json_arr_end(w);
	json_str(w, "prog_state", ctl_prog_state_name(p->info.prog_state));
	json_u64(w, "prog_step", p->info.prog_step);
	json_str(w, "evidence", ev);
	json_obj_end(w);
}

/*
 * A host barrier that waits for its comm's next op: for the application to
 * start it (time between ops, not a stall), or, carried, for its data (a
 * stall there shows on that op's own tasks).  The library says so.
 */
static bool deferred(const struct nproxy_proxy_task *task)
{
	return task->flags & NPROXY_PROXY_TASK_F_DEFERRED;
}

/*
 * Every task of job j in flight for at least min_age_s; how many.  Deferred
 * barriers are not stuck: *n_deferred counts them.
 */
static size_t report_job(const struct ctl_proxy_list *l, const struct job *j, double min_age_s,
			 struct json_writer *w, size_t *n_deferred)
{
	size_t stuck = 0;
	char ev[1024];

	if (!w)
		printf("job (launcher pid %u): %zu of %u ranks on this host%s\n", j->ppid, j->n,
		       j->n_ranks, j->n_ranks_bad ? " (a proxy page claims more than "
		       "NPROXY_NET_MAX_RANKS ranks: ignored)" : "");
	for (size_t i = j->first; i < j->first + j->n; i++) {
		const struct ctl_proxy *p = &l->v[i];

		for (int t = 0; t < NPROXY_PROXY_STATE_TASKS; t++) {
			const struct nproxy_proxy_task *task = &p->ps.tasks[t];
			double age = ctl_age_s(p, task->progress_ns);

			if (!task->type || task->run_state == NPROXY_TASK_STATE_DONE ||
			    age < min_age_s)
				continue;
			if (deferred(task)) {
				(*n_deferred)++;
				continue;
			}
			stuck++;
			task_evidence(l, j, p, task, ev, sizeof(ev));
			if (w)
				stuck_task_json(w, j, p, task, age, ev);
			else
				printf("rank %u (pid %d) task %s in %s for %.1f s: %s\n", p->ps.rank,
				       (int)p->pid, ctl_task_type_name(task->type),
				       ctl_run_state_name(task->run_state), age, ev);
		}
	}
	return stuck;
}

/* A task that stalls on its own: its device never triggered it. */
static bool stalls_on_device(const struct nproxy_proxy_task *task)
{
	return task->run_state == NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER;
}

/* Is rank r of job j a culprit: stopped, or a stuck task waiting for its device? */
static bool rank_stalled(const struct ctl_proxy_list *l, const struct job *j, uint32_t r,
			 double min_age_s)
{
	for (size_t i = j->first; i < j->first + j->n; i++) {
		const struct ctl_proxy *p = &l->v[i];

		if (p->ps.rank != r)
			continue;
		if (proc_stopped(p->proc_state))
			return true;
		for (int t = 0; t < NPROXY_PROXY_STATE_TASKS; t++) {
			const struct nproxy_proxy_task *task = &p->ps.tasks[t];

			if (task->type && stalls_on_device(task) &&
			    ctl_age_s(p, task->progress_ns) >= min_age_s)
				return true;
		}
	}
	return false;
}

/*
 * One rank's line of the judgement: a culprit with the evidence of its first
 * stalled task, or a victim with the task that waits (if one is stuck yet).
 */
static void judge_rank(const struct ctl_proxy_list *l, const struct job *j,
		       const struct ctl_proxy *p, double min_age_s, const char *culprits,
		       bool culprit, char *buf, size_t len)
{
	char ev[1024];

	if (culprit && proc_stopped(p->proc_state)) {
		append(buf, len, "rank %u (pid %d) stalled: its process is stopped (state %c)\n",
		       p->ps.rank, (int)p->pid, p->proc_state);
		return;
	}
	if (!culprit)
		append(buf, len, "rank %u (pid %d): waiting on %s (victim)", p->ps.rank, (int)p->pid,
		       culprits);
	for (int t = 0; t < NPROXY_PROXY_STATE_TASKS; t++) {
		const struct nproxy_proxy_task *task = &p->ps.tasks[t];
		double age = ctl_age_s(p, task->progress_ns);

		if (!task->type || task->run_state == NPROXY_TASK_STATE_DONE || age < min_age_s ||
		    deferred(task) || (culprit && !stalls_on_device(task)))
			continue;
		if (culprit) {
			task_evidence(l, j, p, task, ev, sizeof(ev));
			append(buf, len, "rank %u (pid %d) stalled: task %s of op %llu in %s for %.1f s: %s",
			       p->ps.rank, (int)p->pid, ctl_task_type_name(task->type),
			       (unsigned long long)task->exec_id, ctl_run_state_name(task->run_state),
			       age, ev);
		} else {
			append(buf, len, ": task %s of op %llu in %s for %.1f s",
			       ctl_task_type_name(task->type), (unsigned long long)task->exec_id,
			       ctl_run_state_name(task->run_state), age);
		}
		break;
	}
	append(buf, len, "\n");
}

size_t ctl_hang_judge(pid_t job_pid, double min_age_s, char *culprits_buf, size_t clen,
		      char *victims_buf, size_t vlen)
{
	struct ctl_proxy_list l;
	struct job *jobs;
	size_t n_jobs, found = 0;
	char who[256];

	culprits_buf[0] = victims_buf[0] = '\0';
	if (ctl_proxy_scan(&l, job_pid) < 0)
		return 0;
	jobs = calloc(l.n ? l.n : 1, sizeof(*jobs));
	if (!jobs) {
		ctl_proxy_list_free(&l);
		return 0;
	}
	n_jobs = group_jobs(&l, jobs);
	for (size_t jn = 0; jn < n_jobs; jn++) {
		const struct job *j = &jobs[jn];

		who[0] = '\0';
		for (size_t i = j->first; i < j->first + j->n; i++)
			if (rank_stalled(&l, j, l.v[i].ps.rank, min_age_s))
				append(who, sizeof(who), "%srank %u", who[0] ? ", " : "", l.v[i].ps.rank);
		for (size_t i = j->first; i < j->first + j->n; i++) {
			bool culprit = rank_stalled(&l, j, l.v[i].ps.rank, min_age_s);

			found += culprit;
			if (culprit)
				judge_rank(&l, j, &l.v[i], min_age_s, who, true, culprits_buf, clen);
			else if (who[0])
				judge_rank(&l, j, &l.v[i], min_age_s, who, false, victims_buf, vlen);
		}
	}
	free(jobs);
	ctl_proxy_list_free(&l);
	return found;
}

int cmd_hang_report(bool json, double min_age_s, pid_t only_pid)
{
	struct ctl_proxy_list l;
	struct json_writer w;
	struct job *jobs;
	size_t n_jobs, stuck = 0, n_deferred = 0;
	int rc = ctl_proxy_scan(&l, only_pid);

	if (rc < 0)
		return -rc;
	jobs = calloc(l.n ? l.n : 1, sizeof(*jobs));
	if (!jobs) {
		ctl_proxy_list_free(&l);
		return CTL_FAIL;
	}
	n_jobs = group_jobs(&l, jobs);
	if (json) {
		json_init(&w, stdout, true);
		json_obj_begin(&w, NULL);
		json_double(&w, "min_age_s", min_age_s);
		json_u64(&w, "denied", (uint64_t)l.denied);
		json_arr_begin(&w, "stuck");
	}
	for (size_t jn = 0; jn < n_jobs; jn++)
		stuck += report_job(&l, &jobs[jn], min_age_s, json ? &w : NULL, &n_deferred);
	if (json) {
		json_arr_end(&w);
		json_u64(&w, "deferred", n_deferred);
		json_bool(&w, "hang", stuck > 0);
		json_obj_end(&w);
		json_finish(&w);
	} else if (!l.n) {
		printf("no proxy found on this host%s\n",
		       l.denied ? " (some processes could not be read: run as root)" : "");
	} else {
		printf(stuck ? "hang: %zu task(s) without progress for >= %.1f s"
			     : "no hang: %zu task(s) without progress for >= %.1f s", stuck, min_age_s);
		if (n_deferred)
			printf(" (%zu host barrier(s) deferred to their comm's next op: waiting for "
			       "the application to start it, or for its data; not counted)", n_deferred);
		printf("\n");
	}
	free(jobs);
	ctl_proxy_list_free(&l);
	return stuck ? CTL_HANG_FOUND : CTL_OK;
}
