/* SPDX-License-Identifier: MIT */
#include "handover.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dispatch.h"
#include "fanevent.h"
#include "fanotify-uapi.h"
#include "fdio.h"
#include "fdstore.h"
#include "holder-proto.h"
#include "inflight.h"
#include "log.h"
#include "macro.h"

#define INFLIGHT_NAME "journal" /* its fd store name, kept from before: an upgrade finds it */
#define KEEPER_NAME "keeper"

/* Answers an event by its number only: nothing to close (the number is a
 * placeholder or free). */
static bool answer_number(int group_fd, int number, int error) {
        return fanotify_answer_number(group_fd, number, FAN_DENY_ERRNO(error));
}

static int inherited_group(struct tierd *t, const char *kind, uint64_t fsid) {
        char name[64];
        holder_group_name(name, sizeof(name), kind, fsid);
        for (size_t g = 0; g < t->store.n_inherited; g++)
                if (t->store.inherited[g].fd >= 0 && strcmp(t->store.inherited[g].name, name) == 0)
                        return t->store.inherited[g].fd;
        return -1;
}

/* The predecessor died between reading events and recording them: they are
 * pending with numbers the in-flight record named in advance. Their fds live on in
 * its keeper: record them from there (whole-file restores: their ranges are
 * unknown). Without a keeper (a unit or container killed whole) they cannot
 * be filled: EIO, never a reader blocked for good (a number with no pending
 * event gives ENOENT and changes nothing). */
static bool recover_unrecorded(struct tierd *t, int old_keeper) {
        int candidates[INFLIGHT_MAX_CANDIDATES];
        unsigned recovered = 0, lost = 0;
        uint64_t fsid = 0;
        unsigned n = inflight_was_reading(t->inflight, &fsid, candidates);

        for (unsigned i = 0; i < n; i++) {
                struct inflight_event ev;
                int c = candidates[i], fd = -1;
                if (c < 3 || inflight_get(t->inflight, c, &ev))
                        continue;
                if (old_keeper >= 0)
                        fd = (int)syscall(SYS_pidfd_getfd, old_keeper, c, 0);
                if (fd >= 0) {
                        inflight_record_unknown(t->inflight, c, fd, fsid);
                        close(fd);
                        recovered++;
                } else if (old_keeper < 0 || errno != EBADF) {
                        int group = inherited_group(t, "pre", fsid);
                        if (group >= 0 && answer_number(group, c, EIO))
                                lost++;
                }
        }
        if (recovered)
                log_info("%u event(s) the previous tierd read as it died were recovered from its keeper", recovered);
        if (lost)
                log_error("%u event(s) the previous tierd read as it died, and its keeper is gone: answered EIO", lost);
        return n > 0;
}

/* Events pending in the inherited groups that the in-flight record does not name
 * (j NULL: a record nobody can read, damaged or of another layout): the
 * predecessor read them, but which file they are about is unknown (a kill
 * between read and record, when threads took the fd numbers it had named
 * in advance). None can be filled, and none may hang: each number that
 * may be one is answered EIO (ENOENT where none is). Nothing of ours is
 * pending yet, so no answer can reach an event of ours. */
static void answer_unnamed(struct tierd *t, const struct inflight *j, int old_keeper) {
        unsigned answered = 0, n = fd_numbers_in_use(old_keeper, j ? inflight_slots(j) : MAX(t->nofile, 65536u));
        struct inflight_event ev;
        uint64_t fsid;

        for (size_t g = 0; g < t->store.n_inherited; g++) {
                const struct fdstore_entry *e = &t->store.inherited[g];
                if (e->fd < 0 || !holder_group_fsid(e->name, "pre", &fsid))
                        continue;
                for (unsigned i = 3; i < n; i++)
                        if (!(j && inflight_get(j, (int)i, &ev) && ev.fsid == fsid))
                                answered += answer_number(e->fd, (int)i, EIO);
        }
        if (!j)
                log_error("the handed-over in-flight record is unreadable: %u pending event(s) answered EIO", answered);
        else if (answered)
                log_error("%u event(s) the previous tierd read but its in-flight record does not name: answered EIO", answered);
}

