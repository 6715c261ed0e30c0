/* SPDX-License-Identifier: MIT */
/*
 * Where an event is served. tierd answers what needs no data at once and
 * parks the rest as waiters on a per-file entry; fills go to the tenant's
 * worker, one per missing range (two readers of one range cause one fetch),
 * and every completion re-evaluates the file's waiters. Never allow a range
 * that was not filled.
 *
 * The rule of this path (and of everything on tierd's event loop): never
 * wait on anything a tenant, a caller or the network controls. No blocking
 * open (fsgroup_open_regular, or O_PATH), no tree walk, no whole-file hash,
 * no unbounded loop or queue: such work runs on a thread (offthread.h,
 * treewalk.h) or in the worker. tests/lint/eventpath.sh and
 * tests/integration/isolation.sh fail when it is broken.
 */
#include "dispatch.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "readeraccess.h"
#include "containers.h"
#include "fanotify-uapi.h"
#include "fsgroup.h"
#include "journal.h"
#include "quota.h"
#include "settle.h"
#include "usage.h"
#include "log.h"
#include "macro.h"
#include "tally.h"
#include "workers.h"

#define FILL_PIECE (8u << 20)
#define FILLS_PER_FILE 16

struct waiter {
        struct waiter *next;
        uint64_t start, end; /* needed (reads) */
        uint64_t want_end;   /* plus read-ahead */
        uint64_t parked_usec; /* when the reader started waiting (monotonic) */
        bool whole, dirty;
        /* Answered only once what it needs is recorded, not as soon as it
         * is written: a writer (its file becomes dirty), an open that waits
         * for the whole file (what it stats after must not change) and
         * tierd's own jobs, which read the record next. */
        bool needs_record;
        uint64_t route; /* the reader's container (its serial), 0: the host */
        int event_fd; /* a parked kernel event, or -1 */
        struct tiered_fs *event_fs;
        void (*callback)(void *userdata, int error);
        void *userdata;
        int error;
};

struct fill {
        struct fill *next;
        struct tfile *file;
        uint64_t start, end;
        bool whole_verified; /* PROTO_FILL_WHOLE: checked against the SHA-256 */
        bool verify;         /* a PROTO_VERIFY of the whole file */
        bool sync;           /* a PROTO_SYNC: then what was syncing is recorded */
        unsigned gen;        /* the file's sync_gen when sent */
        uint64_t reserved;   /* counted against the tenant's quota until done */
        bool unverified;     /* a ranged fill no manifest checks (see struct tfile) */
        uint64_t route;      /* the container whose worker runs it, 0: the host worker */
};

struct idle_callback {
        struct idle_callback *next;
        void (*callback)(void *userdata);
        void *userdata;
};

struct tfile {
        struct tfile *next;
        struct inode_attrs attrs; /* as its owner last set them, before our fills */
        struct idle_callback *idle; /* to run once nothing is in flight */
        struct tiered_fs *fs;
        struct tenant *tenant;
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } h;
        int fd; /* the fill fd: O_WRONLY through the private mount */
        struct fill *fills;
        struct waiter *waiters;
        /* Filled by ranged fills nothing checked (a file without a manifest,
         * verify on): not recorded as populated, so no reader is let
         * through to them, until the whole file passes its SHA-256. */
        struct range_set unverified;
        /* Durability off the reader's path: what fills wrote and checked is
         * shown to readers at once (written), and recorded in the stub only
         * after a PROTO_SYNC made it durable (syncing: one sync in flight per
         * file, for all that was written before it was sent). A crash or a
         * power cut in between loses the record, never bytes a record
         * vouches for; a refill writes over what readers saw, never punches
         * it (worker/fill.c). Their quota stays reserved until recorded. */
        struct range_set written, syncing;
        bool whole_written, whole_syncing;
        uint64_t written_reserved;
        /* Bumped by a failed sync: the write error it reported may have
         * been another fill's, so nothing in flight then is recorded. */
        unsigned sync_gen;
        bool quota_wait; /* a waiter waits for room: quota.c checks copies before it releases */
};

static void file_progress(struct tfile *f);

