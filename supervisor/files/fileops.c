/* SPDX-License-Identifier: MIT */
/*
 * The file verbs: archive (and again, rehash), restore, pin, status.
 * Release is in release.c; a caller's path or fd is found in fileref.c.
 */
#include "fileops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "catalog.h"
#include "dispatch.h"
#include "fsgroup.h"
#include "gc.h"
#include "fileops-internal.h"
#include "log.h"
#include "macro.h"
#include "tally.h"
#include "quota.h"
#include "remotecheck.h"
#include "usage.h"
#include "workers.h"

struct archive_job {
        struct tenant *tn;
        int fd;
        char *rel; /* beneath the subvolume: the catalog's name for it */
        uint64_t chunk; /* the manifest's, asked of the worker: a reload may change the tenant's meanwhile */
        struct stat before;
        job_done_t done;
        void *userdata;
        char path[];
};

static void archive_finish(struct archive_job *j, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void archive_finish(struct archive_job *j, int r, const char *fmt, ...) {
        char msg[512] = "";
        if (fmt) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(msg, sizeof(msg), fmt, ap);
                va_end(ap);
                if (r < 0)
                        log_error("tenant %s: archive %s", j->tn->cfg->name, msg);
        }
        /* Closed first: a release queued behind this archive takes a lease,
         * which any other open of the file would refuse. */
        safe_close(j->fd);
        j->done(j->userdata, r, fmt ? msg : NULL);
        free(j->rel);
        free(j);
}

