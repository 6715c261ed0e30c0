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
#include <sys/ioctl.h>
#include <unistd.h>

#include "catalog-internal.h"
#include "catalog.h"
#include "fanotify-uapi.h"
#include "log.h"
#include "macro.h"
#include "namer.h"
#include "offthread.h"

#define CATALOG_MASK (FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_ONDIR)

static bool fs_has_catalog(const struct tiered_fs *fs) {
        for (size_t i = 0; i < fs->t->n_tenants; i++)
                if (fs->t->tenants[i].fs == fs && fs->t->tenants[i].cfg->catalog)
                        return true;
        return false;
}

struct dfid_name {
        struct file_handle *fh;
        const char *name;
};

/*
 * Which tenant an event is about, and its path there, takes the event's
 * directory opened by its handle: a directory's dentry must be connected,
 * so if the kernel dropped it, opening it by handle finds it again through
 * its parents, a lookup per directory level (on btrfs a tree search each),
 * as deep as the tenant chose. That runs on a thread, never on the loop.
 * The loop only reads the events (no fd: FID records), counts renames
 * and queues each change; a thread opens the directories of a batch of
 * them and reads their /proc links; back on the loop they are applied in
 * the order heard. A file archived meanwhile (catalog_note_archived) is
 * queued behind them, so the catalog hears a delete and a create of a
 * name before the archive that came after them. Bounded: CHANGES_MAX
 * read and not applied; past that the loop reads no more until a batch
 * ends, and the kernel's queue holds the rest.
 */
#define CHANGES_MAX 4096
#define BATCH_MAX 512 /* directories opened by one thread */
/* Bytes a read may take: at least one event of the largest (two
 * handles and two names), and no more events than the changes' room. */
#define READ_MIN 4096
#define READ_MAX 65536

enum change_kind { CHANGE_CREATED, CHANGE_DELETED, CHANGE_RENAMED, CHANGE_ARCHIVED };

struct change_dir {
        struct file_handle *fh; /* in the change's own allocation; NULL: none */
        const char *name;
        char *where; /* the directory's /proc link, read on the thread; NULL: none (gone) */
};

struct change {
        struct change *next;
        enum change_kind kind;
        bool dir;                /* a directory created, deleted or renamed */
        struct change_dir at[2]; /* the entry (created, deleted); renamed: [0] the new one, [1] the old */
        struct tenant *tn;       /* archived: its tenant and entry */
        struct catalog_pending *p;
        char data[]; /* handles and names */
};

struct change_batch {
        struct catalog_changes *cc; /* the loop's: not touched by the thread */
        int root_fd;                /* the same number in the thread's own fd table */
        struct change *first;       /* n changes, detached from the queue */
        size_t n;
};

struct catalog_changes {
        struct tiered_fs *fs;
        struct change *head, **tail; /* waiting for a batch */
        size_t n;                    /* changes read and not applied, the running batch's too */
        size_t n_archived;           /* of them, files archived */
        struct change_batch *running;
        struct offthread *thread;
        bool stopped; /* too many: the group is not read until a batch ends */
};

static void change_free(struct change *c) {
        if (!c)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(c->at); i++)
                free(c->at[i].where);
        catalog_pending_free_list(c->p);
        free(c);
}

static void changes_free_list(struct change *c, size_t n) {
        while (c && n--) {
                struct change *next = c->next;
                change_free(c);
                c = next;
        }
}

/* The tenant whose subvolume holds where (a directory's /proc link), and
 * name's path beneath it (malloc'd), or NULL: not a tenant's with a
 * catalog. */
static struct tenant *entry_of(struct tiered_fs *fs, const char *where, const char *name, char **ret_rel) {
        if (!where)
                return NULL; /* gone meanwhile: a later event or the next snapshot says what became of it */
        for (size_t i = 0; i < fs->t->n_tenants; i++) {
                struct tenant *tn = &fs->t->tenants[i];
                _cleanup_free_ char *dir_rel = NULL;
                if (tn->fs != fs || !tn->cfg->catalog || usage_rel_of_path(tn, where, &dir_rel) < 0)
                        continue;
                if (asprintf(ret_rel, "%s%s%s", dir_rel, *dir_rel ? "/" : "", name) < 0)
                        return NULL;
                return tn;
        }
        return NULL;
}

