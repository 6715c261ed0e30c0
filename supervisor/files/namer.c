/* SPDX-License-Identifier: MIT */
#include "namer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handle.h"
#include "inopath.h"
#include "log.h"
#include "macro.h"
#include "offthread.h"

#define BATCH_MAX 32                           /* files named by one thread */
#define KNOWN_MAX 64                           /* names kept for the loop */
#define KNOWN_USEC (30 * 1000 * 1000ull)       /* how long: a name may change */

struct namer_item {
        union file_handle_buf h;
        char *rel; /* found on the thread, or NULL */
        void (*done)(void *userdata);
        void *userdata;
};

struct namer_batch {
        struct namer *namer;
        int root_fd, subvol_fd; /* the same numbers in the thread's own fd table */
        size_t n;
        struct namer_item items[BATCH_MAX];
};

struct namer_known {
        union file_handle_buf h;
        char *rel; /* NULL: the thread found none (not the tenant's, another filesystem, many links) */
        uint64_t until; /* CLOCK_MONOTONIC usec */
};

struct namer {
        struct tenant *tn;
        struct namer_batch *running; /* on its thread, or NULL */
        struct offthread *thread;
        size_t n_waiting;
        struct namer_item waiting[BATCH_MAX];
        size_t next; /* known[] is a ring: the oldest name goes first */
        struct namer_known known[KNOWN_MAX];
};

/* The path of fd's /proc link beneath subvol_rel (malloc'd): 0; -ENOENT:
 * not beneath it, deleted; -EAGAIN: the link reads "/" (a file reached by
 * handle whose dentry was dropped: it has a name, not one the dcache has). */
static int name_of_link(const char *subvol_rel, int fd, char **ret) {
        char link[40], where[PATH_MAX];
        static const char deleted[] = " (deleted)";

        /* thread-self: also right on a thread with an fd table of its own (offthread.h). */
        snprintf(link, sizeof(link), "/proc/thread-self/fd/%d", fd);
        ssize_t n = readlink(link, where, sizeof(where) - 1);
        if (n == 1 && where[0] == '/')
                return -EAGAIN;
        if (n <= 1)
                return -ENOENT;
        where[n] = 0;
        /* Unlinked: no name (a name could only match by chance). */
        if ((size_t)n >= sizeof(deleted) - 1 && strcmp(where + n - (sizeof(deleted) - 1), deleted) == 0)
                return -ENOENT;
        const char *rel = where + 1;
        if (strcmp(subvol_rel, ".") != 0) {
                size_t k = strlen(subvol_rel);
                if (strncmp(where + 1, subvol_rel, k) != 0 || (where[1 + k] != '/' && where[1 + k] != 0))
                        return -ENOENT;
                rel = where[1 + k] ? where + 2 + k : ""; /* "": the subvolume itself */
        }
        *ret = strdup(rel);
        return *ret ? 0 : -ENOMEM;
}

char *subvol_rel_of_fd(const char *subvol_rel, int subvol_fd, int fd) {
        char *rel = NULL;
        int r = name_of_link(subvol_rel, fd, &rel);
        if (r == -EAGAIN && subvol_fd >= 0)
                return inode_rel_beneath(subvol_fd, fd);
        return r < 0 ? NULL : rel;
}

static bool handle_of(int fd, union file_handle_buf *h) {
        int mount_id;
        *h = (union file_handle_buf){ .fh.handle_bytes = MAX_HANDLE_SZ };
        return name_to_handle_at(fd, "", &h->fh, &mount_id, AT_EMPTY_PATH) == 0;
}

static bool same_handle(const union file_handle_buf *a, const union file_handle_buf *b) {
        return a->fh.handle_type == b->fh.handle_type && a->fh.handle_bytes == b->fh.handle_bytes &&
               memcmp(a->fh.f_handle, b->fh.f_handle, a->fh.handle_bytes) == 0;
}

