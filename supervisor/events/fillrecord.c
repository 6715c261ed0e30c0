/* SPDX-License-Identifier: MIT */
/*
 * What a completed fill changes. Its checked bytes are shown to readers at
 * once (written), the owner's mode and times put back first; a PROTO_SYNC
 * makes them durable, and only then does the stub record them (synced), so
 * a crash or a power cut loses a record, never bytes a record vouches for.
 * A failed whole-file check punches the file back; a manifest gone from the
 * store makes the stub forget it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "containers.h"
#include "dispatch-internal.h"
#include "fillwatch.h"
#include "fsgroup.h"
#include "log.h"
#include "macro.h"
#include "quota.h"
#include "tally.h"
#include "trace.h"
#include "usage.h"

int inode_attrs_read(int fd, struct inode_attrs *a) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        a->mode = st.st_mode;
        ssize_t n = fgetxattr(fd, "security.capability", a->fcaps, sizeof(a->fcaps));
        if (n < 0 && errno != ENODATA && errno != ERANGE)
                return -errno;
        a->fcaps_len = n > 0 ? (size_t)n : 0; /* ERANGE: too long to be ours to keep */
        return 0;
}

int put_back_attrs(int fd, const struct inode_attrs *a, const struct timespec *mtime, bool whole) {
        struct timespec ts[2];
        struct stat st;

        if (whole && a->fcaps_len > 0 && fsetxattr(fd, "security.capability", a->fcaps, a->fcaps_len, 0) < 0)
                return log_error_errno(errno, "cannot put back file capabilities: %m");
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((st.st_mode & 07777) != (a->mode & 07777) && fchmod(fd, a->mode & 07777) < 0)
                return log_error_errno(errno, "cannot put back mode: %m");
        /* Both times: setting mtime alone is reported as FAN_MODIFY, with no
         * mount to tell it was ours (the private mount's ignore mark does not
         * apply), and would mark the file dirty. Both is FAN_ATTRIB. */
        ts[0] = st.st_atim;
        ts[1] = *mtime;
        if (futimens(fd, ts) < 0)
                return log_error_errno(errno, "cannot put back mtime: %m");
        return 0;
}

int stub_put_back_attrs(int fd, const struct stub *s, bool whole) {
        struct inode_attrs a = { .mode = s->mode, .fcaps_len = s->fcaps_len };
        memcpy(a.fcaps, s->fcaps, s->fcaps_len);
        return put_back_attrs(fd, &a, &s->mtime, whole);
}

/* What fills wrote, recorded or not yet. */
int tfile_written(const struct tfile *f, const struct stub *s, struct range_set *out) {
        int r = range_set_add_set(out, s->state == STUB_PARTIAL ? &s->populated : NULL);
        if (r == 0)
                r = range_set_add_set(out, &f->written);
        return r < 0 ? r : range_set_add_set(out, &f->syncing);
}

bool tfile_data_fills_in_flight(const struct tfile *f) {
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                if (!fl->sync && !fl->verify)
                        return true;
        return false;
}

/* In flight, in and waiting for the whole-file check, or written and
 * waiting for its record: not to fetch. */
void tfile_in_flight(const struct tfile *f, struct range_set *out) {
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                range_set_add(out, fl->start, fl->end);
        range_set_add_set(out, &f->unverified);
        range_set_add_set(out, &f->written);
        range_set_add_set(out, &f->syncing);
}

/* Every byte in, recorded or waiting for the whole-file check. */
bool tfile_all_in(const struct tfile *f, const struct stub *s) {
        _cleanup_(range_set_done) struct range_set in = {};
        range_set_add_set(&in, &s->populated);
        range_set_add_set(&in, &f->unverified);
        return range_set_covers(&in, 0, s->size);
}

unsigned tfile_fills_in_flight(const struct tfile *f) {
        unsigned n = 0;
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                n++;
        return n;
}

bool tfile_verify_in_flight(const struct tfile *f) {
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                if (fl->verify)
                        return true;
        return false;
}

/* Writes the stub's record: the file whole (archived; checked says how),
 * or these ranges present. What it vouches for is durable by now. */
