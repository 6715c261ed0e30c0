/* SPDX-License-Identifier: MIT */
/*
 * tierd-worker: fetches, verifies, fills, replies. It sees no file but the
 * fds tierd hands it over the control socket (fd 3), and gets its whole
 * configuration there too, never from argv or the environment.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
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
#define QUEUED_CLEANUP 0 /* internal: not a request from tierd, no reply */

/* A request from tierd, queued for a thread of its lane. */
struct queued {
        struct proto_request req;
        int fd;
        struct queued *next;
};

/* Two lanes: syncs (PROTO_SYNC) have a thread of their own, so a flush
 * that waits behind the device's writeback never holds up a fetch, nor a
 * fetch a flush. */
enum { LANE_STORE, LANE_SYNCS, LANE_AHEAD, LANES_MAX };

/* A thread waiting for a request. The idle threads of a lane are a stack: a
 * request goes to the one that went idle last, whose fill buffer, connections
 * and caches are warm (a shared condition variable wakes the one that has
 * waited longest: the coldest), and the ones at the bottom stay idle long
 * enough to give their buffers back. */
struct idle {
        struct idle *next;
        pthread_cond_t cond;
        bool listed;
};

/* Three classes. Background work (archives, listings and
 * deletions for gc and audit, the store's tidying) has no reader waiting
 * on it; everything else may: fills and the checks of what they restored,
 * and, on a tenant at its quota, the existence checks (PROTO_CHECK) and
 * catalog objects (PROTO_PUT, PROTO_GET) a release must finish before a
 * fill may go on. Prefetch (PROTO_FILL_PREFETCH: ranges a trace says a
 * container will read) comes between. Demand has the store's lane and its
 * threads to itself; prefetch and background work go first to last in a
 * lane of their own (LANE_AHEAD: all threads but one), whose threads run
 * at nice AHEAD_NICE: on a machine of few cores, a hydration's or an
 * archive's threads (fetch, hash, copy) otherwise take the CPU a reader's
 * fill waits for. A reader's fill never waits for a thread or the CPU
 * behind uploads or prefetches, however many are queued or however long
 * they take. A prefetch a reader comes to wait for moves to the store's
 * lane if it has not started (pool_promote); one that has goes on at its
 * nice, which the kernel still gives a tenth of a busy CPU. */
enum { CLASS_DEMAND, CLASS_PREFETCH, CLASS_BACKGROUND, CLASSES_MAX };

/* Weight 110 against a reader's fill's 1024 (nice 0). Raising a thread's
 * nice needs no privilege; the thread never lowers it again. */
#define AHEAD_NICE 10

/* sched_setattr(2)'s first fields (glibc 2.36 has no wrapper). */
struct sched_attr_v0 {
        uint32_t size, sched_policy;
        uint64_t sched_flags;
        int32_t sched_nice;
        uint32_t sched_priority;
        uint64_t sched_runtime, sched_deadline, sched_period;
};

struct lane {
        struct idle *idle; /* the last to go idle first */
        struct queued *head[CLASSES_MAX], *tail[CLASSES_MAX];
};

struct pool {
        int sock;
        struct backend *backend;
        struct manifest_cache *mcache;
        pthread_mutex_t lock;
        struct lane lanes[LANES_MAX];
        bool done;
};

