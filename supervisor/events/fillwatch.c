/* SPDX-License-Identifier: MIT */
/*
 * What a worker does with the fill fds it is lent, heard by the kernel.
 *
 * A fill fd is passed to the worker (SCM_RIGHTS) and tierd cannot take it
 * back: a compromised worker could keep it and write, punch or fallocate
 * the file long after its fill was answered, behind every record tierd
 * keeps. So fill fds are opened through a mount of their own (the fill
 * mount: a detached clone nothing else uses), and a notification group
 * with a mount mark on it hears every FAN_MODIFY through it, with the
 * writer's pid. truncate raises no event on a mount mark: the worker's
 * seccomp filter has no ftruncate, and no shared file mapping either
 * (worker/sandbox.c), so every change it can make is heard here.
 *
 * The rule: a write by a worker to a file none of whose fills in flight
 * is that worker's is a violation. The order makes it exact: the kernel
 * queues a write's event inside the write(2) itself, before the worker
 * sends "done", so tierd drains this group (what is queued then, bounded)
 * before it takes any fill's reply (fillrecord.c). A violation kills the
 * worker (its requests go to a replacement, and the death counts towards
 * its crash loop), and the file's record becomes "released" without a
 * punch: every range is fetched and checked again at its next read,
 * written over what is there. A file with no copy in the store (dirty)
 * cannot be put back, and the log says so.
 *
 * All of it runs on the event loop: an O_NONBLOCK open of a regular file
 * by handle and its xattr, per event, never a wait.
 */
#include "fillwatch.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "containers.h"
#include "contentcheck.h"
#include "dispatch-internal.h"
#include "fanevent.h"
#include "fsgroup.h"
#include "handle.h"
#include "log.h"
#include "macro.h"
#include "stub.h"
#include "tally.h"

#define WATCH_BUF 4096

int fillwatch_open(struct tiered_fs *fs) {
        const unsigned ignore = FAN_MARK_ADD | FAN_MARK_MOUNT | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY;

        /* Fills raise no pre-content event and mark nothing dirty, through
         * this mount as through the private one. */
        if (fanotify_mark(fs->pre_fd, ignore, TIERD_PRE_CONTENT_MASK, fs->fill_root_fd, NULL) < 0)
                return log_error_errno(errno, "ignore mark on the fill mount of %s: %m", fs->mountpoint);
        if (fanotify_mark(fs->notif_fd, ignore, FSGROUP_NOTIFY_MASK, fs->fill_root_fd, NULL) < 0)
                return log_error_errno(errno, "notification ignore mark on the fill mount of %s: %m", fs->mountpoint);
        /* An unlimited queue: an overflow would lose which files to check
         * again. Writes of one file by one process merge while unread, a
         * worker cannot fork, and its fds are bounded: so is the queue. */
        fs->watch_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_UNLIMITED_QUEUE | FAN_CLOEXEC | FAN_NONBLOCK,
                                     O_RDONLY | O_CLOEXEC);
        if (fs->watch_fd < 0)
                return log_error_errno(errno, "fanotify_init (the fill mount's watch): %m");
        if (fanotify_mark(fs->watch_fd, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_MODIFY, fs->fill_root_fd, NULL) < 0)
                return log_error_errno(errno, "FAN_MODIFY mark on the fill mount of %s: %m", fs->mountpoint);
        return 0;
}

/* The live worker of one of fs's tenants whose pid this is, or NULL (one
 * that died since its write was queued). */
static struct worker *worker_of_pid(struct tiered_fs *fs, pid_t pid) {
        for (struct worker *w = NULL; (w = worker_next(fs->t, w));)
                if (w->tenant->fs == fs && w->pid == pid)
                        return w;
        return NULL;
}

/* Every live worker of fs's tenants, or of tn alone (not NULL), is killed:
 * their requests go to the replacements. */
static void kill_workers(struct tiered_fs *fs, const struct tenant *tn) {
        for (struct worker *w = NULL; (w = worker_next(fs->t, w));)
                if (w->tenant->fs == fs && (!tn || tn == w->tenant) && w->pid > 0)
                        kill(w->pid, SIGKILL);
}

struct recheck {
        struct tiered_fs *fs;
        const char *why; /* for the log: "written outside a fill"... */
        union file_handle_buf h;
};

/* Its size as the record has it: bytes written past it would be read at
 * once (reads past the size need no fill), and a collapse shortens it. */
static int size_back(int fd, const struct stub *s) {
        struct inode_attrs attrs;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((uint64_t)st.st_size == s->size)
                return 0;
        int r = inode_attrs_read(fd, &attrs);
        if (r < 0)
                return r;
        if (ftruncate(fd, (off_t)s->size) < 0)
                return -errno;
        return put_back_attrs(fd, &attrs, &s->mtime, true); /* a truncate clears capabilities */
}

