/* SPDX-License-Identifier: MIT */
/*
 * Workers: one tierd-worker per tenant. tierd keeps every in-flight request
 * (and its fd), so when a worker dies the replacement gets the same work and
 * the blocked readers never notice.
 */
#include "workers.h"

#include <errno.h>
#include <seccomp.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "face.h"
#include "log.h"
#include "macro.h"
#include "awscreds.h"
#include "resolver.h"
#include "workerspawn.h"

#define WORKER_THREADS 4
#define RESTART_DELAY_USEC (50 * 1000ull)
#define RESTART_WINDOW_USEC (10 * 1000 * 1000ull)
#define RESTART_MAX 5 /* deaths in a row with no request completed */
#define CRASH_MAX 3

static const char *const state_names[] = {
        [WORKER_STOPPED] = "stopped", [WORKER_RUNNING] = "running",
        [WORKER_RESTARTING] = "restarting", [WORKER_FAILED] = "failed",
};

const char *worker_state_to_string(enum worker_state s) { return state_names[s]; }

/* The face's object that shows this worker: its container's, or its tenant's. */
static void worker_announce_changed(struct worker *w) {
        if (w->container)
                FACE_TELL(w->tenant->t, container_worker_changed, w->container);
        else
                FACE_TELL(w->tenant->t, tenant_worker_changed, w->tenant);
}

struct request *request_new(int type, int fd, void (*done)(struct request *, const struct proto_reply *),
                            void *userdata) {
        struct request *req = calloc(1, sizeof(*req));
        if (!req)
                return NULL;
        req->msg.type = (uint32_t)type;
        req->fd = fd;
        req->done = done;
        req->userdata = userdata;
        return req;
}

struct request *request_new_borrowing(int type, int fd, void (*done)(struct request *, const struct proto_reply *),
                                      void *userdata) {
        struct request *req = request_new(type, fd, done, userdata);
        if (req)
                req->fd_borrowed = true;
        return req;
}

/* A stop waits for every request, tierd's own store reads and writes too:
 * any answered may be the last. */
static void request_finish(struct worker *w, struct request *req, const struct proto_reply *rep) {
        /* Close our copy first: what done() starts (a release's write lease)
         * fails while tierd holds any other fd of the file. */
        req->fd = req->fd_borrowed ? -1 : safe_close(req->fd);
        req->done(req, rep);
        free(req);
        tierd_check_idle(w->tenant->t);
}

static void request_fail(struct worker *w, struct request *req, int error) {
        request_finish(w, req, &(struct proto_reply){ .id = req->msg.id, .error = error });
}

/* tierd's end of the control socket does not block: a worker that stops
 * reading (stopped, hung, compromised) fills it, and tierd keeps what it
 * could not send until the socket takes more (EPOLLOUT), instead of
 * waiting in sendmsg() with every tenant's events behind it. The stall
 * check then kills a worker that took requests and does nothing. */
static void worker_wait_writable(struct worker *w) {
        if (!w->out_blocked)
                w->blocked_usec = tierd_now_usec(w->tenant->t);
        w->out_blocked = true;
        if (w->io_src)
                sd_event_source_set_io_events(w->io_src, EPOLLIN | EPOLLOUT);
}

/* -EAGAIN: not sent, and req stays unsent until the socket is writable,
 * or until the store's host and keys have a first answer (resolver.c,
 * awscreds.c: a fetch without would fail a reader who need only wait). */
static int worker_send(struct worker *w, struct request *req) {
        if (w->out_blocked || !resolver_answered(w->tenant) || !awscreds_answered(w->tenant))
                return -EAGAIN;
        req->progress_usec = tierd_now_usec(w->tenant->t);
        req->started = false;
        int r = proto_send(w->sock, &req->msg, sizeof(req->msg), req->fd);
        req->sent = r != -EAGAIN;
        if (r == -EAGAIN)
                worker_wait_writable(w);
        return r;
}

static int send_text(struct worker *w, uint32_t type, const char *text) {
        struct proto_text m = { .type = type };
        snprintf(m.text, sizeof(m.text), "%s", text);
        int r = proto_send(w->sock, &m, sizeof(m), -1);
        explicit_bzero(&m, sizeof(m));
        return r;
}

