/* SPDX-License-Identifier: MIT */
/*
 * Which tenant a create, delete or rename is about, and its path there,
 * takes the event's directory opened by its handle: a directory's dentry
 * must be connected, so if the kernel dropped it, opening it by handle
 * finds it again through its parents, a lookup per directory level (on
 * btrfs a tree search each), as deep as the tenant chose. That runs on a
 * thread, never on the loop: the loop queues each change, a thread opens
 * the directories of a batch of them and reads their /proc links, and
 * back on the loop they are applied in the order heard.
 *
 * A file archived meanwhile (catalog_note_archived) is queued behind them,
 * so the catalog hears a delete and a create of a name before the archive
 * that came after them (and the file is not released until its entry is
 * written). Bounded: CHANGES_MAX waiting, SHARE_MAX of one tenant's
 * (room_for), and SHARE_MAX whose tenant is not known yet.
 *
 * Whose a change is, is told on the loop from the directory's handle:
 * its btrfs subvolume, a tenant's root, or what the loop saw of that
 * directory before (catalogowner.c): made or moved by a change heard, or
 * named by a thread since. A change in a directory not seen since start
 * counts as no one's until a thread names it.
 */
#include "catalogchanges.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog-internal.h"
#include "catalog.h"
#include "catalogowner.h"
#include "catalogtree.h"
#include "catalogwatch.h"
#include "handle.h"
#include "log.h"
#include "macro.h"
#include "namer.h"
#include "offthread.h"

#define CHANGES_MAX 16384 /* waiting, all tenants */
#define SHARE_MAX 4096    /* waiting, one tenant's (told by its subvolume: btrfs) */
#define BATCH_MAX 2048    /* directories opened by one thread */

struct change_dir {
        struct file_handle *fh; /* in the change's own allocation; NULL: none */
        const char *name;
        int owner;   /* its tenant's index, as told when heard; -1: not known */
        char *where; /* the directory's /proc link, read on the thread; NULL: none (gone) */
};

struct change {
        struct change *next;
        enum change_kind kind;
        bool dir;                /* a directory created, deleted or renamed */
        int owner;               /* the tenant's index, if its subvolume told it; -1: not known */
        struct change_dir at[2]; /* the entry; renamed: [0] the new one, [1] the old */
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
        size_t n;                    /* queued and not applied, the running batch's too */
        size_t n_archived;           /* of them, files archived */
        size_t *share;               /* of them, each tenant's (by index), then those of no one known */
        uint64_t *root_id;           /* each tenant's btrfs subvolume (0: none, or shared with another) */
        struct catalog_owners *owners; /* each tenant's root (pinned) and directories seen */
        struct change_batch *running;
        struct offthread *thread;
};

/* btrfs's file handles (fs/btrfs/export.h): the inode's objectid, then
 * its subvolume's. */
#define FILEID_BTRFS_WITHOUT_PARENT 0x4d
#define FILEID_BTRFS_WITH_PARENT 0x4e
#define FILEID_BTRFS_WITH_PARENT_ROOT 0x4f

static uint64_t handle_root_id(const struct file_handle *fh) {
        uint64_t id;
        if ((fh->handle_type != FILEID_BTRFS_WITHOUT_PARENT && fh->handle_type != FILEID_BTRFS_WITH_PARENT &&
             fh->handle_type != FILEID_BTRFS_WITH_PARENT_ROOT) ||
            fh->handle_bytes < 2 * sizeof(id))
                return 0;
        memcpy(&id, fh->f_handle + sizeof(id), sizeof(id));
        return id;
}

/* The tenant the directory is in, told on the loop from its handle alone:
 * its btrfs subvolume (a tenant with a subvolume to itself), or where the
 * loop last saw it (a tenant's root: always). Its index, or -1. */
static int owner_of(const struct catalog_changes *cc, const struct file_handle *fh) {
        uint64_t id = fh ? handle_root_id(fh) : 0;
        for (size_t i = 0; id && i < cc->fs->t->n_tenants; i++)
                if (cc->root_id[i] == id)
                        return (int)i;
        return fh ? catalog_owners_get(cc->owners, fh) : -1;
}

/* A change's: its directory's tenant; a rename's, both sides' if they
 * are one tenant, else no one's (dropped, it spills every catalog, the
 * one it left too). */
static int change_owner(const struct change_dir at[2]) {
        return !at[0].fh ? at[1].owner : !at[1].fh || at[0].owner == at[1].owner ? at[0].owner : -1;
}

