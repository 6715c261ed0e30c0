/* SPDX-License-Identifier: MIT */
/*
 * Release: a file whose bytes are in the store, unchanged since, becomes
 * a stub again (its blocks punched); fills of it in flight are waited
 * for first.
 */
#include "fileops-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "dispatch.h"
#include "fsgroup.h"
#include "handle.h"
#include "contentcheck.h"
#include "log.h"
#include "macro.h"
#include "tally.h"
#include "remotecheck.h"
#include "usage.h"

/* Before the lease: the file must be archived, unpinned, idle, known to
 * the catalog, and unchanged by the writes closed so far. 1 when it is
 * released already, 0 to go on (h names it), or an error said in
 * message. */
static int release_precheck(struct tenant *tn, int fd, const char *path, struct stub *s, union file_handle_buf *h,
                            char *message, size_t size, bool *busy) {
        const char *err = "", *why;
        int r, mount_id;

        r = stub_pinned_fd(fd);
        if (r != 0)
                return file_job_say(message, size, r > 0 ? -EPINNED : r, "%s: %s", path,
                           r > 0 ? "pinned: unpin it first" : "cannot read the pin mark");
        r = stub_read_fd(fd, s, &err);
        if (r == -ENODATA)
                return file_job_say(message, size, -ENODATA, "%s: not archived: archive it first", path);
        if (r < 0)
                return file_job_say(message, size, r == -EINVAL ? -EBADMSG : r, "%s: bad stub: %s", path,
                           r == -EINVAL ? err : strerror(-r));
        /* A restore in flight, even of a stub that still says released
         * (its bytes are written and shown, their record on its way):
         * released once it is done, not taken as released already. */
        if (s->state != STUB_DIRTY && dispatch_file_busy(tn->t, tn->fs, fd)) {
                *busy = true;
                return -EBUSY;
        }
        if (s->state == STUB_RELEASED)
                return 1;
        if (s->state == STUB_DIRTY)
                return file_job_say(message, size, -EBUSY, "%s: changed since it was archived: archive it again first", path);
        /* The catalog must know the file before its only local copy goes. */
        if (!catalog_file_durable(tn, fd, &why))
                return file_job_say(message, size, -EINPROGRESS, "%s: not released: %s", path, why);

        /* 0. Writes closed so far: account for them while we may still open
         *    files (under the lease, opening this one would break it). */
        fsgroup_drain_notifications(tn->fs);
        stub_done(s);
        r = stub_read_fd(fd, s, &err);
        if (r < 0)
                return file_job_say(message, size, r == -EINVAL ? -EBADMSG : r, "%s: bad stub: %s", path,
                           r == -EINVAL ? err : strerror(-r));
        if (s->state == STUB_DIRTY)
                return file_job_say(message, size, -EBUSY, "%s: changed since it was archived: archive it again first", path);
        *h = (union file_handle_buf){ .fh.handle_bytes = MAX_HANDLE_SZ };
        if (name_to_handle_at(fd, "", &h->fh, &mount_id, AT_EMPTY_PATH) < 0)
                return file_job_say(message, size, -errno, "%s: name_to_handle_at: %m", path);
        return 0;
}

/* 3. Under the lease: writes closed before it are queued, and one for this
 *    file means it changed; so do a size or mtime that differ. The stub is
 *    read again into s, the file's stat into st. *check: its bytes are to
 *    be checked once the lease is dropped (-EAGAIN). */
static int release_check_unchanged(struct tenant *tn, int fd, const char *path, const union file_handle_buf *h,
                                   struct stub *s, struct stat *st, bool *check, char *message, size_t size) {
        bool written = fsgroup_drain_notifications_except(tn->fs, &h->fh);
        const char *err = "";
        int r, known;

        stub_done(s);
        r = stub_read_fd(fd, s, &err);
        if (r < 0)
                return r;
        if (written || s->state == STUB_DIRTY) {
                if (written && s->state == STUB_ARCHIVED) {
                        s->state = STUB_DIRTY;
                        tally_stub_write(tn, fd, s);
                }
                return file_job_say(message, size, -EBUSY, "%s: changed since it was archived: archive it again first", path);
        }
        if (fstat(fd, st) < 0 || (uint64_t)st->st_size != s->size || st->st_mtim.tv_sec != s->mtime.tv_sec ||
            st->st_mtim.tv_nsec != s->mtime.tv_nsec)
                return file_job_say(message, size, -EBUSY, "%s: size or mtime differ from the archived copy: not released", path);
        /* 3b. After a lost notification, or with a ctime past the record's
         *     (a change while tierd was not listening: stopped, or before
         *     the record existed), a write may have gone unheard: the bytes
         *     themselves must be the archived ones, as a check on a thread
         *     found them with the file as it is now (contentcheck.c). None
         *     yet: one starts, and -EAGAIN says to ask again after. */
        if (s->state != STUB_ARCHIVED || (!tn->fs->writes_maybe_missed && !stub_ctime_moved(s, &st->st_ctim)) ||
            (known = content_known(tn, st, s)) == 1)
                return 0;
        if (known == 0) {
                s->state = STUB_DIRTY;
                tally_stub_write(tn, fd, s);
                return file_job_say(message, size, -EBUSY, "%s: changed since it was archived (found by its SHA-256): "
                        "archive it again first", path);
        }
        *check = true; /* once the lease is dropped */
        return file_job_say(message, size, -EAGAIN, "%s: not released yet: a write may have gone unheard, its "
                "bytes are checked against the archived SHA-256 first", path);
}