/* On the loop, in the order heard. */
static void change_apply(struct tiered_fs *fs, struct change *c) {
        _cleanup_free_ char *rel = NULL, *old_rel = NULL;
        struct tenant *tn;

        switch (c->kind) {
        case CHANGE_ARCHIVED:
                catalog_note_entry(c->tn, TAKE_PTR(c->p));
                break;
        case CHANGE_RENAMED: {
                /* The new name is recorded (with all beneath it), then the
                 * old one goes: in that order, every prefix of the journal
                 * names each file under one name at least (a delete of a
                 * directory hides what was recorded beneath it before). */
                struct tenant *old_tn;
                if ((tn = entry_of(fs, c->at[0].where, c->at[0].name, &rel)))
                        catalog_note_created(tn, rel);
                if ((old_tn = entry_of(fs, c->at[1].where, c->at[1].name, &old_rel)))
                        catalog_note_deleted(old_tn, old_rel, c->dir);
                break;
        }
        case CHANGE_DELETED:
                if ((tn = entry_of(fs, c->at[0].where, c->at[0].name, &rel)))
                        catalog_note_deleted(tn, rel, c->dir);
                break;
        case CHANGE_CREATED:
                if ((tn = entry_of(fs, c->at[0].where, c->at[0].name, &rel)))
                        catalog_note_created(tn, rel);
                break;
        }
}

/* On the batch's thread: each directory opened by its handle (the
 * reconnect through its parents, if its dentry was dropped, is here) and
 * its link read. */