/* What changed (or changed while the socket was full), in order: a later
 * request finds it in place. */
static void worker_flush_updates(struct worker *w) {
        /* Addresses first: keys start the worker's tidying of the store
         * (S3 uploads a crash left), which needs them. */
        static const struct { unsigned bit; const char *what; } order[] = {
                { UPDATE_RESOLVE, "addresses" }, { UPDATE_CREDENTIALS, "credentials" }, { UPDATE_HEADERS, "headers" }
        };
        struct tenant *tn = w->tenant;
        for (size_t i = 0; i < ARRAY_SIZE(order) && !w->out_blocked; i++) {
                int r = 0;
                if (!(w->updates_due & order[i].bit))
                        continue;
                if (order[i].bit == UPDATE_CREDENTIALS && tn->have_cred)
                        r = proto_send(w->sock, &tn->cred, sizeof(tn->cred), -1);
                else if (order[i].bit == UPDATE_HEADERS)
                        r = send_text(w, PROTO_HEADERS, tn->headers);
                else if (order[i].bit == UPDATE_RESOLVE)
                        r = send_text(w, PROTO_RESOLVE, resolver_answer(tn));
                if (r == -EAGAIN)
                        return worker_wait_writable(w);
                if (r < 0) {
                        /* A replacement gets it all with its config. */
                        log_error_errno(r, "tenant %s: cannot hand %s to the worker, restarting it: %m", tn->cfg->name,
                                        order[i].what);
                        worker_restart_planned(w);
                        return;
                }
                w->updates_due &= ~order[i].bit;
        }
}

/* Sends what the worker has not been given. After a death with several
 * requests in progress, any of them may be the killer: those suspects then
 * run one at a time, alone, so the next death is blamed on the right one. */
static void worker_send_pending(struct worker *w) {
        struct request *suspect = NULL;
        int r;

        if (w->state != WORKER_RUNNING)
                return;
        for (struct request *q = w->requests; q; q = q->next)
                if (q->suspect) {
                        if (q->sent)
                                return; /* one at a time */
                        suspect = q;
                }
        w->serial = suspect != NULL;
        if (suspect) {
                log_debug("tenant %s: request %llu, a suspect, runs alone", w->tenant->cfg->name,
                          (unsigned long long)suspect->msg.id);
                r = worker_send(w, suspect);
                if (r < 0 && r != -EAGAIN && w->pid > 0)
                        kill(w->pid, SIGKILL);
                return;
        }
        for (struct request *q = w->requests; q; q = q->next)
                if (!q->sent && (r = worker_send(w, q)) < 0) {
                        if (r != -EAGAIN && w->pid > 0)
                                kill(w->pid, SIGKILL); /* restarted, and everything re-sent */
                        return;
                }
}

static void worker_fail_all(struct worker *w, int error) {
        for (struct request *req; (req = w->requests);) {
                w->requests = req->next;
                request_fail(w, req, error);
        }
}

/* A worker that completes work is not crash-looping, however often it was
 * killed before. */
static void worker_served(struct worker *w) {
        if (w->died_usec) {
                log_info("tenant %s: replacement worker %d serving %.1f ms after its predecessor died",
                         w->tenant->cfg->name, (int)w->pid, (double)(tierd_now_usec(w->tenant->t) - w->died_usec) / 1000.0);
                w->died_usec = 0;
        }
        w->restarts = 0;
}

/* Replies read per turn of the loop: the socket stays ready for the rest,
 * and the other workers' replies (other tenants') get their turn first. */
#define REPLY_SLICE 32