static bool same_version(const struct stat *a, const struct stat *b) {
        return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
               a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
               a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void on_archived(struct request *req, const struct proto_reply *rep) {
        struct archive_job *j = req->userdata;
        struct stub s = {};
        struct stat after;
        ssize_t n;
        int r;

        if (rep->error < 0) {
                archive_finish(j, rep->error, "%s: upload failed: %s", j->path,
                               rep->error == -EBADMSG       ? "the file changed during upload"
                               : rep->error == -EOPNOTSUPP ? "the store does not support a method an upload needs "
                                                             "(an HTTP store: WebDAV MOVE); see tierd's log"
                                                           : strerror(-rep->error));
                return;
        }
        /* Drain writes that closed while we uploaded, then compare: a file
         * changed during upload is not recorded as archived. Draining may
         * have put back the ignore mark on changes (an event for a file not
         * yet archived: a writer that closed during the upload), so it is
         * removed again before the compare: from the compare on, every
         * change is heard and marks the record about to be written dirty. */
        fsgroup_drain_notifications(j->tn->fs);
        r = fsgroup_ignore_changes(j->tn->fs, j->fd, false);
        if (r < 0) {
                archive_finish(j, r, "%s: cannot watch the file for changes: %s", j->path, strerror(-r));
                return;
        }
        if (fstat(j->fd, &after) < 0 || !same_version(&j->before, &after) || rep->size != (uint64_t)after.st_size) {
                archive_finish(j, -EBUSY, "%s: the file changed during upload, try again", j->path);
                return;
        }
        snprintf(s.tenant, sizeof(s.tenant), "%s", j->tn->cfg->name);
        s.state = STUB_ARCHIVED;
        stub_key_for_hash(rep->sha256, s.key);
        s.size = rep->size;
        memcpy(s.sha256, rep->sha256, 32);
        s.mode = after.st_mode;
        s.uid = after.st_uid;
        s.gid = after.st_gid;
        s.mtime = after.st_mtim;
        s.chunk = j->chunk;
        if (rep->flags & PROTO_REPLY_MANIFEST) {
                s.has_manifest = true;
                memcpy(s.manifest, rep->manifest, 32);
        }
        n = fgetxattr(j->fd, "security.capability", s.fcaps, sizeof(s.fcaps));
        s.fcaps_len = n > 0 ? (size_t)n : 0;
        r = tally_stub_write(j->tn, j->fd, &s);
        if (r < 0) {
                archive_finish(j, r, "%s: cannot write the stub: %s", j->path, strerror(-r));
                return;
        }
        fsgroup_ignore_file(j->tn->fs, j->fd);
        remote_check_remember(j->tn, s.sha256, s.size); /* put or found just now: releasable without asking */
        catalog_note_archived(j->tn, j->fd, j->rel, &s);
        gc_note_archived(j->tn, s.sha256, s.has_manifest ? s.manifest : NULL);
        usage_update_fd(j->tn, j->fd);
        quota_candidates_changed(j->tn); /* one more file that may be released */
        j->tn->counters.archives++;
        log_info("tenant %s: archived %s as %s (%llu bytes%s)", j->tn->cfg->name, j->path, s.key,
                 (unsigned long long)s.size, rep->bytes ? "" : ", already in the store");
        archive_finish(j, 0, NULL);
}

/* An archived file whose size or mtime moved was changed behind our back
 * (a change no event told us of): archive it again. */
static bool stub_matches_file(const struct stub *s, int fd) {
        struct stat st;
        return fstat(fd, &st) == 0 && (uint64_t)st.st_size == s->size && st.st_mtim.tv_sec == s->mtime.tv_sec &&
               st.st_mtim.tv_nsec == s->mtime.tv_nsec;
}

enum archive_mode {
        ARCHIVE_CHANGED, /* only what is not archived as it is */
        ARCHIVE_REHASH,  /* and archived files without a chunk manifest */
        ARCHIVE_AGAIN,   /* and archived files whatever they have: their object is gone */
};

/* rehash: an archived file without a chunk manifest is hashed (and its
 * manifest stored) again; the object, content-addressed, is not sent again. */
static int archive(struct tierd *t, const struct file_ref *f, enum archive_mode mode, job_done_t done,
                   void *userdata) {
        _cleanup_(stub_done) struct stub s = {};
        struct archive_job *j;
        struct request *req;
        const char *err = "";
        char msg[512];
        struct tenant *tn = f->tn;
        int fd = -1, dupfd, r;
        (void)t;

        r = file_ref_open(f, O_RDONLY, &fd, msg, sizeof(msg));
        if (r < 0) {
                done(userdata, r, msg);
                return 0;
        }
        /* From here on every change to the file is heard of again. */
        r = fsgroup_ignore_changes(tn->fs, fd, false);
        if (r < 0) {
                close(fd);
                done(userdata, r, "cannot watch the file for changes");
                return 0;
        }
        fsgroup_drain_notifications(tn->fs);
        r = stub_read_fd(fd, &s, &err);
        /* Partial or released: the content is in the store, and reading the
         * file here would upload holes as zeros. Archived and unchanged:
         * nothing to do. */
        if (r == 0 && (s.state == STUB_PARTIAL || s.state == STUB_RELEASED ||
                       (s.state == STUB_ARCHIVED && stub_matches_file(&s, fd) && mode != ARCHIVE_AGAIN &&
                        !(mode == ARCHIVE_REHASH && !s.has_manifest)))) {
                close(fd);
                done(userdata, 0, NULL);
                return 0;
        }
        if (r < 0 && r != -ENODATA) {
                close(fd);
                done(userdata, r == -EINVAL ? -EBADMSG : r, r == -EINVAL ? err : strerror(-r));
                return 0;
        }
        j = calloc(1, sizeof(*j) + strlen(f->name) + 1);
        dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        char *rel = strdup(f->rel);
        if (!j || !rel || dupfd < 0 || !(req = request_new(PROTO_ARCHIVE, dupfd, on_archived, j))) {
                free(j);
                free(rel);
                close(fd);
                safe_close(dupfd);
                return -ENOMEM;
        }
        *j = (struct archive_job){ .tn = tn, .fd = fd, .rel = rel, .done = done, .userdata = userdata };
        req->msg.chunk = j->chunk = tn->cfg->chunk; /* the manifest's chunks: the fills' */
        strcpy(j->path, f->name);
        fstat(fd, &j->before);
        worker_submit(&tn->worker, req);
        return 0;
}

int job_archive(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        return archive(t, f, ARCHIVE_CHANGED, done, userdata);
}

int job_archive_again(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        return archive(t, f, ARCHIVE_AGAIN, done, userdata);
}

struct rehash_job {
        struct tierd *t;
        const struct file_ref *f;
        job_done_t done;
        void *userdata;
};

static void rehash_restored(void *userdata, int error, const char *message) {
        struct rehash_job *j = userdata;
        if (error < 0)
                j->done(j->userdata, error, message);
        else if (archive(j->t, j->f, ARCHIVE_REHASH, j->done, j->userdata) < 0)
                j->done(j->userdata, -ENOMEM, NULL);
        free(j);
}

/* Released or partial: brought back whole first (the bytes must be local
 * to be hashed), then hashed again. */
int job_rehash(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        struct rehash_job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct rehash_job){ .t = t, .f = f, .done = done, .userdata = userdata };
        int r = job_restore(t, f, rehash_restored, j);
        if (r < 0)
                free(j);
        return r;
}

