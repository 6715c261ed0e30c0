/* SPDX-License-Identifier: MIT */
#include "offthread.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "macro.h"

struct offthread {
        pthread_t thread;
        int event_fd; /* the thread's "done", read by the event loop */
        sd_event_source *src;
        void (*work)(void *userdata);
        void (*done)(void *userdata);
        void *userdata;
};

static void *run(void *arg) {
        struct offthread *o = arg;
        o->work(o->userdata);
        eventfd_write(o->event_fd, 1);
        return NULL;
}

static int on_ended(sd_event_source *s, int fd, uint32_t revents, void *arg) {
        struct offthread *o = arg;
        eventfd_t v;
        (void)s, (void)fd, (void)revents;

        (void)eventfd_read(o->event_fd, &v);
        pthread_join(o->thread, NULL);
        sd_event_source_disable_unref(o->src);
        close(o->event_fd);
        void (*done)(void *) = o->done;
        void *userdata = o->userdata;
        free(o);
        done(userdata); /* last: it may start another */
        return 0;
}

int offthread_start(sd_event *event, void (*work)(void *userdata), void (*done)(void *userdata), void *userdata,
                    struct offthread **ret) {
        struct offthread *o = calloc(1, sizeof(*o));
        int r;

        if (!o)
                return -ENOMEM;
        *o = (struct offthread){ .work = work, .done = done, .userdata = userdata };
        o->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (o->event_fd < 0) {
                r = -errno;
                free(o);
                return r;
        }
        r = sd_event_add_io(event, &o->src, o->event_fd, EPOLLIN, on_ended, o);
        if (r == 0)
                r = -pthread_create(&o->thread, NULL, run, o);
        if (r < 0) {
                sd_event_source_disable_unref(o->src);
                close(o->event_fd);
                free(o);
                return r;
        }
        if (ret)
                *ret = o;
        return 0;
}

void offthread_abandon(struct offthread *o, void (*release)(void *userdata)) {
        o->done = release;
}
