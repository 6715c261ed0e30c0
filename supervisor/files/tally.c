/* SPDX-License-Identifier: MIT */
#include "tally.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "offthread.h"
#include "tierd.h"
#include "treewalk.h"

/* A count of the whole tree is not started again before this, nor before
 * 20 times as long as the last one took: a caller polling status costs the
 * machine at most 1/20 of a core's walk, whatever the tree's size. */
#define TALLY_RECOUNT_MIN (60 * 1000000ull)
#define TALLY_RECOUNT_FACTOR 20
#define TALLY_DEPTH_MAX 256
#define TALLY_MAGIC "tierd-tally 1"

struct tally {
        struct tenant_usage counts;
        uint64_t counted_usec; /* when the last count ended (monotonic), 0: never */
        uint64_t took_usec;    /* how long it took */
        bool due;              /* to count when no other tenant's count runs */
        struct tally_count *running;
        struct offthread *thread; /* running's */
};

/* A count in progress: the thread's own, freed by whoever sees it last. */
struct tally_count {
        struct tenant *tn; /* NULL: the tenant went meanwhile */
        int root_fd;
        struct tenant_usage counts;
        uint64_t started_usec;
        unsigned long skipped;
        int error;
        char xattr[STUB_TEXT_MAX];
};

static struct tally *tally_of(struct tenant *tn) {
        if (!tn->tally)
                tn->tally = calloc(1, sizeof(*tn->tally));
        return tn->tally;
}

/* What one file adds to the counts: its state, the bytes here and not
 * (plain_size: its size on disk, what a file without a stub or a dirty one
 * holds here). */
static void add_file(struct tenant_usage *u, const struct stub *s, uint64_t plain_size, int sign) {
        static const int map[] = { [STUB_ARCHIVED] = USAGE_ARCHIVED, [STUB_PARTIAL] = USAGE_PARTIAL,
                                   [STUB_RELEASED] = USAGE_RELEASED, [STUB_DIRTY] = USAGE_DIRTY };
        uint64_t files = 1, res = plain_size, released = 0, archived = 0;
        int k = USAGE_RESIDENT;
        if (s) {
                k = map[s->state];
                res = s->state == STUB_DIRTY ? plain_size : stub_resident_bytes(s);
                released = s->state == STUB_DIRTY ? 0 : s->size - MIN(res, s->size);
                archived = s->state == STUB_DIRTY ? 0 : s->size;
        }
        /* Subtracting what was never counted (a file made since the last
         * count) stops at zero: the next count puts it right. */
#define ADD(field, v) ((field) = sign > 0 ? (field) + (v) : (field) - MIN((field), (v)))
        ADD(u->files[k], files);
        ADD(u->resident_bytes, res);
        ADD(u->released_bytes, released);
        ADD(u->archived_bytes, archived);
#undef ADD
}

void tally_prior_read(int fd, struct tally_prior *p) {
        const char *err = "";
        struct stat st;
        p->had = stub_read_fd(fd, &p->before, &err);
        p->sized = fstat(fd, &st) == 0;
        p->size = p->sized ? (uint64_t)st.st_size : 0;
}

void tally_prior_done(struct tally_prior *p) { stub_done(&p->before); }

void tally_count_written(struct tenant *tn, const struct tally_prior *p, const struct stub *s) {
        struct tally *ta = tally_of(tn);
        if (!ta || !p->sized)
                return;
        if (p->had == 0)
                add_file(&ta->counts, &p->before, p->size, -1);
        else if (p->had == -ENODATA)
                add_file(&ta->counts, NULL, p->size, -1);
        add_file(&ta->counts, s, p->size, +1);
}

int tally_stub_write(struct tenant *tn, int fd, const struct stub *s) {
        _cleanup_(tally_prior_done) struct tally_prior p = {};
        tally_prior_read(fd, &p);
        int r = stub_write_fd(fd, s);
        if (r == 0)
                tally_count_written(tn, &p, s);
        return r;
}

static int count_one(void *userdata, int dir_fd, const char *name, const struct stat *st) {
        struct tally_count *c = userdata;
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";

        if (!S_ISREG(st->st_mode))
                return 0;
        ssize_t n = treewalk_xattr(dir_fd, name, STUB_XATTR, c->xattr, sizeof(c->xattr));
        if (n == -ENODATA)
                add_file(&c->counts, NULL, (uint64_t)st->st_size, +1);
        else if (n >= 0 && stub_parse(c->xattr, (size_t)n, &s, &err) == 0)
                add_file(&c->counts, &s, (uint64_t)st->st_size, +1);
        /* A corrupt stub, or a file gone meanwhile: not counted. */
        return 0;
}

static void count_thread(void *userdata) {
        struct tally_count *c = userdata;
        /* treewalk closes the thread's copy; count_free the loop's. */
        c->error = treewalk(c->root_fd, TALLY_DEPTH_MAX, count_one, c, &c->skipped);
}

static void count_free(struct tally_count *c) {
        safe_close(c->root_fd);
        free(c);
}

static void count_release(void *userdata) { count_free(userdata); }

static void tally_save(struct tenant *tn, bool clean);
static void start_due(struct tierd *t);

