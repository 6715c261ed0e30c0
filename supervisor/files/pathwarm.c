/* SPDX-License-Identifier: MIT */
/*
 * A file a job names by its path beneath the tenant's subvolume is opened
 * on the event loop with RESOLVE_CACHED (fileref.c): every directory on
 * the way must be in the kernel's lookup cache. A level that is not costs
 * a lookup in the filesystem (a read from the disk, maybe), and the
 * tenant chose how many levels there are; so the loop never makes one.
 * When the kernel says a level is missing (EAGAIN), the job waits here
 * while a thread walks its path, which brings the directories in, and
 * starts after. One thread a tenant at a time, for all its jobs waiting:
 * a tenant's cold tree delays its own jobs, no one else's. Callers bound
 * the jobs they have in flight (a batch's 16 files, archive_after's), and
 * so what waits here.
 */
#include "fileops-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "offthread.h"

enum warm_kind {
        WARM_JOB,   /* a job: fn once the path is in (file_job_when_cached) */
        WARM_ONLY,  /* nothing but the walk (file_ref_warm) */
        WARM_CHECK, /* the walk's result for a caller (pathwarm_check) */
};

struct check_run {
        size_t pending;
        void (*done)(void *userdata);
        void *userdata;
};

struct warm_job {
        struct warm_job *next;
        enum warm_kind kind;
        struct tierd *t;
        const struct file_ref *f; /* the caller's, valid until done() (WARM_ONLY: the job's own copy) */
        file_job_t fn;
        job_done_t done;
        void *userdata;
        struct check_run *run; /* WARM_CHECK: where the result goes */
        struct path_check *out;
        char *rel;                /* the thread's copy */
        char *name;               /* WARM_CHECK with a status: the thread's copy, for its messages */
        struct path_check result; /* found by the thread */
};

#define WARM_ONLY_MAX 64 /* paths brought in for a caller who asks again (file_ref_warm) */
#define WARM_RUN_MAX 4096 /* paths a thread walks, for the loop to take back in one turn */

struct pathwarm {
        struct tenant *tn;
        atomic_bool stop; /* tierd stops: the paths left are not walked (-ECANCELED) */
        size_t n_only; /* of the jobs waiting or running, file_ref_warm's */
        struct warm_job *waiting, **tail;
        struct warm_job *running; /* on the thread */
        int subvol_fd;            /* the same number in the thread's own fd table */
        struct offthread *thread;
};

static void warm_only_free(const struct file_ref *f) {
        file_ref_done((struct file_ref *)f);
        free((struct file_ref *)f);
}

/* Jobs that end here: a file_ref_warm's copy is freed with it (it may
 * go when the tenant is gone: touches nothing else); the other callers
 * were told, or go with the tenant. */
static void warm_jobs_free(struct warm_job *j) {
        while (j) {
                struct warm_job *next = j->next;
                if (j->kind == WARM_ONLY)
                        warm_only_free(j->f);
                free(j->result.status_msg);
                free(j->name);
                free(j->rel);
                free(j);
                j = next;
        }
}

#ifdef TIERD_TEST_HOOKS
/* Test builds: every job's path is walked here, and the job starts long
 * after (as behind a cold tree on a slow disk): for a cancel to come
 * meanwhile, and the loop's own walk to come when a symlink's atime is
 * due again. Whether a path is cached at a job's start is a race a test
 * cannot set up otherwise. */
static unsigned test_job_walk_ms(void) {
        const char *ms = getenv("TIERD_TEST_PATHWARM_PAUSE_MS");
        return ms ? (unsigned)atoi(ms) : 0;
}
#endif

/* On the thread: a status asked for is read here, where its stub's
 * read may wait for the disk. */
static void warm_status(struct warm_job *j, int fd) {
        char msg[512];
        struct path_check *k = &j->result;

        k->status_error = file_status_fd(fd, j->name, &k->status, msg, sizeof(msg));
        if (k->status_error < 0 && !(k->status_msg = strdup(msg)))
                k->status_error = -ENOMEM;
}