/* A file a worker wrote wrong (rc->why): what its record vouches for is
 * fetched and checked again, written over what is there (a reader is never
 * shown a hole where it was shown bytes). */
static void recheck_file(void *userdata) {
        _cleanup_free_ struct recheck *rc = userdata;
        _cleanup_close_ int fd = fsgroup_open_regular(rc->fs, &rc->h.fh, O_RDWR);
        _cleanup_(stub_done) struct stub s = {};
        char buf[PATH_MAX];
        const char *path = fd < 0 ? "a file" : fsgroup_fd_name(fd, buf, sizeof(buf)), *err = "";
        int r = fd < 0 ? fd : stub_read_fd(fd, &s, &err);

        if (r == -ENODATA || (r == 0 && s.state == STUB_DIRTY)) {
                log_error("%s: %s, %s, has no copy in the store: its bytes may be wrong", rc->fs->mountpoint, path,
                          rc->why);
                return;
        }
        if (r < 0) {
                log_error_errno(r, "%s: %s, %s, cannot be checked again: %m%s%s", rc->fs->mountpoint, path, rc->why,
                                *err ? ": " : "", err);
                return;
        }
        struct tenant *tn = tierd_find_tenant(rc->fs->t, s.tenant);
        /* The ignore mark first: a read after the record must raise an event. */
        r = fsgroup_unignore_file(rc->fs, fd);
        if (r >= 0 && s.state != STUB_RELEASED) {
                s.state = STUB_RELEASED;
                s.checked = false;
                range_set_clear(&s.populated);
                r = tn ? tally_stub_write(tn, fd, &s) : stub_write_fd(fd, &s);
        }
        if (r >= 0)
                r = size_back(fd, &s);
        if (r < 0)
                log_error_errno(r, "%s: %s (%s), %s: cannot record it released: %m", rc->fs->mountpoint, path, s.key,
                                rc->why);
        else
                log_error("tenant %s: %s (%s), %s, is fetched and checked again at its next read", s.tenant, path,
                          s.key, rc->why);
}

/* recheck_file, at once, or once the fills in flight for the file (f, if
 * not NULL) are recorded. */
static void recheck_later(struct tiered_fs *fs, const struct file_handle *fh, struct tfile *f, const char *why) {
        struct recheck *rc = calloc(1, sizeof(*rc));
        struct idle_callback *c = f ? calloc(1, sizeof(*c)) : NULL;
        if (!rc || (f && !c)) {
                free(rc);
                free(c);
                log_error("%s: out of memory: a file %s is not checked again", fs->mountpoint, why);
                return;
        }
        *rc = (struct recheck){ .fs = fs, .why = why };
        memcpy(&rc->h, fh, sizeof(*fh) + fh->handle_bytes);
        if (!f) {
                recheck_file(rc);
                return;
        }
        *c = (struct idle_callback){ .next = f->idle, .callback = recheck_file, .userdata = rc };
        f->idle = c;
}

/* The cross-check: tierd, not the worker, hashes a share (fill_check) of
 * the files restored whole, on a thread (contentcheck.c), against the
 * SHA-256 the archive recorded. The worker checks every chunk it writes;
 * this checks the worker. A file that does not match was written wrong by
 * a worker that said it was right: the tenant's workers are replaced, and
 * the file is fetched again as after a write outside a fill. */
struct cross_check {
        struct tenant *tn;
        struct recheck rc;
        struct stat st;
        uint8_t sha256[32];
};

static bool sampled(double share) {
        uint32_t x;
        if (share <= 0)
                return false;
        /* Unpredictable, so a worker cannot tell which files are looked at. */
        if (share >= 1 || getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t)sizeof(x))
                return true;
        return x < share * 4294967296.0;
}

/* The file is as it was when its check was queued, and still archived
 * under the same SHA-256: a mismatch is then the worker's, not a write of
 * its owner's since (heard by the notification group, drained first). */
static bool still_as_checked(const struct cross_check *cc, char *path, size_t size) {
        _cleanup_close_ int fd = fsgroup_open_regular(cc->rc.fs, &cc->rc.h.fh, O_RDONLY);
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0 || stub_read_fd(fd, &s, &err) < 0)
                return false;
        fsgroup_fd_name(fd, path, size);
        return s.state == STUB_ARCHIVED && memcmp(s.sha256, cc->sha256, sizeof(s.sha256)) == 0 &&
               content_stat_same(&cc->st, &st);
}

