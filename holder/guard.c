/* SPDX-License-Identifier: MIT */
/*
 * The guard. While no tierd serves the groups the holder keeps, a reader
 * of a file whose data is not here must neither wait forever nor read
 * zeros. So once the last tierd asked for it on its way out (a final
 * stop), or guard_after has passed since a tierd went and no successor
 * came (a crash loop, a binary that no longer starts), the holder reads
 * the pre-content events itself and answers each: allowed for a file with
 * no stub or a whole one, or a range of a partial one that is here; EIO
 * for everything else. The next tierd to connect takes the groups back:
 * the guard stops before that tierd's first request is served.
 *
 * The event path's rule holds here too: the guard never waits on what a
 * reader controls. The kernel opens event fds O_NONBLOCK (the groups'
 * event_f_flags), the guard reads one xattr of each and answers every
 * event it read before it polls again, except those whose accessor is not
 * asleep yet (readeraccess.h): they wait in h->waiting, looked at again
 * each millisecond, never polled for in a loop.
 */
#include "holder.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fanevent.h"
#include "fdio.h"
#include "holder-proto.h"
#include "inflight.h"
#include "log.h"
#include "macro.h"
#include "readeraccess.h"
#include "stub.h"

/* Numbers swept at least, when the in-flight record does not say how many fds its
 * tierd could have (its slots are its fd limit). */
#define GUARD_SWEEP_MIN 65536

bool guard_is_group(const struct held *e, uint64_t *fsid) {
        return e->fd >= 0 && holder_group_fsid(e->name, "pre", fsid);
}

bool guard_holds_groups(const struct holder *h) {
        uint64_t id;
        for (size_t i = 0; i < h->n; i++)
                if (guard_is_group(&h->fds[i], &id))
                        return true;
        return false;
}

int guard_due_ms(const struct holder *h, uint64_t now_usec) {
        if (h->guarding || !h->had_client || !guard_holds_groups(h))
                return -1;
        if (h->guard_at_once)
                return 0;
        uint64_t due = h->gone_usec + h->guard_after_usec;
        return now_usec >= due ? 0 : (int)MIN((due - now_usec + 999) / 1000, (uint64_t)INT32_MAX);
}

/* Above every fd number the last tierd could have used: its keeper's fd
 * table (the dead tierd's own) while it lives, else the in-flight record, which has
 * a slot for each number below its fd limit. */
static unsigned numbers_used(struct holder *h) {
        struct held *record = holder_find(h, "journal"), *keeper = holder_find(h, "keeper");
        struct inflight *j = NULL;
        unsigned n = GUARD_SWEEP_MIN;

        if (record && inflight_open(record->fd, 0, &j) == 0) {
                n = MAX(n, inflight_slots(j));
                inflight_free(j);
        }
        return keeper ? fd_numbers_in_use(keeper->fd, n) : n;
}

/* Every event the last tierd read and left unanswered is answered EIO
 * first (it cannot be filled now), whatever its in-flight record says: a tierd
 * killed between reading events and recording them may have got numbers
 * nobody knows, and an answer of ours by the same number would otherwise
 * reach its event, not ours. The guard has nothing pending yet, so every
 * number answered is one of those. */
void guard_start(struct holder *h) {
        unsigned n = numbers_used(h), answered = 0;
        struct held *record;
        uint64_t id;

        if (h->guard_at_once)
                log_info("tierd stopped: guarding its filesystems (reads of files not whole get EIO until a tierd "
                         "connects)");
        else
                log_error("no tierd for %" PRIu64 " s: guarding its filesystems (reads of files not whole get EIO "
                          "until a tierd connects)", h->guard_after_usec / 1000000);
        for (size_t g = 0; g < h->n; g++)
                for (unsigned i = 3; guard_is_group(&h->fds[g], &id) && i < n; i++)
                        answered += fanotify_answer_number(h->fds[g].fd, (int)i, FAN_DENY_ERRNO(EIO));
        /* The next tierd must not serve them again. */
        if ((record = holder_find(h, "journal")))
                holder_drop(h, record);
        h->guarding = true;
        h->guard_allowed = h->guard_denied = 0;
        if (answered)
                log_error("%u event(s) the last tierd left unanswered: answered EIO", answered);
}

void guard_stop(struct holder *h) {
        /* The next tierd cannot know the events the guard read: all are
         * answered before it is served. */
        guard_settle(h, 0, true);
        if (h->guarding)
                log_info("a tierd connected: the guard stops (%" PRIu64 " event(s) allowed, %" PRIu64 " answered EIO)",
                         h->guard_allowed, h->guard_denied);
        h->guarding = false;
}

