/* SPDX-License-Identifier: MIT */
/*
 * One pre-content fanotify group per tiered filesystem, with a filesystem
 * mark (every view, and every copy of a view in any mount namespace, is
 * served), plus a FAN_REPORT_FID notification group for FAN_CLOSE_WRITE.
 * tierd's private mount is a detached clone of the filesystem's mount that
 * no other process can reach; both groups ignore it, so archive reads and
 * fill writes through it raise no event.
 */
#include "fsgroup.h"
#include "offthread.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <signal.h>
#include <unistd.h>

#include "dispatch.h"
#include "fanevent.h"
#include "fillwatch.h"
#include "fanotify-uapi.h"
#include "handle.h"
#include "handover.h"
#include "inflight.h"
#include "log.h"
#include "macro.h"
#include "stub.h"
#include "tally.h"

#define EVENT_BUF (INFLIGHT_MAX_CANDIDATES * FAN_EVENT_METADATA_LEN)
#define NOTIF_BUF 65536

static void mnt_tablep(struct libmnt_table **t) { mnt_unref_table(*t); }

int fsgroup_locate(const char *path, char **mountpoint, char **fstype, char **relative) {
        _cleanup_(mnt_tablep) struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
        struct libmnt_fs *fs;
        const char *target, *rel;
        size_t n;

        if (!tb)
                return -errno ?: -EIO;
        fs = mnt_table_find_mountpoint(tb, path, MNT_ITER_BACKWARD);
        if (!fs || !(target = mnt_fs_get_target(fs)))
                return -ENOENT;
        n = strlen(target);
        if (strcmp(target, "/") == 0)
                rel = path + 1;
        else if (strncmp(path, target, n) == 0 && (path[n] == '/' || path[n] == 0))
                rel = path[n] ? path + n + 1 : path + n;
        else
                return -EINVAL;
        *mountpoint = strdup(target);
        *fstype = strdup(mnt_fs_get_fstype(fs) ?: "?");
        *relative = strdup(*rel ? rel : ".");
        if (!*mountpoint || !*fstype || !*relative)
                return -ENOMEM;
        return 0;
}

void fsgroup_read_notifications(struct tiered_fs *fs, int fd,
                                void (*handle)(struct tiered_fs *fs, const struct fanotify_event_metadata *md)) {
        char buf[65536] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));

        for (int rounds = 0; rounds < 16; rounds++) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                for (const struct fanotify_event_metadata *md = (const void *)buf; FAN_EVENT_OK(md, n);
                     md = FAN_EVENT_NEXT(md, n))
                        if (md->vers == FANOTIFY_METADATA_VERSION)
                                handle(fs, md);
        }
}

const char *fsgroup_fd_name(int fd, char *buf, size_t size) {
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, buf, size - 1);
        if (n < 0)
                return "a file";
        buf[n] = 0;
        return buf;
}

struct file_handle *fanotify_event_fid(const struct fanotify_event_metadata *md) {
        const char *p = (const char *)md + md->metadata_len, *end = (const char *)md + md->event_len;
        while (p + sizeof(struct fanotify_event_info_header) <= end) {
                const struct fanotify_event_info_fid *fid = (const void *)p;
                if (fid->hdr.len < sizeof(fid->hdr) || p + fid->hdr.len > end)
                        return NULL;
                if (fid->hdr.info_type == FAN_EVENT_INFO_TYPE_FID &&
                    fid->hdr.len >= sizeof(*fid) + sizeof(struct file_handle))
                        return (struct file_handle *)fid->handle;
                p += fid->hdr.len;
        }
        return NULL;
}

/* How many events may be read now. Each holds an event fd and may open a
 * fill fd until answered; an event the kernel cannot give an fd reaches its
 * reader as EPERM, so stop short and let events wait in the kernel queue. */
static size_t events_room(const struct tierd *t) {
        return t->fds_in_flight < t->fd_budget ? (t->fd_budget - t->fds_in_flight) / 2 : 0;
}

