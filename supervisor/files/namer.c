/* SPDX-License-Identifier: MIT */
#include "namer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle.h"
#include "inopath.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"

#define BATCH_MAX 32 /* files named by one thread */
/* Names kept for the loop: the files of the batch that just ended and of
 * the one before, for askers called back at its end (namer_after_batch)
 * to find. */
#define KNOWN_MAX (2 * BATCH_MAX)
/* How long a name is trusted: a parent renamed while the file's dentry is
 * dropped again would leave it stale, unheard where no catalog counts
 * renames. Askers use it within a turn or a tick. */
#define KNOWN_USEC (5 * 1000 * 1000ull)
#define AFTER_MAX 4 /* callers waiting for a batch's end: the quota, archive_after */

struct namer_batch {
        struct namer *namer; /* the loop's: batch_done's way back */
        int root_fd, subvol_fd; /* the same numbers in the thread's own fd table */
        size_t n;
        union file_handle_buf h[BATCH_MAX];
        char *rel[BATCH_MAX]; /* found on the thread, or NULL */
};

struct namer_known {
        union file_handle_buf h;
        char *rel;       /* NULL: the thread found none (moved meanwhile, not the tenant's, many links) */
        uint64_t until;  /* CLOCK_MONOTONIC usec */
        uint64_t renames; /* fs->renames when the batch began: a rename heard since, and it is not trusted */
};

struct namer_after {
        void (*done)(void *userdata);
        void *userdata;
};

struct namer {
        struct tenant *tn;
        struct namer_batch *running; /* on its thread, or NULL */
        struct offthread *thread;
        uint64_t running_renames;
        size_t n_after;
        struct namer_after after[AFTER_MAX]; /* told when the running batch ends */
        size_t n_waiting;
        union file_handle_buf waiting[BATCH_MAX];
        size_t next; /* known[] is a ring: the oldest name goes first */
        struct namer_known known[KNOWN_MAX];
};

static bool handle_of(int fd, union file_handle_buf *h) {
        int mount_id;
        *h = (union file_handle_buf){ .fh.handle_bytes = MAX_HANDLE_SZ };
        return name_to_handle_at(fd, "", &h->fh, &mount_id, AT_EMPTY_PATH) == 0;
}

bool namer_can_name(const struct tenant *tn) { return strcmp(tn->fs->fstype, "btrfs") == 0; }

bool usage_fd_in_own_subvolume(const struct tenant *tn, int fd) {
        struct stat st, dir;
        return namer_can_name(tn) && fstat(fd, &st) == 0 && fstat(tn->subvol_fd, &dir) == 0 && st.st_dev == dir.st_dev &&
               dir.st_ino == BTRFS_SUBVOL_ROOT_INO;
}

int usage_name_of_fd(const struct tenant *tn, int fd, char **ret) {
        union file_handle_buf h;
        int r = subvol_rel_of_link(tn->subvol_rel, fd, ret);
        if (r != -EAGAIN)
                return r;
        if (!namer_can_name(tn))
                return -ESTALE; /* xfs and ext4 keep no names of an inode */
        if (!tn->namer || !handle_of(fd, &h))
                return -EAGAIN;
        uint64_t now = tierd_now_usec(tn->t);
        for (size_t i = 0; i < KNOWN_MAX; i++) {
                const struct namer_known *k = &tn->namer->known[i];
                if (k->until > now && k->renames == tn->fs->renames && file_handle_equal(&k->h.fh, &h.fh)) {
                        if (!k->rel)
                                return -ESTALE;
                        *ret = strdup(k->rel);
                        return *ret ? 0 : -ENOMEM;
                }
        }
        return -EAGAIN;
}

char *usage_rel_of_fd(const struct tenant *tn, int fd) {
        char *rel = NULL;
        return usage_name_of_fd(tn, fd, &rel) < 0 ? NULL : rel;
}

int usage_rel_of_path(const struct tenant *tn, const char *where, char **ret) {
        return subvol_rel_of_path(tn->subvol_rel, where, ret);
}

/* On the batch's thread: each file opened by its handle and named. */
static void name_work(void *userdata) {
        struct namer_batch *b = userdata;
        for (size_t i = 0; i < b->n; i++) {
                _cleanup_close_ int fd = open_by_handle_at(b->root_fd, &b->h[i].fh, O_PATH | O_CLOEXEC);
                if (fd >= 0)
                        b->rel[i] = inode_rel_beneath(b->subvol_fd, fd);
        }
}

