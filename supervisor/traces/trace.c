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
#include "prefetch.h"
#include "storeio.h"
#include "traceformat.h"
#include "tracelock.h"
#include "tracework.h"

struct trace_recording {
        struct tenant *tn;
        struct container *c; /* NULL: the tenant's host readers; only while it records */
        uint64_t serial;     /* c's, found again when the run is saved (it may be gone) */
        char name[TRACE_NAME_MAX + 1];
        uint64_t started_usec;   /* monotonic */
        struct timespec started; /* realtime: files' ctimes are compared with it */
        sd_event_source *end_src;
        struct trace_touch *touches;
        size_t n, allocated;
        bool dropped; /* touches past TRACE_TOUCHES_MAX */
        struct trace_ahead *ahead; /* fetched ahead for this run (prefetch.c) */
        size_t n_ahead;
        /* Saving, once the window is over (tracework.c). A trace object is
         * read, merged and written whole, so two runs of one name saved at
         * once would each merge into the same old object and the first
         * write would be lost: one run a name at a time, the others queued
         * behind it (replicas of one workload end their windows together);
         * other nodes' are kept out by the name's lock (tracelock.h). */
        struct trace_lock *lock;
        char *subvol_rel;
        struct trace_save save;
        struct trace_recording *next_saving; /* the tenant's list of saves in flight */
        struct trace_recording *queued;      /* the next run of the same name */
};

static void recording_free(struct trace_recording *rec) {
        if (!rec)
                return;
        sd_event_source_disable_unref(rec->end_src);
        trace_lock_release(rec->lock);
        free(rec->subvol_rel);
        free(rec->touches);
        for (size_t i = 0; i < rec->n_ahead; i++)
                free(rec->ahead[i].path);
        free(rec->ahead);
        free(rec->save.old);
        free(rec->save.text);
        free(rec);
}

bool trace_watching(const struct tenant *tn) { return tn->recordings > 0; }

static struct trace_recording **owner_of(struct trace_recording *rec) {
        return rec->c ? &rec->c->recording : &rec->tn->recording;
}

/* The touched file's handle with its parent's: the files are named when
 * the window closes (tracework.c), and by then memory pressure may have
 * dropped the file's dentry; a plain handle then opens to a file with no
 * path, and the touch would be lost. The flag refuses AT_EMPTY_PATH, so
 * through /proc (the fd's own path, whatever mount namespace it was opened
 * in); a kernel before 6.13 gives the plain handle. */