/* 4 and 5, the file found unchanged under the lease: recorded released,
 * then punched, then its mode, capabilities and mtime put back. */
static int release_punch(struct tenant *tn, int fd, const char *path, struct stub *s, const struct stat *st,
                         char *message, size_t size) {
        /* The mode and capabilities as they are now (a chmod u-s since the
         * archive holds), to put back after the punch strips them. */
        struct inode_attrs attrs = {};
        int r = inode_attrs_read(fd, &attrs);
        if (r < 0)
                return file_job_say(message, size, r, "%s: cannot read its mode: %s", path, strerror(-r));
        /* 4. Record "released" before punching: if tierd dies in between, the
         *    next read fills the (still present) bytes again from the store;
         *    the other order would leave holes under a stub saying archived. */
        struct stub before = *s;
        s->state = STUB_RELEASED;
        range_set_clear(&s->populated);
        r = tally_stub_write(tn, fd, s);
        if (r < 0)
                return file_job_say(message, size, r, "%s: cannot record the release: %s", path, strerror(-r));
        /* 5. Punch whole blocks: punching only [0, size) would leave a zeroed
         *    last block that looks like data. */
        if (s->size > 0 &&
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)round_up_u64(s->size, (uint64_t)st->st_blksize)) < 0) {
                r = file_job_say(message, size, -errno, "%s: cannot punch: %m", path);
                if (tally_stub_write(tn, fd, &before) < 0) /* nothing was punched: as before */
                        log_error("%s: cannot put the stub back; the file stays released and refills", path);
                return r;
        }
        /* The punch changed mtime and may have cleared setuid bits and caps. */
        return put_back_attrs(fd, &attrs, &s->mtime, true);
}

int job_release_fd(struct tenant *tn, int fd, const char *path, char *message, size_t size, bool *busy) {
        _cleanup_(stub_done) struct stub s = {};
        union file_handle_buf h;
        struct stat st = {};
        bool check = false;
        int r, known;

        message[0] = 0;
        r = release_precheck(tn, fd, path, &s, &h, message, size, busy);
        if (r != 0)
                return r > 0 ? 0 : r;
        /* tierd's own check of its bytes (fill_check, or a release's) holds
         * it open, and the lease below would fail: after it. */
        if (content_check_queued(tn, fd))
                return file_job_say(message, size, -EAGAIN, "%s: not released yet: its bytes are being checked", path);
        /* 1. Remove the ignore mark first, or reads after the punch would see
         *    zeros without raising an event. */
        r = fsgroup_unignore_file(tn->fs, fd);
        if (r < 0)
                return file_job_say(message, size, r, "%s: cannot remove the ignore mark: %s", path, strerror(-r));
        /* 2. A write lease fails if anyone else has the file open: nobody is
         *    reading or writing it while we punch. */
        if (fcntl(fd, F_SETLEASE, F_WRLCK) < 0)
                return file_job_say(message, size, -EBUSY, "%s: in use (open by a process), not released", path);
        r = release_check_unchanged(tn, fd, path, &h, &s, &st, &check, message, size);
        if (r == 0)
                r = release_punch(tn, fd, path, &s, &st, message, size);
        if (fcntl(fd, F_SETLEASE, F_UNLCK) < 0)
                log_warning("%s: cannot drop the lease: %m", path);
        if (check && (known = content_check(tn, fd, &st, &s, "before its release: a write may have gone unheard")) < 0)
                r = file_job_say(message, size, known, "%s: not released: cannot check its bytes against the archived SHA-256: "
                        "%s", path, strerror(-known));
        if (r == 0) {
                tn->counters.releases++;
                log_info("tenant %s: released %s (%llu bytes)", tn->cfg->name, path, (unsigned long long)s.size);
        } else if (!message[0])
                file_job_say(message, size, r, "%s: %s", path, strerror(-r));
        return r;
}

