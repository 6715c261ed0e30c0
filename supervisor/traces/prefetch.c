/* SPDX-License-Identifier: MIT */
#include "prefetch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "containers.h"
#include "dispatch.h"
#include "handle.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "pace.h"
#include "quota.h"
#include "ranges.h"
#include "storeio.h"
#include "trace.h"
#include "traceformat.h"
#include "tracework.h"

struct prefetch {
        struct tenant *tn;
        struct container *c; /* NULL: the host's readers */
        char name[TRACE_NAME_MAX + 1];
        struct trace_lookup lk; /* the trace, and its files found again (tracework.c) */
        struct offthread *thread;
        sd_event_source *pump_src; /* the next files start from the loop, not from a fill's callback */
        sd_event_source *pace_src; /* and when prefetch_rate lets them (pace.h) */
        bool cancelled, getting; /* getting: the object is on its way (store_get) */
        size_t next;          /* the next file to start */
        unsigned running;     /* files in flight */
        uint64_t started_usec, bytes;
        size_t fetched, resident, skipped, failed;
};

/* Files looked at in one turn of the loop (resident, skipped or started). */
#define PUMP_TURN 16

static struct prefetch **owner_of(struct prefetch *p) { return p->c ? &p->c->prefetch : &p->tn->prefetch; }

static void prefetch_free(struct prefetch *p) {
        sd_event_source_disable_unref(p->pump_src);
        sd_event_source_disable_unref(p->pace_src);
        safe_close(p->lk.subvol_fd);
        free(p->lk.data);
        trace_done(&p->lk.trace);
        free(p->lk.files);
        free(p);
}

static void pump(struct prefetch *p);

static void prefetch_finish(struct prefetch *p) {
        log_info("tenant %s: trace %s fetched ahead of %s in %llu ms: %zu files (%llu bytes), %zu already here, "
                 "%zu skipped, %zu failed",
                 p->tn->cfg->name, p->name, p->c ? p->c->id : "the host",
                 (unsigned long long)((tierd_now_usec(p->tn->t) - p->started_usec) / 1000), p->fetched,
                 (unsigned long long)p->bytes, p->resident, p->skipped, p->failed);
        *owner_of(p) = NULL;
        prefetch_free(p);
}

static void on_range(void *userdata, int error);

struct range_done {
        struct prefetch *p;
        size_t file;
        uint64_t bytes;
};

static int on_pump(sd_event_source *s, void *userdata) {
        (void)s;
        pump(userdata);
        return 0;
}

/* The next files start from the loop, in turns: never from inside a
 * fill's callback (in the middle of a file's progress, dispatch.c), and
 * never more than PUMP_TURN files a turn, however many complete at once. */
static void pump_later(struct prefetch *p) {
        int r = tierd_defer_once(p->tn->t->event, &p->pump_src, on_pump, p);
        if (r < 0)
                log_error_errno(r, "tenant %s: trace %s: cannot go on fetching ahead: %m", p->tn->cfg->name, p->name);
}

static void file_done(struct prefetch *p) {
        p->running--;
        if (p->cancelled) {
                if (!p->running)
                        prefetch_free(p);
                return;
        }
        pump_later(p);
}

static void on_range(void *userdata, int error) {
        struct range_done *d = userdata;
        struct prefetch *p = d->p;
        struct prefetch_file *pf = &p->lk.files[d->file];

        if (error == 0)
                p->tn->counters.prefetched_bytes += d->bytes;
        if (error == 0 && p->c && !p->cancelled) /* a cancelled one's container may be gone */
                p->c->prefetched_bytes += d->bytes;
        free(d);
        if (error < 0 && !p->cancelled) {
                p->failed++;
                log_error_errno(error, "tenant %s: trace %s: cannot fetch %s ahead: %m", p->tn->cfg->name, p->name,
                                p->lk.trace.files[pf - p->lk.files].path);
        }
        if (--pf->pending == 0)
                file_done(p);
}

/* What of the file to fetch: its ranges as one set (a trace may hold
 * overlapping ones, from different runs), or all of it. */