static int touch_handle_of(int fd, struct file_handle *fh) {
        char proc[48], link[2];
        int mount_id;

        snprintf(proc, sizeof(proc), "/proc/thread-self/fd/%d", fd);
        fh->handle_bytes = MAX_HANDLE_SZ;
        /* Not for a file with no path itself (opened by handle, by knfsd
         * or a backup tool): the kernel warns (WARN_ON) on a connectable
         * handle of a disconnected file, which its AT_EMPTY_PATH refusal
         * means to keep out. */
        bool disconnected = readlink(proc, link, sizeof(link)) == 1 && link[0] == '/';
        if (!disconnected &&
            name_to_handle_at(AT_FDCWD, proc, fh, &mount_id, AT_SYMLINK_FOLLOW | AT_HANDLE_CONNECTABLE) == 0)
                return 0;
        fh->handle_bytes = MAX_HANDLE_SZ;
        return name_to_handle_at(fd, "", fh, &mount_id, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

bool trace_touch(struct tenant *tn, uint64_t route, int fd, const struct stub *s, uint64_t start, uint64_t end) {
        struct container *c = route ? container_by_serial(tn, route) : NULL;
        struct trace_recording *rec = c ? c->recording : route ? NULL : tn->recording;
        bool resident = s->state == STUB_ARCHIVED || s->state == STUB_DIRTY;
        union file_handle_buf h;
        const struct file_handle *fh = &h.fh;
        uint64_t chunk = s->chunk ?: 1;

        /* Another reader's access (the host's, a container no trace
         * follows) must not make the file silent for one a trace follows. */
        if (!rec)
                return false;
        if (touch_handle_of(fd, &h.fh) < 0 || !range_round_to_chunks(&start, &end, chunk, s->size))
                return true;
        /* A sequential reader touches the same file again and again: one
         * touch while it goes on. */
        struct trace_touch *last = rec->n ? &rec->touches[rec->n - 1] : NULL;
        if (last && file_handle_equal(&last->h.fh, fh) && start <= last->end && end >= last->start) {
                last->start = MIN(last->start, start);
                last->end = MAX(last->end, end);
                last->resident |= resident;
                return last->start == 0 && last->end >= s->size;
        }
        struct trace_touch *grown =
                rec->n < TRACE_TOUCHES_MAX ? array_room(rec->touches, rec->n, &rec->allocated, sizeof(*grown), 64) : NULL;
        if (!grown) {
                rec->dropped = true;
                return true;
        }
        rec->touches = grown;
        struct trace_touch *t = &rec->touches[rec->n++];
        memcpy(&t->h, fh, sizeof(*fh) + fh->handle_bytes);
        snprintf(t->key, sizeof(t->key), "%s", s->key);
        t->size = s->size;
        t->start = start;
        t->end = end;
        t->at_ms = (uint32_t)MIN((tierd_now_usec(tn->t) - rec->started_usec) / 1000, UINT32_MAX);
        t->resident = resident;
        return start == 0 && end >= s->size;
}

void trace_fetched_ahead(struct trace_recording *rec, const char *path, uint64_t bytes) {
        struct trace_ahead *a;
        /* At most a trace's files (and a recording's lifetime). */
        if (!rec || rec->n_ahead >= TRACE_FILES_MAX || !(a = reallocarray(rec->ahead, rec->n_ahead + 1, sizeof(*a))))
                return;
        rec->ahead = a;
        if ((a[rec->n_ahead].path = strdup(path)))
                a[rec->n_ahead++].bytes = bytes;
}

static int save_start(struct trace_recording *rec);

static void save_unlist(struct trace_recording *rec) {
        for (struct trace_recording **p = &rec->tn->saving; *p; p = &(*p)->next_saving)
                if (*p == rec) {
                        *p = rec->next_saving;
                        return;
                }
}

/* The run saved, or not (said): the next of its name starts, if one waits.
 * A loop, not a recursion: every start may fail at once. */
static void save_end(struct trace_recording *rec) {
        struct trace_recording *next = rec->queued;
        struct tenant *tn = rec->tn;
        unsigned dropped = 0;
        int r = 0;

        save_unlist(rec);
        recording_free(rec);
        for (; next; next = rec) {
                rec = next->queued;
                if (!tn->t->stopping && (r = save_start(next)) >= 0)
                        break; /* the rest wait behind it, as they did */
                if (!tn->t->stopping)
                        log_error_errno(r, "tenant %s: trace %s: cannot store a run: %m", tn->cfg->name, next->name);
                dropped += tn->t->stopping;
                save_unlist(next);
                recording_free(next);
        }
        if (dropped) /* no worker to read and write it any more */
                log_warning("tenant %s: %u run(s) of a trace waiting to be saved at the stop: dropped", tn->cfg->name,
                            dropped);
        tierd_check_idle(tn->t); /* a stop waits for saves under way (tierd_idle) */
}

static void on_saved(void *userdata, int error) {
        struct trace_recording *rec = userdata;

        if (error < 0)
                log_error_errno(error, "tenant %s: trace %s: cannot store it: %m", rec->tn->cfg->name, rec->name);
        else
                log_info("tenant %s: trace %s stored: run %u, %zu files, %zu ranges, %llu bytes; %llu bytes fetched "
                         "ahead in files this run did not read",
                         rec->tn->cfg->name, rec->name, rec->save.runs, rec->save.files, rec->save.ranges,
                         (unsigned long long)rec->save.bytes, (unsigned long long)rec->save.wasted);
        save_end(rec);
}

/* Back from tracework.c: the merged trace goes to the store. */
static void on_merged(void *userdata) {
        struct trace_save *sv = userdata;
        struct trace_recording *rec = sv->owner;
        char key[TRACE_NAME_MAX + 16];
        int r = sv->error;

        if (sv->named < rec->n)
                log_info("tenant %s: trace %s: %zu of %zu touches left out (files deleted since, or names not "
                         "UTF-8)", rec->tn->cfg->name, rec->name, rec->n - sv->named, rec->n);
        rec->tn->counters.prefetch_wasted_bytes += sv->wasted;
        struct container *c = rec->serial ? container_by_serial(rec->tn, rec->serial) : NULL;
        if (c)
                c->prefetch_wasted_bytes += sv->wasted;
        if (sv->old_refused)
                log_error("tenant %s: trace %s in the store is refused (%s): it starts again from this run",
                          rec->tn->cfg->name, rec->name, sv->old_refused);
        /* What a read could not take back (and what the loop would hash
         * for its PUT at length) is not written. */
        size_t len = r == 0 ? strlen(sv->text) : 0;
        if (len > TRACE_OBJECT_MAX)
                r = -EFBIG;
        if (r < 0 || (r = trace_store_key(rec->name, key, sizeof(key))) < 0 ||
            (r = store_put(rec->tn, key, sv->text, len, false, on_saved, rec)) < 0)
                on_saved(rec, r);
}

/* The stored trace (or none): named, merged and formatted on a thread. */
static void on_old_trace(void *userdata, int error, const char *data, size_t len) {
        struct trace_recording *rec = userdata;
        struct tenant *tn = rec->tn;
        int r = 0;

        /* A trace that is not there, or not one (too big, or not its bytes:
         * refused, as a corrupt one is), starts again from this run. One
         * that could not be read for a passing reason is kept, and this run
         * is not saved over it. */
        const char *refused = error == -EFBIG ? "larger than a trace may be" : error == -EBADMSG ? "corrupt" : NULL;
        if (error < 0 && error != -ENOENT && !refused) {
                log_error_errno(error, "tenant %s: trace %s: cannot read it: %m: this run is not saved, what is stored "
                                "is kept", tn->cfg->name, rec->name);
                save_end(rec);
                return;
        }
        rec->save = (struct trace_save){ .owner = rec, .name = rec->name, .root_fd = tn->fs->root_fd,
                                         .subvol_fd = tn->subvol_fd, .started = rec->started,
                                         .touches = rec->touches, .n = rec->n, .ahead = rec->ahead,
                                         .n_ahead = rec->n_ahead };
        rec->save.old_refused = refused;
        if (error == 0 && !(rec->save.old = trace_copy(data, len)))
                r = -ENOMEM;
        rec->save.old_len = len;
        if (r == 0 && !(rec->subvol_rel = strdup(tn->subvol_rel)))
                r = -ENOMEM;
        rec->save.subvol_rel = rec->subvol_rel;
        if (r == 0)
                r = offthread_start(tn->t->event, (int[]){ rec->save.root_fd, rec->save.subvol_fd }, 2,
                                    trace_work_save, on_merged, &rec->save, NULL);
        if (r < 0)
                on_saved(rec, r);
}

void trace_record_end(struct trace_recording *rec, const char *why) {
        struct tenant *tn = rec->tn;

        *owner_of(rec) = NULL;
        tn->recordings--;
        rec->end_src = sd_event_source_disable_unref(rec->end_src);
        log_info("tenant %s: trace %s: %s after %llu ms, %zu first touches%s", tn->cfg->name, rec->name, why,
                 (unsigned long long)((tierd_now_usec(tn->t) - rec->started_usec) / 1000), rec->n,
                 rec->dropped ? " (more were dropped: a run keeps at most 8192)" : "");
        /* A container gone at once read nothing: no run to age the trace
         * with. At a stop there is no worker left to save with. */
        if ((rec->n == 0 && strcmp(why, "window over") != 0) || tn->t->stopping) {
                recording_free(rec);
                return;
        }
        for (struct trace_recording *s = tn->saving; s; s = s->next_saving) {
                if (strcmp(s->name, rec->name) != 0)
                        continue;
                unsigned waiting = 0;
                for (; s->queued; s = s->queued)
                        waiting++;
                /* A store that is slow or down holds them all: at most
                 * TRACE_SAVES_WAITING runs' touches wait in memory. */
                if (waiting >= TRACE_SAVES_WAITING) {
                        log_warning("tenant %s: trace %s: %u runs wait to be saved already: this one is dropped",
                                    tn->cfg->name, rec->name, waiting);
                        recording_free(rec);
                } else
                        s->queued = rec;
                return;
        }
        int r = save_start(rec);
        if (r < 0) {
                log_error_errno(r, "tenant %s: trace %s: cannot store it: %m", tn->cfg->name, rec->name);
                save_end(rec);
        }
}

/* The name's lock held: the stored trace read, for the run to merge into
 * (on_old_trace). */
static void on_locked(void *userdata, int error) {
        struct trace_recording *rec = userdata;
        char key[TRACE_NAME_MAX + 16];
        int r = error;

        if (r == -ETIMEDOUT)
                log_error("tenant %s: trace %s: another node's save of it held its lock for %d s: this run is not "
                          "saved", rec->tn->cfg->name, rec->name, TRACE_LOCK_WAIT_SEC);
        else if (r < 0 || (r = trace_store_key(rec->name, key, sizeof(key))) < 0 ||
                 (r = store_get(rec->tn, key, TRACE_OBJECT_MAX, on_old_trace, rec)) < 0)
                log_error_errno(r, "tenant %s: trace %s: cannot store it: %m", rec->tn->cfg->name, rec->name);
        if (r < 0)
                save_end(rec);
}

static int save_start(struct trace_recording *rec) {
        rec->next_saving = rec->tn->saving;
        rec->tn->saving = rec;
        return trace_lock_take(rec->tn, rec->name, on_locked, rec, &rec->lock);
}

void trace_saves_stop(struct tenant *tn) {
        /* Only those waiting for another node's lock: nothing of theirs is
         * in the worker's hands, so nothing would end them. The others end
         * with their requests. */
        for (struct trace_recording *rec = tn->saving, *next; rec; rec = next) {
                next = rec->next_saving;
                if (!rec->lock || !trace_lock_waiting(rec->lock))
                        continue;
                log_warning("tenant %s: trace %s: a run waiting for another node's save of it at the stop: dropped",
                            tn->cfg->name, rec->name);
                save_end(rec);
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
        if (tn->cfg->trace_window_usec == 0) /* the tenant's traces are off */
                return -EOPNOTSUPP;
        if (*owner)
                return -EBUSY;
        if (!(rec = calloc(1, sizeof(*rec))))
                return -ENOMEM;
        *rec = (struct trace_recording){ .tn = tn, .c = c, .serial = c ? c->serial : 0,
                                         .started_usec = tierd_now_usec(tn->t) };
        clock_gettime(CLOCK_REALTIME, &rec->started);
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

/* What is open for one route (the host's, or a container's): gone. */
static unsigned traces_off(struct trace_recording **rec, struct prefetch **p) {
        unsigned n = (*rec != NULL) + (*p != NULL);
        if (*rec)
                trace_record_drop(*rec);
        if (*p)
                prefetch_cancel(*p);
        return n;
}

void trace_policy_changed(struct tenant *tn) {
        if (tn->cfg->trace_window_usec != 0)
                return;
        /* Turned off: nothing more is recorded (what was, is not saved) or
         * fetched ahead. */
        unsigned n = traces_off(&tn->recording, &tn->prefetch);
        for (struct container *c = tn->t->containers; c; c = c->next)
                if (c->tenant == tn)
                        n += traces_off(&c->recording, &c->prefetch);
        if (n)
                log_info("tenant %s: traces turned off (trace_window 0s): %u recordings and prefetches ended",
                         tn->cfg->name, n);
}

struct trace_read {
        sd_event *event;
        trace_read_t done;
        void *userdata;
        struct trace_lookup lk;
};

static void trace_read_free(struct trace_read *rd) {
        free(rd->lk.data);
        trace_done(&rd->lk.trace);
        free(rd);
}

static void on_parsed(void *userdata) {
        struct trace_read *rd = ((struct trace_lookup *)userdata)->owner;
        rd->done(rd->userdata, rd->lk.error, rd->lk.error < 0 ? rd->lk.why : NULL, &rd->lk.trace);
        trace_read_free(rd);
}

/* The object's bytes, parsed on a thread: up to TRACE_OBJECT_MAX of them. */
static void on_trace_read(void *userdata, int error, const char *data, size_t len) {
        struct trace_read *rd = userdata;
        int r = error;

        if (r == 0 && !(rd->lk.data = trace_copy(data, len)))
                r = -ENOMEM;
        rd->lk.len = len;
        if (r == 0 && (r = offthread_start(rd->event, NULL, 0, trace_work_lookup, on_parsed, &rd->lk, NULL)) >= 0)
                return;
        rd->done(rd->userdata, r, NULL, NULL);
        trace_read_free(rd);
}

int trace_read(struct tenant *tn, const char *name, trace_read_t done, void *userdata) {
        char key[TRACE_NAME_MAX + 16];
        struct trace_read *rd;
        int r = trace_store_key(name, key, sizeof(key));

        if (r < 0)
                return r;
        if (!(rd = calloc(1, sizeof(*rd))))
                return -ENOMEM;
        *rd = (struct trace_read){ .event = tn->t->event, .done = done, .userdata = userdata,
                                   .lk = { .subvol_fd = -1 } };
        rd->lk.owner = rd;
        if ((r = store_get(tn, key, TRACE_OBJECT_MAX, on_trace_read, rd)) < 0)
                free(rd);
        return r;
}
