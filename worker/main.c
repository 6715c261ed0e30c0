/* SPDX-License-Identifier: MIT */
/*
 * tierd-worker: fetches, verifies, fills, replies. It sees no file but the
 * fds tierd hands it over the control socket (fd 3), and gets its whole
 * configuration there too, never from argv or the environment.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "backend.h"
#include "fill.h"
#include "fillbuf.h"
#include "log.h"
#include "macro.h"
#include "proto.h"
#include "progress.h"
#include "sandbox.h"

#define MAX_THREADS 16
#define JOB_CLEANUP 0 /* internal: not a request from tierd, no reply */

struct job {
        struct proto_request req;
        int fd;
        struct job *next;
};

/* Two lanes: syncs (PROTO_SYNC) have a thread of their own, so a flush
 * that waits behind the device's writeback never holds up a fetch, nor a
 * fetch a flush. */
enum { LANE_JOBS, LANE_SYNCS, LANES_MAX };

/* A thread waiting for a job. The idle threads of a lane are a stack: a
 * job goes to the one that went idle last, whose fill buffer, connections
 * and caches are warm (a shared condition variable wakes the one that has
 * waited longest: the coldest), and the ones at the bottom stay idle long
 * enough to give their buffers back. */
struct idle {
        struct idle *next;
        pthread_cond_t cond;
        bool listed;
};

struct lane {
        struct idle *idle; /* the last to go idle first */
        struct job *head, *tail;
};

struct worker {
        int sock;
        struct backend *backend;
        struct manifest_cache *mcache;
        pthread_mutex_t lock;
        struct lane lanes[LANES_MAX];
        bool done;
};

struct worker_thread_arg {
        struct worker *w;
        struct lane *lane;
};

static void idle_unlist(struct lane *l, struct idle *me) {
        for (struct idle **p = &l->idle; *p; p = &(*p)->next)
                if (*p == me) {
                        *p = me->next;
                        break;
                }
        me->listed = false;
}

/* The lane's next job for this thread (me), waiting on top of the idle
 * stack for one; NULL once the worker is done. */
static struct job *worker_pop(struct worker *w, struct lane *l, struct idle *me) {
        struct timespec until;
        bool released = false;
        struct job *j;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += FILLBUF_IDLE_SEC;
        pthread_mutex_lock(&w->lock);
        while (!l->head && !w->done) {
                if (!me->listed) {
                        me->next = l->idle;
                        l->idle = me;
                        me->listed = true;
                }
                if (released) {
                        pthread_cond_wait(&me->cond, &w->lock);
                        continue;
                }
                if (pthread_cond_timedwait(&me->cond, &w->lock, &until) == ETIMEDOUT && !l->head && !w->done) {
                        /* Idle a while: the fill buffer goes back (fillbuf.h). */
                        pthread_mutex_unlock(&w->lock);
                        fillbuf_release();
                        pthread_mutex_lock(&w->lock);
                        released = true;
                }
        }
        if (me->listed)
                idle_unlist(l, me); /* a job came, but not through a wake-up of ours */
        j = l->head;
        if (j) {
                l->head = j->next;
                if (!l->head)
                        l->tail = NULL;
        }
        pthread_mutex_unlock(&w->lock);
        return j;
}

/* Wakes the lane's last idle thread (called with the lock held). */
static void wake_one(struct lane *l) {
        struct idle *t = l->idle;
        if (!t)
                return;
        l->idle = t->next;
        t->listed = false;
        pthread_cond_signal(&t->cond);
}

static void worker_push(struct worker *w, struct job *j) {
        struct lane *l = &w->lanes[j->req.type == PROTO_SYNC ? LANE_SYNCS : LANE_JOBS];
        pthread_mutex_lock(&w->lock);
        if (l->tail)
                l->tail->next = j;
        else
                l->head = j;
        l->tail = j;
        wake_one(l);
        pthread_mutex_unlock(&w->lock);
}

