/* SPDX-License-Identifier: MIT */
#include "inodework.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>

#include "log.h"
#include "loopnice.h"
#include "macro.h"

/* An idle thread ends after this long. */
#define IDLE_SEC 10
/* A stop waits this long for threads a held lock keeps, then leaves them. */
#define STOP_WAIT_SEC 5

/* The loop's end: jobs whose work is done, for their done() on the loop. */
struct inode_work {
        struct tierd *t;
        int event_fd;
        sd_event_source *src;
        pthread_mutex_t lock;
        struct inode_job *head, *tail;
        bool left; /* a lane's threads were left blocked at a stop: w stays */
};

/* A tenant's threads and the jobs queued for them. */
struct inode_lane {
        struct inode_work *w;
        pthread_mutex_t lock;
        pthread_cond_t work, gone;
        struct inode_job *head, *tail;
        unsigned queued, threads, idle, background;
        bool stopping;
};

static void append(struct inode_job **head, struct inode_job **tail, struct inode_job *j) {
        j->next = NULL;
        if (*tail)
                (*tail)->next = j;
        else
                *head = j;
        *tail = j;
}

/* Its work done: for done() on the loop. */
static void worked(struct inode_work *w, struct inode_job *j) {
        pthread_mutex_lock(&w->lock);
        append(&w->head, &w->tail, j);
        pthread_mutex_unlock(&w->lock);
        (void)eventfd_write(w->event_fd, 1);
}

/* Every job worked so far, done() in order (dropped at a handover: the
 * next tierd reads the files as they are). */
static void deliver(struct inode_work *w) {
        for (;;) {
                pthread_mutex_lock(&w->lock);
                struct inode_job *j = w->head;
                w->head = w->tail = NULL;
                pthread_mutex_unlock(&w->lock);
                if (!j)
                        return;
                for (struct inode_job *next; j; j = next) {
                        next = j->next;
                        if (!w->t->handing_over)
                                j->done(j);
                }
        }
}

static int on_worked(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        eventfd_t v;
        (void)s;
        (void)revents;
        (void)eventfd_read(fd, &v);
        deliver(userdata);
        return 0;
}

int inode_work_open(struct tierd *t) {
        struct inode_work *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        *w = (struct inode_work){ .t = t, .event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) };
        pthread_mutex_init(&w->lock, NULL);
        t->inodework = w;
        if (w->event_fd < 0)
                return log_error_errno(errno, "eventfd: %m");
        r = sd_event_add_io(t->event, &w->src, w->event_fd, EPOLLIN, on_worked, w);
        return r < 0 ? log_error_errno(r, "sd_event_add_io (inode work): %m") : 0;
}

void inode_work_close(struct tierd *t) {
        struct inode_work *w = t->inodework;
        if (!w)
                return;
        if (w->left) {
                /* Threads left blocked at a stop still hold it, and will
                 * write to its eventfd. */
                w->src = sd_event_source_disable_unref(w->src);
                t->inodework = NULL;
                return;
        }
        deliver(w); /* their done() may run jobs more, here (inode_work_over) */
        w->src = sd_event_source_disable_unref(w->src);
        t->inodework = NULL;
        safe_close(w->event_fd);
        pthread_mutex_destroy(&w->lock);
        free(w);
}

static struct inode_job *unqueue(struct inode_lane *l, struct inode_job *prev, struct inode_job *j) {
        if (prev)
                prev->next = j->next;
        else
                l->head = j->next;
        if (l->tail == j)
                l->tail = prev;
        j->next = NULL;
        l->queued--;
        return j;
}

/* A reader waits for j, or for a job of its file after it (lane locked). */
static bool wanted(const struct inode_job *j) {
        for (; j; j = j->then)
                if (j->reader)
                        return true;
        return false;
}

/* The next job a thread may run (lane locked): a reader's first, then one
 * no reader waits for while fewer than INODE_THREADS - 1 of those run. A
 * file has one job queued at most (the rest wait on it: then), so taking
 * a reader's first keeps each file's order. */
static struct inode_job *pick(struct inode_lane *l) {
        struct inode_job *prev = NULL, *j;
        for (j = l->head; j; prev = j, j = j->next)
                if (wanted(j))
                        return unqueue(l, prev, j);
        if (l->head && (l->background < INODE_THREADS - 1 || l->stopping))
                return unqueue(l, NULL, l->head);
        return NULL;
}

static void enqueue(struct inode_lane *l, struct inode_job *j) {
        append(&l->head, &l->tail, j);
        l->queued++;
}

/* Runs one job (lane locked on entry and exit): the file's next job, if
 * one waits for it, is queued then, and the job goes to the loop last
 * (its done() may free it). */
static void run_one(struct inode_lane *l, struct inode_job *j) {
        bool background = !wanted(j);
        if (background)
                l->background++;
        pthread_mutex_unlock(&l->lock);
        j->work(j);
        pthread_mutex_lock(&l->lock);
        if (background)
                l->background--;
        struct inode_job *then = j->then;
        j->then = NULL;
        j->worked = true;
        if (then)
                enqueue(l, then);
        worked(l->w, j);
        if (then || background)
                pthread_cond_signal(&l->work);
}