static void batch_free(void *userdata) {
        struct namer_batch *b = userdata;
        for (size_t i = 0; i < b->n; i++)
                free(b->rel[i]);
        free(b);
}

static void learn(struct namer *n, const union file_handle_buf *h, char *rel) {
        struct namer_known *k = &n->known[n->next];
        n->next = (n->next + 1) % KNOWN_MAX;
        free(k->rel);
        *k = (struct namer_known){ .h = *h, .rel = rel, .until = tierd_now_usec(n->tn->t) + KNOWN_USEC,
                                   .renames = n->running_renames };
}

static void batch_done(void *userdata);

/* The files waiting, named on a thread: 0, or -errno (they still wait). */
static int start_batch(struct namer *n) {
        struct tenant *tn = n->tn;
        struct namer_batch *b;

        if (n->running || n->n_waiting == 0)
                return 0;
        if (!(b = calloc(1, sizeof(*b))))
                return -ENOMEM;
        b->namer = n;
        b->root_fd = tn->fs->root_fd;
        b->subvol_fd = tn->subvol_fd;
        b->n = n->n_waiting;
        memcpy(b->h, n->waiting, n->n_waiting * sizeof(b->h[0]));
        int keep[] = { b->root_fd, b->subvol_fd };
        int r = offthread_start(tn->t->event, keep, ARRAY_SIZE(keep), name_work, batch_done, b, &n->thread);
        if (r < 0) {
                free(b);
                return r;
        }
        n->running = b;
        n->running_renames = tn->fs->renames;
        n->n_waiting = 0;
        return 0;
}

/* On the loop: the names found are kept, the files that waited meanwhile
 * named next, and the callers waiting for this batch told. */
static void batch_done(void *userdata) {
        struct namer_batch *b = userdata;
        struct namer *n = b->namer;
        struct namer_after after[AFTER_MAX];
        size_t n_after = n->n_after, named = 0;

        n->running = NULL;
        n->thread = NULL;
        for (size_t i = 0; i < b->n; i++) {
                named += b->rel[i] != NULL;
                learn(n, &b->h[i], TAKE_PTR(b->rel[i]));
        }
        log_debug("tenant %s: %zu of %zu files whose dentries were dropped named on a thread", n->tn->cfg->name,
                  named, b->n);
        batch_free(b);
        memcpy(after, n->after, n_after * sizeof(after[0]));
        n->n_after = 0;
        int r = start_batch(n);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot name files on a thread: %m", n->tn->cfg->name);
        for (size_t i = 0; i < n_after; i++) /* last: each may ask again */
                after[i].done(after[i].userdata);
}

int namer_ask(struct tenant *tn, int fd) {
        union file_handle_buf h;
        struct namer *n = tn->namer;

        if (!namer_can_name(tn))
                return -EOPNOTSUPP;
        if (!handle_of(fd, &h))
                return -errno;
        if (!n) {
                if (!(n = tn->namer = calloc(1, sizeof(*n))))
                        return -ENOMEM;
                n->tn = tn;
        }
        for (size_t i = 0; i < n->n_waiting; i++)
                if (file_handle_equal(&n->waiting[i].fh, &h.fh))
                        return 0;
        /* The thread only reads the handles: the loop may look at them. */
        for (size_t i = 0; n->running && i < n->running->n; i++)
                if (file_handle_equal(&n->running->h[i].fh, &h.fh))
                        return 0;
        if (n->n_waiting == BATCH_MAX)
                return -EBUSY;
        n->waiting[n->n_waiting++] = h;
        int r = start_batch(n);
        if (r < 0)
                n->n_waiting--; /* the caller hears it instead */
        return r;
}

int namer_after_batch(struct tenant *tn, void (*done)(void *userdata), void *userdata) {
        struct namer *n = tn->namer;
        if (!n || !n->running)
                return -ENOENT;
        for (size_t i = 0; i < n->n_after; i++)
                if (n->after[i].done == done && n->after[i].userdata == userdata)
                        return -EALREADY;
        if (n->n_after == AFTER_MAX)
                return -EBUSY;
        n->after[n->n_after++] = (struct namer_after){ done, userdata };
        return 0;
}

void namer_free(struct tenant *tn) {
        struct namer *n = tn->namer;
        if (!n)
                return;
        if (n->thread)
                offthread_abandon(n->thread, batch_free);
        for (size_t i = 0; i < KNOWN_MAX; i++)
                free(n->known[i].rel);
        free(n);
        tn->namer = NULL;
}
