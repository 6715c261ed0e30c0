/* SPDX-License-Identifier: MIT */
#include "hydrate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dispatch.h"
#include "handle.h"
#include "log.h"
#include "macro.h"
#include "pace.h"
#include "quota.h"
#include "stub.h"
#include "usage.h"

struct hydrate_entry {
        union file_handle_buf h;
        uint64_t route;
};

struct hydrate {
        struct tenant *tn; /* NULL once stopped: freed when nothing is in flight */
        struct hydrate_entry ring[HYDRATE_QUEUE];
        unsigned head, n;  /* queued: ring[head], ... */
        unsigned running;  /* files in flight */
        sd_event_source *pump_src;
        sd_event_source *pace_src; /* prefetch_rate (pace.h) */
};

/* Files looked at in one turn of the loop (already whole, gone, started). */
#define PUMP_TURN 16

static void hydrate_free(struct hydrate *h) {
        sd_event_source_disable_unref(h->pump_src);
        sd_event_source_disable_unref(h->pace_src);
        free(h);
}

static void pump_later(struct hydrate *h);

static void on_hydrated(void *userdata, int error) {
        struct hydrate *h = userdata;

        h->running--;
        if (!h->tn) {
                if (!h->running)
                        hydrate_free(h);
                return;
        }
        if (error == 0)
                h->tn->counters.hydrated_files++;
        else
                log_warning_errno(error, "tenant %s: a file read in part could not be fetched whole: %m",
                                  h->tn->cfg->name);
        pump_later(h);
}

/* 1: started, 0: nothing to do (whole already, released again since it
 * was read, gone, no free room). */
static int start(struct hydrate *h, const struct hydrate_entry *e) {
        struct tenant *tn = h->tn;
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        uint64_t need;
        int r;

        /* O_PATH: only its handle is taken (the file's own fill fd is dispatch.c's). */
        _cleanup_close_ int fd = open_by_handle_at(tn->fs->root_fd, (struct file_handle *)&e->h.fh, O_PATH | O_CLOEXEC);
        if (fd < 0 || stub_read_fd(fd, &s, &err) < 0)
                return 0;
        /* Released with no fill of its read in flight: released again since
         * (tierctl release, the quota), which a hydration must not undo. */
        if (s.state != STUB_PARTIAL && !(s.state == STUB_RELEASED && dispatch_file_busy(tn->t, tn->fs, fd)))
                return 0;
        /* "hydrate_pinned" alone: pinned files only, by mark or by the name
         * the file has now (a readlink and the globs: no lookup). */
        if (!tn->cfg->restore_progressive && !usage_pinned_fd(tn, fd))
                return 0;
        need = s.size - MIN(s.state == STUB_PARTIAL ? range_set_total(&s.populated) : 0, s.size);
        /* Only room that is free: a hydration never makes a tenant release files. */
        if (!quota_room(tn, need)) {
                log_info("tenant %s: %s stays partial: no free room under the quota's high watermark to fetch it whole",
                         tn->cfg->name, s.key);
                return 0;
        }
        h->running++; /* on_hydrated may run before dispatch_prefetch returns */
        r = dispatch_prefetch(tn, fd, 0, s.size, true, e->route, on_hydrated, h);
        if (r < 0) {
                h->running--;
                return r;
        }
        pace_spend(tn, need);
        return 1;
}

static void pump(struct hydrate *h);

static int on_paced(sd_event_source *s, uint64_t usec, void *userdata) {
        (void)s, (void)usec;
        pump(userdata);
        return 0;
}

static void pump(struct hydrate *h) {
        struct tenant *tn = h->tn;

        if (!hydrate_wanted(tn) || tn->t->stopping)
                h->n = 0; /* no longer asked for */
        for (unsigned looked = 0; h->n && h->running < HYDRATE_FILES; looked++) {
                if (looked == PUMP_TURN) {
                        pump_later(h);
                        return;
                }
                if (!pace_ready(tn, &h->pace_src, on_paced, h))
                        return;
                struct hydrate_entry *e = &h->ring[h->head];
                h->head = (h->head + 1) % HYDRATE_QUEUE;
                h->n--;
                int r = start(h, e);
                if (r < 0)
                        log_error_errno(r, "tenant %s: cannot fetch a file read in part whole: %m", tn->cfg->name);
        }
}

static int on_pump(sd_event_source *s, void *userdata) {
        (void)s;
        pump(userdata);
        return 0;
}

/* From the loop, in turns: never from inside a fill's callback (in the
 * middle of a file's progress, dispatch.c), nor from the event path. */
static void pump_later(struct hydrate *h) {
        int r = tierd_defer_once(h->tn->t->event, &h->pump_src, on_pump, h);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot go on fetching files whole: %m", h->tn->cfg->name);
}

/* With "hydrate_pinned" alone: is the file pinned? Its mark, and the
 * globs on its name beneath the subvolume: an O_PATH open by handle on
 * tierd's own mount (the file is open by its reader: its name is in the
 * dcache) and a readlink, no lookup and no lock a tenant holds. */
static bool pinned_now(struct tenant *tn, const struct file_handle *fh) {
        _cleanup_close_ int fd = open_by_handle_at(tn->fs->root_fd, (struct file_handle *)fh, O_PATH | O_CLOEXEC);
        return fd >= 0 && usage_pinned_fd(tn, fd);
}

bool hydrate_touched(struct tenant *tn, const struct file_handle *fh, uint64_t route) {
        struct hydrate *h = tn->hydrate;

        /* Pinned files only: the others never take a place in the queue,
         * which they would fill while a big file is fetched. */
        if (!tn->cfg->restore_progressive && !pinned_now(tn, fh))
                return true; /* nothing to ask: not again for this file's reads */
        if (!h && !(h = tn->hydrate = calloc(1, sizeof(*h))))
                return false;
        h->tn = tn;
        if (h->n == HYDRATE_QUEUE || fh->handle_bytes > MAX_HANDLE_SZ)
                return false;
        struct hydrate_entry *e = &h->ring[(h->head + h->n++) % HYDRATE_QUEUE];
        memcpy(&e->h.fh, fh, sizeof(*fh) + fh->handle_bytes);
        e->route = route;
        pump_later(h);
        return true;
}

void hydrate_stop(struct tenant *tn) {
        struct hydrate *h = tn->hydrate;

        if (!h)
                return;
        tn->hydrate = NULL;
        h->tn = NULL;
        h->n = 0;
        h->pump_src = sd_event_source_disable_unref(h->pump_src);
        h->pace_src = sd_event_source_disable_unref(h->pace_src);
        if (!h->running)
                hydrate_free(h);
}