void fsgroup_resume_reading(struct tierd *t) {
        if (!t->reading_paused || events_room(t) < 2 || t->handing_over)
                return;
        t->reading_paused = false;
        for (size_t i = 0; i < t->n_fss; i++)
                if (t->fss[i].pre_src)
                        sd_event_source_set_enabled(t->fss[i].pre_src, SD_EVENT_ON);
}

#ifdef TIERD_TEST_HOOKS
/* Fault injection (test builds only): tierd dies between reading events and
 * recording them, a window of microseconds a kill can hit but a test
 * cannot aim at, when an event's file carries user.tierd-test-die. */
static void test_hook_die_before_recording(const char *buf, ssize_t n) {
        for (const struct fanotify_event_metadata *md = (const void *)buf; FAN_EVENT_OK(md, n); md = FAN_EVENT_NEXT(md, n)) {
                char v;
                if (md->fd >= 0 && fgetxattr(md->fd, "user.tierd-test-die", &v, 1) >= 0)
                        raise(SIGKILL);
        }
}

/* With TIERD_TEST_THREAD_OPENS set, between naming the fd numbers and
 * reading, a thread started as every off-loop job's is opens as many fds
 * as were named and keeps them: the race a gc or audit walk can win at any
 * time, made certain. */
static void thread_opens(void *userdata _unused_) {
        for (unsigned i = 0; i < INFLIGHT_MAX_CANDIDATES; i++)
                (void)open("/", O_PATH | O_CLOEXEC); /* kept, on purpose */
}

static void test_hook_thread_opens(void) {
        if (getenv("TIERD_TEST_THREAD_OPENS"))
                (void)offthread_test_run(thread_opens, NULL);
}
#else
static void test_hook_die_before_recording(const char *buf _unused_, ssize_t n _unused_) {}
static void test_hook_thread_opens(void) {}
#endif

/* Every first read of every file on the filesystem comes here, stubs or
 * not: an ordinary file (no stub record) is allowed with the fewest
 * syscalls, and never recorded: it is answered while its number is still
 * named (journal_reading), so a tierd killed before the answer leaves it
 * to the next one, as any event not recorded yet; its fd is closed only
 * once the numbers are no longer named, so that no fd opened meanwhile
 * takes the number and passes for an event. It is ignored while its inode
 * is cached, so it runs at native speed. */
static bool answered_ordinary(struct tiered_fs *fs, const struct fanotify_event_metadata *md) {
        if (md->vers != FANOTIFY_METADATA_VERSION || fgetxattr(md->fd, STUB_XATTR, NULL, 0) >= 0 || errno != ENODATA)
                return false;
        fsgroup_ignore_file(fs, md->fd);
        dispatch_answer_write(fs, md->fd, 0);
        return true;
}

/* Every event read is recorded before any is acted on (a tierd killed in
 * between leaves the next one a record to answer from), but an ordinary
 * file's, answered at once (answered_ordinary). Ends journal_reading. */
static void record_events(struct tiered_fs *fs, char *buf, ssize_t n) {
        struct tierd *t = fs->t;
        int answered[INFLIGHT_MAX_CANDIDATES]; /* at most k events fit in k * FAN_EVENT_METADATA_LEN */
        unsigned n_answered = 0;

        for (struct fanotify_event_metadata *md = (void *)buf; FAN_EVENT_OK(md, n); md = FAN_EVENT_NEXT(md, n)) {
                if (md->fd < 0)
                        continue;
                if (n_answered < INFLIGHT_MAX_CANDIDATES && answered_ordinary(fs, md)) {
                        answered[n_answered++] = md->fd;
                        md->fd = FAN_NOFD;
                        continue;
                }
                inflight_record(t->inflight, fs->fsid, md);
                t->fds_in_flight++;
        }
        inflight_reading_done(t->inflight);
        for (unsigned i = 0; i < n_answered; i++)
                close(answered[i]);
}

