/* SPDX-License-Identifier: MIT */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "containers.h"
#include "handle.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "storeio.h"
#include "traceformat.h"
#include "usage.h"

struct trace_touch {
        union file_handle_buf h;
        char key[STUB_KEY_MAX];
        uint64_t size, start, end;
        uint32_t at_ms;
};

struct trace_recording {
        struct tenant *tn;
        struct container *c; /* NULL: the tenant's host readers */
        char name[TRACE_NAME_MAX + 1];
        uint64_t started_usec;
        sd_event_source *end_src;
        struct trace_touch *touches;
        size_t n, allocated;
        bool dropped; /* touches past TRACE_TOUCHES_MAX */
        /* Saving, once the window is over. */
        struct offthread *thread;
        int root_fd;      /* the filesystem's private mount: handles are opened there */
        char *subvol_rel; /* a copy: the thread touches only what it is given */
        char **paths;     /* per touch, beneath the subvolume; NULL: gone, or not a name we keep */
        struct trace run, all;
};

static void recording_free(struct trace_recording *rec) {
        if (!rec)
                return;
        sd_event_source_disable_unref(rec->end_src);
        for (size_t i = 0; rec->paths && i < rec->n; i++)
                free(rec->paths[i]);
        free(rec->paths);
        free(rec->subvol_rel);
        free(rec->touches);
        trace_done(&rec->run);
        trace_done(&rec->all);
        free(rec);
}

bool trace_watching(const struct tenant *tn) { return tn->recordings > 0; }

static struct trace_recording **owner_of(struct trace_recording *rec) {
        return rec->c ? &rec->c->recording : &rec->tn->recording;
}

void trace_touch(struct tenant *tn, uint64_t route, const struct file_handle *fh, const struct stub *s,
                 uint64_t start, uint64_t end) {
        struct container *c = route ? container_by_serial(tn, route) : NULL;
        struct trace_recording *rec = c ? c->recording : route ? NULL : tn->recording;
        uint64_t chunk = s->chunk ?: 1;

        if (!rec || fh->handle_bytes > MAX_HANDLE_SZ || !range_round_to_chunks(&start, &end, chunk, s->size))
                return;
        /* A sequential reader touches the same file again and again: one
         * touch while it goes on. */
        struct trace_touch *last = rec->n ? &rec->touches[rec->n - 1] : NULL;
        if (last && last->h.fh.handle_bytes == fh->handle_bytes && last->h.fh.handle_type == fh->handle_type &&
            memcmp(last->h.fh.f_handle, fh->f_handle, fh->handle_bytes) == 0 && start <= last->end &&
            end >= last->start) {
                last->start = MIN(last->start, start);
                last->end = MAX(last->end, end);
                return;
        }
        if (rec->n == rec->allocated) {
                size_t n = rec->allocated ? rec->allocated * 2 : 64;
                struct trace_touch *t = rec->n < TRACE_TOUCHES_MAX ? reallocarray(rec->touches, n, sizeof(*t)) : NULL;
                if (!t) {
                        rec->dropped = true;
                        return;
                }
                rec->touches = t;
                rec->allocated = n;
        }
        struct trace_touch *t = &rec->touches[rec->n++];
        memcpy(&t->h, fh, sizeof(*fh) + fh->handle_bytes);
        snprintf(t->key, sizeof(t->key), "%s", s->key);
        t->size = s->size;
        t->start = start;
        t->end = end;
        t->at_ms = (uint32_t)MIN((tierd_now_usec(tn->t) - rec->started_usec) / 1000, UINT32_MAX);
}

/* On its own thread: each touched file's path beneath the subvolume. */
static void name_files(void *userdata) {
        struct trace_recording *rec = userdata;
        for (size_t i = 0; i < rec->n; i++) {
                int fd = open_by_handle_at(rec->root_fd, &rec->touches[i].h.fh, O_PATH | O_CLOEXEC);
                if (fd < 0)
                        continue; /* deleted since: not in the trace */
                rec->paths[i] = subvol_rel_of_fd(rec->subvol_rel, fd);
                close(fd);
        }
}

static void on_saved(void *userdata, int error) {
        struct trace_recording *rec = userdata;
        if (error < 0)
                log_error_errno(error, "tenant %s: trace %s: cannot store it: %m", rec->tn->cfg->name, rec->name);
        else
                log_info("tenant %s: trace %s stored: run %u, %zu files, %zu ranges, %llu bytes", rec->tn->cfg->name,
                         rec->name, rec->all.runs, rec->all.n_files, trace_ranges(&rec->all),
                         (unsigned long long)trace_bytes(&rec->all));
        recording_free(rec);
}

/* The trace as stored (or none, or one refused), merged with this run, stored. */
static void on_old_trace(void *userdata, int error, const char *data, size_t len) {
        struct trace_recording *rec = userdata;
        const char *why = NULL;
        char key[TRACE_NAME_MAX + 16];
        int r = error;

        if (r == 0 && (r = trace_parse(data, len, &rec->all, &why)) < 0)
                log_error("tenant %s: trace %s in the store is refused (%s): it starts again from this run",
                          rec->tn->cfg->name, rec->name, why ?: strerror(-r));
        else if (r < 0 && r != -ENOENT)
                log_error_errno(r, "tenant %s: trace %s: cannot read it: %m: it starts again from this run",
                                rec->tn->cfg->name, rec->name);
        if (r < 0)
                trace_done(&rec->all);
        snprintf(rec->all.name, sizeof(rec->all.name), "%s", rec->name);
        _cleanup_free_ char *text = NULL;
        if ((r = trace_merge(&rec->all, &rec->run)) < 0 || !(text = trace_format(&rec->all)) ||
            (r = trace_store_key(rec->name, key, sizeof(key))) < 0 ||
            (r = store_put(rec->tn, key, text, strlen(text), false, on_saved, rec)) < 0)
                on_saved(rec, r < 0 ? r : -ENOMEM);
}

