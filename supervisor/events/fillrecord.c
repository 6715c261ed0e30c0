/* SPDX-License-Identifier: MIT */
/*
 * What a completed fill changes. Its checked bytes are shown to readers at
 * once (written), the owner's mode and times put back first; a PROTO_SYNC
 * makes them durable, and only then does the stub record them (synced), so
 * a crash or a power cut loses a record, never bytes a record vouches for.
 * A failed whole-file check punches the file back; a manifest gone from the
 * store makes the stub forget it.
 *
 * The put-back after a fill and the record after a sync take the file's
 * inode lock, which the worker's own writes and syncs of the file hold for
 * long: they run on the tenant's inode threads (inodework.h), the fill or
 * sync staying in the file's list, in flight, until they are done.
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
#include "inodework.h"
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

/* -errno, and *what failed. Takes the inode lock: on the loop only where
 * no fill or sync of the file is in flight (inodework.h). */
static int put_back_quiet(int fd, const struct inode_attrs *a, const struct timespec *mtime, bool whole,
                          const char **what) {
        struct timespec ts[2];
        struct stat st;

        *what = "file capabilities";
        if (whole && a->fcaps_len > 0 && fsetxattr(fd, "security.capability", a->fcaps, a->fcaps_len, 0) < 0)
                return -errno;
        *what = "mode";
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((st.st_mode & 07777) != (a->mode & 07777) && fchmod(fd, a->mode & 07777) < 0)
                return -errno;
        /* Both times: setting mtime alone is reported as FAN_MODIFY, with no
         * mount to tell it was ours (the private mount's ignore mark does not
         * apply), and would mark the file dirty. Both is FAN_ATTRIB. */
        *what = "mtime";
        ts[0] = st.st_atim;
        ts[1] = *mtime;
        return futimens(fd, ts) < 0 ? -errno : 0;
}

int put_back_attrs(int fd, const struct inode_attrs *a, const struct timespec *mtime, bool whole) {
        const char *what;
        int r = put_back_quiet(fd, a, mtime, whole, &what);
        return r < 0 ? log_error_errno(r, "cannot put back %s: %m", what) : 0;
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

/* The stub's record, as s: the file whole (archived), or these ranges
 * present (unchecked: a ranged fill no manifest checked wrote some). What
 * it vouches for is durable by now. Touches nothing but s: it runs on an
 * inode thread too. */
static int record_apply(struct stub *s, bool whole, const struct range_set *present, bool unchecked) {
        if (whole) {
                s->state = STUB_ARCHIVED;
                range_set_clear(&s->populated);
                return 0;
        }
        if (s->state == STUB_RELEASED) {
                range_set_clear(&s->populated);
                s->checked = true; /* nothing recorded yet */
        }
        s->state = STUB_PARTIAL;
        s->checked = s->checked && !unchecked;
        int r = range_set_add_set(&s->populated, present);
        /* Fills in flight may add ranges beyond what a stub holds. */
        if (r == 0 && present->n)
                range_set_limit(&s->populated, STUB_MAX_RANGES, present->r[present->n - 1].start);
        return r;
}

/* Our fills' modify events are queued: heard before a whole record, while
 * the stub still says partial, or they would make the file dirty. */
static void record_drain(struct tfile *f, bool whole) {
        if (whole)
                fsgroup_drain_notifications(f->fs);
}

/* The record s is written (checked says how a whole file was). */
static void record_after(struct tfile *f, const struct stub *s, bool whole, const char *checked) {
        usage_update_fd(f->tenant, f->fd);
        quota_check_high(f->tenant);
        if (!whole)
                return;
        /* While a trace records, reads of it are still heard (trace.h): its
         * next event adds the mark once the trace has the whole file, or no
         * trace records (preevent.c). */
        if (!trace_watching(f->tenant))
                fsgroup_ignore_file(f->fs, f->fd);
        log_info("tenant %s: %s restored whole (%llu bytes, %s)", f->tenant->cfg->name, s->key,
                 (unsigned long long)s->size, checked);
        fillwatch_cross_check(f, s);
}

/* Writes the stub's record here, on the loop: only where no fill or sync
 * of the file is in flight (inodework.h). Mode and times went back when
 * the bytes were shown (file_take_fill), not here: the owner may have
 * changed them since (chmod u-s after a read), and an archived record
 * comes last, as its ctime_max says nothing changed the file after it. */
static int file_record(struct tfile *f, struct stub *s, bool whole, const struct range_set *present,
                       const char *checked) {
        record_drain(f, whole);
        int r = record_apply(s, whole, present, f->unchecked_written);
        if (r == 0 && (r = tally_stub_write(f->tenant, f->fd, s)) == 0)
                record_after(f, s, whole, checked);
        return r;
}

/* Whole already (archived, or dirty: written by its owner since): nothing
 * of a fill's is to be recorded. */
static bool recorded_whole(const struct stub *s) {
        return s->state == STUB_ARCHIVED || s->state == STUB_DIRTY;
}

/* The file's stub: 1 if it is recorded_whole. */
static int stub_unless_whole(struct tfile *f, struct stub *s) {
        const char *err = "";
        int r = stub_read_fd(f->fd, s, &err);
        if (r < 0)
                return r;
        return recorded_whole(s);
}

static bool reader_waits(const struct tfile *f) {
        for (const struct waiter *w = f->waiters; w; w = w->next)
                if (!w->ahead)
                        return true;
        return false;
}

/* After the file's last job (inodework.h), if its done() has not run. */
static void inode_submit(struct tfile *f, struct inode_job *j) {
        struct inode_job *after = f->inode_last;
        j->reader = reader_waits(f);
        f->inode_last = j;
        inode_work_submit(f->tenant, j, after);
}

static void inode_done(struct tfile *f, struct inode_job *j) {
        if (f->inode_last == j)
                f->inode_last = NULL;
}

/* A fill's put-back of its owner's mode, times and capabilities, on a
 * thread (the fill stays in the file's list meanwhile: in flight). */
struct put_back {
        struct inode_job job;
        struct fill *fl;
        int fd, error;
        struct inode_attrs attrs;
        struct timespec mtime;
        bool whole;
        const char *what;
        char key[STUB_KEY_MAX];
};

static void fill_end(struct tfile *f, struct fill *fl, int r, const char *key);

static void put_back_work(struct inode_job *j) {
        struct put_back *pb = container_of(j, struct put_back, job);
        pb->error = put_back_quiet(pb->fd, &pb->attrs, &pb->mtime, pb->whole, &pb->what);
}

/* Put back: its bytes are shown to readers now (written), and recorded
 * once synced (file_sync_start). A sync that failed since (sync_gen)
 * leaves them unrecorded: read again, fetched again. */
static void on_put_back(struct inode_job *j) {
        struct put_back *pb = container_of(j, struct put_back, job);
        struct fill *fl = pb->fl;
        struct tfile *f = fl->file;
        int r = pb->error;

        inode_done(f, j);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot put back the %s of %s: %m", f->tenant->cfg->name, pb->what,
                                pb->key);
        else if (fl->gen == f->sync_gen && pb->whole)
                f->whole_written = true;
        else if (fl->gen == f->sync_gen)
                r = range_set_add(&f->written, fl->start, fl->end);
        fill_end(f, fl, r, pb->key);
        free(pb);
}