static size_t *share_of(const struct catalog_changes *cc, int owner) {
        return &cc->share[owner >= 0 ? (size_t)owner : cc->fs->t->n_tenants];
}

/* A change leaves the queue. */
static void counted_out(struct catalog_changes *cc, const struct change *c) {
        cc->n--;
        cc->n_archived -= c->kind == CHANGE_ARCHIVED;
        (*share_of(cc, c->owner))--;
}

static void change_free(struct change *c) {
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
static struct tenant *entry_of(struct tiered_fs *fs, const struct change_dir *d, char **ret_rel) {
        if (!d->where)
                return NULL; /* gone meanwhile: a later event or the next snapshot says what became of it */
        for (size_t i = 0; i < fs->t->n_tenants; i++) {
                struct tenant *tn = &fs->t->tenants[i];
                _cleanup_free_ char *dir_rel = NULL;
                if (tn->fs != fs || !tn->cfg->catalog || usage_rel_of_path(tn, d->where, &dir_rel) < 0)
                        continue;
                if (asprintf(ret_rel, "%s%s%s", dir_rel, *dir_rel ? "/" : "", d->name) < 0)
                        return NULL;
                return tn;
        }
        return NULL;
}

/* Where a thread found the directory: whose it is (or no one's) from now
 * on. The index of the tenant it is in, -1: none, -2: not known (gone). */
static int learned(struct catalog_changes *cc, const struct change_dir *d, const struct tenant *tn) {
        if (!d->fh || !d->where)
                return -2;
        int owner = tn ? (int)(tn - cc->fs->t->tenants) : -1;
        if (catalog_owners_set(cc->owners, d->fh, owner) < 0)
                (void)catalog_owners_set(cc->owners, d->fh, -1);
        return owner;
}

static int note(struct catalog_changes *cc, const struct change_dir *d, bool created, bool dir) {
        _cleanup_free_ char *rel = NULL;
        struct tenant *tn = entry_of(cc->fs, d, &rel);
        int owner = learned(cc, d, tn);
        if (tn && created)
                catalog_note_created(tn, rel);
        else if (tn)
                catalog_note_deleted(tn, rel, dir);
        return owner;
}

/* A directory moved from one tenant's tree to another's (only through a
 * mount that sees both: each tenant's view is a mount of its own, and a
 * rename across mounts fails) takes along directories the loop saw as
 * the first's: all it saw is forgotten, and so it is when a side is not
 * known (gone before a thread named it, and not known when heard). Each
 * side as a thread found it, or, if gone meanwhile, as told when heard. */
static void moved(struct catalog_changes *cc, const struct change *c, int to, int from) {
        to = to == -2 && c->at[0].owner >= 0 ? c->at[0].owner : to;
        from = from == -2 && c->at[1].owner >= 0 ? c->at[1].owner : from;
        if (c->dir && (to != from || to == -2))
                catalog_owners_clear(cc->owners);
}

/* On the loop, in the order heard. */
static void change_apply(struct catalog_changes *cc, struct change *c) {
        counted_out(cc, c);
        switch (c->kind) {
        case CHANGE_ARCHIVED:
                catalog_note_entry(c->tn, TAKE_PTR(c->p));
                break;
        case CHANGE_RENAMED:
                /* The new name is recorded (with all beneath it), then the
                 * old one goes: in that order, every prefix of the journal
                 * names each file under one name at least (a delete of a
                 * directory hides what was recorded beneath it before). */
                moved(cc, c, note(cc, &c->at[0], true, c->dir), note(cc, &c->at[1], false, c->dir));
                break;
        case CHANGE_REPLACED:
                /* Whichever came first: the delete, then what is there now. */
                note(cc, &c->at[0], false, c->dir);
                note(cc, &c->at[0], true, c->dir);
                break;
        case CHANGE_DELETED:
        case CHANGE_CREATED:
                note(cc, &c->at[0], c->kind == CHANGE_CREATED, c->dir);
                break;
        }
}

/* On the batch's thread: the directory opened by its handle (the
 * reconnect through its parents, if its dentry was dropped, is here) and
 * its link read. A directory deleted during its reconnect is opened as a
 * root of its own, its link "/": only the filesystem's root reads so. */
static char *dir_link(int root_fd, struct file_handle *fh) {
        char link[40], where[PATH_MAX];
        struct stat st, root;
        _cleanup_close_ int fd = open_by_handle_at(root_fd, fh, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        snprintf(link, sizeof(link), "/proc/thread-self/fd/%d", fd);
        ssize_t n = readlink(link, where, sizeof(where) - 1);
        if (n <= 0)
                return NULL;
        where[n] = 0;
        if (strcmp(where, "/") == 0 && (fstat(fd, &st) < 0 || fstat(root_fd, &root) < 0 || st.st_dev != root.st_dev ||
                                        st.st_ino != root.st_ino))
                return NULL;
        return strdup(where);
}

static void resolve_work(void *userdata) {
        struct change_batch *b = userdata;
        struct change *c = b->first;

#ifdef TIERD_TEST_HOOKS
        /* Test builds: a slow batch, for changes to pile up behind it. */
        const char *pause = getenv("TIERD_TEST_CATALOG_PAUSE_MS");
        if (pause)
                usleep((useconds_t)atoi(pause) * 1000);
#endif
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

/* Changes waiting as no one's whose directories the batch just named
 * now count as their tenants'. */
static void reattribute(struct catalog_changes *cc) {
        if (!*share_of(cc, -1))
                return;
        for (struct change *c = cc->head; c; c = c->next) {
                if (c->owner >= 0)
                        continue;
                struct change_dir now[2] = { { .fh = c->at[0].fh, .owner = owner_of(cc, c->at[0].fh) },
                                             { .fh = c->at[1].fh, .owner = owner_of(cc, c->at[1].fh) } };
                int owner = change_owner(now);
                if (owner < 0)
                        continue;
                (*share_of(cc, -1))--;
                (*share_of(cc, owner))++;
                c->owner = owner;
        }
}

static void on_resolved(void *userdata) {
        struct change_batch *b = userdata;
        struct catalog_changes *cc = b->cc;
        struct change *c = b->first;

        cc->running = NULL;
        cc->thread = NULL;
        for (size_t i = 0; i < b->n; i++, c = c->next)
                change_apply(cc, c);
        batch_release(b);
        reattribute(cc);
        catalog_changes_advance(cc);
}

/* The catalog of tenant owner (-1: every catalog of the filesystem) gets
 * a snapshot instead of its changes waiting (dropped), and releases
 * nothing until it is in the store. */
static void spill_owner(struct catalog_changes *cc, int owner, const char *why) {
        struct tiered_fs *fs = cc->fs;

        for (size_t i = 0; i < fs->t->n_tenants; i++)
                if (fs->t->tenants[i].fs == fs && (owner < 0 || (size_t)owner == i))
                        catalog_note_spilled(&fs->t->tenants[i], why);
        if (owner < 0) /* changes lost, a move between tenants among them maybe */
                catalog_owners_clear(cc->owners);
        for (struct change **at = &cc->head; *at;) {
                struct change *c = *at;
                if (owner >= 0 && c->owner != owner) {
                        at = &c->next;
                        continue;
                }
                *at = c->next;
                counted_out(cc, c);
                change_free(c);
        }
        for (cc->tail = &cc->head; *cc->tail; cc->tail = &(*cc->tail)->next)
                ;
        fs->renames++;
}

void catalog_changes_spill(struct catalog_changes *cc, const char *why) { spill_owner(cc, -1, why); }

/* The waiting changes' first BATCH_MAX to a thread, their list detached
 * before it starts. */
static int batch_start(struct catalog_changes *cc) {
        struct change_batch *b = calloc(1, sizeof(*b));
        struct change **at = &cc->head, *rest;

        if (!b)
                return -ENOMEM;
        *b = (struct change_batch){ .cc = cc, .root_fd = cc->fs->root_fd, .first = cc->head };
        /* At most BATCH_MAX in all, files archived too: what a batch holds
         * stays under a tenant's share, so a spill always makes room. */
        for (; *at && b->n < BATCH_MAX; at = &(*at)->next)
                b->n++;
        rest = *at;
        *at = NULL;
        int r = offthread_start(cc->fs->t->event, &b->root_fd, 1, resolve_work, on_resolved, b, &cc->thread);
        if (r < 0) {
                *at = rest;
                free(b);
                return r;
        }
        if (!(cc->head = rest))
                cc->tail = &cc->head;
        cc->running = b;
        return 0;
}

void catalog_changes_advance(struct catalog_changes *cc) {
        /* Files archived at the head: nothing heard before them is left. */
        while (!cc->running && cc->head && cc->head->kind == CHANGE_ARCHIVED) {
                struct change *c = cc->head;
                if (!(cc->head = c->next))
                        cc->tail = &cc->head;
                change_apply(cc, c);
                change_free(c);
        }
        if (cc->running || !cc->head)
                return;
        int r = batch_start(cc);
        if (r < 0) {
                log_error_errno(r, "%s: cannot read the catalog's changes on a thread: %m", cc->fs->mountpoint);
                catalog_changes_spill(cc, "its changes cannot be read on a thread");
        }
}

static void changes_append(struct catalog_changes *cc, struct change *c) {
        *cc->tail = c;
        cc->tail = &c->next;
        cc->n++;
        cc->n_archived += c->kind == CHANGE_ARCHIVED;
        (*share_of(cc, c->owner))++;
}

/* Room for one more of owner's: made by dropping its changes waiting
 * (every tenant's, when all changes are full or those of no one known
 * are), and its catalog gets a snapshot instead. So a tenant's storm of
 * changes costs its own catalog, not another's, as long as the loop can
 * tell whose they are (owner_of). */
static bool room_for(struct catalog_changes *cc, int owner) {
        if (cc->n < CHANGES_MAX && *share_of(cc, owner) < SHARE_MAX)
                return true;
        spill_owner(cc, cc->n < CHANGES_MAX ? owner : -1, "more changes were heard than wait to be read");
        return cc->n < CHANGES_MAX && *share_of(cc, owner) < SHARE_MAX;
}

/* A directory made, moved or deleted (child: its handle) is told apart
 * on the loop from now on as its new parent's (to) is, or forgotten. A
 * move between two tenants known on the loop forgets all (moved). */
static void heard_dir(struct catalog_changes *cc, enum change_kind kind, const struct change_dir *to,
                      const struct change_dir *from, const struct file_handle *child) {
        if (kind == CHANGE_RENAMED && to->owner >= 0 && from->owner >= 0 && to->owner != from->owner)
                catalog_owners_clear(cc->owners);
        if (catalog_owners_set(cc->owners, child, kind == CHANGE_DELETED ? -1 : to->owner) < 0)
                (void)catalog_owners_set(cc->owners, child, -1);
}

#define ALIGNED(n) (((n) + 7) & ~(size_t)7)

static size_t dir_bytes(const struct dfid_name *d) {
        return d->fh ? ALIGNED(sizeof(*d->fh) + d->fh->handle_bytes) + ALIGNED(strlen(d->name) + 1) : 0;
}

static void copy_dir(struct change_dir *to, const struct dfid_name *from, char **data) {
        if (!from->fh)
                return;
        size_t fh_len = sizeof(*from->fh) + from->fh->handle_bytes, name_len = strlen(from->name);
        to->fh = memcpy(*data, from->fh, fh_len);
        *data += ALIGNED(fh_len);
        to->name = memcpy(*data, from->name, name_len + 1);
        *data += ALIGNED(name_len + 1);
}

int catalog_changes_add(struct catalog_changes *cc, enum change_kind kind, bool dir, const struct dfid_name *a,
                        const struct dfid_name *b, const struct file_handle *child) {
        /* The handles (the caller's) only for telling whose: copied below. */
        struct change_dir at[2] = { { .fh = (struct file_handle *)a->fh, .owner = owner_of(cc, a->fh) },
                                    { .fh = (struct file_handle *)b->fh, .owner = owner_of(cc, b->fh) } };
        int owner = change_owner(at);
        if (dir && child)
                heard_dir(cc, kind, &at[0], &at[1], child);
        if (!room_for(cc, owner)) {
                if (dir && kind == CHANGE_RENAMED && owner < 0) /* its move is never applied (moved) */
                        catalog_owners_clear(cc->owners);
                return 0; /* dropped: a snapshot has it */
        }
        struct change *c = calloc(1, sizeof(*c) + dir_bytes(a) + dir_bytes(b));
        if (!c)
                return -ENOMEM;
        char *data = c->data;
        c->owner = owner;
        c->kind = kind;
        c->dir = dir;
        copy_dir(&c->at[0], a, &data);
        copy_dir(&c->at[1], b, &data);
        c->at[0].owner = at[0].owner;
        c->at[1].owner = at[1].owner;
        changes_append(cc, c);
        return 0;
}

bool catalogwatch_defer(struct tenant *tn, struct catalog_pending *p) {
        struct catalog_changes *cc = tn->fs->catalog_changes;
        struct change *c;

        int owner = (int)(tn - tn->t->tenants);

        if (!cc || !cc->n)
                return false; /* nothing heard waits: the caller queues it now */
        if (!room_for(cc, owner) || !(c = calloc(1, sizeof(*c)))) {
                catalog_pending_free_list(p);
                catalog_note_spilled(tn, "more files archived wait behind changes heard than may");
                return true;
        }
        *c = (struct change){ .kind = CHANGE_ARCHIVED, .owner = owner, .tn = tn, .p = p };
        changes_append(cc, c);
        return true;
}

static const struct change *batch_first(const struct catalog_changes *cc, size_t *n) {
        *n = cc->running ? cc->running->n : 0;
        return cc->running ? cc->running->first : NULL;
}

bool catalogwatch_holds(const struct tiered_fs *fs, dev_t dev, ino_t ino) {
        const struct catalog_changes *cc = fs->catalog_changes;
        const struct change *lists[2];
        size_t n[2] = { 0, SIZE_MAX };

        if (!cc || !cc->n_archived)
                return false;
        lists[0] = batch_first(cc, &n[0]);
        lists[1] = cc->head;
        for (size_t l = 0; l < 2; l++)
                for (const struct change *c = lists[l]; c && n[l]--; c = c->next)
                        if (c->kind == CHANGE_ARCHIVED && c->p->dev == dev && c->p->ino == ino)
                                return true;
        return false;
}

/* Each tenant's directory's handle (pinned as its), and its subvolume id
 * when it is a btrfs subvolume's root; neither where another tenant
 * shares it. */
static int root_ids(struct catalog_changes *cc) {
        struct tierd *t = cc->fs->t;
        _cleanup_free_ union file_handle_buf *root = calloc(t->n_tenants ?: 1, sizeof(*root));
        int r = 0;

        if (!root)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_tenants; i++) {
                struct stat st;
                int mount_id;
                root[i].fh.handle_bytes = MAX_HANDLE_SZ;
                if (t->tenants[i].fs != cc->fs || fstat(t->tenants[i].subvol_fd, &st) < 0 ||
                    name_to_handle_at(t->tenants[i].subvol_fd, "", &root[i].fh, &mount_id, AT_EMPTY_PATH) < 0) {
                        root[i].fh.handle_bytes = 0;
                        continue;
                }
                if (st.st_ino == 256 /* BTRFS_FIRST_FREE_OBJECTID: a subvolume's root */)
                        cc->root_id[i] = handle_root_id(&root[i].fh);
        }
        /* Shared: by two tenants, or three (each marked before any is cleared). */
        _cleanup_free_ bool *shared_id = calloc(t->n_tenants ?: 1, sizeof(bool));
        _cleanup_free_ bool *shared_root = calloc(t->n_tenants ?: 1, sizeof(bool));
        if (!shared_id || !shared_root)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_tenants; i++)
                for (size_t k = i + 1; k < t->n_tenants; k++) {
                        if (cc->root_id[i] && cc->root_id[k] == cc->root_id[i])
                                shared_id[i] = shared_id[k] = true;
                        if (root[i].fh.handle_bytes && root[k].fh.handle_bytes &&
                            file_handle_equal(&root[i].fh, &root[k].fh))
                                shared_root[i] = shared_root[k] = true;
                }
        for (size_t i = 0; r >= 0 && i < t->n_tenants; i++) {
                if (shared_id[i])
                        cc->root_id[i] = 0;
                if (root[i].fh.handle_bytes && !shared_root[i])
                        r = catalog_owners_pin(cc->owners, &root[i].fh, (int)i);
        }
        return r;
}

/* The table remembers every tenant's directories on the filesystem, a
 * catalog's or not: a storm in a tenant without one counts against its
 * own share too. */
static size_t tenants_here(const struct tiered_fs *fs) {
        size_t n = 0;
        for (size_t i = 0; i < fs->t->n_tenants; i++)
                n += fs->t->tenants[i].fs == fs;
        return n;
}

struct catalog_changes *catalog_changes_new(struct tiered_fs *fs) {
        struct catalog_changes *cc = calloc(1, sizeof(*cc));
        size_t n = fs->t->n_tenants;
        if (!cc || !(cc->share = calloc(n + 1, sizeof(*cc->share))) ||
            !(cc->root_id = calloc(n ?: 1, sizeof(*cc->root_id))) || !(cc->owners = catalog_owners_new(n, tenants_here(fs)))) {
                catalog_changes_free(cc);
                return NULL;
        }
        cc->fs = fs;
        cc->tail = &cc->head;
        if (root_ids(cc) < 0) {
                catalog_changes_free(cc);
                return NULL;
        }
        return cc;
}

void catalog_changes_free(struct catalog_changes *cc) {
        if (!cc)
                return;
        if (cc->thread)
                offthread_abandon(cc->thread, batch_release);
        changes_free_list(cc->head, SIZE_MAX);
        catalog_owners_free(cc->owners);
        free(cc->share);
        free(cc->root_id);
        free(cc);
}
