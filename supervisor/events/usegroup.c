/* SPDX-License-Identifier: MIT */
#include "usegroup.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "fanotify-uapi.h"
#include "fsgroup.h"
#include "handover.h"
#include "log.h"
#include "macro.h"
#include "usage.h"

/* FAN_OPEN, not FAN_ACCESS (every read) nor atime (relatime): a use is an
 * open. Unlimited queue: a dropped write would leave a file's bytes
 * miscounted. */
#define USE_MASK (FAN_OPEN | FAN_CLOSE_WRITE | FAN_DELETE_SELF | FAN_MOVE_SELF)

static void use_event(struct tiered_fs *fs, const struct fanotify_event_metadata *md) {
        const struct file_handle *fh;

        if (md->mask & FAN_Q_OVERFLOW) {
                log_error("%s: use queue overflow: its tenants' files are scanned again", fs->mountpoint);
                for (size_t i = 0; i < fs->t->n_tenants; i++)
                        if (fs->t->tenants[i].fs == fs && fs->t->tenants[i].usage)
                                usage_scan(&fs->t->tenants[i]);
                return;
        }
        if (!(fh = fanotify_event_fid(md)))
                return;
        if (md->mask & FAN_DELETE_SELF)
                usage_deleted(fs, fh);
        else if (md->mask & (FAN_CLOSE_WRITE | FAN_MOVE_SELF))
                usage_written(fs, fh);
        else if (md->mask & FAN_OPEN)
                usage_opened(fs, fh);
}

static int on_use(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void)s;
        (void)revents;
        fsgroup_read_notifications(userdata, fd, use_event);
        return 0;
}

int usegroup_open(struct tiered_fs *fs) {
        const unsigned ignore = FAN_MARK_ADD | FAN_MARK_MOUNT | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY;
        struct tierd *t = fs->t;
        bool created;
        int r;

        if (fs->use_fd >= 0)
                return 0;
        fs->use_fd = fsgroup_fid_group(fs, "use", &created);
        if (fs->use_fd < 0)
                return log_error_errno(fs->use_fd, "fanotify_init (use): %m");
        r = 0;
        if (fanotify_mark(fs->use_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, USE_MASK, AT_FDCWD, fs->mountpoint) < 0)
                r = log_error_errno(errno, "use mark on %s: %m", fs->mountpoint);
        /* tierd's own opens (scans, fills, archives) are no use. */
        else if (fanotify_mark(fs->use_fd, ignore, FAN_OPEN | FAN_CLOSE_WRITE, fs->root_fd, NULL) < 0 ||
                 fanotify_mark(fs->use_fd, ignore, FAN_OPEN | FAN_CLOSE_WRITE, fs->fill_root_fd, NULL) < 0)
                r = log_error_errno(errno, "use ignore mark on the private or fill mount of %s: %m", fs->mountpoint);
        else if (created)
                r = handover_store_group(t, "use", fs->fsid, fs->use_fd);
        if (r >= 0 && (r = sd_event_add_io(t->event, &fs->use_src, fs->use_fd, EPOLLIN, on_use, fs)) < 0)
                log_error_errno(r, "sd_event_add_io: %m");
        if (r < 0)
                usegroup_close(fs); /* half set up is not set up: the next call tries again */
        return r < 0 ? r : 0;
}

void usegroup_close(struct tiered_fs *fs) {
        fs->use_src = sd_event_source_disable_unref(fs->use_src);
        fs->use_fd = safe_close(fs->use_fd);
}