static int journal_take(struct tierd *t) {
        int jfd = fdstore_take(&t->store, INFLIGHT_NAME), r;

        if (jfd >= 0) {
                r = inflight_open(jfd, t->nofile, &t->inflight);
                close(jfd);
                if (r != -EBADMSG)
                        return r;
                answer_unnamed(t, NULL, -1);
                fdstore_forget(&t->store, INFLIGHT_NAME);
        }
        jfd = memfd_create("tierd-journal", MFD_CLOEXEC);
        if (jfd < 0)
                return log_error_errno(errno, "memfd_create: %m");
        /* Header first: a record in the store is always a readable one. */
        r = inflight_open(jfd, t->nofile, &t->inflight);
        if (r >= 0)
                r = fdstore_put(&t->store, INFLIGHT_NAME, jfd);
        close(jfd);
        return r;
}

int handover_begin(struct tierd *t, const char *holder_path, const char *holder_binary) {
        int r, high = -1, old_keeper;

        r = fdstore_open(&t->store, holder_path, holder_binary);
        if (r < 0)
                return r;
        /* Refused only by a holder older than this tierd: it still keeps. */
        fdstore_guard_after(&t->store, t->policy->guard_after_usec);
        r = journal_take(t);
        if (r < 0)
                return r;
        old_keeper = fdstore_take(&t->store, KEEPER_NAME);
        /* Killed while reading events: some may have got numbers it did
         * not name. Otherwise it recorded every event it read. Done only
         * once all are answered: a kill meanwhile leaves the next tierd
         * to do it again. */
        if (recover_unrecorded(t, old_keeper))
                answer_unnamed(t, t->inflight, old_keeper);
        inflight_reading_done(t->inflight);

        /* Orphans: events read by the predecessor and not answered. Only
         * numbers below our fd limit can be given to new events: those are
         * the ones to reserve. */
        for (unsigned i = 0; i < inflight_high(t->inflight); i++) {
                struct inflight_event ev;
                if (!inflight_get(t->inflight, (int)i, &ev))
                        continue;
                if (i < 3) {
                        inflight_forget(t->inflight, (int)i); /* cannot be: stdio was open */
                        continue;
                }
                t->n_orphans++;
                if (i < t->nofile)
                        high = (int)i;
        }
        /* Reserve their numbers before anything else takes one: the kernel
         * matches an answer to the first pending event with that number.
         * First every fd we hold moves above them. */
        r = fdstore_move_above(&t->store, high + 1);
        if (r >= 0)
                r = fd_move_above(&old_keeper, high + 1);
        if (r < 0)
                return log_error_errno(r, "moving handed-over fds above fd %d: %m", high);
        if (high >= 3) {
                int placeholder = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (placeholder < 0 || (r = fd_move_above(&placeholder, high + 1)) < 0) {
                        safe_close(placeholder);
                        return log_error_errno(errno, "a placeholder fd: %m");
                }
                for (int i = 3; i <= high; i++) {
                        struct inflight_event ev;
                        if (inflight_get(t->inflight, i, &ev) && dup3(placeholder, i, O_CLOEXEC) < 0) {
                                r = -errno;
                                close(placeholder);
                                return log_error_errno(r, "reserving fd %d: %m", i);
                        }
                }
                close(placeholder);
        }
        if (t->n_orphans)
                log_info("taking over %u event(s) the previous tierd left unanswered", t->n_orphans);
        /* Its keeper is done: its copies of the old fds (fill fds among
         * them) must not linger. */
        if (old_keeper >= 0) {
                struct pollfd p = { .fd = old_keeper, .events = POLLIN };
                syscall(SYS_pidfd_send_signal, old_keeper, SIGKILL, NULL, 0);
                /* Gone for real: its copy of the D-Bus connection too, so
                 * the bus name is free for us. */
                poll(&p, 1, 2000);
                close(old_keeper);
                fdstore_forget(&t->store, KEEPER_NAME);
        }
        return 0;
}

int handover_take_group(struct tierd *t, const char *kind, uint64_t fsid) {
        char name[64];
        holder_group_name(name, sizeof(name), kind, fsid);
        return fdstore_take(&t->store, name);
}

int handover_store_group(struct tierd *t, const char *kind, uint64_t fsid, int fd) {
        char name[64];
        holder_group_name(name, sizeof(name), kind, fsid);
        return fdstore_put(&t->store, name, fd);
}

static struct tiered_fs *fs_by_id(struct tierd *t, uint64_t fsid) {
        for (size_t i = 0; i < t->n_fss; i++)
                if (t->fss[i].fsid == fsid)
                        return &t->fss[i];
        return NULL;
}