void dispatch_answer(struct tiered_fs *fs, int event_fd, int error) {
        struct tierd *t = fs->t;
        struct fanotify_response resp = {
                .fd = event_fd,
                /* The errnos the kernel passes on to the reader (6.14+):
                 * a full filesystem or quota as such, the rest as EIO. */
                .response = error ? FAN_DENY_ERRNO(error == EDQUOT || error == ENOSPC ? error : EIO) : FAN_ALLOW,
        };
        if (write(fs->pre_fd, &resp, sizeof(resp)) != sizeof(resp)) {
                /* ENOENT: an event a predecessor answered and died before
                 * it could clear the record. */
                if (errno == ENOENT)
                        log_debug("event fd %d: already answered", event_fd);
                else
                        log_error("cannot answer event fd %d: %m", event_fd);
        }
        /* Only now: the kernel matches answers by fd number, reused at once. */
        journal_forget(t->journal, event_fd);
        close(event_fd);
        t->fds_in_flight--;
        fsgroup_resume_reading(t);
}

static void waiter_finish(struct tfile *f, struct waiter *w, int error) {
        if (w->event_fd >= 0) {
                tenant_record_wait(f->tenant, (double)(tierd_now_usec(f->tenant->t) - w->parked_usec) / 1e6);
                dispatch_answer(w->event_fs, w->event_fd, error);
        } else
                w->callback(w->userdata, error ? -error : 0);
        free(w);
}

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