static void on_named(void *userdata) {
        struct trace_recording *rec = userdata;
        char key[TRACE_NAME_MAX + 16];
        size_t named = 0;
        int r;

        rec->thread = NULL;
        rec->run = (struct trace){ .runs = 1 };
        snprintf(rec->run.name, sizeof(rec->run.name), "%s", rec->name);
        for (size_t i = 0; i < rec->n; i++) {
                const struct trace_touch *t = &rec->touches[i];
                if (rec->paths[i] && trace_add(&rec->run, rec->paths[i], t->key, t->size, t->start, t->end, t->at_ms) == 0)
                        named++;
        }
        if (named < rec->n)
                log_info("tenant %s: trace %s: %zu of %zu touches left out (files deleted since, or names not "
                         "UTF-8)", rec->tn->cfg->name, rec->name, rec->n - named, rec->n);
        if ((r = trace_store_key(rec->name, key, sizeof(key))) < 0 ||
            (r = store_get(rec->tn, key, TRACE_OBJECT_MAX, on_old_trace, rec)) < 0)
                on_saved(rec, r);
}

void trace_record_end(struct trace_recording *rec, const char *why) {
        struct tenant *tn = rec->tn;
        int r;

        *owner_of(rec) = NULL;
        tn->recordings--;
        rec->end_src = sd_event_source_disable_unref(rec->end_src);
        log_info("tenant %s: trace %s: %s after %llu ms, %zu first touches%s", tn->cfg->name, rec->name, why,
                 (unsigned long long)((tierd_now_usec(tn->t) - rec->started_usec) / 1000), rec->n,
                 rec->dropped ? " (more were dropped: a run keeps at most 8192)" : "");
        /* A container gone at once read nothing: no run to age the trace with. */
        if (rec->n == 0 && strcmp(why, "window over") != 0) {
                recording_free(rec);
                return;
        }
        rec->root_fd = tn->fs->root_fd;
        rec->subvol_rel = strdup(tn->subvol_rel);
        rec->paths = calloc(MAX(rec->n, 1u), sizeof(*rec->paths));
        if (!rec->subvol_rel || !rec->paths)
                r = -ENOMEM;
        else
                r = offthread_start(tn->t->event, &rec->root_fd, 1, name_files, on_named, rec, &rec->thread);
        if (r < 0) {
                log_error_errno(r, "tenant %s: trace %s: cannot name its files: %m", tn->cfg->name, rec->name);
                recording_free(rec);
        }
}

static int on_window_over(sd_event_source *s, uint64_t usec, void *userdata) {
        (void)s;
        (void)usec;
        trace_record_end(userdata, "window over");
        return 0;
}

int trace_record_start(struct tenant *tn, struct container *c, const char *name) {
        struct trace_recording **owner = c ? &c->recording : &tn->recording;
        struct trace_recording *rec;
        int r;

        if (!trace_name_valid(name))
                return -EINVAL;
        if (*owner)
                return -EBUSY;
        if (!(rec = calloc(1, sizeof(*rec))))
                return -ENOMEM;
        *rec = (struct trace_recording){ .tn = tn, .c = c, .root_fd = -1, .started_usec = tierd_now_usec(tn->t) };
        snprintf(rec->name, sizeof(rec->name), "%s", name);
        r = sd_event_add_time_relative(tn->t->event, &rec->end_src, CLOCK_MONOTONIC, tn->cfg->trace_window_usec,
                                       100 * 1000, on_window_over, rec);
        if (r < 0) {
                recording_free(rec);
                return r;
        }
        *owner = rec;
        tn->recordings++;
        log_info("tenant %s: trace %s: recording %s's first touches for %llu s", tn->cfg->name, name,
                 c ? c->id : "the host", (unsigned long long)(tn->cfg->trace_window_usec / 1000000));
        return 0;
}

void trace_record_drop(struct trace_recording *rec) {
        *owner_of(rec) = NULL;
        rec->tn->recordings--;
        recording_free(rec);
}

struct trace_read {
        trace_read_t done;
        void *userdata;
};

static void on_trace_read(void *userdata, int error, const char *data, size_t len) {
        _cleanup_free_ struct trace_read *rd = userdata;
        _cleanup_(trace_done) struct trace t = {};
        const char *why = NULL;
        int r = error;

        if (r == 0 && (r = trace_parse(data, len, &t, &why)) < 0)
                why = why ?: strerror(-r);
        rd->done(rd->userdata, r, r < 0 ? why : NULL, r < 0 ? NULL : &t);
}

int trace_read(struct tenant *tn, const char *name, trace_read_t done, void *userdata) {
        char key[TRACE_NAME_MAX + 16];
        struct trace_read *rd;
        int r = trace_store_key(name, key, sizeof(key));

        if (r < 0)
                return r;
        if (!(rd = malloc(sizeof(*rd))))
                return -ENOMEM;
        *rd = (struct trace_read){ .done = done, .userdata = userdata };
        if ((r = store_get(tn, key, TRACE_OBJECT_MAX, on_trace_read, rd)) < 0)
                free(rd);
        return r;
}
