/* SPDX-License-Identifier: MIT */
/*
 * A pre-content event as it comes: an ordinary file or a whole one is
 * allowed (and ignored from then on), a read of bytes already here too; the
 * reader's access is classified (common/readeraccess.c, never waiting for
 * it: settle.c) and anything else parks it as a waiter on its file
 * (dispatch.c). Also the events a previous tierd left (dispatch_orphan).
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "containers.h"
#include "dispatch-internal.h"
#include "fanotify-uapi.h"
#include "fsgroup.h"
#include "handle.h"
#include "hydrate.h"
#include "inflight.h"
#include "log.h"
#include "macro.h"
#include "readeraccess.h"
#include "settle.h"
#include "trace.h"

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
        if (tfile_written(f, s, &in) < 0)
                return 0;
        for (size_t i = 0; i < in.n; i++)
                if (in.r[i].start < offset && offset <= in.r[i].end)
                        return MIN(MAX(offset - in.r[i].start, s->chunk), max);
        return 0;
}

/* A read served at once while a trace records (trace.h): the reader's
 * touch is recorded. True once the recording needs no more of the file's reads. */
static bool touch_served(struct tenant *tn, const struct fanotify_event_metadata *md, const struct stub *s) {
        uint64_t offset = 0, count = 0, route = container_of_thread(tn, md->pid);
        struct container *c = route ? container_by_serial(tn, route) : NULL;

        tn->counters.prefetch_hits++;
        if (c && c->recording) /* its trace's hits: another container's recording is not its */
                c->prefetch_hits++;
        if (!fanotify_event_range(md, &offset, &count) || count == 0)
                offset = 0, count = s->size;
        return trace_touch(tn, route, md->fd, s, offset, MIN(offset + count, s->size));
}

/* A reader that needs bytes: a waiter on its file (dispatch.c), for the
 * range it reads and read-ahead, or for the whole file. */
static void park_reader(struct tenant *tn, struct tiered_fs *fs, const struct fanotify_event_metadata *md,
                        const struct stub *s, enum access_kind kind, uint64_t since_usec) {
        uint64_t offset = 0, count = 0;
        struct tfile *f = NULL;
        struct waiter *w;
        int fd = md->fd;

        w = tfile_waiter_new();
        if (!w || tfile_get(tn, fd, &f) < 0 || !f) {
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
                   s->size < tn->cfg->small_file || (s->mode & 0111) || tn->cfg->restore_whole ||
                   /* No manifest (archived before them, or one chunk):
                    * only the whole-file hash can check what comes. */
                   (tn->cfg->verify && !s->has_manifest);
        if (!w->whole) {
                w->start = offset;
                w->end = offset + count;
                w->want_end = w->end + readahead_for(f, s, offset, tn->cfg->readahead);
        }
        trace_touch(tn, w->route, fd, s, w->whole ? 0 : w->start, w->whole ? s->size : w->end);
        if (!w->whole && hydrate_wanted(tn) && !f->hydrate_asked)
                f->hydrate_asked = hydrate_touched(tn, &f->h.fh, w->route);
        log_debug("tenant %s: pid %d %s [%llu, +%llu)%s", tn->cfg->name, (int)md->pid, access_kind_to_string(kind),
                  (unsigned long long)offset, (unsigned long long)count, w->whole ? " whole" : "");
        tfile_add_waiter(f, w);
}

void dispatch_pre_content_retry(struct tiered_fs *fs, const struct fanotify_event_metadata *md, uint64_t since_usec) {
        _cleanup_(stub_done) struct stub s = {};
        uint64_t offset = 0, count = 0;
        const char *err = "";
        struct tenant *tn;
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
                        log_error("%s (read by pid %d): corrupt stub, EIO: %s", fsgroup_fd_name(fd, path, sizeof(path)),
                                  (int)md->pid, err);
                else
                        log_error_errno(r, "%s (read by pid %d): unreadable stub, EIO: %m", fsgroup_fd_name(fd, path, sizeof(path)),
                                        (int)md->pid);
                dispatch_answer(fs, fd, EIO);
                return;
        }
        tn = tierd_find_tenant(fs->t, s.tenant);
        if (s.state == STUB_ARCHIVED || s.state == STUB_DIRTY) {
                /* A file made whole while a trace records is heard until
                 * the trace has it all (trace.h), then ignored as any whole
                 * file is. */
                if (!(tn && tn->fs == fs && trace_watching(tn)) || touch_served(tn, md, &s))
                        fsgroup_ignore_file(fs, fd);
                dispatch_answer(fs, fd, 0);
                return;
        }
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
                if (trace_watching(tn))
                        (void)touch_served(tn, md, &s);
                dispatch_answer(fs, fd, 0); /* a read of bytes already here */
                return;
        }
        park_reader(tn, fs, md, &s, kind, since_usec);
}

void dispatch_pre_content_event(struct tiered_fs *fs, const struct fanotify_event_metadata *md) {
        dispatch_pre_content_retry(fs, md, tierd_now_usec(fs->t));
}

int dispatch_orphan(struct tiered_fs *fs, const struct inflight_event *ev, int number) {
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
