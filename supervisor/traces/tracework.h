/* SPDX-License-Identifier: MIT */
/*
 * The work of traces that grows with them, on threads of their own
 * (offthread.h), never where events are answered: naming the touched files,
 * parsing, merging and formatting trace objects (a store object of up to
 * TRACE_OBJECT_MAX bytes, which the tenant controls), and finding the
 * traced files again beneath the subvolume. Each takes only what it is
 * given and writes only its results.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "handle.h"
#include "traceformat.h"

struct trace_touch {
        union file_handle_buf h;
        char key[STUB_KEY_MAX];
        uint64_t size, start, end;
        uint32_t at_ms;
        bool resident; /* the file was whole when read */
};

/* len bytes of data, copied for a thread (malloc'd; NULL: -ENOMEM). */
char *trace_copy(const char *data, size_t len);

/* A file fetched ahead for a run. */
struct trace_ahead {
        char *path;
        uint64_t bytes;
};

/* A run, merged into the stored trace (old, or NULL for none) as text. */
struct trace_save {
        void *owner; /* for the done callback: offthread_start is given the struct itself */
        /* In */
        const char *name, *subvol_rel;
        int root_fd;   /* the filesystem's private mount: handles are opened there */
        int subvol_fd; /* the subvolume through it: names are checked, and stored files looked at, there */
        const struct trace_touch *touches;
        size_t n;
        struct timespec started; /* CLOCK_REALTIME, when the run began */
        const struct trace_ahead *ahead; /* fetched ahead for this run */
        size_t n_ahead;
        char *old;       /* the stored object's bytes, or NULL */
        size_t old_len;
        /* Out */
        int error;       /* < 0: text is NULL */
        const char *old_refused; /* why the stored object was not a trace, or NULL */
        size_t named;    /* touches whose file still has a name we keep */
        char *text;
        uint32_t runs;
        size_t files, ranges;
        uint64_t bytes;
        uint64_t wasted; /* of ahead, in files the run did not touch */
};
void trace_work_save(void *userdata);

enum prefetch_file_state { PF_FETCH, PF_RESIDENT, PF_GONE, PF_CHANGED };

struct prefetch_file {
        union file_handle_buf h;
        enum prefetch_file_state state;
        bool whole;       /* its stub restores only whole (no manifest, or small) */
        unsigned pending; /* ranges in flight (prefetch.c) */
};

/* A stored trace parsed, and each of its files found beneath the subvolume. */
struct trace_lookup {
        void *owner; /* for the done callback: offthread_start is given the struct itself */
        /* In */
        char *data;
        size_t len;
        int subvol_fd; /* -1: parse only */
        uint64_t small_file; /* the tenant's: files below it are fetched whole */
        bool restore_whole, verify;
        /* Out */
        int error;
        const char *why; /* -EINVAL: how the object is not a trace */
        struct trace trace;
        struct prefetch_file *files; /* per trace file (subvol_fd given) */
};
void trace_work_lookup(void *userdata);
