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
#include "dispatch-internal.h"

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
#include "handle.h"
#include "inodework.h"
#include "inflight.h"
#include "quota.h"
#include "settle.h"
#include "usage.h"
#include "log.h"
#include "macro.h"
#include "tally.h"
#include "workers.h"

#define FILL_PIECE (8u << 20)
#define FILLS_PER_FILE 16


void dispatch_answer_write(struct tiered_fs *fs, int event_fd, int error) {
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
}

void dispatch_answer(struct tiered_fs *fs, int event_fd, int error) {
        struct tierd *t = fs->t;

        dispatch_answer_write(fs, event_fd, error);
        /* Only now: the kernel matches answers by fd number, reused at once. */
        inflight_forget(t->inflight, event_fd);
        close(event_fd);
        t->fds_in_flight--;
        fsgroup_resume_reading(t);
}

static void waiter_finish(struct tfile *f, struct waiter *w, int error) {
        if (w->event_fd >= 0) {
                tenant_record_wait(f->tenant, w->route, (double)(tierd_now_usec(f->tenant->t) - w->parked_usec) / 1e6,
                                   error);
                dispatch_answer(w->event_fs, w->event_fd, error);
        } else
                w->callback(w->userdata, error ? -error : 0);
        free(w);
}

int file_handle_of(int fd, struct file_handle *fh) {
        int mount_id;
        fh->handle_bytes = MAX_HANDLE_SZ;
        if (name_to_handle_at(fd, "", fh, &mount_id, AT_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

struct tfile *tfile_find(struct tierd *t, struct tiered_fs *fs, const struct file_handle *fh) {
        for (struct tfile *f = t->files; f; f = f->next)
                if (f->fs == fs && file_handle_equal(&f->h.fh, fh))
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

int tfile_get(struct tenant *tn, int any_fd, struct tfile **ret) {
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
        struct tfile *existing = tfile_find(t, tn->fs, &f->h.fh);
        if (existing) {
                free(f);
                *ret = existing;
                return 0;
        }
        /* The fill fd is opened through the fill mount: writes raise no
         * pre-content event and keep every permission check (immutable,
         * read-only), and whatever the worker writes through it after its
         * fills is heard (fillwatch.c).
         * Write-only: a fill writes, punches and syncs, never reads; the
         * worker gets no more than that (a verification, which reads, gets
         * an fd of its own, fill_submit). */
        f->fd = fsgroup_open_fill(tn->fs, &f->h.fh, O_WRONLY);
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
        restore_unpark(f);
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

void tfile_add_waiter(struct tfile *f, struct waiter *w) {
        w->next = f->waiters;
        f->waiters = w;
        /* The put-backs and records of the file's fills go first now. */
        if (!w->ahead && f->inode_last)
                inode_work_promote(f->tenant, f->inode_last);
        tfile_progress(f);
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
        return !w->needs_record && tfile_written(f, s, &here) == 0 && range_set_covers(&here, start, end);
}


static int fill_submit(struct tfile *f, uint64_t start, uint64_t end, const struct stub *s, int type, bool whole,
                       uint64_t route, bool ahead) {
        struct fill *fl = calloc(1, sizeof(*fl));
        struct request *req;

        if (!fl)
                return -ENOMEM;
        /* No fill of ours has touched the inode since the last put-back:
         * what the owner set since (a chmod u-s after a read) is what goes
         * back after this one. */
        if (type == PROTO_FILL && !tfile_data_fills_in_flight(f) && !f->unverified.n)
                (void)inode_attrs_read(f->fd, &f->attrs);
        /* The file's fill fd, lent: it stays open while any fill is in
         * flight, and one fd per file keeps tierd far from its fd limit. A
         * verification reads the file (and punches it back if it is wrong):
         * an fd of its own, closed with the request. */
        if (type == PROTO_VERIFY) {
                int rfd = fsgroup_open_fill(f->fs, &f->h.fh, O_RDWR);
                req = rfd < 0 ? NULL : request_new(type, rfd, tfile_fill_done, fl);
                if (rfd >= 0 && !req)
                        close(rfd);
                if (rfd < 0) {
                        free(fl);
                        return rfd;
                }
        } else
                req = request_new_borrowing(type, f->fd, tfile_fill_done, fl);
        if (!req) {
                free(fl);
                return -ENOMEM;
        }
        bool ranged = type == PROTO_FILL && !whole, verify = f->tenant->cfg->verify;
        *fl = (struct fill){ .file = f, .start = start, .end = end, .whole_verified = whole,
                             .verify = type == PROTO_VERIFY, .next = f->fills,
                             .reserved = type == PROTO_FILL ? end - start : 0,
                             .unverified = ranged && !s->has_manifest && verify,
                             .checked = ranged && s->has_manifest && verify,
                             .route = route, .gen = f->sync_gen, .req = req };
        f->tenant->quota_reserved += fl->reserved;
        f->fills = fl;
        req->msg.offset = start;
        req->msg.length = end - start;
        req->msg.size = s->size;
        req->msg.flags = (whole ? PROTO_FILL_WHOLE : 0) | (ahead ? PROTO_FILL_PREFETCH : 0);
        req->msg.chunk = s->chunk;
        /* A ranged fill is checked chunk by chunk against the manifest. */
        if (fl->checked) {
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

/* A reader waits for [start, end): the prefetch fills of it become
 * readers' fills, so it never waits behind other prefetches (worker/main.c). */
static void promote_fills(struct tfile *f, const struct waiter *w, uint64_t start, uint64_t end) {
        if (w->ahead)
                return;
        for (struct fill *fl = f->fills; fl; fl = fl->next)
                if (fl->req && fl->start < end && start < fl->end)
                        worker_promote(container_worker(f->tenant, fl->route), fl->req);
}

/* Room for need more bytes, at the tenant's restore_rate for readers. A fetch ahead of readers (a trace's, a
 * hydration's) takes only free room and never makes the tenant release
 * files, and none starts once tierd stops. */
static int fill_admit(struct tfile *f, const struct waiter *w, uint64_t need) {
        if (!w->ahead) {
                int r = restore_paced(f);
                if (r == 0 && (r = quota_admit(f->tenant, f->fd, need)) == 0)
                        restore_spend(f->tenant, need);
                return r;
        }
        if (f->tenant->t->stopping)
                return -ECANCELED;
        return quota_room(f->tenant, need) ? 0 : -EDQUOT;
}

/* Starts the fills w needs that nobody has started yet. */
static int waiter_dispatch(struct tfile *f, struct waiter *w, const struct stub *s) {
        _cleanup_(range_set_done) struct range_set busy = {}, missing = {}, todo = {};
        uint64_t chunk = s->chunk, start, end;
        int r;

        if (f->whole_written || f->whole_syncing)
                return 0; /* all in: its record is on its way */
        tfile_in_flight(f, &busy);
        if (w->whole || s->populated.n + 2 >= STUB_MAX_RANGES) {
                w->whole = true;
                if (s->state == STUB_PARTIAL && range_set_covers(&s->populated, 0, s->size))
                        return 0; /* all in: tfile_progress verifies it */
                if (s->state == STUB_RELEASED && !f->fills) {
                        if ((r = fill_admit(f, w, s->size)) < 0)
                                return r;
                        return fill_submit(f, 0, s->size, s, PROTO_FILL, true, w->route, w->ahead);
                }
                start = 0;
                end = s->size;
        } else {
                start = w->start;
                end = MIN(w->want_end, s->size);
        }
        promote_fills(f, w, start, end);
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
         * as those complete (tfile_progress), so a huge file (or a stub that
         * claims one) never floods the worker's queue. Pieces of at most
         * FILL_PIECE run on several worker threads at once, and a reader
         * waits only for the piece it needs; whole chunks: the manifest
         * checks chunks. */
        struct { uint64_t start, end; } piece[FILLS_PER_FILE];
        unsigned running = tfile_fills_in_flight(f), n = 0;
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
        if (need && (r = fill_admit(f, w, need)) < 0) {
                if (r == -EINPROGRESS || w->whole || w->want_end <= w->end)
                        return r; /* a turn under restore_rate keeps its readahead */
                w->want_end = w->end;
                return waiter_dispatch(f, w, s);
        }
        for (unsigned i = 0; i < n; i++)
                if ((r = fill_submit(f, piece[i].start, piece[i].end, s, PROTO_FILL, false, w->route, w->ahead)) < 0)
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
void tfile_progress(struct tfile *f) {
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        int r = stub_read_fd(f->fd, &s, &err);

        /* Every range in, each chunk checked against the manifest on its
         * way in: archived at once, no second pass over its bytes (one
         * hash per byte), before the waiters are looked at. */
        if (r == 0 && s.state == STUB_PARTIAL && !f->fills && tfile_chunks_checked(f, &s) &&
            (r = tfile_record_checked(f, &s)) < 0) {
                log_error_errno(r, "tenant %s: cannot record %s whole: %m", f->tenant->cfg->name, s.key);
                stub_done(&s);
                r = stub_read_fd(f->fd, &s, &err); /* as it is on disk */
        }
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
        /* Every range in, by whatever reads, and hashed once (not checked
         * on its way in, above): the file becomes archived and gets its
         * ignore mark. */
        if (r == 0 && s.state == STUB_PARTIAL && !f->fills && tfile_all_in(f, &s)) {
                /* On a waiting reader's worker: its container's, if any. */
                int k = fill_submit(f, 0, s.size, &s, PROTO_VERIFY, false, f->waiters ? f->waiters->route : 0, false);
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
                if (k == -EAGAIN || k == -EINPROGRESS)
                        f->quota_wait = true; /* dispatch_quota_retry() or restore_rate's turn comes back */
                else if (k == -EDQUOT || k == -ECANCELED)
                        w->error = -k; /* said and signalled by quota.c; or a fetch ahead no longer wanted */
                else if (k < 0) {
                        log_error_errno(k, "tenant %s: cannot start a fill: %m", f->tenant->cfg->name);
                        w->error = EIO;
                }
                if (!f->fills && !w->error && !tfile_verify_in_flight(f) && !f->quota_wait) {
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

struct waiter *tfile_waiter_new(void) {
        struct waiter *w = calloc(1, sizeof(*w));
        if (w)
                w->event_fd = -1;
        return w;
}

/* A waiter of tierd's own (no event) on the file behind fd, as *tmpl. */
static int job_waiter_add(struct tenant *tn, int fd, const struct waiter *tmpl) {
        struct waiter *w = malloc(sizeof(*w));
        struct tfile *f = NULL;
        int r;

        if (!w)
                return -ENOMEM;
        r = tfile_get(tn, fd, &f);
        if (r < 0 || !f) {
                free(w);
                return r < 0 ? r : -EIO;
        }
        *w = *tmpl;
        w->event_fd = -1;
        tfile_add_waiter(f, w);
        return 0;
}

int dispatch_restore_whole(struct tenant *tn, int fd, void (*callback)(void *userdata, int error), void *userdata) {
        return job_waiter_add(tn, fd, &(struct waiter){ .whole = true, .needs_record = true, .callback = callback,
                                                        .userdata = userdata });
}

int dispatch_prefetch(struct tenant *tn, int fd, uint64_t start, uint64_t end, bool whole, uint64_t route,
                      void (*callback)(void *userdata, int error), void *userdata) {
        return job_waiter_add(tn, fd, &(struct waiter){ .start = start, .end = end, .want_end = end, .whole = whole,
                                                        .route = route, .ahead = true, .callback = callback,
                                                        .userdata = userdata });
}

bool dispatch_file_busy(struct tierd *t, struct tiered_fs *fs, int fd) {
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } h;
        if (file_handle_of(fd, &h.fh) < 0)
                return true;
        return tfile_find(t, fs, &h.fh) != NULL;
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
        f = tfile_find(t, fs, &h.fh);
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
                next = f->next; /* tfile_progress may free f */
                if (f->tenant == tn && f->quota_wait) {
                        f->quota_wait = false;
                        tfile_progress(f);
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
