/* SPDX-License-Identifier: GPL-2.0 */
/* A tiny streaming JSON writer for the tools' --json output. */
#ifndef NPROXY_TOOLS_JSON_WRITER_H
#define NPROXY_TOOLS_JSON_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json_writer {
	FILE *f;
	int depth;
	bool need_comma[JSON_MAX_DEPTH];
	bool after_key;
	bool pretty;
};

void json_init(struct json_writer *w, FILE *f, bool pretty);
/* key may be NULL inside arrays and at the top level. */
void json_obj_begin(struct json_writer *w, const char *key);
void json_obj_end(struct json_writer *w);
void json_arr_begin(struct json_writer *w, const char *key);
void json_arr_end(struct json_writer *w);
void json_str(struct json_writer *w, const char *key, const char *val);
void json_u64(struct json_writer *w, const char *key, uint64_t val);
void json_i64(struct json_writer *w, const char *key, int64_t val);
void json_double(struct json_writer *w, const char *key, double val);
void json_bool(struct json_writer *w, const char *key, bool val);
void json_null(struct json_writer *w, const char *key);
/* Ends the document with a newline and flushes. */
void json_finish(struct json_writer *w);

#endif