int usage_name_of_fd(const struct tenant *tn, int fd, char **ret) {
        union file_handle_buf h;
        int r = name_of_link(tn->subvol_rel, fd, ret);
        if (r != -EAGAIN || !tn->namer || !handle_of(fd, &h))
                return r;
        uint64_t now = tierd_now_usec(tn->t);
        for (size_t i = 0; i < KNOWN_MAX; i++) {
                const struct namer_known *k = &tn->namer->known[i];
                if (k->until > now && same_handle(&k->h, &h)) {
                        if (!k->rel)
                                return -ENOENT;
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

/* On the batch's thread: each file opened by its handle and named. */
static void name_work(void *userdata) {
        struct namer_batch *b = userdata;
        for (size_t i = 0; i < b->n; i++) {
                _cleanup_close_ int fd = open_by_handle_at(b->root_fd, &b->items[i].h.fh, O_PATH | O_CLOEXEC);
                if (fd >= 0)
                        b->items[i].rel = inode_rel_beneath(b->subvol_fd, fd);
        }
}

static void batch_free(void *userdata) {
        struct namer_batch *b = userdata;
        for (size_t i = 0; i < b->n; i++)
                free(b->items[i].rel);
        free(b);
}

static void learn(struct namer *n, struct namer_item *it) {
        struct namer_known *k = &n->known[n->next];
        n->next = (n->next + 1) % KNOWN_MAX;
        free(k->rel);
        *k = (struct namer_known){ .h = it->h, .rel = it->rel, .until = tierd_now_usec(n->tn->t) + KNOWN_USEC };
        it->rel = NULL; /* known[]'s now */
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
        *b = (struct namer_batch){ .namer = n, .root_fd = tn->fs->root_fd, .subvol_fd = tn->subvol_fd,
                                   .n = n->n_waiting };
        memcpy(b->items, n->waiting, n->n_waiting * sizeof(b->items[0]));
        int keep[] = { b->root_fd, b->subvol_fd };
        int r = offthread_start(tn->t->event, keep, ARRAY_SIZE(keep), name_work, batch_done, b, &n->thread);
        if (r < 0) {
                free(b);
                return r;
        }
        n->running = b;
        n->n_waiting = 0;
        return 0;
}

/* On the loop: the names found are kept, the askers told, and the files
 * that waited meanwhile named next. */
static void batch_done(void *userdata) {
        struct namer_batch *b = userdata;
        struct namer *n = b->namer;

        n->running = NULL;
        n->thread = NULL;
        size_t named = 0;
        for (size_t i = 0; i < b->n; i++) {
                named += b->items[i].rel != NULL;
                learn(n, &b->items[i]);
        }
        log_debug("tenant %s: %zu of %zu files whose dentries were dropped named on a thread", n->tn->cfg->name,
                  named, b->n);
        int r = start_batch(n);
        if (r < 0) { /* told as tried: they would wait for a next ask that may never come */
                log_error_errno(r, "tenant %s: cannot name files on a thread: %m", n->tn->cfg->name);
                for (size_t i = 0; i < n->n_waiting; i++)
                        if (n->waiting[i].done)
                                n->waiting[i].done(n->waiting[i].userdata);
                n->n_waiting = 0;
        }
        for (size_t i = 0; i < b->n; i++)
                if (b->items[i].done)
                        b->items[i].done(b->items[i].userdata);
        batch_free(b);
}

static struct namer_item *find_item(struct namer_item *items, size_t n, const union file_handle_buf *h) {
        for (size_t i = 0; i < n; i++)
                if (same_handle(&items[i].h, h))
                        return &items[i];
        return NULL;
}

int namer_ask(struct tenant *tn, int fd, void (*done)(void *userdata), void *userdata) {
        union file_handle_buf h;
        struct namer *n = tn->namer;

        if (!handle_of(fd, &h))
                return -errno;
        if (!n) {
                if (!(n = tn->namer = calloc(1, sizeof(*n))))
                        return -ENOMEM;
                n->tn = tn;
        }
        struct namer_item *it = find_item(n->waiting, n->n_waiting, &h);
        if (!it && n->running) /* done and userdata are the loop's alone: the thread reads h, writes rel */
                it = find_item(n->running->items, n->running->n, &h);
        if (it) { /* asked already: one asker is called back a file, a second asks again later */
                if (done && it->done)
                        return -EBUSY;
                if (done)
                        it->done = done, it->userdata = userdata;
                return 0;
        }
        if (n->n_waiting == BATCH_MAX)
                return -EBUSY;
        n->waiting[n->n_waiting++] = (struct namer_item){ .h = h, .done = done, .userdata = userdata };
        int r = start_batch(n);
        if (r < 0)
                n->n_waiting--; /* the caller hears it instead */
        return r;
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