struct pool_thread_arg {
        struct pool *w;
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

static int class_of(const struct queued *j) {
        switch (j->req.type) {
        case PROTO_ARCHIVE:
        case PROTO_LIST:
        case PROTO_DELETE:
        case QUEUED_CLEANUP:
                return CLASS_BACKGROUND;
        case PROTO_FILL:
                return j->req.flags & PROTO_FILL_PREFETCH ? CLASS_PREFETCH : CLASS_DEMAND;
        default:
                return CLASS_DEMAND;
        }
}

/* The class this lane may start now, first to last, or -1 (called with
 * the lock held). Demand and the rest are in lanes of their own: no class
 * needs a cap on the threads it takes. */
static int class_ready(const struct lane *l) {
        for (int c = CLASS_DEMAND; c < CLASSES_MAX; c++)
                if (l->head[c])
                        return c;
        return -1;
}

/* The lane's next request for this thread (me), waiting on top of the idle
 * stack for one; NULL once the worker is done. */
static struct queued *pool_pop(struct pool *w, struct lane *l, struct idle *me) {
        struct timespec until;
        bool released = false;
        struct queued *j = NULL;
        int c;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += FILLBUF_IDLE_SEC;
        pthread_mutex_lock(&w->lock);
        while ((c = class_ready(l)) < 0 && !w->done) {
                if (!me->listed) {
                        me->next = l->idle;
                        l->idle = me;
                        me->listed = true;
                }
                if (released) {
                        pthread_cond_wait(&me->cond, &w->lock);
                        continue;
                }
                if (pthread_cond_timedwait(&me->cond, &w->lock, &until) == ETIMEDOUT && class_ready(l) < 0 &&
                    !w->done) {
                        /* Idle a while: the fill buffer goes back (fillbuf.h). */
                        pthread_mutex_unlock(&w->lock);
                        fillbuf_release();
                        pthread_mutex_lock(&w->lock);
                        released = true;
                }
        }
        if (me->listed)
                idle_unlist(l, me); /* a request came, but not through a wake-up of ours */
        if (c >= 0) {
                j = l->head[c];
                l->head[c] = j->next;
                if (!l->head[c])
                        l->tail[c] = NULL;
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

/* Under w->lock. */
static void class_append(struct lane *l, int c, struct queued *j) {
        if (l->tail[c])
                l->tail[c]->next = j;
        else
                l->head[c] = j;
        l->tail[c] = j;
}

static void pool_push(struct pool *w, struct queued *j) {
        struct lane *l = &w->lanes[j->req.type == PROTO_SYNC ? LANE_SYNCS
                                   : class_of(j) == CLASS_DEMAND ? LANE_STORE
                                                                 : LANE_AHEAD];
        pthread_mutex_lock(&w->lock);
        class_append(l, class_of(j), j);
        if (class_ready(l) >= 0)
                wake_one(l);
        pthread_mutex_unlock(&w->lock);
}

/* Request id, queued at prefetch priority, now has a reader waiting for
 * it: it goes last among the readers' fills. Started or done already:
 * nothing to do. */
static void pool_promote(struct pool *w, uint64_t id) {
        struct lane *l = &w->lanes[LANE_AHEAD], *store = &w->lanes[LANE_STORE];
        struct queued *prev = NULL;

        pthread_mutex_lock(&w->lock);
        for (struct queued *j = l->head[CLASS_PREFETCH]; j; prev = j, j = j->next) {
                if (j->req.id != id)
                        continue;
                if (prev)
                        prev->next = j->next;
                else
                        l->head[CLASS_PREFETCH] = j->next;
                if (l->tail[CLASS_PREFETCH] == j)
                        l->tail[CLASS_PREFETCH] = prev;
                j->req.flags &= ~(uint32_t)PROTO_FILL_PREFETCH;
                j->next = NULL;
                class_append(store, CLASS_DEMAND, j);
                wake_one(store);
                break;
        }
        pthread_mutex_unlock(&w->lock);
}

/* Several threads, so a slow fetch of one file never holds up another. */
static void *pool_thread(void *arg) {
        struct pool_thread_arg *a = arg;
        struct pool *w = a->w;
        struct idle me = { .cond = PTHREAD_COND_INITIALIZER };
        struct queued *j;

        if (a->lane == &w->lanes[LANE_AHEAD]) {
                /* This thread only (pid 0): SCHED_OTHER at AHEAD_NICE. */
                struct sched_attr_v0 attr = { .size = sizeof(attr), .sched_policy = SCHED_OTHER, .sched_nice = AHEAD_NICE };
                if (syscall(SYS_sched_setattr, 0, &attr, 0) < 0)
                        log_warning_errno(errno, "cannot lower the priority of a prefetch thread: %m");
        }

        while ((j = pool_pop(w, a->lane, &me))) {
                struct proto_reply rep;
                progress_begin(w->sock, j->req.id);
                if (j->req.type == QUEUED_CLEANUP) {
                        w->backend->ops->cleanup(w->backend);
                } else {
                        worker_serve(w->backend, w->mcache, &j->req, j->fd, &rep);
                        close(j->fd);
                        int r = proto_send(w->sock, &rep, sizeof(rep), -1);
                        if (r < 0) {
                                log_error_errno(r, "cannot reply to tierd: %m");
                                _exit(EXIT_FAILURE);
                        }
                }
                free(j);
        }
        pthread_cond_destroy(&me.cond);
        return NULL;
}

/* tierd's configuration, the first message on the socket, with the
 * store's directory fd for a file:// store: 0, or -1 said. */
static int read_config(int sock, struct proto_config *cfg, int *store_fd) {
        int r = proto_recv(sock, cfg, sizeof(*cfg), NULL, store_fd, 0);
        if (r != 0) {
                log_error("no configuration from tierd on fd %d: %s", PROTO_CONTROL_FD, r > 0 ? "end of stream" : strerror(-r));
                return -1;
        }
        cfg->tenant[sizeof(cfg->tenant) - 1] = 0;
        cfg->backend[sizeof(cfg->backend) - 1] = 0;
        cfg->endpoint[sizeof(cfg->endpoint) - 1] = 0;
        cfg->region[sizeof(cfg->region) - 1] = 0;
        cfg->ca_file[sizeof(cfg->ca_file) - 1] = 0;
        cfg->sse[sizeof(cfg->sse) - 1] = 0;
        cfg->kms_key_id[sizeof(cfg->kms_key_id) - 1] = 0;
        cfg->headers[sizeof(cfg->headers) - 1] = 0;
        cfg->resolve[sizeof(cfg->resolve) - 1] = 0;
        cfg->proxy[sizeof(cfg->proxy) - 1] = 0;
        if (cfg->type != PROTO_CONFIG || cfg->threads == 0 || cfg->threads > MAX_THREADS) {
                log_error("malformed configuration from tierd");
                return -1;
        }
        return 0;
}

/* The backend and the sandbox, before any thread: 0, or -1 said. */
static int open_store(struct pool *w, struct proto_config *cfg, int store_fd) {
        /* Before any thread: libcurl's global state is not thread-safe to set up. */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
                log_error("cannot initialize libcurl");
                return -1;
        }
        int r = backend_open(cfg, store_fd, &w->backend);
        if (r < 0) {
                log_error_errno(r, "tenant %s: cannot open backend: %m", cfg->tenant);
                return -1;
        }
        log_set_ident(cfg->tenant[0] ? cfg->tenant : "tierd-worker");
        /* Before the first request and before any thread: see sandbox.c. */
        r = sandbox_apply(cfg, store_fd, w->sock);
        if (r < 0) {
                log_error_errno(r, "cannot lock the worker down, not serving: %m");
                return -1;
        }
        explicit_bzero(&cfg->headers, sizeof(cfg->headers));
        w->mcache = mcache_new(cfg->manifest_cache);
        return 0;
}

/* New credentials; the first ones also start the store's cleanup, on a
 * thread (it talks to the store), with no reply. */
static void take_credentials(struct pool *w, const struct proto_credentials *cred, bool *cleaned) {
        if (w->backend->ops->set_credentials)
                w->backend->ops->set_credentials(w->backend, cred);
        if (!*cleaned && w->backend->ops->cleanup) {
                struct queued *j = calloc(1, sizeof(*j));
                if (j) {
                        j->fd = -1;
                        j->req.type = QUEUED_CLEANUP;
                        pool_push(w, j);
                }
        }
        *cleaned = true;
}

/* New extra headers or pinned addresses (text, NUL-terminated here). */
static void take_text(struct pool *w, bool headers, struct proto_text *text) {
        int (*set)(struct backend *, const char *) = headers ? w->backend->ops->set_headers : w->backend->ops->set_resolve;
        text->text[sizeof(text->text) - 1] = 0;
        int r = set ? set(w->backend, text->text) : 0;
        if (r < 0)
                log_error_errno(r, "cannot take the new %s, the old ones stay: %m", headers ? "headers" : "addresses");
}

static bool request_well_formed(const struct proto_request *req, size_t len, int fd) {
        uint32_t t = req->type;
        if (len != sizeof(*req))
                return false;
        if (t != PROTO_FILL && t != PROTO_VERIFY && t != PROTO_ARCHIVE && t != PROTO_CHECK && t != PROTO_GET &&
            t != PROTO_PUT && t != PROTO_LIST && t != PROTO_DELETE && t != PROTO_SYNC)
                return false;
        return fd >= 0 || (t != PROTO_GET && t != PROTO_PUT && t != PROTO_LIST && t != PROTO_SYNC);
}

/* tierd's messages, until it closes the socket: 0, or -errno. */
static int serve(struct pool *w) {
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
                int r = proto_recv(w->sock, &m, sizeof(m), &len, &fd, 0);
                if (r != 0) {
                        if (r < 0)
                                log_error_errno(r, "bad message from tierd: %m");
                        return r < 0 ? r : 0; /* end of stream: tierd stopped us */
                }
                if ((m.type == PROTO_CREDENTIALS && len == sizeof(m.cred)) ||
                    ((m.type == PROTO_HEADERS || m.type == PROTO_RESOLVE) && len == sizeof(m.text))) {
                        safe_close(fd);
                        if (m.type == PROTO_CREDENTIALS)
                                take_credentials(w, &m.cred, &cleaned);
                        else
                                take_text(w, m.type == PROTO_HEADERS, &m.text);
                        explicit_bzero(&m, sizeof(m));
                        continue;
                }
                if (m.type == PROTO_PROMOTE && len == sizeof(m.req)) {
                        safe_close(fd);
                        pool_promote(w, m.req.id);
                        continue;
                }
                if (!request_well_formed(&m.req, len, fd)) {
                        safe_close(fd);
                        log_error("malformed request from tierd (type %u, %zu bytes)", m.type, len);
                        return -EBADMSG;
                }
                struct queued *j = calloc(1, sizeof(*j));
                if (!j)
                        _exit(EXIT_FAILURE);
                j->req = m.req;
                j->fd = fd;
                j->req.key[sizeof(j->req.key) - 1] = 0;
                pool_push(w, j);
        }
}

int main(int argc, char **argv) {
        struct pool w = { .sock = PROTO_CONTROL_FD, .lock = PTHREAD_MUTEX_INITIALIZER };
        struct proto_config cfg;
        pthread_t threads[2 * MAX_THREADS];
        struct pool_thread_arg args[LANES_MAX] = { { &w, &w.lanes[LANE_STORE] }, { &w, &w.lanes[LANE_SYNCS] },
                                                   { &w, &w.lanes[LANE_AHEAD] } };
        unsigned n_threads;
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
        if (read_config(w.sock, &cfg, &store_fd) < 0)
                return EXIT_FAILURE;
#ifdef TIERD_TEST_HOOKS
        /* Fault switch (test builds only): a worker that crashes in a loop. */
        if (strcmp(cfg.tenant, "crashloop") == 0)
                abort();
#endif
        if (open_store(&w, &cfg, store_fd) < 0)
                return EXIT_FAILURE;
        /* cfg.threads for readers' fills, one for syncs, and all of
         * cfg.threads but one (one if there is only one) for prefetch and
         * background work. */
        unsigned ahead = cfg.threads > 1 ? cfg.threads - 1 : 1;
        n_threads = cfg.threads + 1 + ahead;
        for (unsigned i = 0; i < n_threads; i++) {
                int lane = i < cfg.threads ? LANE_STORE : i == cfg.threads ? LANE_SYNCS : LANE_AHEAD;
                if ((r = pthread_create(&threads[i], NULL, pool_thread, &args[lane])) != 0) {
                        log_error_errno(r, "cannot start thread: %m");
                        return EXIT_FAILURE;
                }
        }
        r = serve(&w);
        pthread_mutex_lock(&w.lock);
        w.done = true;
        for (unsigned i = 0; i < LANES_MAX; i++)
                while (w.lanes[i].idle)
                        wake_one(&w.lanes[i]);
        pthread_mutex_unlock(&w.lock);
        for (unsigned i = 0; i < n_threads; i++)
                pthread_join(threads[i], NULL);
        w.backend->ops->close(w.backend);
        mcache_free(w.mcache);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