static int on_worker_reply(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct worker *w = userdata;

        if ((revents & EPOLLOUT) && w->out_blocked) {
                w->out_blocked = false;
                sd_event_source_set_io_events(s, EPOLLIN);
                worker_flush_updates(w);
                worker_send_pending(w);
        }

        for (unsigned n = 0; n < REPLY_SLICE; n++) {
                struct proto_reply rep;
                struct request **p, *req;
                int r = proto_recv(fd, &rep, sizeof(rep), NULL, NULL, MSG_DONTWAIT);
                if (r == -EAGAIN)
                        return 0;
                if (r != 0) {
                        /* End of stream or garbage: the exit handler restarts it. */
                        if (r < 0)
                                log_error_errno(r, "tenant %s: bad reply from worker: %m", w->tenant->cfg->name);
                        if (w->pid > 0)
                                kill(w->pid, SIGKILL);
                        sd_event_source_set_enabled(w->io_src, SD_EVENT_OFF);
                        return 0;
                }
                if (rep.id == PROTO_ID_PROGRESS) {
                        for (struct request *q = w->requests; q; q = q->next)
                                if (q->msg.id == rep.bytes) {
                                        q->progress_usec = tierd_now_usec(w->tenant->t);
                                        q->started = true;
                                }
                        continue;
                }
                if (rep.id == PROTO_ID_SECCOMP) {
                        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)rep.bytes);
                        log_error("tenant %s: worker %d stopped by its seccomp filter at system call %llu (%s)",
                                  w->tenant->cfg->name, (int)w->pid, (unsigned long long)rep.bytes, name ?: "?");
                        free(name);
                        continue; /* it exits: the exit handler restarts it */
                }
                for (p = &w->requests; *p && (*p)->msg.id != rep.id; p = &(*p)->next)
                        ;
                if (!*p) {
                        log_error("tenant %s: worker replied to unknown request %llu", w->tenant->cfg->name,
                                  (unsigned long long)rep.id);
                        continue;
                }
                req = *p;
                *p = req->next;
                if (rep.error > 0 || rep.error < -4095)
                        rep.error = -EIO;
                if (rep.error == 0)
                        worker_served(w);
                else if (rep.error == -EIO)
                        resolver_failed(w->tenant); /* the store moved? ask again soon */
                request_finish(w, req, &rep);
                if (w->serial)
                        worker_send_pending(w); /* the next suspect */
        }
        return 0;
}

static int worker_restart_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct worker *w = userdata;
        (void)s;
        (void)usec;
        w->restart_src = sd_event_source_unref(w->restart_src);
        if (worker_start(w) < 0) {
                w->state = WORKER_FAILED;
                worker_fail_all(w, -EIO);
                worker_announce_changed(w);
        }
        return 0;
}

#define STALL_MAX 3 /* workers a request may hang; it fails once the last is dead (its writes heard first) */

/* A death with one request in progress is blamed on it, and a request
 * blamed CRASH_MAX times fails rather than crash workers forever. With
 * several in progress, they become suspects, run alone from now on. */
static void worker_blame(struct worker *w) {
        unsigned in_progress = 0;

        for (struct request *q = w->requests; q; q = q->next)
                in_progress += q->started;
        for (struct request **pq = &w->requests; *pq;) {
                struct request *q = *pq;
                bool started = q->started;
                if (q->stalls >= STALL_MAX) { /* on_stall_check */
                        *pq = q->next;
                        request_fail(w, q, -EIO);
                        continue;
                }
                /* The replacement gets everything again, from the start. */
                q->sent = q->started = false;
                if (started && in_progress > 1) {
                        log_debug("tenant %s: request %llu was in progress with others at a worker death: a suspect",
                                  w->tenant->cfg->name, (unsigned long long)q->msg.id);
                        q->suspect = true;
                } else if (started && ++q->crashes >= CRASH_MAX) {
                        log_error("tenant %s: request %llu was alone in progress at %d worker deaths: failing it",
                                  w->tenant->cfg->name, (unsigned long long)q->msg.id, CRASH_MAX);
                        *pq = q->next;
                        request_fail(w, q, -EIO);
                        continue;
                }
                pq = &q->next;
        }
}