static void *lane_thread(void *arg) {
        struct inode_lane *l = arg;

        loop_nice_leave(); /* not at the loop's priority it was started from */
        pthread_mutex_lock(&l->lock);
        for (;;) {
                struct inode_job *j = pick(l);
                if (j) {
                        run_one(l, j);
                        continue;
                }
                if (l->stopping)
                        break;
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += IDLE_SEC;
                l->idle++;
                int r = pthread_cond_timedwait(&l->work, &l->lock, &until);
                l->idle--;
                if (r == ETIMEDOUT && !l->head)
                        break;
        }
        l->threads--;
        pthread_cond_broadcast(&l->gone);
        pthread_mutex_unlock(&l->lock);
        return NULL;
}

/* A thread more, if the lane may have one (lane locked): false if none
 * could start. */
static bool lane_grow(struct inode_lane *l) {
        pthread_attr_t attr;
        pthread_t id;
        int r;

        /* An idle thread may have been woken for another job already:
         * one more thread while more jobs wait than threads idle. */
        if (l->queued <= l->idle || l->threads >= INODE_THREADS)
                return true;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&id, &attr, lane_thread, l);
        pthread_attr_destroy(&attr);
        if (r != 0)
                return false;
        l->threads++;
        return true;
}

static struct inode_lane *lane_of(struct tenant *tn) {
        if (tn->inode_lane || tn->inode_work_over || !tn->t->inodework)
                return tn->inode_lane;
        struct inode_lane *l = calloc(1, sizeof(*l));
        if (!l)
                return NULL;
        l->w = tn->t->inodework;
        pthread_mutex_init(&l->lock, NULL);
        pthread_cond_init(&l->work, NULL);
        pthread_cond_init(&l->gone, NULL);
        return tn->inode_lane = l;
}

/* No thread to run it: on the loop, as before there were threads; its
 * done() comes from the loop's next turn, as a thread's would. */
static void run_here(struct tenant *tn, struct inode_job *j) {
        while (j) {
                struct inode_job *then = j->then;
                j->then = NULL;
                j->work(j);
                j->worked = true;
                if (tn->t->inodework)
                        worked(tn->t->inodework, j);
                j = then;
        }
}

void inode_work_submit(struct tenant *tn, struct inode_job *j, struct inode_job *after) {
        struct inode_lane *l = lane_of(tn);

        j->next = j->then = NULL;
        j->worked = false;
        if (!l) {
                run_here(tn, j);
                return;
        }
        pthread_mutex_lock(&l->lock);
        if (after && !after->worked) {
                after->then = j;
                pthread_mutex_unlock(&l->lock);
                return;
        }
        enqueue(l, j);
        bool grown = lane_grow(l);
        if (!grown && l->threads == 0) {
                l->head = l->tail = NULL; /* j was the only one: no thread ever ran here */
                l->queued = 0;
                pthread_mutex_unlock(&l->lock);
                log_warning("tenant %s: no thread for inode work: on the event loop", tn->cfg->name);
                run_here(tn, j);
                return;
        }
        pthread_cond_signal(&l->work);
        pthread_mutex_unlock(&l->lock);
}

void inode_work_promote(struct tenant *tn, struct inode_job *j) {
        struct inode_lane *l = tn->inode_lane;
        if (!l)
                return; /* not queued: it runs, or ran, on the loop */
        pthread_mutex_lock(&l->lock);
        if (!j->reader && !j->worked) {
                j->reader = true;
                (void)lane_grow(l);
                pthread_cond_signal(&l->work);
        }
        pthread_mutex_unlock(&l->lock);
}

/* Waits for the lane's threads to end, STOP_WAIT_SEC at most (lane
 * locked): false if some are still blocked (on a lock someone holds). */
static bool lane_drained(struct inode_lane *l) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += STOP_WAIT_SEC;
        while (l->threads > 0)
                if (pthread_cond_timedwait(&l->gone, &l->lock, &until) == ETIMEDOUT)
                        return l->threads == 0;
        return true;
}

void inode_work_stop(struct tenant *tn) {
        struct inode_lane *l = tn->inode_lane;

        tn->inode_work_over = true; /* from now on, jobs run on the loop */
        if (l) {
                pthread_mutex_lock(&l->lock);
                l->stopping = true;
                pthread_cond_broadcast(&l->work);
                bool drained = lane_drained(l);
                pthread_mutex_unlock(&l->lock);
                tn->inode_lane = NULL;
                if (!drained) {
                        /* Left to end on their own, with what they hold:
                         * their jobs' done() never runs. */
                        log_warning("tenant %s: inode work blocked on a lock someone holds: left behind at the stop",
                                    tn->cfg->name);
                        l->w->left = true;
                } else {
                        pthread_cond_destroy(&l->work);
                        pthread_cond_destroy(&l->gone);
                        pthread_mutex_destroy(&l->lock);
                        free(l);
                }
        }
        if (tn->t->inodework && !tn->t->inodework->left)
                deliver(tn->t->inodework);
}

bool inode_work_left(const struct tierd *t) { return t->inodework && t->inodework->left; }