void handover_replay(struct tierd *t) {
        unsigned served = 0, failed = 0;

        for (unsigned i = 3; t->n_orphans && i < inflight_high(t->inflight); i++) {
                struct inflight_event ev;
                if (!inflight_get(t->inflight, (int)i, &ev))
                        continue;
                struct tiered_fs *fs = fs_by_id(t, ev.fsid);
                /* A number at or above our fd limit (it was lowered) cannot
                 * hold the file: such an event can only be answered EIO. */
                if (fs && i < t->nofile && dispatch_orphan(fs, &ev, (int)i) == 0) {
                        served++;
                        continue;
                }
                /* Its filesystem is no longer tiered, or the file cannot be
                 * opened: no data can come, so EIO, never zeros. */
                answer_number(inherited_group(t, "pre", ev.fsid), (int)i, EIO);
                if (fs)
                        answer_number(fs->pre_fd, (int)i, EIO);
                inflight_forget(t->inflight, (int)i);
                if (i < t->nofile)
                        close((int)i);
                failed++;
        }
        if (served || failed)
                log_info("previous tierd's events: %u being served, %u answered EIO", served, failed);
        t->n_orphans = 0;
        /* What the store holds that this policy no longer uses. */
        for (size_t g = 0; g < t->store.n_inherited; g++) {
                struct fdstore_entry *e = &t->store.inherited[g];
                if (e->fd < 0)
                        continue;
                log_warning("dropping %s from the fd store: its filesystem is no longer tiered", e->name);
                fdstore_forget(&t->store, e->name);
                e->fd = safe_close(e->fd);
        }
}

void handover_forget_all(struct tierd *t) {
        char name[64];
        for (size_t i = 0; i < t->n_fss && t->fss[i].pre_fd >= 0; i++) {
                holder_group_name(name, sizeof(name), "pre", t->fss[i].fsid);
                fdstore_forget(&t->store, name);
                holder_group_name(name, sizeof(name), "notif", t->fss[i].fsid);
                fdstore_forget(&t->store, name);
                holder_group_name(name, sizeof(name), "use", t->fss[i].fsid);
                fdstore_forget(&t->store, name);
        }
        fdstore_forget(&t->store, INFLIGHT_NAME);
}

/* Stopped for good (SIGINT, a stop of the unit, a start that failed after
 * marking). Closing the groups would let every read of a file not whole
 * return zeros, so they stay with tierd-holder, whose guard answers those
 * reads EIO (and lets everything else through) until a tierd takes over
 * again. Only without any holder (--no-holder) are they let go. */
void handover_stop_for_good(struct tierd *t) {
        char name[64];
        bool any = false;
        int r;

        for (size_t i = 0; i < t->n_fss; i++)
                any = any || t->fss[i].pre_fd >= 0;
        /* --no-holder: tierd said what that costs when it started. */
        if (!any || !t->store.holder_path) {
                handover_forget_all(t);
                return;
        }
        bool moved = t->store.kind != FDSTORE_HOLDER;
        r = fdstore_to_holder(&t->store);
        /* From systemd's store: the holder gets its own copies first. */
        for (size_t i = 0; r >= 0 && moved && i < t->n_fss; i++) {
                const struct tiered_fs *fs = &t->fss[i];
                const struct { const char *kind; int fd; } g[] = { { "pre", fs->pre_fd }, { "notif", fs->notif_fd },
                                                                    { "use", fs->use_fd } };
                for (size_t k = 0; k < ARRAY_SIZE(g) && r >= 0; k++) {
                        if (g[k].fd < 0)
                                continue;
                        holder_group_name(name, sizeof(name), g[k].kind, fs->fsid);
                        fdstore_forget(&t->store, name); /* a copy the holder had already */
                        r = fdstore_put(&t->store, name, g[k].fd);
                }
        }
        if (r >= 0)
                r = fdstore_guard(&t->store);
        if (r >= 0) {
                fdstore_forget(&t->store, INFLIGHT_NAME); /* every event was answered */
                log_info("stopped for good: tierd-holder (%s) keeps the groups and answers reads of files not whole "
                         "EIO until tierd runs again", t->store.holder_path);
                return;
        }
        if (t->store.kind == FDSTORE_HOLDER && r == -EIO) {
                /* A holder older than this tierd: it keeps the groups but
                 * cannot guard them. Readers wait rather than read zeros. */
                log_error("tierd-holder (%s) keeps the groups but cannot guard them (it is older than tierd): "
                          "readers of files not whole wait until tierd runs again; restart tierd-holder to update "
                          "it", t->store.holder_path);
                return;
        }
        log_error_errno(r, "no holder to guard the groups (%m): reads of files not whole now return zeros until "
                           "tierd runs again");
        handover_forget_all(t);
}