static int file_ranges(const struct trace_file *tf, bool whole, struct range_set *out) {
        int r = 0;
        if (whole)
                return range_set_add(out, 0, tf->size);
        for (size_t j = 0; j < tf->n && r >= 0; j++)
                r = range_set_add(out, tf->r[j].start, tf->r[j].end);
        return r;
}

/* The file's ranges to dispatch.c: a reader of them meanwhile waits for
 * these fills. 1: all in already (nothing in flight), 0: started. */
static int file_start(struct prefetch *p, size_t i) {
        const struct trace_file *tf = &p->lk.trace.files[i];
        struct prefetch_file *pf = &p->lk.files[i];
        _cleanup_(range_set_done) struct range_set want = {};
        uint64_t route = p->c ? p->c->serial : 0;
        int r;

        if ((r = file_ranges(tf, pf->whole, &want)) < 0)
                return r;
        /* Only room that is free: a prefetch never makes a tenant release files. */
        if (!quota_room(p->tn, range_set_total(&want)))
                return -EDQUOT;
        /* O_PATH: only its handle is taken (the file's own fill fd is dispatch.c's). */
        _cleanup_close_ int fd = open_by_handle_at(p->tn->fs->root_fd, &pf->h.fh, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        pace_spend(p->tn, range_set_total(&want));
        pf->pending = 1; /* until every range is started: a fill done at once frees nothing */
        p->running++;
        for (size_t j = 0; j < want.n; j++) {
                struct range_done *d = malloc(sizeof(*d));
                if (!d) {
                        r = -ENOMEM;
                        break;
                }
                *d = (struct range_done){ .p = p, .file = i, .bytes = want.r[j].end - want.r[j].start };
                pf->pending++;
                if ((r = dispatch_prefetch(p->tn, fd, want.r[j].start, want.r[j].end, pf->whole, route, on_range,
                                           d)) < 0) {
                        free(d);
                        pf->pending--;
                        break;
                }
                p->bytes += want.r[j].end - want.r[j].start;
        }
        p->fetched++;
        trace_fetched_ahead(p->c ? p->c->recording : p->tn->recording, tf->path, range_set_total(&want));
        if (r < 0) {
                p->failed++;
                log_error_errno(r, "tenant %s: trace %s: cannot fetch %s ahead: %m", p->tn->cfg->name, p->name,
                                tf->path);
        }
        if (--pf->pending > 0)
                return 0;
        p->running--;
        return 1;
}

/* Whether file i is fetched, and why not. */
static void file_consider(struct prefetch *p, size_t i) {
        struct prefetch_file *pf = &p->lk.files[i];
        const char *path = p->lk.trace.files[i].path;

        if (pf->state == PF_RESIDENT) {
                p->resident++;
                return;
        }
        if (pf->state != PF_FETCH) {
                p->skipped++;
                log_info("tenant %s: trace %s: %s skipped: %s since the trace", p->tn->cfg->name, p->name, path,
                         pf->state == PF_GONE ? "gone" : "its content changed");
                return;
        }
        int r = file_start(p, i);
        if (r == -EDQUOT) {
                log_info("tenant %s: trace %s: no free room under the quota for %s: the rest is not fetched ahead",
                         p->tn->cfg->name, p->name, path);
                p->skipped += p->lk.trace.n_files - i;
                p->next = p->lk.trace.n_files;
        } else if (r < 0) {
                p->failed++;
                log_error_errno(r, "tenant %s: trace %s: cannot open %s: %m", p->tn->cfg->name, p->name, path);
        }
}

static int on_paced(sd_event_source *s, uint64_t usec, void *userdata) {
        (void)s, (void)usec;
        pump(userdata);
        return 0;
}

/* Starts files in trace order while fewer than PREFETCH_FILES are in
 * flight, at most PUMP_TURN of them this turn. */
static void pump(struct prefetch *p) {
        unsigned turn = 0;

        while (!p->cancelled && p->running < PREFETCH_FILES && p->next < p->lk.trace.n_files) {
                if (++turn > PUMP_TURN) {
                        pump_later(p);
                        return;
                }
                if (!pace_ready(p->tn, &p->pace_src, on_paced, p))
                        return;
                file_consider(p, p->next++);
        }
        if (!p->cancelled && !p->running && p->next == p->lk.trace.n_files)
                prefetch_finish(p);
}

static void on_looked_up(void *userdata) {
        struct prefetch *p = ((struct trace_lookup *)userdata)->owner;
        p->thread = NULL;
        p->lk.subvol_fd = safe_close(p->lk.subvol_fd);
        if (p->lk.error == -EINVAL)
                log_error("tenant %s: trace %s in the store is refused: %s", p->tn->cfg->name, p->name,
                          p->lk.why ?: "not a trace");
        else if (p->lk.error < 0)
                log_error_errno(p->lk.error, "tenant %s: trace %s: cannot read it: %m", p->tn->cfg->name, p->name);
        if (p->lk.error < 0) {
                *owner_of(p) = NULL;
                prefetch_free(p);
                return;
        }
        pump(p);
}

static void on_looked_up_abandoned(void *userdata) { prefetch_free(((struct trace_lookup *)userdata)->owner); }

/* The stored trace: parsed, and its files found, on a thread. */
static void on_trace(void *userdata, int error, const char *data, size_t len) {
        struct prefetch *p = userdata;
        int r = error;

        p->getting = false;
        if (p->cancelled) {
                prefetch_free(p);
                return;
        }
        if (r == -ENOENT)
                log_info("tenant %s: trace %s: none stored yet: nothing to fetch ahead", p->tn->cfg->name, p->name);
        else if (r < 0)
                log_error_errno(r, "tenant %s: trace %s: cannot read it: %m", p->tn->cfg->name, p->name);
        else if (!(p->lk.data = trace_copy(data, len)))
                r = -ENOMEM;
        else if ((p->lk.len = len, p->lk.subvol_fd = fcntl(p->tn->subvol_fd, F_DUPFD_CLOEXEC, 3)) < 0)
                r = -errno;
        else
                r = offthread_start(p->tn->t->event, &p->lk.subvol_fd, 1, trace_work_lookup, on_looked_up,
                                    &p->lk, &p->thread);
        if (r < 0) {
                *owner_of(p) = NULL;
                prefetch_free(p);
        }
}

int prefetch_start(struct tenant *tn, struct container *c, const char *name) {
        struct prefetch **owner = c ? &c->prefetch : &tn->prefetch;
        char key[TRACE_NAME_MAX + 16];
        struct prefetch *p;
        int r;

        if ((r = trace_store_key(name, key, sizeof(key))) < 0)
                return r;
        if (tn->cfg->trace_window_usec == 0) /* the tenant's traces are off */
                return -EOPNOTSUPP;
        if (*owner)
                return -EBUSY;
        if (!(p = calloc(1, sizeof(*p))))
                return -ENOMEM;
        *p = (struct prefetch){ .tn = tn, .c = c, .getting = true,
                                .lk = { .owner = p, .subvol_fd = -1, .small_file = tn->cfg->small_file,
                                        .restore_whole = tn->cfg->restore_whole, .verify = tn->cfg->verify },
                                .started_usec = tierd_now_usec(tn->t) };
        snprintf(p->name, sizeof(p->name), "%s", name);
        if ((r = store_get(tn, key, TRACE_OBJECT_MAX, on_trace, p)) < 0) {
                free(p);
                return r;
        }
        *owner = p;
        return 0;
}

void prefetch_stop_all(struct tierd *t) {
        for (size_t i = 0; i < t->n_tenants; i++)
                if (t->tenants[i].prefetch)
                        prefetch_cancel(t->tenants[i].prefetch);
        for (struct container *c = t->containers; c; c = c->next)
                if (c->prefetch)
                        prefetch_cancel(c->prefetch);
}

void prefetch_cancel(struct prefetch *p) {
        *owner_of(p) = NULL;
        p->cancelled = true;
        if (p->thread)
                offthread_abandon(p->thread, on_looked_up_abandoned);
        else if (!p->getting && !p->running)
                prefetch_free(p);
        /* else: the last callback frees it */
}