/* Several threads, so a slow fetch of one file never holds up another. */
static void *worker_thread(void *arg) {
        struct worker_thread_arg *a = arg;
        struct worker *w = a->w;
        struct idle me = { .cond = PTHREAD_COND_INITIALIZER };
        struct job *j;

        while ((j = worker_pop(w, a->lane, &me))) {
                struct proto_reply rep;
                progress_begin(w->sock, j->req.id);
                if (j->req.type == JOB_CLEANUP) {
                        w->backend->ops->cleanup(w->backend);
                        free(j);
                        continue;
                }
                worker_serve(w->backend, w->mcache, &j->req, j->fd, &rep);
                close(j->fd);
                int r = proto_send(w->sock, &rep, sizeof(rep), -1);
                if (r < 0) {
                        log_error_errno(r, "cannot reply to tierd: %m");
                        _exit(EXIT_FAILURE);
                }
                free(j);
        }
        pthread_cond_destroy(&me.cond);
        return NULL;
}

int main(int argc, char **argv) {
        struct worker w = { .sock = PROTO_CONTROL_FD, .lock = PTHREAD_MUTEX_INITIALIZER,
                            .lanes = { [LANE_JOBS] = { 0 }, [LANE_SYNCS] = { 0 } } };
        struct proto_config cfg;
        pthread_t threads[MAX_THREADS + 1];
        struct worker_thread_arg args[LANES_MAX] = { { &w, &w.lanes[LANE_JOBS] }, { &w, &w.lanes[LANE_SYNCS] } };
        int store_fd, r;

        (void)argv;
        log_set_ident("tierd-worker");
        if (argc != 1) {
                log_error("tierd-worker takes no arguments: tierd starts it with its control socket on fd %d", PROTO_CONTROL_FD);
                return EXIT_FAILURE;
        }
        /* Fill buffers (an 8 MiB verify window, 1 MiB reads) are mapped and
         * unmapped each time: kept in the threads' malloc arenas they held
         * ~10 MiB per idle worker, which 100 tenants (or containers) pay. */
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        signal(SIGPIPE, SIG_IGN);
        r = proto_recv(w.sock, &cfg, sizeof(cfg), NULL, &store_fd, 0);
        if (r != 0) {
                log_error("no configuration from tierd on fd %d: %s", PROTO_CONTROL_FD, r > 0 ? "end of stream" : strerror(-r));
                return EXIT_FAILURE;
        }
        cfg.tenant[sizeof(cfg.tenant) - 1] = 0;
        cfg.backend[sizeof(cfg.backend) - 1] = 0;
        cfg.endpoint[sizeof(cfg.endpoint) - 1] = 0;
        cfg.region[sizeof(cfg.region) - 1] = 0;
        cfg.ca_file[sizeof(cfg.ca_file) - 1] = 0;
        cfg.sse[sizeof(cfg.sse) - 1] = 0;
        cfg.kms_key_id[sizeof(cfg.kms_key_id) - 1] = 0;
        cfg.headers[sizeof(cfg.headers) - 1] = 0;
        cfg.resolve[sizeof(cfg.resolve) - 1] = 0;
        if (cfg.type != PROTO_CONFIG || cfg.threads == 0 || cfg.threads > MAX_THREADS) {
                log_error("malformed configuration from tierd");
                return EXIT_FAILURE;
        }
#ifdef TIERD_TEST_HOOKS
        /* Fault switch (test builds only): a worker that crashes in a loop. */
        if (strcmp(cfg.tenant, "crashloop") == 0)
                abort();
#endif
        /* Before any thread: libcurl's global state is not thread-safe to set up. */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
                log_error("cannot initialize libcurl");
                return EXIT_FAILURE;
        }
        r = backend_open(&cfg, store_fd, &w.backend);
        if (r < 0) {
                log_error_errno(r, "tenant %s: cannot open backend: %m", cfg.tenant);
                return EXIT_FAILURE;
        }
        log_set_ident(cfg.tenant[0] ? cfg.tenant : "tierd-worker");
        /* Before the first request and before any thread: see sandbox.c. */
        r = sandbox_apply(&cfg, store_fd, w.sock);
        if (r < 0) {
                log_error_errno(r, "cannot lock the worker down, not serving: %m");
                return EXIT_FAILURE;
        }
        explicit_bzero(&cfg.headers, sizeof(cfg.headers));
        w.mcache = mcache_new(cfg.manifest_cache);
        /* cfg.threads for the store, one more for syncs. */
        for (unsigned i = 0; i <= cfg.threads; i++)
                if ((r = pthread_create(&threads[i], NULL, worker_thread, &args[i < cfg.threads ? LANE_JOBS : LANE_SYNCS])) != 0) {
                        log_error_errno(r, "cannot start thread: %m");
                        return EXIT_FAILURE;
                }
        bool cleaned = false;
        for (;;) {
                union {
                        uint32_t type;
                        struct proto_request req;
                        struct proto_credentials cred;
                        struct proto_text text;
                } m;
                size_t len;
                int fd;
                r = proto_recv(w.sock, &m, sizeof(m), &len, &fd, 0);
                if (r != 0) {
                        if (r < 0)
                                log_error_errno(r, "bad message from tierd: %m");
                        break; /* end of stream: tierd stopped us */
                }
                if (m.type == PROTO_CREDENTIALS && len == sizeof(m.cred)) {
                        safe_close(fd);
                        if (w.backend->ops->set_credentials)
                                w.backend->ops->set_credentials(w.backend, &m.cred);
                        explicit_bzero(&m, sizeof(m));
                        if (!cleaned && w.backend->ops->cleanup) {
                                /* On a thread: it talks to the store. No reply. */
                                struct job *j = calloc(1, sizeof(*j));
                                if (j) {
                                        j->fd = -1;
                                        j->req.type = JOB_CLEANUP;
                                        worker_push(&w, j);
                                }
                        }
                        cleaned = true;
                        continue;
                }
                if ((m.type == PROTO_HEADERS || m.type == PROTO_RESOLVE) && len == sizeof(m.text)) {
                        bool headers = m.type == PROTO_HEADERS;
                        int (*set)(struct backend *, const char *) =
                                headers ? w.backend->ops->set_headers : w.backend->ops->set_resolve;
                        safe_close(fd);
                        m.text.text[sizeof(m.text.text) - 1] = 0;
                        r = set ? set(w.backend, m.text.text) : 0;
                        explicit_bzero(&m, sizeof(m));
                        if (r < 0)
                                log_error_errno(r, "cannot take the new %s, the old ones stay: %m",
                                                headers ? "headers" : "addresses");
                        continue;
                }
                if (len != sizeof(m.req) ||
                    (m.type != PROTO_FILL && m.type != PROTO_VERIFY && m.type != PROTO_ARCHIVE && m.type != PROTO_CHECK &&
                     m.type != PROTO_GET && m.type != PROTO_PUT && m.type != PROTO_LIST && m.type != PROTO_DELETE &&
                     m.type != PROTO_SYNC) ||
                    ((m.type == PROTO_GET || m.type == PROTO_PUT || m.type == PROTO_LIST || m.type == PROTO_SYNC) && fd < 0)) {
                        safe_close(fd);
                        log_error("malformed request from tierd (type %u, %zu bytes)", m.type, len);
                        r = -EBADMSG;
                        break;
                }
                struct job *j = calloc(1, sizeof(*j));
                if (!j)
                        return EXIT_FAILURE;
                j->req = m.req;
                j->fd = fd;
                j->req.key[sizeof(j->req.key) - 1] = 0;
                worker_push(&w, j);
        }
        pthread_mutex_lock(&w.lock);
        w.done = true;
        for (unsigned i = 0; i < LANES_MAX; i++)
                while (w.lanes[i].idle)
                        wake_one(&w.lanes[i]);
        pthread_mutex_unlock(&w.lock);
        for (unsigned i = 0; i <= cfg.threads; i++)
                pthread_join(threads[i], NULL);
        w.backend->ops->close(w.backend);
        mcache_free(w.mcache);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