static int release_now(const struct file_ref *f, char *message, size_t size, bool *busy) {
        _cleanup_close_ int fd = -1;
        int r = file_ref_open(f, O_RDWR, &fd, message, size);
        if (r < 0)
                return r;
        r = job_release_fd(f->tn, fd, f->name, message, size, busy);
        if (r == 0)
                usage_update_fd(f->tn, fd);
        return r;
}

struct release_job {
        struct tierd *t;
        const struct file_ref *f;
        job_done_t done;
        void *userdata;
        unsigned tries;
        bool checked; /* the archived copy was found in the store */
};

static void release_attempt(void *userdata);

static int release_resume(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        (void)t, (void)f, (void)done;
        release_attempt(userdata);
        return 0;
}

static void release_walk_failed(void *userdata, int error, const char *msg) {
        struct release_job *j = userdata;
        j->done(j->userdata, error, msg);
        free(j);
}

/* Back after a wait (the store, the catalog, a check, fills): the file's
 * path may have left the lookup cache meanwhile, and the loop walks none
 * past it; a thread walks it first then (file_job_when_cached). */
static void release_again(void *userdata) {
        struct release_job *j = userdata;
        int r = file_job_when_cached(j->t, j->f, release_resume, release_walk_failed, j);
        if (r < 0)
                release_walk_failed(j, r, NULL);
}

static void release_checked(void *userdata, int error, const char *msg) {
        struct release_job *j = userdata;
        if (error < 0) {
                char m[600];
                file_job_say(m, sizeof(m), error, "%s: %s", j->f->name, msg);
                j->done(j->userdata, error, m);
                free(j);
                return;
        }
        j->checked = true;
        release_again(j);
}

/* 1: the check was started (release_checked goes on); 0: nothing to check
 * (not archived: job_release_fd says why, or released already). */
static int release_check_first(struct release_job *j, char *msg, size_t size) {
        _cleanup_(stub_done) struct stub s = {};
        _cleanup_close_ int fd = -1;
        const char *err = "";
        int r = file_ref_open(j->f, O_RDONLY, &fd, msg, size);
        if (r < 0)
                return r;
        if (stub_read_fd(fd, &s, &err) < 0 || s.state != STUB_ARCHIVED)
                return 0;
        r = remote_check(j->f->tn, &s, release_checked, j);
        return r < 0 ? r : 1;
}

static void release_attempt(void *userdata) {
        struct release_job *j = userdata;
        char msg[512] = "";
        bool busy = false;
        int r;

        /* Never punch the only local copy of a file whose archived copy is
         * gone from the store. */
        if (!j->checked && (r = release_check_first(j, msg, sizeof(msg))) != 0) {
                if (r > 0)
                        return;
                j->done(j->userdata, r, msg);
                free(j);
                return;
        }
        r = release_now(j->f, msg, sizeof(msg), &busy);
        /* Its catalog entry goes out within a second or two: then again. */
        if (r == -EINPROGRESS && catalog_when_written(j->f->tn, release_again, j) == 0)
                return;
        if (r == -EINPROGRESS)
                r = -EBUSY;
        /* Its bytes are being checked (a write may have gone unheard):
         * again when that is done. */
        if (r == -EAGAIN && ++j->tries < 100) {
                _cleanup_close_ int fd = -1;
                if (file_ref_open(j->f, O_RDONLY, &fd, msg, sizeof(msg)) == 0 &&
                    content_when_checked(j->f->tn, fd, release_again, NULL, j) == 0)
                        return;
        }

        /* A fill or a verification of this file is in flight: release it
         * when it is done (again, if a reader started another meanwhile). */
        if (busy && ++j->tries < 100) {
                _cleanup_close_ int fd = -1;
                if (file_ref_open(j->f, O_RDONLY, &fd, msg, sizeof(msg)) == 0 &&
                    dispatch_when_idle(j->t, j->f->tn->fs, fd, release_again, j) == 0)
                        return;
        }
        if (busy)
                r = file_job_say(msg, sizeof(msg), -EBUSY, "%s: restores keep running on it, not released", j->f->name);
        j->done(j->userdata, r, r < 0 ? msg : NULL);
        free(j);
}

int job_release(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        struct release_job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct release_job){ .t = t, .f = f, .done = done, .userdata = userdata };
        release_attempt(j);
        return 0;
}