/* On the thread: each path walked as file_ref_open walks it, uncached
 * (which brings its directories into the lookup cache), and what the
 * open said kept. */
static void warm_work(void *userdata) {
        struct pathwarm *w = userdata;
        for (struct warm_job *j = w->running; j; j = j->next) {
                struct stat st;
                if (atomic_load_explicit(&w->stop, memory_order_relaxed)) {
                        j->result.error = -ECANCELED;
                        continue;
                }
                int fd = file_open_beneath(w->subvol_fd, j->rel, O_PATH, false);
                if (fd < 0 || fstat(fd, &st) < 0)
                        j->result.error = -errno;
                else
                        j->result = (struct path_check){ .dev = st.st_dev, .ino = st.st_ino, .regular = S_ISREG(st.st_mode) };
                if (fd >= 0 && j->name && j->result.regular)
                        warm_status(j, fd);
                if (fd >= 0)
                        close(fd);
#ifdef TIERD_TEST_HOOKS
                if (j->kind == WARM_JOB && test_job_walk_ms())
                        usleep(test_job_walk_ms() * 1000);
#endif
        }
}

static void warm_start(struct pathwarm *w);

/* On the loop, in the order they came: a job whose path the thread could
 * not open fails with what the open said (a bind mount or a '..' crossed
 * is -EXDEV there, where the cached walk can only say -EAGAIN); the
 * others start. A path that left the cache again meanwhile fails its job
 * with -EAGAIN (file_ref_open). */
static void warm_done(void *userdata) {
        struct pathwarm *w = userdata;
        struct warm_job *jobs = TAKE_PTR(w->running);
        char msg[512];

        w->thread = NULL;
        warm_start(w);
        for (struct warm_job *j = jobs; j; j = j->next) {
                int r = j->result.error;
                w->n_only -= j->kind == WARM_ONLY;
                if (j->kind == WARM_CHECK) {
                        j->result.want_status = j->out->want_status;
                        *j->out = j->result;
                        j->result.status_msg = NULL; /* the caller's now */
                        if (--j->run->pending == 0) {
                                j->run->done(j->run->userdata);
                                free(j->run);
                        }
                } else if (j->kind == WARM_JOB && r < 0) {
                        r = file_ref_open_error(j->f, r, msg, sizeof(msg));
                        j->done(j->userdata, r, msg);
                } else if (j->kind == WARM_JOB && (r = j->fn(j->t, j->f, j->done, j->userdata)) < 0)
                        j->done(j->userdata, r, NULL);
        }
        warm_jobs_free(jobs);
}

static void warm_start(struct pathwarm *w) {
        struct warm_job **cut = &w->waiting;

        if (w->running || !w->waiting)
                return;
        for (size_t n = 0; *cut && n < WARM_RUN_MAX; n++)
                cut = &(*cut)->next;
        w->running = TAKE_PTR(w->waiting);
        if (!(w->waiting = TAKE_PTR(*cut)))
                w->tail = &w->waiting;
        w->subvol_fd = w->tn->subvol_fd;
        int r = offthread_start(w->tn->t->event, &w->subvol_fd, 1, warm_work, warm_done, w, &w->thread);
        if (r < 0) {
                /* Nothing was walked: each says so, those waiting behind
                 * too (in the order they came, at once). */
                log_error_errno(r, "tenant %s: cannot read paths on a thread: %m", w->tn->cfg->name);
                struct warm_job **end = &w->running;
                while (*end)
                        end = &(*end)->next;
                *end = TAKE_PTR(w->waiting);
                w->tail = &w->waiting;
                for (struct warm_job *j = w->running; j; j = j->next)
                        j->result.error = -EAGAIN;
                warm_done(w);
        }
}

