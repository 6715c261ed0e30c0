/* SPDX-License-Identifier: MIT */
#include "offthread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "loopnice.h"
#include "macro.h"

#define OFFTHREAD_KEEP_MAX 4

struct offthread {
        pthread_t thread;
        int event_fd; /* the thread's "done", read by the event loop */
        sd_event_source *src;
        void (*work)(void *userdata);
        void (*done)(void *userdata);
        void *userdata;
        int keep[OFFTHREAD_KEEP_MAX + 1]; /* the fds the work reads through, and event_fd */
        size_t n_keep;
        sem_t table_ready; /* posted once the thread has its own fd table (or failed to) */
        int table_error;
};

static int compare_ints(const void *a, const void *b) {
        int x = *(const int *)a, y = *(const int *)b;
        return (x > y) - (x < y);
}

/* The thread's own fd table, holding stdio and the fds it was given only.
 * Why: the kernel gives each pre-content event the lowest free fd number,
 * and the event loop names those numbers in the in-flight record before it
 * reads. An fd this thread opened in the shared table would take one of
 * them, and a tierd killed then would leave its successor a record that
 * names the wrong events. With a table of its own, nothing the thread
 * opens ever changes the numbers the loop gives out. */
static int own_fd_table(int *keep, size_t n) {
        if (unshare(CLONE_FILES) < 0)
                return -errno;
        /* The copy holds every fd of the loop's: drop all but ours, so that
         * a close on the loop (an answered event's file, a worker's socket)
         * is not held open by this thread until it ends. */
        qsort(keep, n, sizeof(*keep), compare_ints);
        unsigned from = 3;
        for (size_t i = 0; i < n; i++) {
                if (keep[i] < (int)from)
                        continue;
                if ((unsigned)keep[i] > from && close_range(from, (unsigned)keep[i] - 1, 0) < 0)
                        return -errno;
                from = (unsigned)keep[i] + 1;
        }
        return close_range(from, ~0U, 0) < 0 ? -errno : 0;
}

/* Threads not joined yet (offthread_running): a thread whose work is over
 * still runs its key destructors (OpenSSL's among them) until it ends.
 * Only the loop's thread changes it. */
static unsigned running;

static void *run(void *arg) {
        struct offthread *o = arg;
        int r = own_fd_table(o->keep, o->n_keep);

        o->table_error = r;
        /* Background work at the priority of anything else, not at the
         * event loop's, whose threads inherit it. */
        loop_nice_leave();
        sem_post(&o->table_ready); /* o is freed by the loop if r < 0 */
        if (r < 0)
                return NULL;
        o->work(o->userdata);
        /* Closed now, not when the thread's table goes after its end:
         * pthread_join can return before that, and the loop may want
         * what the work read through (a lease on its file) at once. */
        close_range(3, (unsigned)o->event_fd - 1, 0);
        close_range((unsigned)o->event_fd + 1, ~0U, 0);
        eventfd_write(o->event_fd, 1);
        return NULL;
}

unsigned offthread_running(void) { return running; }

static int on_ended(sd_event_source *s, int fd, uint32_t revents, void *arg) {
        struct offthread *o = arg;
        eventfd_t v;
        (void)s, (void)fd, (void)revents;

        (void)eventfd_read(o->event_fd, &v);
        pthread_join(o->thread, NULL);
        running--;
        sd_event_source_disable_unref(o->src);
        close(o->event_fd);
        sem_destroy(&o->table_ready);
        void (*done)(void *) = o->done;
        void *userdata = o->userdata;
        free(o);
        done(userdata); /* last: it may start another */
        return 0;
}

static void offthread_free(struct offthread *o) {
        sd_event_source_disable_unref(o->src);
        safe_close(o->event_fd);
        sem_destroy(&o->table_ready);
        free(o);
}

int offthread_start(sd_event *event, const int *keep, size_t n_keep, void (*work)(void *userdata),
                    void (*done)(void *userdata), void *userdata, struct offthread **ret) {
        struct offthread *o;
        int r;

        if (n_keep > OFFTHREAD_KEEP_MAX)
                return -E2BIG;
        if (!(o = calloc(1, sizeof(*o))))
                return -ENOMEM;
        *o = (struct offthread){ .work = work, .done = done, .userdata = userdata, .n_keep = n_keep + 1 };
        if (sem_init(&o->table_ready, 0, 0) < 0) {
                free(o);
                return -errno;
        }
        o->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (o->event_fd < 0) {
                r = -errno;
                offthread_free(o);
                return r;
        }
        for (size_t i = 0; i < n_keep; i++)
                o->keep[i] = keep[i];
        o->keep[n_keep] = o->event_fd;
        r = sd_event_add_io(event, &o->src, o->event_fd, EPOLLIN, on_ended, o);
        if (r == 0)
                r = -pthread_create(&o->thread, NULL, run, o);
        if (r < 0) {
                offthread_free(o);
                return r;
        }
        /* A short wait, for one copy of the fd table: until the thread has
         * its own, the caller may not close or reuse what it gave. */
        while (sem_wait(&o->table_ready) < 0 && errno == EINTR)
                ;
        if ((r = o->table_error) < 0) {
                pthread_join(o->thread, NULL);
                offthread_free(o);
                return r;
        }
        running++; /* until on_ended joins it */
        if (ret)
                *ret = o;
        return 0;
}

#ifdef TIERD_TEST_HOOKS
static void *run_now(void *arg) {
        struct offthread *o = arg;
        if ((o->table_error = own_fd_table(o->keep, o->n_keep)) == 0)
                o->work(o->userdata);
        return NULL;
}

void offthread_test_pause(const char *env, const char *what) {
        const char *ms = getenv(env);
        if (ms) {
                log_info("test build: %s pauses %s ms", what, ms);
                usleep((useconds_t)atoi(ms) * 1000);
        }
}

int offthread_test_run(void (*work)(void *userdata), void *userdata) {
        struct offthread o = { .work = work, .userdata = userdata };
        pthread_t thread;
        int r = -pthread_create(&thread, NULL, run_now, &o);

        if (r == 0) {
                pthread_join(thread, NULL);
                r = o.table_error;
        }
        return r;
}
#endif

void offthread_abandon(struct offthread *o, void (*release)(void *userdata)) {
        o->done = release;
}