static void worker_handle_exit(struct worker *w, const siginfo_t *si) {
        uint64_t now = tierd_now_usec(w->tenant->t);

        log_warning("tenant %s: worker %d %s %d", w->tenant->cfg->name, (int)si->si_pid,
                    si->si_code == CLD_EXITED ? "exited with status" : "killed by signal", si->si_status);
        w->child_src = sd_event_source_unref(w->child_src);
        w->pid = 0;
        /* What it said before dying counts: replies, and which requests it
         * had started (a request it died on). */
        if (w->io_src && w->sock >= 0)
                on_worker_reply(w->io_src, w->sock, EPOLLIN, w);
        w->io_src = sd_event_source_disable_unref(w->io_src);
        w->sock = safe_close(w->sock);
        w->died_usec = now;
        if (w->planned_restart) {
                /* Our doing (new settings): no blame, no backoff. */
                w->planned_restart = false;
                for (struct request *q = w->requests; q; q = q->next)
                        q->sent = q->started = false;
                w->state = WORKER_RESTARTING;
                if (sd_event_add_time_relative(w->tenant->t->event, &w->restart_src, CLOCK_MONOTONIC, 0, 0,
                                               worker_restart_timer, w) < 0) {
                        w->state = WORKER_FAILED;
                        worker_fail_all(w, -EIO);
                }
                return;
        }
        worker_blame(w);
        w->restarts_total++;
        if (w->tenant->t->stopping && !w->requests) {
                w->state = WORKER_STOPPED;
                return;
        }
        if (now - w->started_usec > RESTART_WINDOW_USEC)
                w->restarts = 0;
        if (++w->restarts > RESTART_MAX) {
                log_error("tenant %s: worker crashed %d times in a row, marked failed: readers get EIO",
                          w->tenant->cfg->name, RESTART_MAX);
                tenant_set_last_error(w->tenant, "worker crashed %d times in a row: failed", RESTART_MAX);
                w->state = WORKER_FAILED;
                worker_fail_all(w, -EIO);
                return;
        }
        w->state = WORKER_RESTARTING;
        /* First restart at once, then back off. */
        uint64_t delay = w->restarts <= 1 ? 0 : RESTART_DELAY_USEC << (w->restarts - 2);
        if (sd_event_add_time_relative(w->tenant->t->event, &w->restart_src, CLOCK_MONOTONIC, delay, 0,
                                       worker_restart_timer, w) < 0) {
                w->state = WORKER_FAILED;
                worker_fail_all(w, -EIO);
        }
        return;
}

static int on_worker_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        struct worker *w = userdata;
        (void)s;
        worker_handle_exit(w, si);
        if (w->container)
                FACE_TELL(w->tenant->t, container_worker_changed, w->container);
        else
                FACE_TELL(w->tenant->t, tenant_worker_exited, w->tenant, si->si_pid, si->si_code != CLD_EXITED,
                          si->si_status);
        return 0;
}

void worker_send_update(struct worker *w, unsigned what) {
        if (w->state != WORKER_RUNNING)
                return; /* a worker that starts later gets them at start */
        w->updates_due |= what;
        worker_flush_updates(w);
        if (what & (UPDATE_RESOLVE | UPDATE_CREDENTIALS))
                worker_send_pending(w); /* held for the first answer */
}
/* A worker that moves no byte of a request it took up for the connect and
 * stall timeouts (plus a grace: curl's own checks go first) is hung: kill
 * it; its requests go to the replacement like after any crash. A request
 * that hangs STALL_MAX workers in a row fails with EIO instead. */
#define STALL_CHECK_USEC (1000 * 1000ull)
#define STALL_GRACE_USEC (5 * 1000 * 1000ull)

static int on_stall_check(sd_event_source *s, uint64_t usec, void *userdata) {
        struct worker *w = userdata;
        const struct policy_tenant *p = w->tenant->cfg;
        uint64_t limit = p->connect_timeout_usec + p->stall_timeout_usec + STALL_GRACE_USEC;

        sd_event_source_set_time(s, usec + STALL_CHECK_USEC);
        if (w->state != WORKER_RUNNING || w->pid <= 0)
                return 0;
        /* One that reads nothing we send (stopped, compromised) is hung too:
         * its requests go to the replacement. */
        if (w->out_blocked && usec > w->blocked_usec + limit) {
                log_error("tenant %s: worker %d took nothing from its socket for %llu s: killing it", p->name,
                          (int)w->pid, (unsigned long long)(limit / 1000000));
                kill(w->pid, SIGKILL);
                return 0;
        }
        for (struct request *q = w->requests; q; q = q->next) {
                if (!q->started || usec <= q->progress_usec + limit)
                        continue;
                log_error("tenant %s: worker %d made no progress on request %llu for %llu s: killing it", p->name,
                          (int)w->pid, (unsigned long long)q->msg.id, (unsigned long long)(limit / 1000000));
                if (++q->stalls >= STALL_MAX)
                        log_error("tenant %s: request %llu hung %d workers: failing it", p->name,
                                  (unsigned long long)q->msg.id, STALL_MAX);
                kill(w->pid, SIGKILL);
                break;
        }
        return 0;
}