static int file_record(struct tfile *f, struct stub *s, bool whole, const struct range_set *present,
                       const char *checked) {
        int r;

        if (whole) {
                /* Our fills' modify events are queued: hear them while the
                 * stub still says partial, or they would make it dirty. */
                fsgroup_drain_notifications(f->fs);
                s->state = STUB_ARCHIVED;
                range_set_clear(&s->populated);
        } else {
                if (s->state == STUB_RELEASED) {
                        range_set_clear(&s->populated);
                        s->checked = true; /* nothing recorded yet */
                }
                s->state = STUB_PARTIAL;
                s->checked = s->checked && !f->unchecked_written;
                if ((r = range_set_add_set(&s->populated, present)) < 0)
                        return r;
                /* Fills in flight may add ranges beyond what a stub holds. */
                if (present->n)
                        range_set_limit(&s->populated, STUB_MAX_RANGES, present->r[present->n - 1].start);
        }
        /* Mode and times went back when the bytes were shown
         * (file_take_fill), not here: the owner may have changed them since
         * (chmod u-s after a read), and an archived record comes last, as
         * its ctime_max says nothing changed the file after it. */
        r = tally_stub_write(f->tenant, f->fd, s);
        if (r < 0)
                return r;
        usage_update_fd(f->tenant, f->fd);
        quota_check_high(f->tenant);
        if (whole) {
                /* While a trace records, reads of it are still heard
                 * (trace.h): its next event adds the mark once the trace
                 * has the whole file, or no trace records (preevent.c). */
                if (!trace_watching(f->tenant))
                        fsgroup_ignore_file(f->fs, f->fd);
                log_info("tenant %s: %s restored whole (%llu bytes, %s)", f->tenant->cfg->name, s->key,
                         (unsigned long long)s->size, checked);
                fillwatch_cross_check(f, s);
        }
        return 0;
}

/* The file's stub: 1 if it is whole already (archived, or dirty: written
 * by its owner since), and nothing of a fill's is to be recorded. */
static int stub_unless_whole(struct tfile *f, struct stub *s) {
        const char *err = "";
        int r = stub_read_fd(f->fd, s, &err);
        if (r < 0)
                return r;
        return s->state == STUB_ARCHIVED || s->state == STUB_DIRTY;
}

/* A completed fill: its bytes are shown to readers now (written), and
 * recorded once synced (file_sync_start) through the fill fd, which was
 * open before any fill wrote, so that it hears of every write error. A
 * passed verification makes the file whole the same way. */
static int file_take_fill(struct tfile *f, const struct fill *fl) {
        _cleanup_(stub_done) struct stub s = {};
        int r = stub_unless_whole(f, &s);

        if (r != 0)
                return MIN(r, 0);
        if (fl->gen != f->sync_gen)
                return 0; /* never recorded: read again, fetched again */
        if (fl->unverified)
                return range_set_add(&f->unverified, fl->start, fl->end);
        bool whole = fl->verify || fl->whole_verified;
        if (!whole && !fl->checked)
                f->unchecked_written = true;
        /* The owner's mode, times and capabilities back before anyone
         * reads (our writes changed them); the record comes later. */
        r = put_back_attrs(f->fd, &f->attrs, &s.mtime, whole);
        if (r < 0)
                return r;
        if (whole) {
                f->whole_written = true;
                return 0;
        }
        return range_set_add(&f->written, fl->start, fl->end);
}

/* What was synced, recorded. */
static int file_record_synced(struct tfile *f) {
        _cleanup_(stub_done) struct stub s = {};
        int r = stub_unless_whole(f, &s);

        if (r != 0)
                return MIN(r, 0);
        return file_record(f, &s, f->whole_syncing, &f->syncing, "SHA-256 checked");
}

bool tfile_chunks_checked(const struct tfile *f, const struct stub *s) {
        /* Only tierd writes a partial file (any other writer restores it
         * whole first: dispatch), as long as no notification was lost;
         * after a lost one, it is hashed whole. */
        return s->state == STUB_PARTIAL && s->has_manifest && s->checked && !f->unchecked_written &&
               !f->unverified.n && !f->fs->writes_maybe_missed && range_set_covers(&s->populated, 0, s->size);
}

