/* SPDX-License-Identifier: MIT */
#include "jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "catalog.h"
#include "dispatch.h"
#include "fsgroup.h"
#include "gc.h"
#include "handle.h"
#include "contentcheck.h"
#include "hash.h"
#include "log.h"
#include "macro.h"
#include "tally.h"
#include "quota.h"
#include "remotecheck.h"
#include "usage.h"
#include "utf8.h"
#include "workers.h"


static int say(char *message, size_t size, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int say(char *message, size_t size, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(message, size, fmt, ap);
        va_end(ap);
        return r;
}

static const char *path_under(const char *path, const char *prefix) {
        size_t n = strlen(prefix);
        if (strncmp(path, prefix, n) != 0 || (path[n] != '/' && path[n] != 0))
                return NULL;
        return path[n] == '/' ? path + n + 1 : path + n;
}

void file_ref_done(struct file_ref *f) {
        free(f->rel);
        free(f->name);
        *f = (struct file_ref){};
}

static int file_ref_set(struct file_ref *ret, struct tenant *tn, const char *rel, const char *name) {
        _cleanup_free_ char *view = NULL;
        if (!name && asprintf(&view, "%s/%s", tn->cfg->mount, rel) < 0)
                return -ENOMEM;
        *ret = (struct file_ref){ .tn = tn, .rel = strdup(rel), .name = utf8_escape(name ?: view) };
        if (!ret->rel || !ret->name) {
                file_ref_done(ret);
                return -ENOMEM;
        }
        return 0;
}

/* Opens rel beneath the tenant's subvolume: no symlink, '..' or mount leads
 * outside, and only regular files are served. */
static int file_open(const struct file_ref *f, int flags, int *ret_fd, char *message, size_t size) {
        struct open_how how = {
                /* openat2 refuses O_PATH with flags it would ignore. */
                .flags = (uint64_t)flags | O_CLOEXEC | O_NOFOLLOW | (flags & O_PATH ? 0 : O_NONBLOCK | O_NOCTTY),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        struct stat st;
        long fd = syscall(SYS_openat2, f->tn->subvol_fd, f->rel, &how, sizeof(how));

        if (fd < 0)
                return say(message, size, errno == ELOOP ? -EINVAL : errno == EXDEV ? -EXDEV : -errno, "%s: %s", f->name,
                           errno == ELOOP ? "is a symlink" : errno == EXDEV ? "leads outside the tenant" : strerror(errno));
        if (fstat((int)fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close((int)fd);
                return say(message, size, -EINVAL, "%s: not a regular file", f->name);
        }
        /* Jobs wait their turn: the name may lead elsewhere by now. */
        if (f->ino && (st.st_ino != f->ino || st.st_dev != f->dev)) {
                close((int)fd);
                return say(message, size, -ENOENT, "%s: renamed or replaced since it was named, not touched", f->name);
        }
        *ret_fd = (int)fd;
        return 0;
}

int file_ref_from_path(struct tierd *t, const char *path, struct file_ref *ret, char *message, size_t size) {
        const char *rel = NULL;
        struct tenant *tn = NULL;
        int fd, r;

        if (path[0] != '/')
                return say(message, size, -EINVAL, "%s: not an absolute path", path);
        for (size_t i = 0; i < t->n_tenants && !rel; i++) {
                tn = &t->tenants[i];
                rel = path_under(path, tn->cfg->mount) ?: path_under(path, tn->cfg->subvolume);
        }
        if (!rel)
                return say(message, size, -EXDEV, "%s: not in any tenant's subvolume or view", path);
        if (!*rel)
                return say(message, size, -EINVAL, "%s: is the tenant's root directory, not a file", path);
        r = file_ref_set(ret, tn, rel, path);
        if (r < 0)
                return r;
        /* Named wrong: said now, to the caller, rather than in the job's result. */
        r = file_open(ret, O_PATH, &fd, message, size);
        if (r < 0) {
                file_ref_done(ret);
                return r;
        }
        struct stat st;
        if (fstat(fd, &st) == 0)
                ret->dev = st.st_dev, ret->ino = st.st_ino;
        close(fd);
        return 0;
}

/* The file behind a caller's fd, found again through tierd's private mount
 * by its handle; its name there must lead to the same inode from beneath
 * the subvolume, or the file is not the tenant's. */
int file_ref_from_fd(struct tierd *t, int fd, struct file_ref *ret, char *message, size_t size) {
        union file_handle_buf h = { .fh.handle_bytes = MAX_HANDLE_SZ };
        struct stat st = {}, sst;
        struct statx stx;
        bool named = false;
        int mount_id;

        /* The caller's fd may be on NFS or FUSE: a plain fstat could flush
         * its dirty pages or wait on a server, on the loop. DONT_SYNC and
         * only the type, device and inode: cached, never a round trip. And
         * nothing more is asked of it unless it is on a tenant's device. */
        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) < 0)
                return say(message, size, -errno, "%m");
        st.st_mode = stx.stx_mode;
        st.st_ino = stx.stx_ino;
        st.st_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct tenant *tn = &t->tenants[i];
                char link[32], where[PATH_MAX];
                const char *rel;
                ssize_t n;

                if (fstat(tn->subvol_fd, &sst) < 0 || sst.st_dev != st.st_dev)
                        continue;
                if (!S_ISREG(st.st_mode))
                        return say(message, size, -EINVAL, "not a regular file");
                if (!named && name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0)
                        return say(message, size, -EXDEV, "not on a tiered filesystem (%m)");
                named = true;
                _cleanup_close_ int found = open_by_handle_at(tn->fs->root_fd, &h.fh, O_PATH | O_CLOEXEC);
                if (found < 0)
                        continue;
                snprintf(link, sizeof(link), "/proc/self/fd/%d", found);
                n = readlink(link, where, sizeof(where) - 1);
                if (n <= 1 || where[0] != '/')
                        continue;
                where[n] = 0;
                rel = strcmp(tn->subvol_rel, ".") == 0 ? where + 1 : path_under(where + 1, tn->subvol_rel);
                if (!rel || !*rel)
                        continue;
                struct open_how how = { .flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
                                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
                _cleanup_close_ int again = (int)syscall(SYS_openat2, tn->subvol_fd, rel, &how, sizeof(how));
                if (again < 0 || fstat(again, &sst) < 0 || sst.st_ino != st.st_ino || sst.st_dev != st.st_dev)
                        continue;
                int r = file_ref_set(ret, tn, rel, NULL);
                if (r == 0)
                        ret->dev = st.st_dev, ret->ino = st.st_ino;
                return r;
        }
        return say(message, size, -EXDEV, "not in any tenant's subvolume");
}

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

        r = file_open(f, O_RDONLY, &fd, msg, sizeof(msg));
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

        r = file_open(f, O_RDONLY, &fd, msg, sizeof(msg));
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

int job_release_fd(struct tenant *tn, int fd, const char *path, char *message, size_t size, bool *busy) {
        _cleanup_(stub_done) struct stub s = {};
        struct tierd *t = tn->t;
        const char *err = "";
        struct stat st = {};
        int r, known;
        bool check = false;

        message[0] = 0;
        r = stub_pinned_fd(fd);
        if (r != 0)
                return say(message, size, r > 0 ? -EPINNED : r, "%s: %s", path,
                           r > 0 ? "pinned: unpin it first" : "cannot read the pin mark");
        r = stub_read_fd(fd, &s, &err);
        if (r == -ENODATA)
                return say(message, size, -ENODATA, "%s: not archived: archive it first", path);
        if (r < 0)
                return say(message, size, r == -EINVAL ? -EBADMSG : r, "%s: bad stub: %s", path,
                           r == -EINVAL ? err : strerror(-r));
        /* A restore in flight, even of a stub that still says released
         * (its bytes are written and shown, their record on its way):
         * released once it is done, not taken as released already. */
        if (s.state != STUB_DIRTY && dispatch_file_busy(t, tn->fs, fd)) {
                *busy = true;
                return -EBUSY;
        }
        if (s.state == STUB_RELEASED)
                return 0;
        if (s.state == STUB_DIRTY)
                return say(message, size, -EBUSY, "%s: changed since it was archived: archive it again first", path);
        /* The catalog must know the file before its only local copy goes. */
        const char *why;
        if (!catalog_file_durable(tn, fd, &why))
                return say(message, size, -EINPROGRESS, "%s: not released: %s", path, why);

        /* 0. Writes closed so far: account for them while we may still open
         *    files (under the lease, opening this one would break it). */
        fsgroup_drain_notifications(tn->fs);
        stub_done(&s);
        r = stub_read_fd(fd, &s, &err);
        if (r < 0)
                return say(message, size, r == -EINVAL ? -EBADMSG : r, "%s: bad stub: %s", path,
                           r == -EINVAL ? err : strerror(-r));
        if (s.state == STUB_DIRTY)
                return say(message, size, -EBUSY, "%s: changed since it was archived: archive it again first", path);
        union file_handle_buf h = { .fh.handle_bytes = MAX_HANDLE_SZ };
        int mount_id;
        if (name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0)
                return say(message, size, -errno, "%s: name_to_handle_at: %m", path);

        /* 1. Remove the ignore mark first, or reads after the punch would see
         *    zeros without raising an event. */
        r = fsgroup_unignore_file(tn->fs, fd);
        if (r < 0)
                return say(message, size, r, "%s: cannot remove the ignore mark: %s", path, strerror(-r));
        /* 2. A write lease fails if anyone else has the file open: nobody is
         *    reading or writing it while we punch. */
        if (fcntl(fd, F_SETLEASE, F_WRLCK) < 0)
                return say(message, size, -EBUSY, "%s: in use (open by a process), not released", path);
        /* 3. Writes closed before the lease are queued: one for this file
         *    means it changed. */
        bool written = fsgroup_drain_notifications_except(tn->fs, &h.fh);
        stub_done(&s);
        r = stub_read_fd(fd, &s, &err);
        if (r == 0 && (written || s.state == STUB_DIRTY)) {
                if (written && s.state == STUB_ARCHIVED) {
                        s.state = STUB_DIRTY;
                        tally_stub_write(tn, fd, &s);
                }
                r = say(message, size, -EBUSY, "%s: changed since it was archived: archive it again first", path);
        }
        else if (r == 0 && (fstat(fd, &st) < 0 || (uint64_t)st.st_size != s.size ||
                            st.st_mtim.tv_sec != s.mtime.tv_sec || st.st_mtim.tv_nsec != s.mtime.tv_nsec))
                r = say(message, size, -EBUSY, "%s: size or mtime differ from the archived copy: not released", path);
        /* 3b. After a lost notification, or with a ctime past the record's
         *     (a change while tierd was not listening: stopped, or before
         *     the record existed), a write may have gone unheard: the bytes
         *     themselves must be the archived ones, as a check on a thread
         *     found them with the file as it is now (contentcheck.c). None
         *     yet: one starts, and -EAGAIN says to ask again after. */
        else if (r == 0 && s.state == STUB_ARCHIVED &&
                 (tn->fs->writes_maybe_missed || stub_ctime_moved(&s, &st.st_ctim)) &&
                 (known = content_known(tn, &st, &s)) != 1) {
                if (known == 0) {
                        s.state = STUB_DIRTY;
                        tally_stub_write(tn, fd, &s);
                        r = say(message, size, -EBUSY, "%s: changed since it was archived (found by its SHA-256): "
                                "archive it again first", path);
                } else {
                        check = true; /* once the lease is dropped */
                        r = say(message, size, -EAGAIN, "%s: not released yet: a write may have gone unheard, its "
                                "bytes are checked against the archived SHA-256 first", path);
                }
        }
        /* The mode and capabilities as they are now (a chmod u-s since the
         * archive holds), to put back after the punch strips them. */
        struct inode_attrs attrs = {};
        if (r == 0 && (r = inode_attrs_read(fd, &attrs)) < 0)
                say(message, size, r, "%s: cannot read its mode: %s", path, strerror(-r));
        /* 4. Record "released" before punching: if tierd dies in between, the
         *    next read fills the (still present) bytes again from the store;
         *    the other order would leave holes under a stub saying archived. */
        struct stub before = {};
        if (r == 0) {
                before = s;
                s.state = STUB_RELEASED;
                range_set_clear(&s.populated);
                r = tally_stub_write(tn, fd, &s);
                if (r < 0)
                        say(message, size, r, "%s: cannot record the release: %s", path, strerror(-r));
        }
        /* 5. Punch whole blocks: punching only [0, size) would leave a zeroed
         *    last block that looks like data. */
        if (r == 0 && s.size > 0 &&
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)round_up_u64(s.size, (uint64_t)st.st_blksize)) < 0) {
                r = say(message, size, -errno, "%s: cannot punch: %m", path);
                if (tally_stub_write(tn, fd, &before) < 0) /* nothing was punched: as before */
                        log_error("%s: cannot put the stub back; the file stays released and refills", path);
        }
        /* The punch changed mtime and may have cleared setuid bits and caps. */
        if (r == 0)
                r = put_back_attrs(fd, &attrs, &s.mtime, true);
        if (fcntl(fd, F_SETLEASE, F_UNLCK) < 0)
                log_warning("%s: cannot drop the lease: %m", path);
        if (check && (known = content_check(tn, fd, &st, &s)) < 0)
                r = say(message, size, known, "%s: not released: cannot check its bytes against the archived SHA-256: "
                        "%s", path, strerror(-known));
        if (r == 0) {
                tn->counters.releases++;
                log_info("tenant %s: released %s (%llu bytes)", tn->cfg->name, path, (unsigned long long)s.size);
        } else if (!message[0])
                say(message, size, r, "%s: %s", path, strerror(-r));
        return r;
}

