// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: where a process is, and how it died.  run_phase() keeps a
 * short "what this process is doing" text in its shared record; a fatal
 * signal handler (SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGABRT) adds the
 * signal and the faulting address, then lets the signal kill the process
 * as before.  The supervisor (or, under a launcher, the handler itself)
 * turns that into "rank 1 (pid 123) was killed by signal SIGBUS (Bus error)
 * at address 0x7f.. during engine setup (nproxy_net_open)".  A SIGKILL
 * cannot be caught, but the phase it interrupted is still in the record.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include "run.h"

static struct run_proc_record *crash_rec;
static bool crash_print;	/* no supervisor: the handler says it itself */
static const char *crash_who = "nproxy-run";

static const int fatal_signals[] = { SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGABRT };

void run_phase(const char *fmt, ...)
{
	char text[sizeof(crash_rec->phase)];
	va_list ap;

	if (!crash_rec)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	/* A reader (the supervisor, after our death) sees either text. */
	memcpy((char *)crash_rec->phase, text, sizeof(text));
}

/* Async-signal-safe appends for the handler's own message. */
static size_t put_str(char *buf, size_t off, size_t len, const char *s)
{
	while (*s && off + 1 < len)
		buf[off++] = *s++;
	buf[off] = 0;
	return off;
}

static size_t put_hex(char *buf, size_t off, size_t len, uint64_t v)
{
	char digits[17];
	int n = 0;

	do {
		digits[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v && n < 16);
	off = put_str(buf, off, len, "0x");
	while (n && off + 1 < len)
		buf[off++] = digits[--n];
	buf[off] = 0;
	return off;
}

static bool has_addr(int sig)
{
	return sig == SIGBUS || sig == SIGSEGV || sig == SIGILL || sig == SIGFPE;
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	struct run_proc_record *rec;

	(void)uc;
	rec = __atomic_load_n(&crash_rec, __ATOMIC_SEQ_CST);
	if (rec) {
		/* A kernel-raised fault carries its address; a re-raise does not. */
		rec->death_addr = has_addr(sig) && si && si->si_code > 0 ?
					(uint64_t)(uintptr_t)si->si_addr : 0;
		rec->death_signal = sig;
	}
	if (crash_print && rec) {
		char msg[256];
		size_t off = put_str(msg, 0, sizeof(msg), crash_who);

		off = put_str(msg, off, sizeof(msg), ": killed by signal SIG");
		off = put_str(msg, off, sizeof(msg), sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
		if (rec->death_addr) {
			off = put_str(msg, off, sizeof(msg), " at address ");
			off = put_hex(msg, off, sizeof(msg), rec->death_addr);
		}
		if (rec->phase[0]) {
			off = put_str(msg, off, sizeof(msg), " during ");
			off = put_str(msg, off, sizeof(msg), (const char *)rec->phase);
		}
		off = put_str(msg, off, sizeof(msg), "\n");
		if (write(STDERR_FILENO, msg, off) < 0)
			(void)0;
	}
	/* Die of the signal itself, as without us: exit statuses stay true. */
	sigaction(sig, &dfl, NULL);
	raise(sig);
}

void run_crash_forget(void)
{
	__atomic_store_n(&crash_rec, NULL, __ATOMIC_SEQ_CST);
}

void run_crash_install(struct run_proc_record *rec, bool print, const char *who)
{
	struct sigaction sa = { .sa_sigaction = on_fatal, .sa_flags = SA_SIGINFO };

	crash_rec = rec;
	crash_print = print;
	if (who)
		crash_who = who;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
		sigaction(fatal_signals[i], &sa, NULL);
}

void run_describe_death(const struct run_proc_record *rec, int sig, char *buf, size_t len)
{
	const char *abbrev = sigabbrev_np(sig);
	int n;

	n = snprintf(buf, len, "was killed by signal SIG%s (%s)", abbrev ? abbrev : "?",
		     strsignal(sig));
	if (n > 0 && (size_t)n < len && rec->death_signal == sig && rec->death_addr)
		n += snprintf(buf + n, len - (size_t)n, " at address 0x%llx",
			      (unsigned long long)rec->death_addr);
	if (n > 0 && (size_t)n < len && rec->phase[0])
		n += snprintf(buf + n, len - (size_t)n, " during %.*s", (int)sizeof(rec->phase),
			      (const char *)rec->phase);
	if (n > 0 && (size_t)n < len && rec->progress)
		snprintf(buf + n, len - (size_t)n, ", after %u iteration%s", rec->progress,
			 rec->progress == 1 ? "" : "s");
}

/* NPROXY_RUN_CRASH=RANK:ITER[:bus|segv] (selftests): -1 when unset. */
int run_crash_hook(uint32_t *iter, int *sig)
{
	const char *v = getenv("NPROXY_RUN_CRASH");
	char kind[8] = "bus";
	unsigned int r, it;

	if (!v || sscanf(v, "%u:%u:%7s", &r, &it, kind) < 2)
		return -1;
	*iter = it;
	*sig = strcmp(kind, "segv") ? SIGBUS : SIGSEGV;
	return (int)r;
}

/* A real fault, with a real address: what a bad mapping does to a rank. */
void run_crash_now(int sig)
{
	volatile char *p;

	if (sig == SIGSEGV) {
		p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	} else {
		/* A shared mapping past the end of an empty file: SIGBUS. */
		int fd = memfd_create("nproxy-run-crash", MFD_CLOEXEC);

		p = fd < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	}
	if (p != MAP_FAILED)
		(void)p[0];
	raise(sig);	/* no mapping: still die of the signal asked for */
}