static char *dir_link(int root_fd, struct file_handle *fh) {
        char link[40], where[PATH_MAX];
        _cleanup_close_ int fd = open_by_handle_at(root_fd, fh, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        snprintf(link, sizeof(link), "/proc/thread-self/fd/%d", fd);
        ssize_t n = readlink(link, where, sizeof(where) - 1);
        if (n <= 0)
                return NULL;
        where[n] = 0;
        return strdup(where);
}

static void resolve_work(void *userdata) {
        struct change_batch *b = userdata;
        struct change *c = b->first;
        for (size_t i = 0; i < b->n; i++, c = c->next)
                for (size_t k = 0; k < ARRAY_SIZE(c->at); k++)
                        if (c->at[k].fh)
                                c->at[k].where = dir_link(b->root_fd, c->at[k].fh);
}

static void batch_release(void *userdata) {
        struct change_batch *b = userdata;
        changes_free_list(b->first, b->n);
        free(b);
}

static void changes_advance(struct catalog_changes *cc);
static void changes_read(struct catalog_changes *cc);

static void on_resolved(void *userdata) {
        struct change_batch *b = userdata;
        struct catalog_changes *cc = b->cc;
        struct change *c = b->first;

        cc->running = NULL;
        cc->thread = NULL;
        for (size_t i = 0; i < b->n; i++, c = c->next) {
                cc->n_archived -= c->kind == CHANGE_ARCHIVED;
                change_apply(cc->fs, c);
        }
        cc->n -= b->n;
        batch_release(b);
        changes_advance(cc);
        if (cc->stopped)
                changes_read(cc);
}

/* The waiting changes' first BATCH_MAX directories to a thread. */
static int batch_start(struct catalog_changes *cc) {
        struct change_batch *b = calloc(1, sizeof(*b));
        size_t dirs = 0;
        int r;

        if (!b)
                return -ENOMEM;
        *b = (struct change_batch){ .cc = cc, .root_fd = cc->fs->root_fd, .first = cc->head };
        struct change **at = &cc->head;
        for (; *at && dirs < BATCH_MAX; at = &(*at)->next, b->n++)
                dirs += (*at)->kind != CHANGE_ARCHIVED;
        r = offthread_start(cc->fs->t->event, &b->root_fd, 1, resolve_work, on_resolved, b, &cc->thread);
        if (r < 0) {
                free(b);
                return r;
        }
        cc->head = *at;
        *at = NULL; /* the batch's list ends here */
        if (!cc->head)
                cc->tail = &cc->head;
        cc->running = b;
        return 0;
}

/* Files archived at the head go to the catalog now (nothing heard before
 * them is left); the rest to a thread, if none runs. */
static void changes_advance(struct catalog_changes *cc) {
        while (!cc->running && cc->head && cc->head->kind == CHANGE_ARCHIVED) {
                struct change *c = cc->head;
                if (!(cc->head = c->next))
                        cc->tail = &cc->head;
                cc->n--;
                cc->n_archived--;
                change_apply(cc->fs, c);
                change_free(c);
        }
        if (cc->running || !cc->head)
                return;
        int r = batch_start(cc);
        if (r < 0) {
                /* They wait for the next event or batch to try again; a
                 * snapshot has them if none comes. */
                log_error_errno(r, "%s: cannot read the catalog's changes on a thread: %m", cc->fs->mountpoint);
                for (size_t i = 0; i < cc->fs->t->n_tenants; i++)
                        if (cc->fs->t->tenants[i].fs == cc->fs)
                                catalog_note_lost(&cc->fs->t->tenants[i]);
        }
}

static void changes_append(struct catalog_changes *cc, struct change *c) {
        *cc->tail = c;
        cc->tail = &c->next;
        cc->n++;
        cc->n_archived += c->kind == CHANGE_ARCHIVED;
}

static void copy_dir(struct change_dir *to, const struct dfid_name *from, char **data) {
        if (!from->fh)
                return;
        size_t fh_len = sizeof(*from->fh) + from->fh->handle_bytes;
        to->fh = memcpy(*data, from->fh, fh_len);
        *data += ((fh_len + 7) & ~(size_t)7);
        to->name = strcpy(*data, from->name);
        *data += strlen(from->name) + 1;
}

static size_t dir_bytes(const struct dfid_name *d) {
        return d->fh ? ((sizeof(*d->fh) + d->fh->handle_bytes + 7) & ~(size_t)7) + strlen(d->name) + 1 : 0;
}

static struct change *change_new(enum change_kind kind, bool dir, const struct dfid_name *a, const struct dfid_name *b) {
        struct change *c = calloc(1, sizeof(*c) + dir_bytes(a) + dir_bytes(b));
        if (!c)
                return NULL;
        char *data = c->data;
        c->kind = kind;
        c->dir = dir;
        copy_dir(&c->at[0], a, &data);
        copy_dir(&c->at[1], b, &data);
        return c;
}

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

/* On the loop: counted and queued, nothing opened. */
static void catalog_event(struct catalog_changes *cc, const struct fanotify_event_metadata *md) {
        struct tiered_fs *fs = cc->fs;
        struct dfid_name entry = {}, from = {}, to = {};
        struct change *c;

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
        parse_records(md, &entry, &from, &to);
        bool dir = md->mask & FAN_ONDIR;
        if ((md->mask & FAN_RENAME) ? !to.fh && !from.fh : !entry.fh || !(md->mask & (FAN_CREATE | FAN_DELETE)))
                return;
        if (md->mask & FAN_RENAME)
                c = change_new(CHANGE_RENAMED, dir, &to, &from);
        else
                c = change_new(md->mask & FAN_DELETE ? CHANGE_DELETED : CHANGE_CREATED, dir, &entry, &(struct dfid_name){});
        if (!c) {
                log_error("%s: catalog: out of memory for a change: its tenants' catalogs get a snapshot", fs->mountpoint);
                for (size_t i = 0; i < fs->t->n_tenants; i++)
                        if (fs->t->tenants[i].fs == fs)
                                catalog_note_lost(&fs->t->tenants[i]);
                return;
        }
        changes_append(cc, c);
}

/* Reads what the changes have room for (at most 16 reads a turn, as any
 * notification group: a steady writer cannot keep the loop here), and
 * stops the group's source when they are full. */
static void changes_read(struct catalog_changes *cc) {
        char buf[READ_MAX] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
        int fd = cc->fs->catalog_fd;

        for (int rounds = 0; rounds < 16; rounds++) {
                size_t room = (CHANGES_MAX - MIN(cc->n, (size_t)CHANGES_MAX)) * FAN_EVENT_METADATA_LEN;
                cc->stopped = room < READ_MIN;
                if (cc->stopped)
                        break;
                ssize_t n = read(fd, buf, MIN(room, sizeof(buf)));
                if (n <= 0)
                        break;
                for (const struct fanotify_event_metadata *md = (const void *)buf; FAN_EVENT_OK(md, n);
                     md = FAN_EVENT_NEXT(md, n))
                        if (md->vers == FANOTIFY_METADATA_VERSION)
                                catalog_event(cc, md);
        }
        if (cc->fs->catalog_src)
                (void)sd_event_source_set_enabled(cc->fs->catalog_src, cc->stopped ? SD_EVENT_OFF : SD_EVENT_ON);
        changes_advance(cc);
}

static int on_catalog_events(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void)s, (void)fd, (void)revents;
        changes_read(userdata);
        return 0;
}

