/* SPDX-License-Identifier: MIT */
/*
 * Workers: one tierd-worker per tenant. tierd keeps every in-flight request
 * (and its fd), so when a worker dies the replacement gets the same work and
 * the blocked readers never notice.
 */
#include "workers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <seccomp.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "container.h"
#include "log.h"
#include "tenant.h"
#include "macro.h"
#include "url.h"

#define WORKER_CONTROL_FD 3
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

/* The D-Bus object that shows this worker: its container's, or its tenant's. */
static void worker_announce_changed(struct worker *w) {
        if (w->container)
                container_bus_worker_changed(w->container);
        else
                tenant_bus_worker_changed(w->tenant);
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

static void request_finish(struct request *req, const struct proto_reply *rep) {
        /* Close our copy first: what done() starts (a release's write lease)
         * fails while tierd holds any other fd of the file. */
        req->fd = req->fd_borrowed ? -1 : safe_close(req->fd);
        req->done(req, rep);
        free(req);
}

static void request_fail(struct request *req, int error) {
        struct proto_reply rep = { .id = req->msg.id, .error = error };
        request_finish(req, &rep);
}

/* tierd's end of the control socket does not block: a worker that stops
 * reading (stopped, hung, compromised) fills it, and tierd keeps what it
 * could not send until the socket takes more (EPOLLOUT), instead of
 * waiting in sendmsg() with every tenant's events behind it. The stall
 * check then kills a worker that took requests and does nothing. */
static void worker_wait_writable(struct worker *w) {
        w->out_blocked = true;
        if (w->io_src)
                sd_event_source_set_io_events(w->io_src, EPOLLIN | EPOLLOUT);
}

/* -EAGAIN: not sent, and req stays unsent until the socket is writable. */
static int worker_send(struct worker *w, struct request *req) {
        if (w->out_blocked)
                return -EAGAIN;
        req->progress_usec = tierd_now_usec(w->tenant->t);
        req->started = false;
        int r = proto_send(w->sock, &req->msg, sizeof(req->msg), req->fd);
        req->sent = r != -EAGAIN;
        if (r == -EAGAIN)
                worker_wait_writable(w);
        return r;
}

/* The secrets that changed while the socket was full, then. */
static void worker_flush_secrets(struct worker *w) {
        struct tenant *tn = w->tenant;
        int r = 0;
        if (w->out_blocked)
                return;
        if ((w->secrets_due & SECRETS_CREDENTIALS) && tn->have_cred)
                r = proto_send(w->sock, &tn->cred, sizeof(tn->cred), -1);
        if (r == -EAGAIN)
                return worker_wait_writable(w);
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot hand credentials to the worker: %m", tn->cfg->name);
        w->secrets_due &= ~SECRETS_CREDENTIALS;
        if (w->secrets_due & SECRETS_HEADERS) {
                struct proto_headers m = { .type = PROTO_HEADERS };
                memcpy(m.headers, tn->headers, sizeof(m.headers));
                r = proto_send(w->sock, &m, sizeof(m), -1);
                explicit_bzero(&m, sizeof(m));
                if (r == -EAGAIN)
                        return worker_wait_writable(w);
                if (r < 0)
                        log_error_errno(r, "tenant %s: cannot hand headers to the worker: %m", tn->cfg->name);
        }
        w->secrets_due = 0;
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
        struct request *req;
        while ((req = w->requests)) {
                w->requests = req->next;
                request_fail(req, error);
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
                worker_flush_secrets(w);
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
                request_finish(req, &rep);
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
                        request_fail(q, -EIO);
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
                container_bus_worker_changed(w->container);
        else
                tenant_bus_worker_exited(w->tenant, si->si_pid, si->si_code != CLD_EXITED, si->si_status);
        return 0;
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void __attribute__((noreturn)) worker_exec(const char *path, int sock, pid_t parent, const char *vg_log) {
        static char *const argv[] = { "tierd-worker", NULL };
        (void)vg_log;
        /* Configuration comes over the socket only; JOURNAL_STREAM says
         * what its stderr (tierd's) is, so its lines carry priorities. */
        char *const envp[] = { (char *)log_stream_env(), NULL };
        sigset_t none;

        /* A worker outliving tierd would keep writing fills nobody tracks
         * while the next tierd's worker fetches the same ranges. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(127);
        if (dup2(sock, WORKER_CONTROL_FD) < 0)
                _exit(127);
        /* Nothing of tierd's leaks into the worker: no group fd, no file. */
        syscall(SYS_close_range, WORKER_CONTROL_FD + 1, ~0U, 0);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
#ifdef TIERD_WORKER_UNDER_VALGRIND
        /* Test build only (make valgrind-daemons, no sandbox): the worker
         * runs under valgrind memcheck, its report in TIERD_VALGRIND_LOG. */
        char log_arg[4200];
        snprintf(log_arg, sizeof(log_arg), "--log-file=%s", vg_log ? vg_log : "/dev/null");
        char *const vg_argv[] = { "valgrind", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite",
                                  "--show-leak-kinds=definite", log_arg, (char *)path, NULL };
        execve("/usr/bin/valgrind", vg_argv, envp);
#endif
        execve(path, argv, envp);
        _exit(127);
}

#define DEFAULT_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* The worker reads no file and asks no DNS server: tierd resolves its
 * backend's host, names the one port it may connect to and the CA bundle
 * it may read. */
static void worker_network(const struct tenant *tn, struct proto_config *cfg) {
        const struct policy_tenant *p = tn->cfg;
        struct backend_url url;
        char base[PROTO_URL_MAX] = "", host[256];
        const char *h, *port_s;
        unsigned port;

        if (backend_url_parse(p->backend, &url, NULL) < 0)
                return;
        if (url.kind == BACKEND_S3 && p->endpoint)
                snprintf(base, sizeof(base), "%s", p->endpoint);
        else if (url.kind == BACKEND_S3) /* the worker's default: AWS's regional endpoint */
                snprintf(base, sizeof(base), "https://s3.%s.amazonaws.com", p->region ?: "us-east-1");
        else if (url.kind == BACKEND_HTTP)
                snprintf(base, sizeof(base), "%s", url.base);
        char bucket[64] = "";
        if (url.kind == BACKEND_S3 && p->virtual_hosted)
                snprintf(bucket, sizeof(bucket), "%s.", url.bucket);
        backend_url_done(&url);
        if (!base[0] || !(h = strstr(base, "://")))
                return;
        bool tls = strncmp(base, "https", 5) == 0;
        h += 3;
        if (*h == '[') { /* [IPv6]:port */
                const char *end = strchr(h, ']');
                snprintf(host, sizeof(host), "%s%.*s", bucket, end ? (int)(end - h - 1) : 0, h + 1);
                port_s = end && end[1] == ':' ? end + 2 : NULL;
        } else {
                port_s = strchr(h, ':');
                snprintf(host, sizeof(host), "%s%.*s", bucket, port_s ? (int)(port_s - h) : (int)strlen(h), h);
                if (port_s)
                        port_s++;
        }
        port = port_s ? (unsigned)strtoul(port_s, NULL, 10) : tls ? 443 : 80;
        cfg->net_port = port;
        if (tls && !p->ca_file && access(DEFAULT_CA_BUNDLE, R_OK) == 0)
                snprintf(cfg->ca_file, sizeof(cfg->ca_file), "%s", DEFAULT_CA_BUNDLE);

        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
        char addr[INET6_ADDRSTRLEN];
        int r = getaddrinfo(host, NULL, &hints, &ai);
        if (r != 0 || !ai) {
                log_warning("tenant %s: cannot resolve %s: %s", p->name, host, gai_strerror(r));
                return;
        }
        if (ai->ai_family == AF_INET6)
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, addr, sizeof(addr));
        else
                inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, addr, sizeof(addr));
        snprintf(cfg->resolve, sizeof(cfg->resolve), ai->ai_family == AF_INET6 ? "%s:%u:[%s]" : "%s:%u:%s", host, port,
                 addr);
        freeaddrinfo(ai);
}

static void worker_config(struct tenant *tn, struct proto_config *cfg) {
        const struct policy_tenant *p = tn->cfg;
        snprintf(cfg->tenant, sizeof(cfg->tenant), "%s", p->name);
        snprintf(cfg->backend, sizeof(cfg->backend), "%s", p->backend);
        snprintf(cfg->endpoint, sizeof(cfg->endpoint), "%s", p->endpoint ?: "");
        snprintf(cfg->region, sizeof(cfg->region), "%s", p->region ?: "us-east-1");
        snprintf(cfg->ca_file, sizeof(cfg->ca_file), "%s", p->ca_file ?: "");
        snprintf(cfg->sse, sizeof(cfg->sse), "%s", p->sse ?: "");
        snprintf(cfg->kms_key_id, sizeof(cfg->kms_key_id), "%s", p->kms_key_id ?: "");
        snprintf(cfg->headers, sizeof(cfg->headers), "%s", tn->headers);
        cfg->virtual_hosted = p->virtual_hosted;
        cfg->connect_timeout_usec = p->connect_timeout_usec;
        cfg->stall_timeout_usec = p->stall_timeout_usec;
        cfg->multipart_threshold = p->multipart_threshold;
        cfg->manifest_cache = p->manifest_cache;
        cfg->part_size = p->part_size;
        cfg->uid = cfg->gid = (uint32_t)tn->worker_uid;
        cfg->landlock_optional = tn->t->policy->landlock_optional;
        worker_network(tn, cfg);
}

void worker_send_secrets(struct worker *w, bool credentials, bool headers) {
        if (w->state != WORKER_RUNNING)
                return; /* a worker that starts later gets them at start */
        w->secrets_due |= (credentials ? SECRETS_CREDENTIALS : 0) | (headers ? SECRETS_HEADERS : 0);
        worker_flush_secrets(w);
}

/* A worker that moves no byte of a request it took up for the connect and
 * stall timeouts (plus a grace: curl's own checks go first) is hung: kill
 * it; its requests go to the replacement like after any crash. A request
 * that hangs STALL_MAX workers in a row fails with EIO instead. */
#define STALL_CHECK_USEC (1000 * 1000ull)
#define STALL_GRACE_USEC (5 * 1000 * 1000ull)
#define STALL_MAX 3

static int on_stall_check(sd_event_source *s, uint64_t usec, void *userdata) {
        struct worker *w = userdata;
        const struct policy_tenant *p = w->tenant->cfg;
        uint64_t limit = p->connect_timeout_usec + p->stall_timeout_usec + STALL_GRACE_USEC;

        sd_event_source_set_time(s, usec + STALL_CHECK_USEC);
        if (w->state != WORKER_RUNNING || w->pid <= 0)
                return 0;
        for (struct request **pq = &w->requests; *pq; pq = &(*pq)->next) {
                struct request *q = *pq;
                if (!q->started || usec <= q->progress_usec + limit)
                        continue;
                log_error("tenant %s: worker %d made no progress on request %llu for %llu s: killing it", p->name,
                          (int)w->pid, (unsigned long long)q->msg.id, (unsigned long long)(limit / 1000000));
                if (++q->stalls >= STALL_MAX) {
                        log_error("tenant %s: request %llu hung %d workers: failing it", p->name,
                                  (unsigned long long)q->msg.id, STALL_MAX);
                        *pq = q->next;
                        request_fail(q, -EIO);
                }
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
        w->secrets_due = 0; /* the config has the headers, the keys follow */
        w->started_usec = tierd_now_usec(w->tenant->t);
        worker_config(tn, &cfg);
        r = proto_send(w->sock, &cfg, sizeof(cfg), tn->store_fd);
        explicit_bzero(&cfg, sizeof(cfg));
        if (r < 0)
                log_error_errno(r, "tenant %s: cannot configure worker: %m", tn->cfg->name);
        if (r >= 0 && tn->have_cred && (r = proto_send(w->sock, &tn->cred, sizeof(tn->cred), -1)) < 0)
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
                container_bus_worker_changed(w->container);
        } else {
                log_info("tenant %s: worker %d started", tn->cfg->name, (int)pid);
                tenant_bus_worker_started(tn);
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