static void count_done(void *userdata) {
        struct tally_count *c = userdata;
        struct tenant *tn = c->tn;
        struct tally *ta = tn->tally;

        ta->running = NULL;
        tn->t->tallies_counting--;
        ta->took_usec = tierd_now_usec(tn->t) - c->started_usec;
        ta->counted_usec = tierd_now_usec(tn->t);
        if (c->error < 0)
                log_warning("tenant %s: counting its files for status: %s (the counts stay as they were)",
                            tn->cfg->name, strerror(-c->error));
        else {
                /* Changes tierd made during the count may be in it or not:
                 * the next count settles them. */
                ta->counts = c->counts;
                if (c->skipped)
                        log_warning("tenant %s: %lu directories deeper than %d not counted for status", tn->cfg->name,
                                    c->skipped, TALLY_DEPTH_MAX);
                log_debug("tenant %s: files counted for status in %" PRIu64 " ms", tn->cfg->name,
                          ta->took_usec / 1000);
                tally_save(tn, false);
        }
        count_free(c);
        start_due(tn->t);
}

static int count_start(struct tenant *tn) {
        struct tally *ta = tn->tally;
        struct tally_count *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->tn = tn;
        c->started_usec = tierd_now_usec(tn->t);
        c->root_fd = fcntl(tn->subvol_fd, F_DUPFD_CLOEXEC, 3);
        if (c->root_fd < 0) {
                free(c);
                return -errno;
        }
        /* Through /proc/thread-self/fd: without it every stub would read
         * as none. */
        if (access("/proc/thread-self/fd", F_OK) < 0) {
                close(c->root_fd);
                free(c);
                return -ENOENT;
        }
        int r = offthread_start(tn->t->event, &c->root_fd, 1, count_thread, count_done, c, &ta->thread);
        if (r < 0) {
                close(c->root_fd);
                free(c);
                return r;
        }
        ta->running = c;
        ta->due = false;
        tn->t->tallies_counting++;
        return 0;
}

/* One count at a time on the whole machine: a tenant polled in a loop
 * delays only its own counts (and others' by at most one count). */
static void start_due(struct tierd *t) {
        for (size_t i = 0; i < t->n_tenants && t->tallies_counting == 0 && !t->stopping; i++) {
                struct tenant *tn = &t->tenants[i];
                if (tn->tally && tn->tally->due && count_start(tn) < 0)
                        tn->tally->due = false;
        }
}

const struct tenant_usage *tally_read(struct tenant *tn) {
        static const struct tenant_usage none;
        struct tally *ta = tally_of(tn);
        if (!ta)
                return &none;
        uint64_t now = tierd_now_usec(tn->t),
                 every = MAX(TALLY_RECOUNT_MIN, ta->took_usec * TALLY_RECOUNT_FACTOR);
        if (!ta->running && !ta->due && (ta->counted_usec == 0 || now - ta->counted_usec >= every)) {
                ta->due = true;
                start_due(tn->t);
        }
        return &ta->counts;
}

static char *tally_path(const struct tenant *tn) {
        char *p = NULL;
        return asprintf(&p, "%s/%s.tally", tn->t->state_dir, tn->cfg->name) < 0 ? NULL : p;
}

/* One line of numbers, written whole (a new file renamed over the old);
 * "clean" when saved at a stop, so the next start may trust it. */
static void tally_save(struct tenant *tn, bool clean) {
        _cleanup_free_ char *path = tally_path(tn), *tmp = NULL;
        const struct tenant_usage *u = &tn->tally->counts;
        char line[512];
        int n, fd;

        if (!path || asprintf(&tmp, "%s.XXXXXX", path) < 0)
                return;
        if (mkdir(tn->t->state_dir, 0700) < 0 && errno != EEXIST)
                return;
        n = snprintf(line, sizeof(line),
                     TALLY_MAGIC " %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                                 " %" PRIu64 " %" PRIu64 "\n",
                     clean ? "clean" : "counted", u->files[0], u->files[1], u->files[2], u->files[3], u->files[4],
                     u->resident_bytes, u->released_bytes, u->archived_bytes);
        if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0)
                return (void)log_warning("tenant %s: cannot save its counts: %m", tn->cfg->name);
        /* No fsync: on the event loop, and the counts are corrected by the
         * next count anyway; the rename keeps the file whole. */
        if (write(fd, line, (size_t)n) != n || close(fd) < 0 || rename(tmp, path) < 0) {
                log_warning("tenant %s: cannot save its counts: %m", tn->cfg->name);
                unlink(tmp);
        }
}

void tally_start(struct tenant *tn) {
        _cleanup_free_ char *path = tally_path(tn);
        struct tally *ta = tally_of(tn);
        struct tenant_usage u = {};
        char kind[16] = "";
        FILE *f;

        if (!ta || !path || !(f = fopen(path, "re")))
                return;
        int n = fscanf(f, TALLY_MAGIC " %15s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                          " %" SCNu64 " %" SCNu64,
                       kind, &u.files[0], &u.files[1], &u.files[2], &u.files[3], &u.files[4], &u.resident_bytes,
                       &u.released_bytes, &u.archived_bytes);
        fclose(f);
        if (n != 9)
                return;
        ta->counts = u;
        /* Trusted as a count only after a clean stop, and only once: a
         * crash from now on must not find it clean. */
        if (strcmp(kind, "clean") == 0) {
                ta->counted_usec = tierd_now_usec(tn->t) ?: 1;
                tally_save(tn, false);
        }
}

void tally_stop(struct tenant *tn) {
        struct tally *ta = tn->tally;
        if (!ta)
                return;
        if (ta->running) {
                /* The thread ends on its own and frees its count. */
                ta->running->tn = NULL;
                offthread_abandon(ta->thread, count_release);
                tn->t->tallies_counting--;
        }
        /* Clean only if nothing was left uncounted. */
        tally_save(tn, !ta->running && ta->counted_usec != 0);
        free(ta);
        tn->tally = NULL;
}