static int file_handle_of(int fd, struct file_handle *fh) {
        int mount_id;
        fh->handle_bytes = MAX_HANDLE_SZ;
        if (name_to_handle_at(fd, "", fh, &mount_id, AT_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

static struct tfile *file_find(struct tierd *t, struct tiered_fs *fs, const struct file_handle *fh) {
        for (struct tfile *f = t->files; f; f = f->next)
                if (f->fs == fs && f->h.fh.handle_type == fh->handle_type &&
                    f->h.fh.handle_bytes == fh->handle_bytes &&
                    memcmp(f->h.fh.f_handle, fh->f_handle, fh->handle_bytes) == 0)
                        return f;
        return NULL;
}

/* Its path leads to nothing, or to another directory than the one tierd
 * opened at start: a deleted btrfs subvolume stays an empty directory to
 * those who hold it open. */
static bool subvolume_gone(const struct tenant *tn) {
        struct stat held, now;
        if (fstat(tn->subvol_fd, &held) < 0 || stat(tn->cfg->subvolume, &now) < 0)
                return true;
        return held.st_dev != now.st_dev || held.st_ino != now.st_ino;
}

static int file_get(struct tenant *tn, int any_fd, struct tfile **ret) {
        struct tierd *t = tn->t;
        struct tfile *f;
        int r;

        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        r = file_handle_of(any_fd, &f->h.fh);
        if (r < 0) {
                free(f);
                return log_error_errno(r, "name_to_handle_at: %m");
        }
        struct tfile *existing = file_find(t, tn->fs, &f->h.fh);
        if (existing) {
                free(f);
                *ret = existing;
                return 0;
        }
        /* The fill fd is opened through the private mount: writes raise no
         * event and keep every permission check (immutable, read-only).
         * Write-only: a fill writes, punches and syncs, never reads; the
         * worker gets no more than that (a verification, which reads, gets
         * an fd of its own, fill_submit). */
        f->fd = fsgroup_open_regular(tn->fs, &f->h.fh, O_WRONLY);
        if (f->fd < 0) {
                r = f->fd;
                free(f);
                /* Its reader's own lease (F_SETLEASE): waiting for it to
                 * let go would wait for the reader, who waits for us. */
                if (r == -EWOULDBLOCK)
                        return log_error_errno(r, "tenant %s: a lease is held on a file being read: EIO",
                                               tn->cfg->name);
                /* A stale handle on a live filesystem: the file's subvolume
                 * was deleted (btrfs) under the tenant. */
                if (r == -ESTALE && subvolume_gone(tn))
                        return log_error_errno(r, "tenant %s: its subvolume %s is gone (deleted?): its readers get EIO",
                                               tn->cfg->name, tn->cfg->subvolume);
                return log_error_errno(r, "tenant %s: cannot open a fill fd: %m", tn->cfg->name);
        }
        /* Before any fill of ours strips setuid bits and capabilities: what
         * goes back after, rather than the stub's record of the archive (a
         * chmod u-s or setcap -r since must hold). */
        r = inode_attrs_read(f->fd, &f->attrs);
        if (r < 0) {
                close(f->fd);
                free(f);
                return log_error_errno(r, "tenant %s: cannot read a file's mode: %m", tn->cfg->name);
        }
        t->fds_in_flight++;
        f->fs = tn->fs;
        f->tenant = tn;
        f->next = t->files;
        t->files = f;
        *ret = f;
        return 0;
}

static void file_free(struct tfile *f) {
        struct tierd *t = f->tenant->t;
        for (struct tfile **p = &t->files; *p; p = &(*p)->next)
                if (*p == f) {
                        *p = f->next;
                        break;
                }
        safe_close(f->fd);
        range_set_done(&f->unverified);
        range_set_done(&f->written);
        range_set_done(&f->syncing);
        f->tenant->quota_reserved -= MIN(f->written_reserved, f->tenant->quota_reserved);
        t->fds_in_flight--;
        fsgroup_resume_reading(t);
        for (struct idle_callback *c; (c = f->idle);) {
                f->idle = c->next;
                c->callback(c->userdata);
                free(c);
        }
        free(f);
        tierd_check_idle(t);
}

static void file_add_waiter(struct tfile *f, struct waiter *w) {
        w->next = f->waiters;
        f->waiters = w;
        file_progress(f);
}

/* What fills wrote, recorded or not yet. */
static int written_ranges(const struct tfile *f, const struct stub *s, struct range_set *out) {
        const struct range_set *sets[] = { s->state == STUB_PARTIAL ? &s->populated : NULL, &f->written, &f->syncing };
        for (size_t k = 0; k < ARRAY_SIZE(sets); k++)
                for (size_t i = 0; sets[k] && i < sets[k]->n; i++) {
                        int r = range_set_add(out, sets[k]->r[i].start, sets[k]->r[i].end);
                        if (r < 0)
                                return r;
                }
        return 0;
}

static bool waiter_satisfied(const struct tfile *f, const struct waiter *w, const struct stub *s) {
        if (s->state == STUB_ARCHIVED || s->state == STUB_DIRTY)
                return true;
        if (!w->needs_record && (f->whole_written || f->whole_syncing))
                return true;
        if (w->whole)
                return false;
        uint64_t end = MIN(w->end, s->size), start = MIN(w->start, end);
        if (start == end || (s->state == STUB_PARTIAL && range_set_covers(&s->populated, start, end)))
                return true;
        _cleanup_(range_set_done) struct range_set here = {};
        return !w->needs_record && written_ranges(f, s, &here) == 0 && range_set_covers(&here, start, end);
}

static void on_fill_done(struct request *req, const struct proto_reply *rep);

static bool data_fills_in_flight(const struct tfile *f) {
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                if (!fl->sync && !fl->verify)
                        return true;
        return false;
}

static int fill_submit(struct tfile *f, uint64_t start, uint64_t end, const struct stub *s, int type, bool whole,
                       uint64_t route) {
        struct fill *fl = calloc(1, sizeof(*fl));
        struct request *req;

        if (!fl)
                return -ENOMEM;
        /* No fill of ours has touched the inode since the last put-back:
         * what the owner set since (a chmod u-s after a read) is what goes
         * back after this one. */
        if (type == PROTO_FILL && !data_fills_in_flight(f) && !f->unverified.n)
                (void)inode_attrs_read(f->fd, &f->attrs);
        /* The file's fill fd, lent: it stays open while any fill is in
         * flight, and one fd per file keeps tierd far from its fd limit. A
         * verification reads the file (and punches it back if it is wrong):
         * an fd of its own, closed with the request. */
        if (type == PROTO_VERIFY) {
                int rfd = fsgroup_open_regular(f->fs, &f->h.fh, O_RDWR);
                req = rfd < 0 ? NULL : request_new(type, rfd, on_fill_done, fl);
                if (rfd >= 0 && !req)
                        close(rfd);
                if (rfd < 0) {
                        free(fl);
                        return rfd;
                }
        } else
                req = request_new_borrowing(type, f->fd, on_fill_done, fl);
        if (!req) {
                free(fl);
                return -ENOMEM;
        }
        *fl = (struct fill){ .file = f, .start = start, .end = end, .whole_verified = whole,
                             .verify = type == PROTO_VERIFY, .next = f->fills,
                             .reserved = type == PROTO_FILL ? end - start : 0,
                             .unverified = type == PROTO_FILL && !whole && !s->has_manifest &&
                                           f->tenant->cfg->verify,
                             .route = route, .gen = f->sync_gen };
        f->tenant->quota_reserved += fl->reserved;
        f->fills = fl;
        req->msg.offset = start;
        req->msg.length = end - start;
        req->msg.size = s->size;
        req->msg.flags = whole ? PROTO_FILL_WHOLE : 0;
        req->msg.chunk = s->chunk;
        /* A ranged fill is checked chunk by chunk against the manifest. */
        if (!whole && type == PROTO_FILL && s->has_manifest && f->tenant->cfg->verify) {
                req->msg.flags |= PROTO_FILL_MANIFEST;
                memcpy(req->msg.manifest, s->manifest, 32);
        }
        memcpy(req->msg.key, s->key, sizeof(req->msg.key));
        memcpy(req->msg.sha256, s->sha256, 32);
        log_debug("tenant %s: %s %s [%llu, %llu)", f->tenant->cfg->name, type == PROTO_VERIFY ? "verify" : "fill",
                  s->key, (unsigned long long)start, (unsigned long long)end);
        /* The reader's container's worker: a crash there touches no one else. */
        worker_submit(container_worker(f->tenant, route), req);
        return 0;
}

/* In flight, in and waiting for the whole-file check, or written and
 * waiting for its record: not to fetch. */
static void in_flight(const struct tfile *f, struct range_set *out) {
        const struct range_set *sets[] = { &f->unverified, &f->written, &f->syncing };
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                range_set_add(out, fl->start, fl->end);
        for (size_t k = 0; k < ARRAY_SIZE(sets); k++)
                for (size_t i = 0; i < sets[k]->n; i++)
                        range_set_add(out, sets[k]->r[i].start, sets[k]->r[i].end);
}

/* Every byte in, recorded or waiting for the whole-file check. */
static bool all_in(const struct tfile *f, const struct stub *s) {
        _cleanup_(range_set_done) struct range_set in = {};
        for (size_t i = 0; i < s->populated.n; i++)
                range_set_add(&in, s->populated.r[i].start, s->populated.r[i].end);
        for (size_t i = 0; i < f->unverified.n; i++)
                range_set_add(&in, f->unverified.r[i].start, f->unverified.r[i].end);
        return range_set_covers(&in, 0, s->size);
}

static unsigned fills_in_flight(const struct tfile *f) {
        unsigned n = 0;
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                n++;
        return n;
}

static bool verify_in_flight(const struct tfile *f) {
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                if (fl->verify)
                        return true;
        return false;
}

/* Starts the fills w needs that nobody has started yet. */
static int waiter_dispatch(struct tfile *f, struct waiter *w, const struct stub *s) {
        _cleanup_(range_set_done) struct range_set busy = {}, missing = {}, todo = {};
        uint64_t chunk = s->chunk, start, end;
        int r;

        if (f->whole_written || f->whole_syncing)
                return 0; /* all in: its record is on its way */
        in_flight(f, &busy);
        if (w->whole || s->populated.n + 2 >= STUB_MAX_RANGES) {
                w->whole = true;
                if (s->state == STUB_PARTIAL && range_set_covers(&s->populated, 0, s->size))
                        return 0; /* all in: file_progress verifies it */
                if (s->state == STUB_RELEASED && !f->fills) {
                        if ((r = quota_admit(f->tenant, f->fd, s->size)) < 0)
                                return r;
                        return fill_submit(f, 0, s->size, s, PROTO_FILL, true, w->route);
                }
                start = 0;
                end = s->size;
        } else {
                start = w->start;
                end = MIN(w->want_end, s->size);
        }
        if (s->state == STUB_PARTIAL)
                r = range_set_missing(&s->populated, start, end, &missing);
        else
                r = range_set_add(&missing, start, end);
        if (r < 0)
                return r;
        /* Round each gap out to whole chunks, then keep only what is neither
         * present nor already being fetched. */
        for (size_t i = 0; i < missing.n; i++) {
                uint64_t a = missing.r[i].start, b = missing.r[i].end;
                if (range_round_to_chunks(&a, &b, chunk, s->size) && (r = range_set_add(&todo, a, b)) < 0)
                        return r;
        }
        _cleanup_(range_set_done) struct range_set fresh = {};
        for (size_t i = 0; i < todo.n; i++) {
                _cleanup_(range_set_done) struct range_set gaps = {};
                range_set_missing(&busy, todo.r[i].start, todo.r[i].end, &gaps);
                for (size_t j = 0; j < gaps.n; j++) {
                        if (s->state == STUB_PARTIAL)
                                range_set_missing(&s->populated, gaps.r[j].start, gaps.r[j].end, &fresh);
                        else
                                range_set_add(&fresh, gaps.r[j].start, gaps.r[j].end);
                }
        }
        /* At most FILLS_PER_FILE pieces of a file in flight: the rest start
         * as those complete (file_progress), so a huge file (or a stub that
         * claims one) never floods the worker's queue. Pieces of at most
         * FILL_PIECE run on several worker threads at once, and a reader
         * waits only for the piece it needs; whole chunks: the manifest
         * checks chunks. */
        struct { uint64_t start, end; } piece[FILLS_PER_FILE];
        unsigned running = fills_in_flight(f), n = 0;
        for (size_t j = 0; j < fresh.n && running + n < FILLS_PER_FILE; j++)
                for (uint64_t a = fresh.r[j].start; a < fresh.r[j].end && running + n < FILLS_PER_FILE; n++) {
                        uint64_t b = MIN(fresh.r[j].end, round_up_u64(a + 1, MAX((uint64_t)FILL_PIECE, s->chunk)));
                        piece[n].start = a;
                        piece[n].end = b;
                        a = b;
                }
        /* Over quota: other files make room, or the readahead goes, or the
         * reader gets EDQUOT. */
        uint64_t need = 0;
        for (unsigned i = 0; i < n; i++)
                need += piece[i].end - piece[i].start;
        if (need && (r = quota_admit(f->tenant, f->fd, need)) < 0) {
                if (w->whole || w->want_end <= w->end)
                        return r;
                w->want_end = w->end;
                return waiter_dispatch(f, w, s);
        }
        for (unsigned i = 0; i < n; i++)
                if ((r = fill_submit(f, piece[i].start, piece[i].end, s, PROTO_FILL, false, w->route)) < 0)
                        return r;
        return 0;
}

static void file_mark_dirty(struct tfile *f, struct stub *s) {
        if (s->state != STUB_ARCHIVED)
                return;
        s->state = STUB_DIRTY;
        int r = tally_stub_write(f->tenant, f->fd, s);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot mark a file dirty: %m", f->tenant->cfg->name);
}

/* Re-evaluates every waiter of f: answer those whose data is in, start
 * fills for the others. */
static void file_progress(struct tfile *f) {
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        int r = stub_read_fd(f->fd, &s, &err);

        if (r < 0) {
                log_error_errno(r, "tenant %s: stub unreadable during restore: %s%m", f->tenant->cfg->name,
                                r == -EINVAL ? err : "");
                for (struct waiter *w = f->waiters; w; w = w->next)
                        w->error = EIO;
        }
        for (struct waiter **p = &f->waiters; *p;) {
                struct waiter *w = *p;
                if (w->error || (r == 0 && waiter_satisfied(f, w, &s))) {
                        if (!w->error && w->dirty)
                                file_mark_dirty(f, &s);
                        *p = w->next;
                        waiter_finish(f, w, w->error);
                        continue;
                }
                p = &w->next;
        }
        /* Every range in, by whatever reads: check the whole file once, so it
         * becomes archived and gets its ignore mark. */
        if (r == 0 && s.state == STUB_PARTIAL && !f->fills && all_in(f, &s)) {
                /* On a waiting reader's worker: its container's, if any. */
                int k = fill_submit(f, 0, s.size, &s, PROTO_VERIFY, false, f->waiters ? f->waiters->route : 0);
                if (k < 0)
                        log_error_errno(k, "tenant %s: cannot start a verification: %m", f->tenant->cfg->name);
        }
        f->quota_wait = false;
        for (struct waiter *w = f->waiters; w && r == 0; w = w->next) {
                if (w->error)
                        continue; /* answered once its fills drain: nothing more is fetched for it */
                /* No manifest (any more): only the whole file can be checked. */
                if (f->tenant->cfg->verify && !s.has_manifest)
                        w->whole = true;
                int k = waiter_dispatch(f, w, &s);
                if (k == -EAGAIN)
                        f->quota_wait = true; /* dispatch_quota_retry() comes back */
                else if (k == -EDQUOT)
                        w->error = EDQUOT; /* said and signalled by quota.c */
                else if (k < 0) {
                        log_error_errno(k, "tenant %s: cannot start a fill: %m", f->tenant->cfg->name);
                        w->error = EIO;
                }
                if (!f->fills && !w->error && !verify_in_flight(f) && !f->quota_wait) {
                        /* Nothing in flight, nothing to fetch, not satisfied. */
                        log_error("tenant %s: file cannot be completed (state %s)", f->tenant->cfg->name,
                                  stub_state_to_string(s.state));
                        w->error = EIO;
                }
        }
        for (struct waiter **p = &f->waiters; *p;) {
                struct waiter *w = *p;
                if (w->error && !f->fills) {
                        *p = w->next;
                        waiter_finish(f, w, w->error);
                        continue;
                }
                p = &w->next;
        }
        if (!f->waiters && !f->fills)
                file_free(f);
}

/* Writes the stub's record: the file whole (archived), or these ranges
 * present. What it vouches for is durable by now. */
static int file_record(struct tfile *f, struct stub *s, bool whole, const struct range_set *present) {
        int r;

        if (whole) {
                /* Our fills' modify events are queued: hear them while the
                 * stub still says partial, or they would make it dirty. */
                fsgroup_drain_notifications(f->fs);
                s->state = STUB_ARCHIVED;
                range_set_clear(&s->populated);
        } else {
                if (s->state == STUB_RELEASED)
                        range_set_clear(&s->populated);
                s->state = STUB_PARTIAL;
                for (size_t i = 0; i < present->n; i++)
                        if ((r = range_set_add(&s->populated, present->r[i].start, present->r[i].end)) < 0)
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
                fsgroup_ignore_file(f->fs, f->fd);
                log_info("tenant %s: %s restored whole (%llu bytes, SHA-256 checked)", f->tenant->cfg->name, s->key,
                         (unsigned long long)s->size);
        }
        return 0;
}

/* A completed fill: its bytes are shown to readers now (written), and
 * recorded once synced (file_sync_start) through the fill fd, which was
 * open before any fill wrote, so that it hears of every write error. A
 * passed verification makes the file whole the same way. */
static int file_take_fill(struct tfile *f, const struct fill *fl) {
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        int r = stub_read_fd(f->fd, &s, &err);

        if (r < 0)
                return r;
        if (s.state == STUB_ARCHIVED || s.state == STUB_DIRTY)
                return 0;
        if (fl->gen != f->sync_gen)
                return 0; /* never recorded: read again, fetched again */
        if (fl->unverified)
                return range_set_add(&f->unverified, fl->start, fl->end);
        bool whole = fl->verify || fl->whole_verified;
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
        const char *err = "";
        int r = stub_read_fd(f->fd, &s, &err);

        if (r < 0)
                return r;
        if (s.state == STUB_ARCHIVED || s.state == STUB_DIRTY)
                return 0;
        return file_record(f, &s, f->whole_syncing, &f->syncing);
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
        struct request *req = fl ? request_new_borrowing(PROTO_SYNC, f->fd, on_fill_done, fl) : NULL;
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
        file_progress(f);
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

static void on_fill_done(struct request *req, const struct proto_reply *rep) {
        struct fill *fl = req->userdata;
        struct tfile *f = fl->file;
        struct tenant_counters *c = &f->tenant->counters;
        int r = rep->error;

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
                file_progress(f); /* its waiters restore it whole now */
                return;
        }
        if (r < 0) {
                c->fill_errors++;
                log_error("tenant %s: %s of %s [%llu, %llu) failed: %s", f->tenant->cfg->name,
                          fl->verify ? "verification" : "fill", req->msg.key, (unsigned long long)fl->start,
                          (unsigned long long)fl->end, strerror(-r));
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
        file_progress(f);
}

static struct waiter *waiter_new(void) {
        struct waiter *w = calloc(1, sizeof(*w));
        if (w)
                w->event_fd = -1;
        return w;
}

int dispatch_restore_whole(struct tenant *tn, int fd, void (*callback)(void *userdata, int error), void *userdata) {
        struct waiter *w = waiter_new();
        struct tfile *f = NULL;
        int r;

        if (!w)
                return -ENOMEM;
        r = file_get(tn, fd, &f);
        if (r < 0 || !f) {
                free(w);
                return r < 0 ? r : -EIO;
        }
        w->whole = true;
        w->needs_record = true;
        w->callback = callback;
        w->userdata = userdata;
        file_add_waiter(f, w);
        return 0;
}

bool dispatch_file_busy(struct tierd *t, struct tiered_fs *fs, int fd) {
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } h;
        if (file_handle_of(fd, &h.fh) < 0)
                return true;
        return file_find(t, fs, &h.fh) != NULL;
}

int dispatch_when_idle(struct tierd *t, struct tiered_fs *fs, int fd, void (*callback)(void *userdata), void *userdata) {
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } h;
        struct idle_callback *c;
        struct tfile *f;
        int r = file_handle_of(fd, &h.fh);

        if (r < 0)
                return r;
        f = file_find(t, fs, &h.fh);
        if (!f) {
                callback(userdata);
                return 0;
        }
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (struct idle_callback){ .next = f->idle, .callback = callback, .userdata = userdata };
        f->idle = c;
        return 0;
}

bool dispatch_idle(struct tierd *t) { return t->files == NULL && settle_idle(t); }

void dispatch_quota_retry(struct tenant *tn) {
        for (struct tfile *f = tn->t->files, *next; f; f = next) {
                next = f->next; /* file_progress may free f */
                if (f->tenant == tn && f->quota_wait) {
                        f->quota_wait = false;
                        file_progress(f);
                }
        }
}

void dispatch_fail_all(struct tierd *t) {
        settle_end_all(t, EIO);
        for (struct tfile *f = t->files; f; f = f->next)
                for (struct waiter *w; (w = f->waiters);) {
                        f->waiters = w->next;
                        waiter_finish(f, w, EIO);
                }
}

/* The file's name, for a message: where the event's fd leads. */
static const char *fd_path(int fd, char *buf, size_t size) {
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, buf, size - 1);
        if (n < 0)
                return "a file";
        buf[n] = 0;
        return buf;
}

/* Read-ahead grows with a sequential reader, as the kernel's does: a read
 * right after N populated bytes fetches about N more (at least a chunk, at
 * most the tenant's readahead); a read from the start, one chunk; a read
 * elsewhere, nothing more than its own chunk. */
static uint64_t readahead_for(const struct tfile *f, const struct stub *s, uint64_t offset, uint64_t max) {
        _cleanup_(range_set_done) struct range_set in = {};
        if (offset == 0)
                return MIN(s->chunk, max);
        /* Written counts: a reader served from the page cache runs ahead
         * of the records. */
        if (written_ranges(f, s, &in) < 0)
                return 0;
        for (size_t i = 0; i < in.n; i++)
                if (in.r[i].start < offset && offset <= in.r[i].end)
                        return MIN(MAX(offset - in.r[i].start, s->chunk), max);
        return 0;
}

void dispatch_pre_content_retry(struct tiered_fs *fs, const struct fanotify_event_metadata *md, uint64_t since_usec) {
        _cleanup_(stub_done) struct stub s = {};
        uint64_t offset = 0, count = 0;
        const char *err = "";
        struct tenant *tn;
        struct waiter *w;
        struct tfile *f = NULL;
        enum access_kind kind;
        int fd = md->fd, r;

        if (fd < 0)
                return; /* permission events always carry an fd */
        r = stub_read_fd(fd, &s, &err);
        if (r == -ENODATA) {
                /* An ordinary file: allow, and never hear of it again while
                 * it is cached, so it runs at native speed. */
                fsgroup_ignore_file(fs, fd);
                dispatch_answer(fs, fd, 0);
                return;
        }
        if (r < 0) {
                char path[PATH_MAX];
                if (r == -EINVAL)
                        log_error("%s (read by pid %d): corrupt stub, EIO: %s", fd_path(fd, path, sizeof(path)),
                                  (int)md->pid, err);
                else
                        log_error_errno(r, "%s (read by pid %d): unreadable stub, EIO: %m", fd_path(fd, path, sizeof(path)),
                                        (int)md->pid);
                dispatch_answer(fs, fd, EIO);
                return;
        }
        if (s.state == STUB_ARCHIVED || s.state == STUB_DIRTY) {
                fsgroup_ignore_file(fs, fd);
                dispatch_answer(fs, fd, 0);
                return;
        }
        tn = tierd_find_tenant(fs->t, s.tenant);
        if (!tn || tn->fs != fs) {
                log_error("stub names tenant '%s', which is not served on %s: EIO", s.tenant, fs->mountpoint);
                dispatch_answer(fs, fd, EIO);
                return;
        }
        /* Never wait here for the accessor to fall asleep: settle.c. */
        r = access_classify(md->pid, fd, md->mask, tierd_now_usec(tn->t) - since_usec >= ACCESS_SETTLE_USEC, &kind);
        if (r == -EAGAIN && settle_later(fs, md, since_usec) == 0)
                return;
        if (r == -EAGAIN)
                kind = ACCESS_WHOLE;
        /* "restore": "open": the open waits for the whole file, so what the
         * opener stats after it (tar's ctime check) no longer changes. */
        if (kind == ACCESS_OPEN_READ && !tn->cfg->restore_open) {
                dispatch_answer(fs, fd, 0);
                return;
        }
        if (kind == ACCESS_READ && fanotify_event_range(md, &offset, &count) && count > 0 && s.state == STUB_PARTIAL &&
            range_set_covers(&s.populated, MIN(offset, s.size), MIN(offset + count, s.size))) {
                dispatch_answer(fs, fd, 0); /* a read of bytes already here */
                return;
        }
        w = waiter_new();
        if (!w || file_get(tn, fd, &f) < 0 || !f) {
                free(w);
                dispatch_answer(fs, fd, EIO);
                return;
        }
        w->event_fd = fd;
        w->event_fs = fs;
        w->parked_usec = since_usec;
        w->dirty = kind == ACCESS_CHANGE;
        /* Only a read is let in before the record: anything else may write
         * (an unknown access too), and a write before the record would be
         * recorded over as archived. */
        w->needs_record = kind != ACCESS_READ;
        w->route = container_of_thread(tn, md->pid);
        w->whole = kind != ACCESS_READ || !fanotify_event_range(md, &offset, &count) || count == 0 ||
                   s.size < tn->cfg->small_file || (s.mode & 0111) || tn->cfg->restore_whole ||
                   /* No manifest (archived before them, or one chunk):
                    * only the whole-file hash can check what comes. */
                   (tn->cfg->verify && !s.has_manifest);
        if (!w->whole) {
                w->start = offset;
                w->end = offset + count;
                w->want_end = w->end + readahead_for(f, &s, offset, tn->cfg->readahead);
        }
        log_debug("tenant %s: pid %d %s [%llu, +%llu)%s", tn->cfg->name, (int)md->pid, access_kind_to_string(kind),
                  (unsigned long long)offset, (unsigned long long)count, w->whole ? " whole" : "");
        file_add_waiter(f, w);
}

void dispatch_pre_content_event(struct tiered_fs *fs, const struct fanotify_event_metadata *md) {
        dispatch_pre_content_retry(fs, md, tierd_now_usec(fs->t));
}

int dispatch_orphan(struct tiered_fs *fs, const struct journal_event *ev, int number) {
        struct {
                struct fanotify_event_metadata md;
                struct fanotify_event_info_range range;
        } e = {};
        int fd;

        if (ev->h.fh.handle_bytes == 0)
                return -EBADF;
        fd = fsgroup_open_regular(fs, (struct file_handle *)&ev->h.fh, O_RDONLY);
        if (fd < 0)
                return log_error_errno(fd, "an event the previous tierd left: cannot open its file: %m");
        /* The file takes the place of the number's placeholder: served and
         * answered like a new event with that fd. */
        if (dup3(fd, number, O_CLOEXEC) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        close(fd);
        /* No reader: the recorded thread id may be another thread by now,
         * and a write misread as a read would be lost. Restored whole. */
        e.md = (struct fanotify_event_metadata){ .event_len = sizeof(e.md), .vers = FANOTIFY_METADATA_VERSION,
                                                 .metadata_len = FAN_EVENT_METADATA_LEN, .mask = ev->mask,
                                                 .fd = number, .pid = 0 };
        if (ev->has_range) {
                e.md.event_len = sizeof(e);
                e.range = (struct fanotify_event_info_range){
                        .hdr = { .info_type = FAN_EVENT_INFO_TYPE_RANGE, .len = sizeof(e.range) },
                        .offset = ev->offset,
                        .count = ev->count,
                };
        }
        fs->t->fds_in_flight++;
        dispatch_pre_content_event(fs, &e.md);
        return 0;
}