/* Whether the event may go on: only what a file holds locally. A read of
 * a partial file's local range, or an open for reading (its reads come as
 * events of their own), needs nothing from the store. -EAGAIN: what the
 * accessor does cannot be told yet (it is not asleep), unless settled. */
static int event_allowed(const struct fanotify_event_metadata *md, bool settled, bool *whole) {
        char text[STUB_TEXT_MAX];
        struct stub s;
        const char *why;
        uint64_t offset, count;
        enum access_kind kind = ACCESS_READ;
        int allowed;

        *whole = false;
        ssize_t n = fgetxattr(md->fd, STUB_XATTR, text, sizeof(text));
        if (n < 0)
                return (*whole = errno == ENODATA || errno == EOPNOTSUPP); /* not tiered */
        if (stub_parse(text, (size_t)n, &s, &why) < 0)
                return false;
        *whole = s.state == STUB_ARCHIVED || s.state == STUB_DIRTY;
        if (!*whole && access_classify(md->pid, md->fd, md->mask, settled, &kind) == -EAGAIN)
                allowed = -EAGAIN;
        else if (*whole || kind == ACCESS_OPEN_READ)
                allowed = true;
        else if (kind == ACCESS_READ && s.state == STUB_PARTIAL && fanotify_event_range(md, &offset, &count)) {
                /* Past the end: nothing to fetch (as tierd clips it). */
                uint64_t start = MIN(offset, s.size), end = count > s.size - start ? s.size : start + count;
                allowed = start == end || range_set_covers(&s.populated, start, end);
        } else
                allowed = false;
        stub_done(&s);
        return allowed;
}

/* A whole file raises no more events (as tierd marks it): evictable, so
 * a file released later is heard again once tierd removes the mark. */
static void ignore_file(int group_fd, int fd) {
        fanotify_mark(group_fd, FAN_MARK_ADD | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY | FAN_MARK_EVICTABLE,
                      TIERD_PRE_CONTENT_MASK, fd, NULL);
}

/* Answers the event, or keeps it to look at again (false). */
static bool guard_answer(struct holder *h, int group_fd, const struct fanotify_event_metadata *md, bool settled) {
        bool whole;
        int allowed = event_allowed(md, settled, &whole);

        if (allowed == -EAGAIN)
                return false;
        if (whole)
                ignore_file(group_fd, md->fd);
        fanotify_answer_number(group_fd, md->fd, allowed > 0 ? FAN_ALLOW : FAN_DENY_ERRNO(EIO));
        close(md->fd);
        if (allowed > 0)
                h->guard_allowed++;
        else if (h->guard_denied++ == 0)
                log_error("guard: a read of a file not whole answered EIO (pid %d)", (int)md->pid);
        return true;
}

void guard_serve(struct holder *h, int group_fd, uint64_t now_usec) {
        char buf[16384] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
        ssize_t len = read(group_fd, buf, sizeof(buf));

        if (len <= 0)
                return;
        for (struct fanotify_event_metadata *md = (void *)buf; FAN_EVENT_OK(md, len); md = FAN_EVENT_NEXT(md, len)) {
                if (md->vers != FANOTIFY_METADATA_VERSION || md->fd < 0)
                        continue;
                /* Full (or an event longer than tierd's groups report):
                 * served as an unknown access, at once. */
                bool room = h->n_waiting < h->waiting_max && md->event_len <= sizeof(h->waiting[0].ev);
                if (guard_answer(h, group_fd, md, !room))
                        continue;
                struct guard_waiting *g = &h->waiting[h->n_waiting++];
                g->group_fd = group_fd;
                g->since_usec = now_usec;
                memcpy(g->ev.buf, md, md->event_len);
        }
}

size_t guard_waiting_room(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
                (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
        /* Half of what is left after the held fds and a batch of events
         * read at once (16 KiB: at most 682 of 24 bytes). */
        return rl.rlim_cur > 1024 ? MIN((size_t)(rl.rlim_cur - 1024) / 2, (size_t)GUARD_WAITING_MAX) : 0;
}

void guard_settle(struct holder *h, uint64_t now_usec, bool now) {
        size_t kept = 0;

        for (size_t i = 0; i < h->n_waiting; i++) {
                struct guard_waiting *g = &h->waiting[i];
                if (!guard_answer(h, g->group_fd, &g->ev.md, now || now_usec - g->since_usec >= ACCESS_SETTLE_USEC))
                        h->waiting[kept++] = *g;
        }
        h->n_waiting = kept;
}