int catalogwatch_open(struct tiered_fs *fs) {
        int r;

        if (fs->catalog_fd >= 0 || !fs_has_catalog(fs))
                return 0;
        if (!(fs->catalog_changes = calloc(1, sizeof(*fs->catalog_changes))))
                return log_error_errno(ENOMEM, "catalog changes: %m");
        *fs->catalog_changes = (struct catalog_changes){ .fs = fs, .tail = &fs->catalog_changes->head };
        /* Unlimited queue: a change lost would be missing until the next
         * snapshot (an overflow brings one forward). */
        fs->catalog_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME_TARGET | FAN_UNLIMITED_QUEUE | FAN_CLOEXEC |
                                               FAN_NONBLOCK,
                                       O_RDONLY | O_CLOEXEC);
        r = fs->catalog_fd < 0 ? log_error_errno(errno, "fanotify_init (catalog): %m") : 0;
        if (r >= 0 && fanotify_mark(fs->catalog_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, CATALOG_MASK, fs->root_fd, NULL) < 0)
                r = log_error_errno(errno, "catalog mark on %s: %m", fs->mountpoint);
        if (r >= 0 && (r = sd_event_add_io(fs->t->event, &fs->catalog_src, fs->catalog_fd, EPOLLIN, on_catalog_events,
                                           fs->catalog_changes)) < 0)
                log_error_errno(r, "sd_event_add_io: %m");
        if (r < 0)
                catalogwatch_close(fs);
        return r < 0 ? r : 0;
}

uint64_t catalogwatch_renames(struct tiered_fs *fs) {
        struct catalog_changes *cc = fs->catalog_changes;
        int queued = 0;

        if (fs->catalog_fd < 0 || !cc)
                return fs->renames;
        changes_read(cc);
        /* Full, with more in the kernel's queue: a rename may be among them. */
        if (cc->stopped && ioctl(fs->catalog_fd, FIONREAD, &queued) == 0 && queued > 0)
                fs->renames++;
        return fs->renames;
}

bool catalogwatch_defer(struct tenant *tn, struct catalog_pending *p) {
        struct catalog_changes *cc = tn->fs->catalog_changes;
        struct change *c;

        if (!cc || !cc->n || !(c = calloc(1, sizeof(*c))))
                return false; /* nothing heard waits (or no memory: at once, as before a watch) */
        *c = (struct change){ .kind = CHANGE_ARCHIVED, .tn = tn, .p = p };
        changes_append(cc, c);
        return true;
}

static bool list_holds(const struct change *c, size_t n, dev_t dev, ino_t ino) {
        for (; c && n--; c = c->next)
                if (c->kind == CHANGE_ARCHIVED && c->p->dev == dev && c->p->ino == ino)
                        return true;
        return false;
}

bool catalogwatch_holds(const struct tiered_fs *fs, dev_t dev, ino_t ino) {
        const struct catalog_changes *cc = fs->catalog_changes;

        if (!cc || !cc->n_archived)
                return false;
        return (cc->running && list_holds(cc->running->first, cc->running->n, dev, ino)) ||
               list_holds(cc->head, SIZE_MAX, dev, ino);
}

void catalogwatch_close(struct tiered_fs *fs) {
        struct catalog_changes *cc = fs->catalog_changes;

        fs->catalog_src = sd_event_source_disable_unref(fs->catalog_src);
        fs->catalog_fd = safe_close(fs->catalog_fd);
        if (!cc)
                return;
        /* A batch on its thread is left to end, unheard. */
        if (cc->thread)
                offthread_abandon(cc->thread, batch_release);
        changes_free_list(cc->head, SIZE_MAX);
        free(cc);
        fs->catalog_changes = NULL;
}