static struct pathwarm *pathwarm_of(struct tenant *tn) {
        struct pathwarm *w = tn->pathwarm;
        if (!w && (w = tn->pathwarm = calloc(1, sizeof(*w))))
                *w = (struct pathwarm){ .tn = tn, .tail = &w->waiting, .stop = tn->t->stopping };
        return w;
}

static int warm_queue(struct tierd *t, const struct file_ref *f, struct warm_job job) {
        struct pathwarm *w = pathwarm_of(f->tn);
        struct warm_job *j = calloc(1, sizeof(*j));
        char *rel = strdup(f->rel);
        char *name = job.out && job.out->want_status ? strdup(f->name) : NULL;

        if (!w || !j || !rel || (job.out && job.out->want_status && !name)) {
                free(j);
                free(rel);
                free(name);
                return -ENOMEM;
        }
        *j = job;
        j->t = t;
        j->f = f;
        j->rel = rel;
        j->name = name;
        *w->tail = j;
        w->tail = &j->next;
        w->n_only += j->kind == WARM_ONLY;
        warm_start(w);
        return 0;
}

int file_job_when_cached(struct tierd *t, const struct file_ref *f, file_job_t fn, job_done_t done, void *userdata) {
        bool walk = file_ref_cached(f) == -EAGAIN;
#ifdef TIERD_TEST_HOOKS
        walk = walk || test_job_walk_ms() > 0;
#endif
        if (!walk)
                return fn(t, f, done, userdata); /* cached, or an error the job reports */
        return warm_queue(t, f, (struct warm_job){ .kind = WARM_JOB, .fn = fn, .done = done, .userdata = userdata });
}

void file_ref_warm(struct tierd *t, const struct file_ref *f) {
        struct file_ref *copy;

        if (!f->tn || file_ref_cached(f) != -EAGAIN || (f->tn->pathwarm && f->tn->pathwarm->n_only >= WARM_ONLY_MAX) ||
            !(copy = calloc(1, sizeof(*copy))))
                return;
        *copy = (struct file_ref){ .tn = f->tn, .rel = strdup(f->rel), .name = strdup(f->name) };
        if (!copy->rel || !copy->name || warm_queue(t, copy, (struct warm_job){ .kind = WARM_ONLY }) < 0)
                warm_only_free(copy);
}

int pathwarm_check(struct tierd *t, const struct file_ref *refs, struct path_check *checks, size_t n,
                   void (*done)(void *userdata), void *userdata) {
        struct check_run *run = calloc(1, sizeof(*run));

        if (!run)
                return -ENOMEM;
        /* One more than the jobs until all are queued: a walk that ends
         * within the loop below (no thread could start) cannot end the run. */
        *run = (struct check_run){ .pending = n + 1, .done = done, .userdata = userdata };
        for (size_t i = 0; i < n; i++)
                if (!refs[i].tn || /* not named: nothing to walk */
                    warm_queue(t, &refs[i], (struct warm_job){ .kind = WARM_CHECK, .run = run, .out = &checks[i] }) < 0) {
                        /* Those queued are walked; the rest say so. */
                        checks[i] = (struct path_check){ .error = refs[i].tn ? -ENOMEM : -EXDEV };
                        run->pending--;
                }
        if (--run->pending == 0) {
                done(userdata);
                free(run);
        }
        return 0;
}

static void warm_release(void *userdata) {
        struct pathwarm *w = userdata;
        warm_jobs_free(w->running);
        free(w);
}

void pathwarm_stop(struct tenant *tn) {
        if (tn->pathwarm)
                atomic_store(&tn->pathwarm->stop, true);
}

void pathwarm_free(struct tenant *tn) {
        struct pathwarm *w = TAKE_PTR(tn->pathwarm);

        if (!w)
                return;
        /* Their callers go with the tenant: the jobs are dropped unstarted. */
        warm_jobs_free(TAKE_PTR(w->waiting));
        if (w->thread)
                offthread_abandon(w->thread, warm_release);
        else
                warm_release(w);
}