/* How many events the next read may take: no more than are queued
 * (FIONREAD counts FAN_EVENT_METADATA_LEN for each, whatever its size),
 * nor than room, and at least two: a buffer smaller than one event (48
 * bytes with its range) fails with EINVAL. 0: none queued. *queued:
 * FIONREAD's count (0: not known). */
static size_t events_to_read(int fd, size_t room, int *queued) {
        if (ioctl(fd, FIONREAD, queued) < 0) {
                *queued = 0;
                return room;
        }
        if (*queued <= 0)
                return 0;
        return MIN(room, MAX((size_t)2, (size_t)*queued / FAN_EVENT_METADATA_LEN));
}

/* The kernel gives events the lowest free fd numbers, in order: they are
 * named before reading (at most want), and no more events are read than
 * named (each takes at least FAN_EVENT_METADATA_LEN). How many. */
static unsigned name_candidates(int fd, size_t want, int *candidates) {
        unsigned k = 0;
        while (k < MIN(want, (size_t)INFLIGHT_MAX_CANDIDATES) && (candidates[k] = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0)
                k++;
        for (unsigned i = 0; i < k; i++)
                close(candidates[i]);
        return k;
}

static int on_pre_content(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct tiered_fs *fs = userdata;
        struct tierd *t = fs->t;
        char buf[EVENT_BUF] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
        (void)revents;

        for (;;) {
                /* At least two events' room: a buffer smaller than one event
                 * (48 bytes with its range) fails with EINVAL. */
                size_t room = events_room(t);
                if (room < 2) {
                        if (!t->reading_paused)
                                log_warning("%u fds in flight, near RLIMIT_NOFILE (%u): events wait in the kernel "
                                            "queue until some are answered", t->fds_in_flight, t->nofile);
                        t->reading_paused = true;
                        sd_event_source_set_enabled(s, SD_EVENT_OFF);
                        return 0;
                }
                int candidates[INFLIGHT_MAX_CANDIDATES], queued;
                size_t want = events_to_read(fd, room, &queued);
                if (want == 0)
                        return 0; /* all read: no numbers, no read(2) to hear EAGAIN */
                unsigned k = name_candidates(fd, want, candidates);
                if (k < 2) {
                        /* Out of fds despite the budget (a D-Bus job's?):
                         * wait for an answer to free some, do not spin. */
                        log_error("no free fds to read events: %m");
                        t->reading_paused = true;
                        sd_event_source_set_enabled(s, SD_EVENT_OFF);
                        return 0;
                }
                /* Record every event before acting on any: a tierd killed
                 * in between leaves the next one a record to answer from. */
                inflight_reading(t->inflight, fs->fsid, candidates, k);
                test_hook_thread_opens();
                ssize_t n = read(fd, buf, k * FAN_EVENT_METADATA_LEN);
                if (n < 0) {
                        inflight_reading_done(t->inflight);
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                log_error("reading fanotify events on %s: %m", fs->mountpoint);
                        return 0;
                }
                test_hook_die_before_recording(buf, n);
                /* As many bytes as FIONREAD counted, or more: every event
                 * queued then was read, as a rule (events with a range
                 * count 24 and take 48: one may be left, and epoll, level
                 * triggered, comes back for it). No FIONREAD to hear that
                 * the queue is empty. */
                bool drained = queued > 0 && n >= queued;
                record_events(fs, buf, n);
                for (struct fanotify_event_metadata *md = (void *)buf; FAN_EVENT_OK(md, n); md = FAN_EVENT_NEXT(md, n)) {
                        if (md->vers != FANOTIFY_METADATA_VERSION) {
                                log_error("fanotify metadata version %u, expected %u", md->vers, FANOTIFY_METADATA_VERSION);
                                if (md->fd >= 0)
                                        dispatch_answer(fs, md->fd, EIO);
                                continue;
                        }
                        dispatch_pre_content_event(fs, md);
                }
                if (drained)
                        return 0;
        }
}

/* A file written since archive is dirty for good, whatever its mtime. The
 * file under tierd's own write lease (leased) is not opened: that would
 * break the lease, and the kernel would send tierd SIGIO. *hit says an event
 * named it. */
static void notification_handle(struct tiered_fs *fs, const struct fanotify_event_metadata *md,
                                const struct file_handle *leased, bool *hit) {
        if (md->mask & FAN_Q_OVERFLOW) {
                log_error("%s: notification queue overflow: writes may have been missed; every archived file is "
                          "checked by its SHA-256 before release from now on", fs->mountpoint);
                fs->writes_maybe_missed = true;
                return;
        }
        struct file_handle *fh = fanotify_event_fid(md);
        if (!fh)
                return;
        if (leased && file_handle_equal(fh, leased)) {
                *hit = true;
                return;
        }
        _cleanup_close_ int fd = fsgroup_open_regular(fs, fh, O_RDONLY);
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";
        int r;
        if (fd == -EWOULDBLOCK) {
                /* Written, then leased by someone before we could look: its
                 * stub cannot be marked dirty without waiting for the
                 * lease, so no release trusts a stub any more without
                 * checking the bytes against its SHA-256. */
                if (!fs->writes_maybe_missed)
                        log_error("%s: a written file is under a lease: every archived file is checked by its "
                                  "SHA-256 before release from now on", fs->mountpoint);
                fs->writes_maybe_missed = true;
                return;
        }
        if (fd < 0)
                return; /* gone, or no regular file: nothing to track */
        r = stub_read_fd(fd, &s, &err);
        if (r == -ENODATA || (r == 0 && s.state == STUB_DIRTY)) {
                /* Nothing to track until it is archived: stop hearing of its
                 * writes (archive removes this). */
                fsgroup_ignore_changes(fs, fd, true);
                return;
        }
        if (r < 0)
                return;
        if (s.state == STUB_ARCHIVED) {
                struct tenant *tn = tierd_find_tenant(fs->t, s.tenant);
                s.state = STUB_DIRTY;
                r = tn ? tally_stub_write(tn, fd, &s) : stub_write_fd(fd, &s);
                if (r < 0)
                        log_error_errno(r, "cannot mark %s dirty: %m", s.key);
                else
                        log_info("tenant %s: file of %s written: dirty", s.tenant, s.key);
                fsgroup_ignore_changes(fs, fd, true);
        }
        /* Partial or released: only tierd writes such a file (fills,
         * punches; any other writer restores it whole first), and the kernel
         * reports those writes too. */
}

static int open_regular_at(int mount_fd, const struct file_handle *fh, int flags) {
        /* O_PATH first: it opens nothing (no FIFO waits for a partner, no
         * device driver runs), and the type of an inode never changes, so
         * the second open by the same handle is of a regular file. */
        _cleanup_close_ int path = open_by_handle_at(mount_fd, (struct file_handle *)fh, O_PATH | O_CLOEXEC);
        struct stat st;
        if (path < 0)
                return -errno;
        if (fstat(path, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        /* O_NONBLOCK: a lease someone holds on it fails the open at once
         * (EWOULDBLOCK) instead of waiting for its holder to let go. */
        int fd = open_by_handle_at(mount_fd, (struct file_handle *)fh,
                                   flags | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC | O_LARGEFILE);
        return fd < 0 ? -errno : fd;
}

int fsgroup_open_regular(struct tiered_fs *fs, const struct file_handle *fh, int flags) {
        return open_regular_at(fs->root_fd, fh, flags);
}

int fsgroup_open_fill(struct tiered_fs *fs, const struct file_handle *fh, int flags) {
        return open_regular_at(fs->fill_root_fd, fh, flags);
}

struct drain_ctx {
        struct tiered_fs *fs;
        const struct file_handle *leased;
        bool hit;
};

static void on_notified(const struct fanotify_event_metadata *md, void *userdata) {
        struct drain_ctx *c = userdata;
        if (md->fd >= 0)
                close(md->fd);
        notification_handle(c->fs, md, c->leased, &c->hit);
}

/* Handles up to max events, or those queued now if max is 0. */
static bool drain(struct tiered_fs *fs, const struct file_handle *leased, size_t max) {
        char buf[NOTIF_BUF] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
        struct drain_ctx c = { .fs = fs, .leased = leased };
        fanotify_drain(fs->notif_fd, buf, sizeof(buf), max, on_notified, &c);
        return c.hit;
}

void fsgroup_drain_notifications(struct tiered_fs *fs) { drain(fs, NULL, 0); }

bool fsgroup_drain_notifications_except(struct tiered_fs *fs, const struct file_handle *leased) {
        return drain(fs, leased, 0);
}

/* A slice per turn of the loop; the source stays ready for the rest, and
 * readers' permission events (a higher priority) go first meanwhile. */
#define NOTIFY_SLICE 4096

static int on_notification(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void)s;
        (void)fd;
        (void)revents;
        drain(userdata, NULL, NOTIFY_SLICE);
        return 0;
}

static int mark_refused(struct tiered_fs *fs, int r) {
        if (r == -EINVAL || r == -EOPNOTSUPP || r == -ENOTSUP || r == -EXDEV)
                log_error("%s (%s) cannot take fanotify pre-content marks: tier only btrfs, xfs or ext4 on a "
                          "kernel with pre-content events (Linux 6.14+)", fs->mountpoint, fs->fstype);
        else
                log_error_errno(r, "cannot mark %s: %m", fs->mountpoint);
        return r;
}

int fsgroup_fid_group(struct tiered_fs *fs, const char *kind, bool *created) {
        int fd = handover_take_group(fs->t, kind, fs->fsid);
        *created = fd < 0;
        if (fd < 0)
                fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_UNLIMITED_QUEUE | FAN_CLOEXEC | FAN_NONBLOCK,
                                   O_RDONLY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* A detached clone of the filesystem's mount (O_PATH), nosuid,nodev: fill
 * fds, worker directories and clones for containers come from such a
 * mount, and nothing reached through it is setuid or a device, whatever
 * flags the admin's mount has. A filesystem tierd mounted itself is not
 * at its mountpoint yet. */
static int clone_mount(struct tiered_fs *fs, const char *what) {
        _cleanup_close_ int fd = fs->mnt_fd >= 0
                                         ? open_tree(fs->mnt_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)
                                         : open_tree(AT_FDCWD, fs->mountpoint, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "open_tree %s (%s): %m", fs->mountpoint, what);
        /* noatime: what tierd reads is no tenant's use of a file, and a
         * walk on the loop is from the lookup cache only (RESOLVE_CACHED),
         * which cannot follow a symlink whose atime is due (every time on
         * a strictatime mount): it would never pass one. */
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOATIME,
                                   .attr_clr = MOUNT_ATTR__ATIME };
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return log_error_errno(errno, "mount_setattr nosuid,nodev,noatime on the %s of %s: %m", what,
                                       fs->mountpoint);
        return TAKE_FD(fd);
}

/* tierd's private mount of the filesystem (tree_fd, root_fd), its mount id
 * and fsid; and the fill mount (fill_tree_fd, fill_root_fd, fillwatch.c). */
static int open_private_mount(struct tiered_fs *fs) {
        struct statfs sf;

        /* The mount cloned: gc's walk looks at it again (wholefs.h). */
        struct statx stx;
        if ((fs->mnt_fd >= 0 ? statx(fs->mnt_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx)
                             : statx(AT_FDCWD, fs->mountpoint, 0, STATX_MNT_ID, &stx)) < 0)
                return log_error_errno(errno, "statx %s: %m", fs->mountpoint);
        fs->mnt_id = stx.stx_mnt_id;
        struct statvfs sv;
        if ((fs->mnt_fd >= 0 ? fstatvfs(fs->mnt_fd, &sv) : statvfs(fs->mountpoint, &sv)) < 0)
                return log_error_errno(errno, "statvfs %s: %m", fs->mountpoint);
        fs->atime_attr = sv.f_flag & ST_NOATIME    ? MOUNT_ATTR_NOATIME
                         : sv.f_flag & ST_RELATIME ? MOUNT_ATTR_RELATIME
                                                   : MOUNT_ATTR_STRICTATIME;
        /* Detached, so no other process can reach them. */
        int r = clone_mount(fs, "private mount");
        if (r < 0)
                return r;
        fs->tree_fd = r;
        if ((r = clone_mount(fs, "fill mount")) < 0)
                return r;
        fs->fill_tree_fd = r;
        /* open_tree gives an O_PATH fd, which fanotify_mark and
         * open_by_handle_at refuse (EBADF): open its root for real. */
        fs->root_fd = openat(fs->tree_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        fs->fill_root_fd = fs->root_fd < 0 ? -1 : openat(fs->fill_tree_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fs->fill_root_fd < 0)
                return log_error_errno(errno, "opening the private mount of %s: %m", fs->mountpoint);
        if (fstatfs(fs->root_fd, &sf) < 0)
                return log_error_errno(errno, "statfs %s: %m", fs->mountpoint);
        memcpy(&fs->fsid, &sf.f_fsid, sizeof(fs->fsid));
        return 0;
}

int fsgroup_open(struct tiered_fs *fs) {
        const unsigned ignore = FAN_MARK_ADD | FAN_MARK_MOUNT | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY;
        struct tierd *t = fs->t;
        bool new_pre, new_notif;
        int r;

        r = open_private_mount(fs);
        if (r < 0)
                return r;

        /* Unlimited queue and marks: a full queue drops permission events
         * and the reads go through, reading zeros. O_RDONLY event fds: with
         * O_RDWR a read through a read-only bind mount fails with EPERM.
         * O_NONBLOCK event fds: the kernel opens each in our read(2), and a
         * write lease someone holds on the file would keep that read (and
         * every tenant's reader) waiting for its holder; so the open fails,
         * read(2) ends early with EAGAIN, and the kernel denies that one
         * event (EPERM for a reader of a file under another's lease). */
        fs->pre_fd = handover_take_group(t, "pre", fs->fsid);
        new_pre = fs->pre_fd < 0;
        if (new_pre)
                fs->pre_fd = fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS |
                                                   FAN_REPORT_TID | FAN_CLOEXEC | FAN_NONBLOCK,
                                           O_RDONLY | O_LARGEFILE | O_CLOEXEC | O_NONBLOCK);
        if (fs->pre_fd < 0)
                return log_error_errno(errno, "fanotify_init (pre-content; needs CAP_SYS_ADMIN): %m");
        /* Also on a group taken over: the filesystem may have been mounted
         * again since, and marking twice changes nothing. */
        /* A filesystem mark: through any mount of it, the private one too. */
        if (fanotify_mark(fs->pre_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, TIERD_PRE_CONTENT_MASK, fs->root_fd, NULL) < 0)
                return mark_refused(fs, -errno);
        if (fanotify_mark(fs->pre_fd, ignore, TIERD_PRE_CONTENT_MASK, fs->root_fd, NULL) < 0)
                return log_error_errno(errno, "ignore mark on the private mount of %s: %m", fs->mountpoint);

        /* Notifications without fds: an fd per event would cost every open. */
        fs->notif_fd = fsgroup_fid_group(fs, "notif", &new_notif);
        if (fs->notif_fd < 0)
                return log_error_errno(fs->notif_fd, "fanotify_init (notifications): %m");
        if (fanotify_mark(fs->notif_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FSGROUP_NOTIFY_MASK, fs->root_fd, NULL) < 0) {
                /* A group reporting file ids marks a btrfs filesystem only
                 * through its top-level subvolume. */
                if (errno == EXDEV && strcmp(fs->fstype, "btrfs") == 0)
                        return log_error_errno(errno, "%s shows a btrfs subvolume, not the filesystem's top level: "
                                               "tierd's marks need the top level mounted (subvolid=5): %m",
                                               fs->mountpoint);
                return log_error_errno(errno, "FAN_CLOSE_WRITE mark on %s: %m", fs->mountpoint);
        }
        if (fanotify_mark(fs->notif_fd, ignore, FSGROUP_NOTIFY_MASK, fs->root_fd, NULL) < 0)
                return log_error_errno(errno, "notification ignore mark on the private mount of %s: %m", fs->mountpoint);
        if ((r = fillwatch_open(fs)) < 0)
                return r;
        /* Stored before any event is read: from now on a dead tierd leaves
         * its readers waiting for the next one, never reading zeros. */
        if (new_pre && (r = handover_store_group(t, "pre", fs->fsid, fs->pre_fd)) < 0)
                return r;
        if (new_notif && (r = handover_store_group(t, "notif", fs->fsid, fs->notif_fd)) < 0)
                return r;
        log_info("watching %s (%s) with a filesystem mark%s", fs->mountpoint, fs->fstype,
                 new_pre ? "" : ", groups taken over from the previous tierd");
        return 0;
}

int fsgroup_attach(struct tiered_fs *fs) {
        int r = sd_event_add_io(fs->t->event, &fs->pre_src, fs->pre_fd, EPOLLIN, on_pre_content, fs);
        if (r >= 0)
                r = sd_event_add_io(fs->t->event, &fs->notif_src, fs->notif_fd, EPOLLIN, on_notification, fs);
        if (r < 0)
                return log_error_errno(r, "sd_event_add_io: %m");
        if ((r = fillwatch_attach(fs)) < 0)
                return r;
        /* Permission events first: a blocked reader waits on them. */
        sd_event_source_set_priority(fs->pre_src, SD_EVENT_PRIORITY_IMPORTANT);
        return 0;
}

void fsgroup_close(struct tiered_fs *fs) {
        fs->pre_src = sd_event_source_disable_unref(fs->pre_src);
        fs->notif_src = sd_event_source_disable_unref(fs->notif_src);
        fs->pre_fd = safe_close(fs->pre_fd);
        fs->notif_fd = safe_close(fs->notif_fd);
        fillwatch_close(fs);
        fs->root_fd = safe_close(fs->root_fd);
        fs->tree_fd = safe_close(fs->tree_fd);
}

void fsgroup_ignore_file(struct tiered_fs *fs, int fd) {
        /* SURV_MODIFY, or the call returns 0 and adds nothing; evictable, so
         * the mark goes with the inode from cache (the next access raises one
         * event, answered at once). */
        if (fanotify_mark(fs->pre_fd, FAN_MARK_ADD | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY | FAN_MARK_EVICTABLE,
                          TIERD_PRE_CONTENT_MASK, fd, NULL) < 0)
                log_warning("cannot add an inode ignore mark: %m");
}

int fsgroup_ignore_changes(struct tiered_fs *fs, int fd, bool ignore) {
        unsigned flags = ignore ? FAN_MARK_ADD | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY | FAN_MARK_EVICTABLE
                                : FAN_MARK_REMOVE | FAN_MARK_IGNORE;
        if (fanotify_mark(fs->notif_fd, flags, FSGROUP_NOTIFY_MASK, fd, NULL) < 0 && !(errno == ENOENT && !ignore))
                return -errno;
        return 0;
}

int fsgroup_unignore_file(struct tiered_fs *fs, int fd) {
        if (fanotify_mark(fs->pre_fd, FAN_MARK_REMOVE | FAN_MARK_IGNORE, TIERD_PRE_CONTENT_MASK, fd, NULL) < 0 &&
            errno != ENOENT)
                return -errno;
        return 0;
}