struct restore_job {
        job_done_t done;
        void *userdata;
};

static void on_restored(void *userdata, int error) {
        struct restore_job *j = userdata;
        j->done(j->userdata, error, error ? "restore failed (see tierd's log)" : NULL);
        free(j);
}

int job_restore(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        _cleanup_(stub_done) struct stub s = {};
        _cleanup_close_ int fd = -1;
        struct restore_job *j;
        const char *err = "";
        char msg[512];
        int r;
        (void)t;

        r = file_ref_open(f, O_RDONLY, &fd, msg, sizeof(msg));
        if (r < 0) {
                done(userdata, r, msg);
                return 0;
        }
        r = stub_read_fd(fd, &s, &err);
        if (r == -ENODATA || (r == 0 && stub_is_whole(&s) && s.state != STUB_PARTIAL)) {
                done(userdata, 0, NULL); /* resident already */
                return 0;
        }
        if (r < 0) {
                done(userdata, r == -EINVAL ? -EBADMSG : r, r == -EINVAL ? err : strerror(-r));
                return 0;
        }
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct restore_job){ .done = done, .userdata = userdata };
        r = dispatch_restore_whole(f->tn, fd, on_restored, j);
        if (r < 0) {
                free(j);
                done(userdata, r, "cannot start the restore");
        }
        return 0;
}

static int set_pin(const struct file_ref *f, bool pinned, char *message, size_t size) {
        _cleanup_close_ int fd = -1;
        int r = file_ref_open(f, O_RDONLY, &fd, message, size);
        if (r < 0)
                return r;
        r = stub_set_pinned_fd(fd, pinned);
        if (r < 0)
                return file_job_say(message, size, r, "%s: cannot %s: %s", f->name, pinned ? "pin" : "unpin", strerror(-r));
        usage_update_fd(f->tn, fd);
        log_info("tenant %s: %s %s", f->tn->cfg->name, pinned ? "pinned" : "unpinned", f->name);
        return 0;
}

/* Pinned means kept local: a released or partial file comes back whole. */
int job_pin(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        char msg[512];
        int r = set_pin(f, true, msg, sizeof(msg));
        if (r < 0) {
                done(userdata, r, msg);
                return 0;
        }
        return job_restore(t, f, done, userdata);
}

int job_unpin(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        char msg[512];
        int r = set_pin(f, false, msg, sizeof(msg));
        (void)t;
        done(userdata, r, r < 0 ? msg : NULL);
        return 0;
}

int file_status_fd(int fd, const char *name, struct file_status *fst, char *message, size_t size) {
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return file_job_say(message, size, -errno, "%s: %m", name);
        fst->pinned = stub_pinned_fd(fd) > 0;
        r = stub_read_fd(fd, &s, &err);
        if (r == -ENODATA) {
                fst->state = "resident";
                fst->size = fst->resident = (uint64_t)st.st_size;
                return 0;
        }
        if (r < 0)
                return file_job_say(message, size, r == -EINVAL ? -EBADMSG : r, "%s: bad stub: %s", name,
                                    r == -EINVAL ? err : strerror(-r));
        fst->state = stub_state_to_string(s.state);
        fst->size = s.state == STUB_DIRTY ? (uint64_t)st.st_size : s.size;
        fst->resident = s.state == STUB_DIRTY ? fst->size : stub_resident_bytes(&s);
        return 0;
}