int worker_start(struct worker *w) {
        struct tenant *tn = w->tenant;
        struct proto_config cfg = { .type = PROTO_CONFIG, .threads = WORKER_THREADS };
        int sv[2], r;
        pid_t pid, self = getpid();
#ifdef TIERD_WORKER_UNDER_VALGRIND
        const char *vg_log = getenv("TIERD_VALGRIND_LOG"); /* read before fork: getenv is not async-signal-safe */
#else
        const char *vg_log = NULL;
#endif

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return log_error_errno(errno, "socketpair: %m");
        /* The worker may be compromised: it passes tierd no fd (a FIFO, a
         * file on a hung mount, whose close would wait). Before Linux 6.16
         * proto_recv closes what comes instead. */
        r = proto_refuse_fds(sv[0]);
        if (r < 0 && r != -ENOPROTOOPT)
                log_warning_errno(r, "tenant %s: cannot refuse fds from the worker (SO_PASSRIGHTS): %m", tn->cfg->name);
        pid = fork();
        if (pid < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                return log_error_errno(r, "fork: %m");
        }
        if (pid == 0)
                worker_exec(tn->t->worker_path, sv[1], self, vg_log);
        close(sv[1]);
        w->sock = sv[0];
        w->pid = pid;
        /* After the fork: the worker's end stays blocking. The config and
         * keys below go into an empty socket, far under its buffer. */
        if (fcntl(w->sock, F_SETFL, O_NONBLOCK) < 0)
                log_warning_errno(errno, "tenant %s: cannot make the worker's socket non-blocking: %m", tn->cfg->name);
        w->out_blocked = false;
        w->updates_due = 0; /* the config has headers and addresses, the keys follow */
        w->started_usec = tierd_now_usec(w->tenant->t);
        worker_config(tn, &cfg);
        r = proto_send(w->sock, &cfg, sizeof(cfg), tn->store_fd);
        explicit_bzero(&cfg, sizeof(cfg));
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot configure worker: %m", tn->cfg->name);
        /* Keys once the store has an address (with the first answer, else). */
        if (r >= 0 && tn->have_cred && !resolver_answered(tn))
                w->updates_due |= UPDATE_CREDENTIALS;
        else if (r >= 0 && tn->have_cred && (r = proto_send(w->sock, &tn->cred, sizeof(tn->cred), -1)) < 0)
                log_error_errno(r, "tenant %s: cannot hand credentials to the worker: %m", tn->cfg->name);
        r = sd_event_add_io(tn->t->event, &w->io_src, w->sock, EPOLLIN, on_worker_reply, w);
        if (r >= 0)
                r = sd_event_add_child(tn->t->event, &w->child_src, pid, WEXITED, on_worker_exit, w);
        if (r < 0) {
                /* Nothing of it stays behind to call us back. */
                w->io_src = sd_event_source_disable_unref(w->io_src);
                w->child_src = sd_event_source_disable_unref(w->child_src);
                w->sock = safe_close(w->sock);
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                w->pid = 0;
                return log_error_errno(r, "tenant %s: cannot watch worker: %m", tn->cfg->name);
        }
        if (!w->stall_src &&
            sd_event_add_time_relative(tn->t->event, &w->stall_src, CLOCK_MONOTONIC, STALL_CHECK_USEC, 0, on_stall_check, w) >= 0)
                sd_event_source_set_enabled(w->stall_src, SD_EVENT_ON);
        w->state = WORKER_RUNNING;
        if (w->container) {
                log_info("tenant %s: worker %d started for container %s", tn->cfg->name, (int)pid, w->container->id);
                FACE_TELL(w->tenant->t, container_worker_changed, w->container);
        } else {
                log_info("tenant %s: worker %d started", tn->cfg->name, (int)pid);
                FACE_TELL(tn->t, tenant_worker_started, tn);
        }
        /* A replacement gets everything its predecessor left unanswered. */
        worker_send_pending(w);
        return 0;
}