int tfile_record_checked(struct tfile *f, struct stub *s) {
        /* The owner's mode and times, as a whole-file check's end puts
         * them back (file_take_fill). */
        static const struct range_set none = {};
        int r = put_back_attrs(f->fd, &f->attrs, &s->mtime, true);
        return r < 0 ? r : file_record(f, s, true, &none, "every chunk checked against its manifest");
}

static void sync_submit(struct tfile *f, struct request *req, uint64_t route) {
        worker_submit(container_worker(f->tenant, route), req);
}

#ifdef TIERD_TEST_HOOKS
/* Test builds: TIERD_TEST_SYNC_PAUSE_MS holds every sync back, so a test
 * can crash tierd, or cut the power, between a reader's answer and the
 * record (tests/integration/durability.sh). */
static int on_sync_pause_end(sd_event_source *src, uint64_t usec, void *userdata) {
        struct request *req = userdata;
        struct fill *fl = req->userdata;
        (void)usec;
        sd_event_source_unref(src);
        sync_submit(fl->file, req, fl->route);
        return 0;
}

static bool sync_paused(struct tfile *f, struct request *req) {
        const char *ms = getenv("TIERD_TEST_SYNC_PAUSE_MS");
        sd_event_source *src;
        return ms && sd_event_add_time_relative(f->tenant->t->event, &src, CLOCK_MONOTONIC,
                                                strtoull(ms, NULL, 10) * 1000, 0, on_sync_pause_end, req) >= 0;
}
#endif

/* Makes what fills wrote durable, then records it (on_sync_done): one sync
 * per file in flight; what is written meanwhile goes with the next. */
static void file_sync_start(struct tfile *f, uint64_t route) {
        if (f->syncing.n || f->whole_syncing || (!f->written.n && !f->whole_written))
                return;
        struct fill *fl = calloc(1, sizeof(*fl));
        struct request *req = fl ? request_new_borrowing(PROTO_SYNC, f->fd, tfile_fill_done, fl) : NULL;
        if (!req) {
                /* Never recorded: fetched again when read again. */
                free(fl);
                range_set_clear(&f->written);
                f->whole_written = false;
                return;
        }
        *fl = (struct fill){ .file = f, .sync = true, .next = f->fills, .reserved = f->written_reserved, .route = route };
        f->written_reserved = 0;
        f->fills = fl;
        struct range_set emptied = f->syncing; /* empty, maybe allocated */
        f->syncing = f->written;
        f->written = emptied;
        f->whole_syncing = f->whole_written;
        f->whole_written = false;
#ifdef TIERD_TEST_HOOKS
        if (sync_paused(f, req))
                return;
#endif
        sync_submit(f, req, route);
}

static void on_sync_done(struct tfile *f, struct fill *fl, int r) {
        f->tenant->quota_reserved -= MIN(fl->reserved, f->tenant->quota_reserved);
        if (r == 0)
                r = file_record_synced(f);
        if (r < 0) {
                /* Not recorded: those who read it have their bytes, the
                 * next readers fetch them again; who needed the record
                 * gets EIO. The error may have been any write's to the
                 * file (one fd): nothing written or in flight is recorded
                 * either, nor what waits for the whole-file check. */
                range_set_clear(&f->written);
                range_set_clear(&f->unverified);
                f->whole_written = false;
                f->sync_gen++;
                log_error_errno(r, "tenant %s: cannot make restored bytes durable, not recorded: %m",
                                f->tenant->cfg->name);
                tenant_set_last_error(f->tenant, "cannot make restored bytes durable: %s", strerror(-r));
                f->tenant->counters.fill_errors++;
                for (struct waiter *w = f->waiters; w; w = w->next)
                        if (w->needs_record)
                                w->error = EIO;
        }
        range_set_clear(&f->syncing);
        f->whole_syncing = false;
        file_sync_start(f, fl->route);
        free(fl);
        tfile_progress(f);
}