static void on_cross_checked(void *userdata) {
        _cleanup_free_ struct cross_check *cc = userdata;
        struct stub s = {};
        char path[PATH_MAX] = "a file";

        memcpy(s.sha256, cc->sha256, sizeof(s.sha256));
        /* 1: the archived bytes; -ENOENT: not known (written while it was
         * read, or not read): nothing to say. */
        if (content_known(cc->tn, &cc->st, &s) != 0)
                return;
        fsgroup_drain_notifications(cc->rc.fs);
        if (!still_as_checked(cc, path, sizeof(path)))
                return;
        log_error("tenant %s: %s, restored by its worker and called checked, does not hash to its archived SHA-256: "
                  "the tenant's workers are replaced", cc->tn->cfg->name, path);
        tenant_set_last_error(cc->tn, "a restored file did not hash to its archived SHA-256: workers replaced");
        kill_workers(cc->rc.fs, cc->tn);
        recheck_later(cc->rc.fs, &cc->rc.h.fh, tfile_find(cc->tn->t, cc->rc.fs, &cc->rc.h.fh),
                      "restored not as archived (fill_check)");
}

void fillwatch_cross_check(struct tfile *f, const struct stub *s) {
        struct cross_check *cc;
        struct stat st;
        int r;

        if (!sampled(f->tenant->cfg->fill_check) || fstat(f->fd, &st) < 0 || !(cc = calloc(1, sizeof(*cc))))
                return;
        *cc = (struct cross_check){ .tn = f->tenant, .rc.fs = f->fs, .st = st };
        memcpy(&cc->rc.h, &f->h, sizeof(cc->rc.h));
        memcpy(cc->sha256, s->sha256, sizeof(cc->sha256));
        r = content_check(f->tenant, f->fd, &st, s, "as restored by its worker (fill_check)");
        if (r < 0 || (r = content_when_checked(f->tenant, f->fd, on_cross_checked, free, cc)) < 0) {
                log_info("tenant %s: %s not cross-checked (fill_check): %s", f->tenant->cfg->name, s->key,
                         r == -EBUSY ? "the tenant's checks are queued full" : strerror(-r));
                free(cc);
        }
}

/* A fill of f not replied yet, by worker w (NULL: by any worker). Once
 * replied, a fill may stay in flight for its put-back or record, but its
 * worker writes no more of it. */
static bool fills_run_by(const struct tfile *f, const struct worker *w) {
        for (const struct fill *fl = f->fills; fl; fl = fl->next)
                if (fl->req && (!w || container_worker(f->tenant, fl->route) == w))
                        return true;
        return false;
}

static void watch_event(struct tiered_fs *fs, const struct fanotify_event_metadata *md) {
        if (md->mask & FAN_Q_OVERFLOW) {
                /* Who wrote what is lost (the queue is unlimited: only the
                 * kernel's memory ends it); which worker is not known. */
                log_error("%s: the watch of fill writes overflowed: every worker of its tenants is replaced",
                          fs->mountpoint);
                kill_workers(fs, NULL);
                return;
        }
        struct file_handle *fh = fanotify_event_fid(md);
        if (!fh || md->pid == getpid() || fh->handle_bytes > MAX_HANDLE_SZ)
                return; /* tierd's own */
        struct tfile *f = tfile_find(fs->t, fs, fh);
        struct worker *w = worker_of_pid(fs, md->pid);
        /* A worker that died since: its writes were of a fill still in
         * flight, which its replacement writes over. */
        if (f && fills_run_by(f, w))
                return;
        struct tenant *tn = w ? w->tenant : f ? f->tenant : NULL;
        if (w) {
                log_error("tenant %s: worker %d wrote to a file none of its fills is writing (through a fill fd it "
                          "kept): killing it", tn->cfg->name, (int)md->pid);
                tenant_set_last_error(tn, "worker %d wrote to a file outside its fills: killed", (int)md->pid);
                kill(md->pid, SIGKILL);
        } else
                log_error("%s: process %d wrote to a file through the fill mount with no fill in flight",
                          fs->mountpoint, (int)md->pid);

        recheck_later(fs, fh, f, "written outside a fill");
}

static void on_watched(const struct fanotify_event_metadata *md, void *userdata) {
        if (md->vers == FANOTIFY_METADATA_VERSION)
                watch_event(userdata, md);
}

void fillwatch_drain(struct tiered_fs *fs) {
        char buf[WATCH_BUF] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
        fanotify_drain(fs->watch_fd, buf, sizeof(buf), 0, on_watched, fs);
}

static int on_watch(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void)s;
        (void)fd;
        (void)revents;
        fillwatch_drain(userdata);
        return 0;
}

int fillwatch_attach(struct tiered_fs *fs) {
        int r = sd_event_add_io(fs->t->event, &fs->watch_src, fs->watch_fd, EPOLLIN, on_watch, fs);
        return r < 0 ? log_error_errno(r, "sd_event_add_io (the fill mount's watch): %m") : 0;
}

void fillwatch_close(struct tiered_fs *fs) {
        fs->watch_src = sd_event_source_disable_unref(fs->watch_src);
        fs->watch_fd = safe_close(fs->watch_fd);
        fs->fill_root_fd = safe_close(fs->fill_root_fd);
        fs->fill_tree_fd = safe_close(fs->fill_tree_fd);
}