/* A completed fill, through the fill fd, which was open before any fill
 * wrote, so that it hears of every write error: 1 if its put-back runs
 * (on_put_back ends it), 0 if it has nothing to show, or -errno. A passed
 * verification makes the file whole the same way. */
static int file_take_fill(struct tfile *f, struct fill *fl) {
        _cleanup_(stub_done) struct stub s = {};
        int r = stub_unless_whole(f, &s);
        struct put_back *pb;

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
        if (!(pb = calloc(1, sizeof(*pb))))
                return -ENOMEM;
        *pb = (struct put_back){ .job = { .work = put_back_work, .done = on_put_back }, .fl = fl, .fd = f->fd,
                                 .attrs = f->attrs, .mtime = s.mtime, .whole = whole };
        memcpy(pb->key, s.key, sizeof(pb->key));
        inode_submit(f, &pb->job);
        return 1;
}

/* What was synced, recorded: the stub read, changed and written on a
 * thread (so a stub the loop wrote since is what it changes), then its
 * tallies and the rest here (sync_end follows). */
struct record {
        struct inode_job job;
        struct fill *fl;
        int fd, error; /* 1: whole already (archived, or dirty), nothing recorded */
        bool whole, unchecked;
        struct range_set present;
        struct stub s;
        struct tally_prior prior;
};

static void sync_end(struct tfile *f, struct fill *fl, int r);

static void record_work(struct inode_job *j) {
        struct record *rc = container_of(j, struct record, job);

        /* The stub as it is, read once: for the tallies (before) and, a
         * copy of it changed, the record. */
        tally_prior_read(rc->fd, &rc->prior);
        if ((rc->error = rc->prior.had) < 0)
                return;
        if (recorded_whole(&rc->prior.before)) {
                rc->error = 1;
                return;
        }
        rc->s = rc->prior.before;
        rc->s.populated = (struct range_set){};
        if ((rc->error = range_set_add_set(&rc->s.populated, &rc->prior.before.populated)) == 0 &&
            (rc->error = record_apply(&rc->s, rc->whole, &rc->present, rc->unchecked)) == 0)
                rc->error = stub_write_fd(rc->fd, &rc->s);
}

