// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Error text, the one mechanism of the library (Documentation/development.md,
 * "Status and errors").  Every object that can fail embeds a struct
 * npx_errbuf; every failure is formatted once, here, as "who: text" (who
 * names the object), logged, and kept in the object; nproxy_<x>_strerror()
 * reads it back through npx_err_text().
 *
 * Threads: a thread reads back its own last failure on an object, so that
 * two threads calling into one comm (a producer and a polling consumer) never
 * hand each other their texts; a thread that has none on the object reads
 * the object's last failure from any thread, and a failure found later by
 * one of the library's own threads (a proxy worker, the device emulator)
 * replaces what it read before.  The string returned is the reading thread's
 * own copy: another thread's failure, or one on another object, never
 * changes it under the reader.
 *
 * A failure before the object exists (a failed open) is kept per thread
 * and per area: nproxy_<x>_strerror(NULL).
 */
#include <stdio.h>
#include <string.h>
#include "common/common_internal.h"

/* A thread's copies, one per object it failed on or read: the least
 * recently used one is reused. */
#define ERR_VIEWS	8

struct err_view {
	uint64_t id;		/* the errbuf's id; 0: free */
	uint64_t seq;		/* the errbuf's seq this text is from */
	uint64_t used;		/* this thread's view clock at the last use */
	bool own;		/* this thread's own failure, not a copy */
	char text[NPX_ERR_LEN];
};

static __thread struct err_view err_views[ERR_VIEWS];
static __thread uint64_t err_view_clock;
static __thread char err_open_text[NPX_ERR_AREAS][NPX_ERR_LEN];
static __thread bool err_library_thread;
static uint64_t err_next_id;

void npx_err_on_library_thread(void)
{
	err_library_thread = true;
}

static void errbuf_lock(struct npx_errbuf *eb)
{
	while (__atomic_exchange_n(&eb->lock, 1, __ATOMIC_ACQUIRE))
		wake_cpu_relax();
}

static void errbuf_unlock(struct npx_errbuf *eb)
{
	__atomic_store_n(&eb->lock, 0, __ATOMIC_RELEASE);
}

static struct err_view *view_of(uint64_t id, bool take)
{
	struct err_view *lru = &err_views[0];

	for (int i = 0; i < ERR_VIEWS; i++) {
		if (err_views[i].id == id)
			return &err_views[i];
		if (err_views[i].used < lru->used)
			lru = &err_views[i];
	}
	if (!take)
		return NULL;
	lru->id = id;
	lru->text[0] = '\0';
	return lru;
}

static void format_text(char *text, const char *who, const char *fmt, va_list ap)
{
	int n = 0;

	if (who)
		n = snprintf(text, NPX_ERR_LEN, "%s: ", who);
	if (n < 0 || n >= NPX_ERR_LEN)
		n = 0;
	vsnprintf(text + n, NPX_ERR_LEN - (size_t)n, fmt, ap);
}

/* Into eb under its lock; into this thread's view unless a library thread. */
static void keep_text(struct npx_errbuf *eb, const char *text)
{
	struct err_view *v;
	uint64_t id, seq;

	errbuf_lock(eb);
	if (!eb->id)
		eb->id = __atomic_add_fetch(&err_next_id, 1, __ATOMIC_RELAXED);
	id = eb->id;
	seq = ++eb->seq;
	snprintf(eb->text, sizeof(eb->text), "%s", text);
	if (err_library_thread)
		eb->lib_seq = seq;
	errbuf_unlock(eb);
	if (err_library_thread)
		return;
	v = view_of(id, true);
	v->seq = seq;
	v->own = true;
	v->used = ++err_view_clock;
	snprintf(v->text, sizeof(v->text), "%s", text);
}

enum nproxy_status npx_err_vset(struct npx_errbuf *eb, enum npx_err_area area,
				enum nproxy_log_level level, enum nproxy_status st,
				const char *who, const char *fmt, va_list ap)
{
	char text[NPX_ERR_LEN];

	format_text(text, who, fmt, ap);
	if (level != NPX_LOG_NONE) {
		if (st != NPROXY_SUCCESS)
			nproxy_log(level, "%s (%s)", text, nproxy_status_str(st));
		else
			nproxy_log(level, "%s", text);
	}
	if (eb)
		keep_text(eb, text);
	else if ((unsigned int)area < NPX_ERR_AREAS)
		snprintf(err_open_text[area], NPX_ERR_LEN, "%s", text);
	return st;
}

enum nproxy_status npx_err_set(struct npx_errbuf *eb, enum npx_err_area area,
			       enum nproxy_log_level level, enum nproxy_status st,
			       const char *who, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	npx_err_vset(eb, area, level, st, who, fmt, ap);
	va_end(ap);
	return st;
}

const char *npx_err_text(const struct npx_errbuf *eb, enum npx_err_area area)
{
	/* Only the lock word is written: the text stays what it was. */
	struct npx_errbuf *w = (struct npx_errbuf *)eb;
	struct err_view *v;

	if (!eb)
		return (unsigned int)area < NPX_ERR_AREAS ? err_open_text[area] : "";
	errbuf_lock(w);
	if (!w->id) {
		errbuf_unlock(w);
		return "";
	}
	v = view_of(w->id, false);
	if (!v || (v->own ? v->seq < w->lib_seq : v->seq != w->seq)) {
		if (!v)
			v = view_of(w->id, true);
		snprintf(v->text, sizeof(v->text), "%s", w->text);
		v->seq = w->seq;
		v->own = false;
	}
	errbuf_unlock(w);
	v->used = ++err_view_clock;
	return v->text;
}

void npx_err_clear(struct npx_errbuf *eb)
{
	struct err_view *v;

	errbuf_lock(eb);
	eb->seq++;
	eb->text[0] = '\0';
	v = eb->id ? view_of(eb->id, false) : NULL;
	errbuf_unlock(eb);
	if (v) {
		v->id = 0;
		v->used = 0;
	}
}

void npx_err_keep_open(enum npx_err_area area, const struct npx_errbuf *eb)
{
	if (eb && (unsigned int)area < NPX_ERR_AREAS)
		snprintf(err_open_text[area], NPX_ERR_LEN, "%s", npx_err_text(eb, area));
}

void npx_err_clear_open(enum npx_err_area area)
{
	if ((unsigned int)area < NPX_ERR_AREAS)
		err_open_text[area][0] = '\0';
}