/* A failed whole-file check: the worker punched the file back. */
static void file_record_verify_failure(struct tfile *f) {
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        if (stub_read_fd(f->fd, &s, &err) < 0)
                return;
        s.state = STUB_RELEASED;
        range_set_clear(&s.populated);
        if (tally_stub_write(f->tenant, f->fd, &s) < 0 || put_back_attrs(f->fd, &f->attrs, &s.mtime, false) < 0)
                log_error("tenant %s: cannot reset the stub of a file that failed verification", f->tenant->cfg->name);
}

/* The manifest is gone from the store: the stub forgets it, and the file
 * restores whole from now on (checked by its whole-file hash). */
static int file_forget_manifest(struct tfile *f) {
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        int r = stub_read_fd(f->fd, &s, &err);
        if (r < 0 || !s.has_manifest)
                return r < 0 ? r : 0;
        s.has_manifest = false;
        r = tally_stub_write(f->tenant, f->fd, &s);
        if (r < 0)
                return r;
        log_warning("tenant %s: the manifest of %s is not in the store: the file restores whole from now on "
                    "(tierctl archive --rehash stores a new one)", f->tenant->cfg->name, s.key);
        tenant_set_last_error(f->tenant, "the manifest of %s is not in the store", s.key);
        return 0;
}

void tfile_fill_done(struct request *req, const struct proto_reply *rep) {
        struct fill *fl = req->userdata;
        struct tfile *f = fl->file;
        struct tenant_counters *c = &f->tenant->counters;
        int r = rep->error;

        /* The writes of this fill are queued by now: heard while it is
         * still in flight, they are its own. */
        fillwatch_drain(f->fs);
        for (struct fill **p = &f->fills; *p; p = &(*p)->next)
                if (*p == fl) {
                        *p = fl->next;
                        break;
                }
        if (fl->sync) {
                on_sync_done(f, fl, r);
                return;
        }
        if (r == 0 && !fl->verify && !fl->unverified)
                f->written_reserved += fl->reserved; /* until recorded */
        else
                f->tenant->quota_reserved -= MIN(fl->reserved, f->tenant->quota_reserved);
        if (r == 0 && !fl->verify) {
                c->fills++;
                c->fill_bytes += rep->bytes;
        }
        if (!fl->verify)
                container_count_fill(f->tenant, fl->route, rep->bytes, r == 0);
        if (r == 0)
                r = file_take_fill(f, fl);
        if (r == -PROTO_ENOMANIFEST && file_forget_manifest(f) == 0) {
                free(fl);
                tfile_progress(f); /* its waiters restore it whole now */
                return;
        }
        if (r < 0) {
                c->fill_errors++;
                log_error_errno(r, "tenant %s: %s of %s [%llu, %llu) failed: %m", f->tenant->cfg->name,
                                fl->verify ? "verification" : "fill", req->msg.key, (unsigned long long)fl->start,
                                (unsigned long long)fl->end);
                tenant_set_last_error(f->tenant, "%s of %s [%llu, %llu) failed: %s",
                                      fl->verify ? "verification" : "fill", req->msg.key,
                                      (unsigned long long)fl->start, (unsigned long long)fl->end, strerror(-r));
                /* A whole-file check failed: the worker punched the file
                 * back, and the record says so. A ranged fill whose chunk
                 * did not match wrote nothing wrong (chunks are checked
                 * before they are written): the ranges readers were given
                 * stay recorded and on disk. */
                if (r == -EBADMSG && (fl->verify || fl->whole_verified)) {
                        file_record_verify_failure(f);
                        range_set_clear(&f->unverified); /* punched back with the rest */
                }
                /* Everyone who needed these bytes gets an error, never zeros:
                 * ENOSPC as it is (the local filesystem is full), else EIO. */
                for (struct waiter *w = f->waiters; w; w = w->next)
                        if (w->whole || fl->verify || fl->whole_verified || (w->start < fl->end && fl->start < w->want_end))
                                w->error = r == -ENOSPC ? ENOSPC : EIO;
        }
        file_sync_start(f, fl->route);
        free(fl);
        tfile_progress(f);
}