static int on_fail_deferred(sd_event_source *s, void *userdata) {
        (void)s;
        worker_fail_all(userdata, -EIO);
        return 0;
}

void worker_submit(struct worker *w, struct request *req) {
        req->msg.id = ++w->tenant->t->next_request_id;
        req->next = w->requests;
        w->requests = req;
        if (w->state == WORKER_FAILED || w->state == WORKER_STOPPED) {
                /* Not from here: the caller is in the middle of its own
                 * bookkeeping, which a completion would change under it. */
                if (!w->fail_src && sd_event_add_defer(w->tenant->t->event, &w->fail_src, on_fail_deferred, w) < 0) {
                        log_error("tenant %s: cannot defer a failure", w->tenant->cfg->name);
                        return;
                }
                sd_event_source_set_enabled(w->fail_src, SD_EVENT_ONESHOT);
                return;
        }
        if (w->state == WORKER_RUNNING && !w->serial) {
                int r = worker_send(w, req);
                if (r < 0 && r != -EAGAIN && w->pid > 0)
                        kill(w->pid, SIGKILL); /* restarted, and the request re-sent */
        }
}

void worker_promote(struct worker *w, struct request *req) {
        if (!(req->msg.flags & PROTO_FILL_PREFETCH))
                return;
        req->msg.flags &= ~(uint32_t)PROTO_FILL_PREFETCH;
        if (!req->sent || req->started || w->state != WORKER_RUNNING || w->out_blocked)
                return;
        struct proto_request m = { .type = PROTO_PROMOTE, .id = req->msg.id };
        /* Not sent (socket full, worker dying): the reader waits as before. */
        if (proto_send(w->sock, &m, sizeof(m), -1) == -EAGAIN)
                worker_wait_writable(w);
}

bool worker_idle(const struct worker *w) { return !w->requests; }

void worker_restart_planned(struct worker *w) {
        if (w->state != WORKER_RUNNING || w->pid <= 0)
                return; /* a restart or a failed worker takes the new settings anyway */
        w->planned_restart = true;
        kill(w->pid, SIGKILL);
}

/* No more events about it, and its end of the control socket closed. */
static void worker_detach(struct worker *w) {
        w->io_src = sd_event_source_disable_unref(w->io_src);
        w->restart_src = sd_event_source_disable_unref(w->restart_src);
        w->child_src = sd_event_source_disable_unref(w->child_src);
        w->fail_src = sd_event_source_disable_unref(w->fail_src);
        w->stall_src = sd_event_source_disable_unref(w->stall_src);
        w->sock = safe_close(w->sock);
}

/* A handover: killed at once, its requests left unanswered; the events
 * behind them stay pending, recorded, for the next tierd. */
void worker_abandon(struct worker *w) {
        worker_detach(w);
        if (w->pid > 0) {
                kill(w->pid, SIGKILL);
                waitpid(w->pid, NULL, 0);
        }
        w->pid = 0;
        w->state = WORKER_STOPPED;
}

void worker_hand_over(struct worker *from, struct worker *to) {
        worker_abandon(from);
        for (struct request *req; (req = from->requests);) {
                from->requests = req->next;
                req->sent = req->started = req->suspect = false;
                worker_submit(to, req);
        }
}

void worker_stop(struct worker *w) {
        worker_detach(w);
        if (w->pid > 0) {
                /* End of stream makes it finish and exit; do not wait forever. */
                for (int i = 0; i < 50; i++) {
                        if (waitpid(w->pid, NULL, WNOHANG) == w->pid) {
                                w->pid = 0;
                                break;
                        }
                        usleep(20000);
                }
                if (w->pid > 0) {
                        kill(w->pid, SIGKILL);
                        waitpid(w->pid, NULL, 0);
                }
        }
        w->pid = 0;
        worker_fail_all(w, -EIO);
        w->state = WORKER_STOPPED;
}
