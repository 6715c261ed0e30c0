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
#include "fanotify-uapi.h"
#include "fsgroup.h"
#include "log.h"
#include "macro.h"
#include "namer.h"

#define CATALOG_MASK (FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_ONDIR)

static bool fs_has_catalog(const struct tiered_fs *fs) {
        for (size_t i = 0; i < fs->t->n_tenants; i++)
                if (fs->t->tenants[i].fs == fs && fs->t->tenants[i].cfg->catalog)
                        return true;
        return false;
}

/* The tenant the directory fh is in, and the entry name's path beneath its
 * subvolume (malloc'd), or NULL: not a tenant's with a catalog. */
static struct tenant *entry_of(struct tiered_fs *fs, struct file_handle *fh, const char *name, char **ret_rel) {
        _cleanup_close_ int dir = open_by_handle_at(fs->root_fd, fh, O_PATH | O_CLOEXEC);
        if (dir < 0)
                return NULL; /* gone meanwhile: a later event or the next snapshot says what became of it */
        for (size_t i = 0; i < fs->t->n_tenants; i++) {
                struct tenant *tn = &fs->t->tenants[i];
                if (tn->fs != fs || !tn->cfg->catalog)
                        continue;
                _cleanup_free_ char *dir_rel = usage_rel_of_fd(tn, dir);
                if (!dir_rel)
                        continue;
                if (asprintf(ret_rel, "%s%s%s", dir_rel, *dir_rel ? "/" : "", name) < 0)
                        return NULL;
                return tn;
        }
        return NULL;
}

struct dfid_name {
        struct file_handle *fh;
        const char *name;
};

/* The event's records: the entry (create, delete), or the old and the new
 * entry (rename). */
static void parse_records(const struct fanotify_event_metadata *md, struct dfid_name *entry, struct dfid_name *from,
                          struct dfid_name *to) {
        const char *p = (const char *)md + md->metadata_len, *end = (const char *)md + md->event_len;
        while (p + sizeof(struct fanotify_event_info_header) <= end) {
                const struct fanotify_event_info_fid *fid = (const void *)p;
                if (fid->hdr.len < sizeof(*fid) + sizeof(struct file_handle) || p + fid->hdr.len > end)
                        return;
                struct file_handle *fh = (struct file_handle *)fid->handle;
                const char *name = (const char *)fh->f_handle + fh->handle_bytes;
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

static void catalog_event(struct tiered_fs *fs, const struct fanotify_event_metadata *md) {
        struct dfid_name entry = {}, from = {}, to = {};
        _cleanup_free_ char *rel = NULL, *old_rel = NULL;
        struct tenant *tn, *old_tn;

        if (md->mask & (FAN_Q_OVERFLOW | FAN_RENAME))
                fs->renames++; /* whoever did it, wherever: a walk in progress may have missed something */
        if (md->mask & FAN_Q_OVERFLOW) {
                log_error("%s: catalog queue overflow: its tenants' catalogs get a snapshot", fs->mountpoint);
                for (size_t i = 0; i < fs->t->n_tenants; i++)
                        if (fs->t->tenants[i].fs == fs)
                                catalog_note_lost(&fs->t->tenants[i]);
                return;
        }
        /* tierd's own (an import making the tree): the catalog has it. */
        if (md->pid == getpid())
                return;
        bool dir = md->mask & FAN_ONDIR;
        parse_records(md, &entry, &from, &to);
        if (md->mask & FAN_RENAME) {
                /* The new name is recorded (with all beneath it), then the
                 * old one goes: in that order, every prefix of the journal
                 * names each file under one name at least (a delete of a
                 * directory hides what was recorded beneath it before). */
                if (to.fh && (tn = entry_of(fs, to.fh, to.name, &rel)))
                        catalog_note_created(tn, rel);
                if (from.fh && (old_tn = entry_of(fs, from.fh, from.name, &old_rel)))
                        catalog_note_deleted(old_tn, old_rel, dir);
                return;
        }
        if (!entry.fh || !(tn = entry_of(fs, entry.fh, entry.name, &rel)))
                return;
        if (md->mask & FAN_DELETE)
                catalog_note_deleted(tn, rel, dir);
        else if (md->mask & FAN_CREATE)
                catalog_note_created(tn, rel);
}

static int on_catalog_events(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void)s, (void)revents;
        fsgroup_read_notifications(userdata, fd, catalog_event);
        return 0;
}

int catalogwatch_open(struct tiered_fs *fs) {
        int r;

        if (fs->catalog_fd >= 0 || !fs_has_catalog(fs))
                return 0;
        /* Unlimited queue: a change lost would be missing until the next
         * snapshot (an overflow brings one forward). */
        fs->catalog_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME_TARGET | FAN_UNLIMITED_QUEUE | FAN_CLOEXEC |
                                               FAN_NONBLOCK,
                                       O_RDONLY | O_CLOEXEC);
        if (fs->catalog_fd < 0)
                return log_error_errno(errno, "fanotify_init (catalog): %m");
        r = 0;
        if (fanotify_mark(fs->catalog_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, CATALOG_MASK, fs->root_fd, NULL) < 0)
                r = log_error_errno(errno, "catalog mark on %s: %m", fs->mountpoint);
        if (r >= 0 && (r = sd_event_add_io(fs->t->event, &fs->catalog_src, fs->catalog_fd, EPOLLIN, on_catalog_events, fs)) < 0)
                log_error_errno(r, "sd_event_add_io: %m");
        if (r < 0)
                catalogwatch_close(fs);
        return r < 0 ? r : 0;
}

uint64_t catalogwatch_renames(struct tiered_fs *fs) {
        if (fs->catalog_fd >= 0)
                fsgroup_read_notifications(fs, fs->catalog_fd, catalog_event);
        return fs->renames;
}

void catalogwatch_close(struct tiered_fs *fs) {
        fs->catalog_src = sd_event_source_disable_unref(fs->catalog_src);
        fs->catalog_fd = safe_close(fs->catalog_fd);
}