static void on_recorded(struct inode_job *j) {
        struct record *rc = container_of(j, struct record, job);
        struct tfile *f = rc->fl->file;

        inode_done(f, j);
        if (rc->error == 0) {
                tally_count_written(f->tenant, &rc->prior, &rc->s);
                record_after(f, &rc->s, rc->whole, "SHA-256 checked");
        }
        sync_end(f, rc->fl, MIN(rc->error, 0));
        range_set_done(&rc->present);
        stub_done(&rc->s);
        tally_prior_done(&rc->prior);
        free(rc);
}

/* 1: the record is being written (on_recorded ends the sync); or -errno. */
static int record_start(struct tfile *f, struct fill *fl) {
        struct record *rc = calloc(1, sizeof(*rc));
        int r;

        if (!rc)
                return -ENOMEM;
        *rc = (struct record){ .job = { .work = record_work, .done = on_recorded }, .fl = fl, .fd = f->fd,
                               .whole = f->whole_syncing, .unchecked = f->unchecked_written };
        if ((r = range_set_add_set(&rc->present, &f->syncing)) < 0) {
                range_set_done(&rc->present);
                free(rc);
                return r;
        }
        record_drain(f, rc->whole);
        inode_submit(f, &rc->job);
        return 1;
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

static void unlist(struct tfile *f, const struct fill *fl) {
        for (struct fill **p = &f->fills; *p; p = &(*p)->next)
                if (*p == fl) {
                        *p = fl->next;
                        break;
                }
}

/* The sync ended, recorded or not: the next one starts, if anything was
 * written meanwhile. */
static void sync_end(struct tfile *f, struct fill *fl, int r) {
        unlist(f, fl);
        /* Recorded by now (the usage counts it), or never. */
        f->tenant->quota_reserved -= MIN(fl->reserved, f->tenant->quota_reserved);
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

static void on_sync_done(struct tfile *f, struct fill *fl, int r) {
        if (r == 0 && (r = record_start(f, fl)) > 0)
                return; /* on_recorded ends it */
        sync_end(f, fl, r);
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

/* The fill is over, its bytes shown or not: who waited for them and got
 * none has an error, never zeros. */
static void fill_end(struct tfile *f, struct fill *fl, int r, const char *key) {
        unlist(f, fl);
        /* Its bytes count against the quota until recorded (its bytes
         * joined written: the next sync takes them), or no more. */
        if (r == 0 && !fl->verify && !fl->unverified)
                f->written_reserved += fl->reserved;
        else
                f->tenant->quota_reserved -= MIN(fl->reserved, f->tenant->quota_reserved);
        if (r == -PROTO_ENOMANIFEST && file_forget_manifest(f) == 0) {
                free(fl);
                tfile_progress(f); /* its waiters restore it whole now */
                return;
        }
        if (r < 0) {
                f->tenant->counters.fill_errors++;
                log_error_errno(r, "tenant %s: %s of %s [%llu, %llu) failed: %m", f->tenant->cfg->name,
                                fl->verify ? "verification" : "fill", key, (unsigned long long)fl->start,
                                (unsigned long long)fl->end);
                tenant_set_last_error(f->tenant, "%s of %s [%llu, %llu) failed: %s",
                                      fl->verify ? "verification" : "fill", key, (unsigned long long)fl->start,
                                      (unsigned long long)fl->end, strerror(-r));
                /* A whole-file check failed: the worker punched the file
                 * back, and the record says so. A ranged fill whose chunk
                 * did not match wrote nothing wrong (chunks are checked
                 * before they are written): the ranges readers were given
                 * stay recorded and on disk. */
                if (r == -EBADMSG && (fl->verify || fl->whole_verified)) {
                        file_record_verify_failure(f);
                        range_set_clear(&f->unverified); /* punched back with the rest */
                }
                /* ENOSPC as it is (the local filesystem is full), else EIO. */
                for (struct waiter *w = f->waiters; w; w = w->next)
                        if (w->whole || fl->verify || fl->whole_verified || (w->start < fl->end && fl->start < w->want_end))
                                w->error = r == -ENOSPC ? ENOSPC : EIO;
        }
        file_sync_start(f, fl->route);
        free(fl);
        tfile_progress(f);
}

void tfile_fill_done(struct request *req, const struct proto_reply *rep) {
        struct fill *fl = req->userdata;
        struct tfile *f = fl->file;
        struct tenant_counters *c = &f->tenant->counters;
        int r = rep->error;

        /* The writes of this fill are queued by now: heard while it is
         * still its worker's, they are its own. From here on it is not
         * (fillwatch.c), and no reader promotes it. */
        fillwatch_drain(f->fs);
        fl->req = NULL;
        if (fl->sync) {
                on_sync_done(f, fl, r);
                return;
        }
        if (r == 0 && !fl->verify) {
                c->fills++;
                c->fill_bytes += rep->bytes;
        }
        if (!fl->verify)
                container_count_fill(f->tenant, fl->route, rep->bytes, r == 0);
        if (r == 0 && (r = file_take_fill(f, fl)) > 0)
                return; /* on_put_back ends it */
        fill_end(f, fl, r, req->msg.key);
}
