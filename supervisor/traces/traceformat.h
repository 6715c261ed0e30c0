/* SPDX-License-Identifier: MIT */
/*
 * An access trace as it is kept in a tenant's store, under "trace/" and
 * the SHA-256 of its name in hex (trace_store_key):
 * which ranges of which files readers first touched after a container (or
 * a host recording) started, in the order they did, merged across runs.
 *
 *   {"tierd_trace":1,"name":"web","runs":3,
 *    "files":[{"path":"lib/a.so","key":"sha256/...","size":N,
 *              "ranges":[[start,end,seen,last,at_ms],...]},...]}
 *
 * path is beneath the tenant's subvolume; key and size are the file's stub
 * when it was recorded (a file whose key changed since is skipped); seen is
 * the runs that touched the range, last the run (1..runs) that last did,
 * at_ms when, after the start. Files come in the order of their first
 * touch. The store is outside tierd: parsing checks everything, and bounds
 * what a hostile object can ask for.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stub.h"

#define TRACE_NAME_MAX 200
#define TRACE_OBJECT_MAX (16u << 20)
#define TRACE_FILES_MAX 65536
#define TRACE_RANGES_MAX 256 /* per file; more are merged into one */
#define TRACE_PATH_MAX 4096

struct trace_range {
        uint64_t start, end;
        uint32_t seen, last, at_ms;
};

struct trace_file {
        char *path;
        char key[STUB_KEY_MAX];
        uint64_t size;
        struct trace_range *r;
        size_t n;
        /* For a merge only, never stored. resident (a run's file): read
         * while whole, which is heard once, not range by range: all its
         * stored ranges count as touched. unknown (a stored file): whole
         * all this run, so no read of it could be heard: it does not age. */
        bool resident, unknown;
};

struct trace {
        char name[TRACE_NAME_MAX + 1];
        uint32_t runs;
        struct trace_file *files;
        size_t n_files;
};

void trace_done(struct trace *t);
/* A name: 1 to TRACE_NAME_MAX of [A-Za-z0-9._:/-], no "." or ".." part, no empty part
 * ("a//b", "/a", "a/"): a piece of a store key. */
bool trace_name_valid(const char *name);
/* What trace_name_valid takes, said to whoever gave another. */
#define TRACE_NAME_RULE \
        "a trace name has 1 to 200 of letters, digits, '.', '_', ':', '-' and '/' (no '.' or '..' part, no empty part)"
/* A path beneath a subvolume: relative, no "." or ".." part, no empty one. */
bool trace_path_valid(const char *path, size_t len);
/* The trace NAME's key: "trace/" and the SHA-256 of NAME in hex (objkey.h). */
int trace_store_key(const char *name, char *buf, size_t size);

/* 0 (*why NULL), or -EINVAL with *why (static text) for an object that is
 * not one. */
int trace_parse(const char *text, size_t len, struct trace *ret, const char **why);
/* The object's text (malloc'd), or NULL (-ENOMEM). */
char *trace_format(const struct trace *t);

/* Adds a range touched in a new run (its runs 1) to run: appended to the
 * file's ranges (the file added at the end if new); resident: the file was
 * whole when read (see struct trace_file). */
int trace_add(struct trace *run, const char *path, const char *key, uint64_t size, uint64_t start, uint64_t end,
              uint32_t at_ms, bool resident);
/* Merges one recorded run (runs == 1) into into (runs == 0: empty): a range
 * seen in most runs, or in one of the last two, is kept; others age out
 * (not those of a file marked unknown). A file whose key changed starts
 * again from the run's ranges. */
int trace_merge(struct trace *into, const struct trace *run);

/* Does t name path? (O(n): for a run's files, on a thread.) */
bool trace_has_file(const struct trace *t, const char *path);
/* Totals, for tierctl trace show and the D-Bus properties. */
uint64_t trace_bytes(const struct trace *t);
size_t trace_ranges(const struct trace *t);
