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
 * event it read before it polls again.
 */
#include "holder.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fanevent.h"
#include "journal.h"
#include "log.h"
#include "macro.h"
#include "stub.h"

/* A tierd whose journal is gone or unreadable may have left any number
 * pending: all the numbers its fd limit likely allowed are answered. */
#define GUARD_UNKNOWN_NUMBERS 65536

bool guard_is_group(const struct held *e, uint64_t *fsid) {
        char *end;
        if (e->fd < 0 || strncmp(e->name, "pre-", 4) != 0 || strlen(e->name) != 4 + 16)
                return false;
        errno = 0;
        *fsid = strtoull(e->name + 4, &end, 16);
        return errno == 0 && *end == 0;
}

static int group_of(const struct holder *h, uint64_t fsid) {
        uint64_t id;
        for (size_t i = 0; i < h->n; i++)
                if (guard_is_group(&h->fds[i], &id) && id == fsid)
                        return h->fds[i].fd;
        return -1;
}

static bool has_groups(const struct holder *h) {
        uint64_t id;
        for (size_t i = 0; i < h->n; i++)
                if (guard_is_group(&h->fds[i], &id))
                        return true;
        return false;
}

int guard_due_ms(const struct holder *h, uint64_t now_usec) {
        if (h->guarding || !h->had_client || !has_groups(h))
                return -1;
        if (h->guard_at_once)
                return 0;
        uint64_t due = h->gone_usec + h->guard_after_usec;
        return now_usec >= due ? 0 : (int)MIN((due - now_usec + 999) / 1000, (uint64_t)INT32_MAX);
}

/* By number only: the kernel matches an answer to the pending event with
 * that fd number (none: ENOENT, nothing changes). */
static bool answer_number(int group_fd, int number, uint32_t response) {
        struct fanotify_response resp = { .fd = number, .response = response };
        return group_fd >= 0 && write(group_fd, &resp, sizeof(resp)) == sizeof(resp);
}

static unsigned answer_journal(const struct holder *h, int jfd) {
        struct journal *j = NULL;
        struct journal_event ev;
        int candidates[JOURNAL_MAX_CANDIDATES];
        uint64_t fsid = 0;
        unsigned answered = 0;

        if (journal_open(jfd, 0, &j) < 0)
                return UINT32_MAX;
        for (unsigned i = 3; i < journal_high(j); i++)
                if (journal_get(j, (int)i, &ev))
                        answered += answer_number(group_of(h, ev.fsid), (int)i, FAN_DENY_ERRNO(EIO));
        /* Read from the group but not recorded yet when tierd died. */
        unsigned n = journal_was_reading(j, &fsid, candidates);
        for (unsigned i = 0; i < n; i++)
                answered += answer_number(group_of(h, fsid), candidates[i], FAN_DENY_ERRNO(EIO));
        journal_free(j);
        return answered;
}

void guard_start(struct holder *h) {
        struct held *journal = holder_find(h, "journal");
        unsigned answered = journal ? answer_journal(h, journal->fd) : UINT32_MAX;

        if (answered == UINT32_MAX) {
                uint64_t id;
                answered = 0;
                for (size_t g = 0; g < h->n; g++)
                        for (int i = 3; guard_is_group(&h->fds[g], &id) && i < GUARD_UNKNOWN_NUMBERS; i++)
                                answered += answer_number(h->fds[g].fd, i, FAN_DENY_ERRNO(EIO));
        }
        if (journal)
                holder_drop(h, journal);
        h->guarding = true;
        h->guard_allowed = h->guard_denied = 0;
        if (h->guard_at_once)
                log_info("tierd stopped: guarding its filesystems (reads of files not whole get EIO until a tierd "
                         "connects)");
        else
                log_error("no tierd for %" PRIu64 " s: guarding its filesystems (reads of files not whole get EIO "
                          "until a tierd connects)", h->guard_after_usec / 1000000);
        if (answered)
                log_error("%u event(s) the last tierd left unanswered: answered EIO", answered);
}

void guard_stop(struct holder *h) {
        if (h->guarding)
                log_info("a tierd connected: the guard stops (%" PRIu64 " event(s) allowed, %" PRIu64 " answered EIO)",
                         h->guard_allowed, h->guard_denied);
        h->guarding = false;
        h->guard_at_once = false;
}

/* Whether the event may go on: only what a file holds locally. */
static bool event_allowed(const struct fanotify_event_metadata *md) {
        char text[STUB_TEXT_MAX];
        struct stub s;
        const char *why;
        uint64_t offset, count;
        bool allowed;

        ssize_t n = fgetxattr(md->fd, STUB_XATTR, text, sizeof(text));
        if (n < 0)
                return errno == ENODATA || errno == EOPNOTSUPP; /* not tiered */
        if (stub_parse(text, (size_t)n, &s, &why) < 0)
                return false;
        allowed = s.state == STUB_ARCHIVED || s.state == STUB_DIRTY ||
                  (s.state == STUB_PARTIAL && (md->mask & FAN_PRE_ACCESS) && fanotify_event_range(md, &offset, &count) &&
                   count > 0 && offset <= UINT64_MAX - count && range_set_covers(&s.populated, offset, offset + count));
        stub_done(&s);
        return allowed;
}

void guard_serve(struct holder *h, int group_fd) {
        char buf[16384] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
        ssize_t len = read(group_fd, buf, sizeof(buf));

        if (len <= 0)
                return;
        for (struct fanotify_event_metadata *md = (void *)buf; FAN_EVENT_OK(md, len); md = FAN_EVENT_NEXT(md, len)) {
                if (md->vers != FANOTIFY_METADATA_VERSION || md->fd < 0)
                        continue;
                bool allowed = event_allowed(md);
                answer_number(group_fd, md->fd, allowed ? FAN_ALLOW : FAN_DENY_ERRNO(EIO));
                close(md->fd);
                if (allowed)
                        h->guard_allowed++;
                else if (h->guard_denied++ == 0)
                        log_error("guard: a read of a file not whole answered EIO (pid %d)", (int)md->pid);
        }
}
