/* SPDX-License-Identifier: MIT */
/*
 * Creates, deletes and renames beneath tenants that keep a catalog, heard
 * through one notification group per filesystem (FAN_REPORT_DFID_NAME_TARGET:
 * each event names its directory and the entry's name), so the catalog
 * follows the tree between snapshots. tierd's own changes (an import's)
 * are heard too, and simply say again what the catalog knows.
 */
#include "catalogwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "catalogchanges.h"
#include "fanotify-uapi.h"
#include "log.h"
#include "macro.h"

#define CATALOG_MASK (FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_ONDIR)

static bool fs_has_catalog(const struct tiered_fs *fs) {
        for (size_t i = 0; i < fs->t->n_tenants; i++)
                if (fs->t->tenants[i].fs == fs && fs->t->tenants[i].cfg->catalog)
                        return true;
        return false;
}

#define READ_MAX 65536

/* The event's records: the entry (create, delete), or the old and the new
 * entry (rename); and the entry's own handle (child). */
static void parse_records(const struct fanotify_event_metadata *md, struct dfid_name *entry, struct dfid_name *from,
                          struct dfid_name *to, const struct file_handle **child) {
        const char *p = (const char *)md + md->metadata_len, *end = (const char *)md + md->event_len;
        while (p + sizeof(struct fanotify_event_info_header) <= end) {
                const struct fanotify_event_info_fid *fid = (const void *)p;
                if (fid->hdr.len < sizeof(*fid) + sizeof(struct file_handle) || p + fid->hdr.len > end)
                        return;
                const struct file_handle *fh = (const struct file_handle *)fid->handle;
                const char *name = (const char *)fh->f_handle + fh->handle_bytes;
                if (fid->hdr.info_type == FAN_EVENT_INFO_TYPE_FID && name <= p + fid->hdr.len)
                        *child = fh;
                bool named = name < p + fid->hdr.len && memchr(name, 0, (size_t)(p + fid->hdr.len - name));
                struct dfid_name *out = fid->hdr.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME       ? entry
                                        : fid->hdr.info_type == FAN_EVENT_INFO_TYPE_OLD_DFID_NAME ? from
                                        : fid->hdr.info_type == FAN_EVENT_INFO_TYPE_NEW_DFID_NAME ? to
                                                                                                  : NULL;
                if (out && named)
                        *out = (struct dfid_name){ .fh = fh, .name = name };
                p += fid->hdr.len;
        }
}

/* On the loop: counted and queued, nothing opened. */
static void catalog_event(struct tiered_fs *fs, const struct fanotify_event_metadata *md) {
        struct catalog_changes *cc = fs->catalog_changes;
        struct dfid_name entry = {}, from = {}, to = {}, none = {};
        const struct file_handle *child = NULL;
        int r = 0;

        if (md->mask & (FAN_Q_OVERFLOW | FAN_RENAME))
                fs->renames++; /* whoever did it, wherever: a walk in progress may have missed something */
        if (md->mask & FAN_Q_OVERFLOW) {
                log_error("%s: catalog queue overflow: its tenants' catalogs get a snapshot", fs->mountpoint);
                catalog_changes_spill(cc, "the kernel's queue of changes overflowed");
                return;
        }
        /* tierd's own (an import making the tree): the catalog has it. */
        if (md->pid == getpid())
                return;
        parse_records(md, &entry, &from, &to, &child);
        bool dir = md->mask & FAN_ONDIR;
        if ((md->mask & FAN_RENAME) && (to.fh || from.fh))
                r = catalog_changes_add(cc, CHANGE_RENAMED, dir, &to, &from, child);
        else if (!(md->mask & FAN_RENAME) && entry.fh && (md->mask & (FAN_CREATE | FAN_DELETE)))
                /* Both: merged by the kernel (same directory, name and
                 * child), and which came first is lost. */
                r = catalog_changes_add(cc,
                                        !(md->mask & FAN_CREATE)   ? CHANGE_DELETED
                                        : !(md->mask & FAN_DELETE) ? CHANGE_CREATED
                                                                   : CHANGE_REPLACED,
                                        dir, &entry, &none, child);
        if (r < 0)
                catalog_changes_spill(cc, "no memory for a change heard");
}

/* Reads at most 16 times a turn, as any notification group (a steady
 * writer cannot keep the loop here); the kernel's queue is unlimited, and
 * memory tierd's: every event read is queued or dropped (its tenant's
 * catalog spilled, catalogchanges.c). Returns whether more may be queued. */
static bool changes_read(struct tiered_fs *fs) {
        char buf[READ_MAX] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));

        for (int rounds = 0; rounds < 16; rounds++) {
                ssize_t n = read(fs->catalog_fd, buf, sizeof(buf));
                if (n <= 0)
                        return false;
                for (const struct fanotify_event_metadata *md = (const void *)buf; FAN_EVENT_OK(md, n);
                     md = FAN_EVENT_NEXT(md, n))
                        if (md->vers == FANOTIFY_METADATA_VERSION)
                                catalog_event(fs, md);
        }
        return true;
}

static int on_catalog_events(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct tiered_fs *fs = userdata;
        (void)s, (void)fd, (void)revents;
        changes_read(fs);
        catalog_changes_advance(fs->catalog_changes);
        return 0;
}

int catalogwatch_open(struct tiered_fs *fs) {
        int r;

        if (fs->catalog_fd >= 0 || !fs_has_catalog(fs))
                return 0;
        if (!(fs->catalog_changes = catalog_changes_new(fs)))
                return log_error_errno(ENOMEM, "catalog changes: %m");
        /* Unlimited queue: a change lost would be missing until the next
         * snapshot (an overflow brings one forward); changes_read keeps
         * it short. */
        fs->catalog_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME_TARGET | FAN_UNLIMITED_QUEUE | FAN_CLOEXEC |
                                               FAN_NONBLOCK,
                                       O_RDONLY | O_CLOEXEC);
        r = fs->catalog_fd < 0 ? log_error_errno(errno, "fanotify_init (catalog): %m") : 0;
        if (r >= 0 && fanotify_mark(fs->catalog_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, CATALOG_MASK, fs->root_fd, NULL) < 0)
                r = log_error_errno(errno, "catalog mark on %s: %m", fs->mountpoint);
        if (r >= 0 && (r = sd_event_add_io(fs->t->event, &fs->catalog_src, fs->catalog_fd, EPOLLIN, on_catalog_events, fs)) < 0)
                log_error_errno(r, "sd_event_add_io: %m");
        if (r < 0)
                catalogwatch_close(fs);
        return r < 0 ? r : 0;
}

/* What is queued in the kernel is read first, so a change heard before an
 * archive is queued before its entry (catalogwatch_defer). */
void catalogwatch_read(struct tiered_fs *fs) {
        if (fs->catalog_fd < 0 || !fs->catalog_changes)
                return;
        if (changes_read(fs))
                fs->renames++; /* 16 reads and still more: a rename may be among them */
        catalog_changes_advance(fs->catalog_changes);
}

uint64_t catalogwatch_renames(struct tiered_fs *fs) {
        catalogwatch_read(fs);
        return fs->renames;
}

void catalogwatch_close(struct tiered_fs *fs) {
        fs->catalog_src = sd_event_source_disable_unref(fs->catalog_src);
        fs->catalog_fd = safe_close(fs->catalog_fd);
        catalog_changes_free(TAKE_PTR(fs->catalog_changes));
}
