// SPDX-License-Identifier: GPL-2.0
/* Streaming JSON writer: enough for flat reports, strictly valid output. */
#include <inttypes.h>
#include <math.h>
#include "json_writer.h"

void json_init(struct json_writer *w, FILE *f, bool pretty)
{
	*w = (struct json_writer){ .f = f, .pretty = pretty };
}

static void indent(struct json_writer *w)
{
	if (!w->pretty)
		return;
	fputc('\n', w->f);
	for (int i = 0; i < w->depth; i++)
		fputs("  ", w->f);
}

static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Separator, indentation and key before any value. */
static void prefix(struct json_writer *w, const char *key)
{
	if (w->depth > 0) {
		if (w->need_comma[w->depth])
			fputc(',', w->f);
		w->need_comma[w->depth] = true;
		indent(w);
	}
	if (key) {
		put_string(w->f, key);
		fputs(w->pretty ? ": " : ":", w->f);
	}
}

static void open_(struct json_writer *w, const char *key, char c)
{
	prefix(w, key);
	fputc(c, w->f);
	if (w->depth < JSON_MAX_DEPTH - 1)
		w->depth++;
	w->need_comma[w->depth] = false;
}

static void close_(struct json_writer *w, char c)
{
	bool had = w->need_comma[w->depth];

	if (w->depth > 0)
		w->depth--;
	if (had)
		indent(w);
	fputc(c, w->f);
}

void json_obj_begin(struct json_writer *w, const char *key) { open_(w, key, '{'); }
void json_obj_end(struct json_writer *w) { close_(w, '}'); }
void json_arr_begin(struct json_writer *w, const char *key) { open_(w, key, '['); }
void json_arr_end(struct json_writer *w) { close_(w, ']'); }

void json_str(struct json_writer *w, const char *key, const char *val)
{
	prefix(w, key);
	if (val)
		put_string(w->f, val);
	else
		fputs("null", w->f);
}

void json_u64(struct json_writer *w, const char *key, uint64_t val)
{
	prefix(w, key);
	fprintf(w->f, "%" PRIu64, val);
}

void json_i64(struct json_writer *w, const char *key, int64_t val)
{
	prefix(w, key);
	fprintf(w->f, "%" PRId64, val);
}

void json_double(struct json_writer *w, const char *key, double val)
{
	prefix(w, key);
	if (isfinite(val))
		fprintf(w->f, "%.6g", val);
	else
		fputs("null", w->f);
}

void json_bool(struct json_writer *w, const char *key, bool val)
{
	prefix(w, key);
	fputs(val ? "true" : "false", w->f);
}

void json_null(struct json_writer *w, const char *key)
{
	prefix(w, key);
	fputs("null", w->f);
}

void json_finish(struct json_writer *w)
{
	fputc('\n', w->f);
	fflush(w->f);
}