static int release_now(const struct file_ref *f, char *message, size_t size, bool *busy) {
        _cleanup_close_ int fd = -1;
        int r = file_open(f, O_RDWR, &fd, message, size);
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

static void release_checked(void *userdata, int error, const char *msg) {
        struct release_job *j = userdata;
        if (error < 0) {
                char m[600];
                say(m, sizeof(m), error, "%s: %s", j->f->name, msg);
                j->done(j->userdata, error, m);
                free(j);
                return;
        }
        j->checked = true;
        release_attempt(j);
}

/* 1: the check was started (release_checked goes on); 0: nothing to check
 * (not archived: job_release_fd says why, or released already). */
static int release_check_first(struct release_job *j, char *msg, size_t size) {
        _cleanup_(stub_done) struct stub s = {};
        _cleanup_close_ int fd = -1;
        const char *err = "";
        int r = file_open(j->f, O_RDONLY, &fd, msg, size);
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
        if (r == -EINPROGRESS && catalog_when_written(j->f->tn, release_attempt, j) == 0)
                return;
        if (r == -EINPROGRESS)
                r = -EBUSY;
        /* Its bytes are being checked (a write may have gone unheard):
         * again when that is done. */
        if (r == -EAGAIN && ++j->tries < 100) {
                _cleanup_close_ int fd = -1;
                if (file_open(j->f, O_RDONLY, &fd, msg, sizeof(msg)) == 0 &&
                    content_when_checked(j->f->tn, fd, release_attempt, j) == 0)
                        return;
        }

        /* A fill or a verification of this file is in flight: release it
         * when it is done (again, if a reader started another meanwhile). */
        if (busy && ++j->tries < 100) {
                _cleanup_close_ int fd = -1;
                if (file_open(j->f, O_RDONLY, &fd, msg, sizeof(msg)) == 0 &&
                    dispatch_when_idle(j->t, j->f->tn->fs, fd, release_attempt, j) == 0)
                        return;
        }
        if (busy)
                r = say(msg, sizeof(msg), -EBUSY, "%s: restores keep running on it, not released", j->f->name);
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

static int set_pin(const struct file_ref *f, bool pinned, char *message, size_t size) {
        _cleanup_close_ int fd = -1;
        int r = file_open(f, O_RDONLY, &fd, message, size);
        if (r < 0)
                return r;
        r = stub_set_pinned_fd(fd, pinned);
        if (r < 0)
                return say(message, size, r, "%s: cannot %s: %s", f->name, pinned ? "pin" : "unpin", strerror(-r));
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

int job_file_status(struct tierd *t, const struct file_ref *f, struct file_status *fst, char *message, size_t size) {
        _cleanup_(stub_done) struct stub s = {};
        _cleanup_close_ int fd = -1;
        const char *err = "", *path = f->name;
        struct stat st;
        int r;
        (void)t;

        /* O_PATH: nothing is opened (the status of a file never runs a
         * driver's open or breaks a lease); the stub is read through it. */
        r = file_open(f, O_PATH, &fd, message, size);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return say(message, size, -errno, "%s: %m", path);
        fst->tenant = f->tn->cfg->name;
        fst->pinned = stub_pinned_fd(fd) > 0;
        r = stub_read_fd(fd, &s, &err);
        if (r == -ENODATA) {
                fst->state = "resident";
                fst->size = fst->resident = (uint64_t)st.st_size;
                return 0;
        }
        if (r < 0)
                return say(message, size, r == -EINVAL ? -EBADMSG : r, "%s: bad stub: %s", path,
                           r == -EINVAL ? err : strerror(-r));
        fst->state = stub_state_to_string(s.state);
        fst->size = s.state == STUB_DIRTY ? (uint64_t)st.st_size : s.size;
        fst->resident = s.state == STUB_DIRTY ? fst->size : stub_resident_bytes(&s);
        return 0;
}
