/* SPDX-License-Identifier: MIT */
/*
 * tierctl metrics --listen ADDRESS: a small HTTP/1.1 server for Prometheus.
 *
 * GET /metrics answers with the text format of tierd's objects, read over
 * the system bus; with tierd absent or not answering it still answers 200,
 * with tierd_up 0, so an alert can tell a stopped tierd from a stopped
 * exporter. One thread, one poll loop, and nothing in it waits on a client:
 * - a client has REQUEST_TIMEOUT to send its request and ANSWER_TIMEOUT to
 *   take the answer; when all MAX_CONNS are taken, the oldest that has not
 *   sent a request yet makes room, so idle connections cannot keep a
 *   scrape out;
 * - one read of tierd (at most two bus calls of BUS_TIMEOUT) serves every
 *   scrape waiting in that turn and every scrape of the next CACHE_MSEC,
 *   shared, not copied: many scrapers cost tierd one call a second;
 * - after an answer the connection is shut for writing and what the client
 *   still sends is read and dropped (LINGER), so a close never resets the
 *   answer on its way.
 *
 * It needs nothing tierd does not give every local user (reading tierd's
 * properties is open to everyone): started as root it binds first (a port
 * under 1024 is allowed), then becomes nobody; whoever starts it, it keeps
 * no capability.
 */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "metrics.h"
#include "tierctl.h"

#define MAX_LISTENERS 4
#define MAX_CONNS 64
#define REQUEST_MAX 8192
#define REQUEST_TIMEOUT_MSEC 2000
#define ANSWER_TIMEOUT_MSEC 10000
#define LINGER_MSEC 1000
#define CACHE_MSEC 1000
#define ACCEPT_RETRY_MSEC 1000
#define BUS_TIMEOUT_USEC (3 * 1000 * 1000ull)
#define NOBODY 65534

/* One rendering of the metrics, shared by the answers that send it. */
struct page {
        char *text;
        size_t len;
        unsigned refs;
        int64_t made_msec;
};

enum conn_state { READING, WAITING, WRITING, LINGERING };

struct conn {
        int fd;
        enum conn_state state;
        int64_t accepted_msec, deadline_msec;
        size_t in_len;
        char in[REQUEST_MAX];
        char head[256]; /* status line and headers */
        size_t head_len, off;
        const char *body; /* static text, or page->text */
        size_t body_len;
        struct page *page;
        bool head_only;
};

static volatile sig_atomic_t stopping;

static void on_stop(int sig) {
        (void)sig;
        stopping = 1;
}

static int64_t now_msec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void page_unref(struct page *p) {
        if (p && --p->refs == 0) {
                free(p->text);
                free(p);
        }
}

/* HOST:PORT, [V6]:PORT or :PORT (every address) into host (NULL: any) and
 * port (0 to 65535, digits only: getaddrinfo would take 70000 as 4464),
 * both pointing into buf. */
static int split_address(char *buf, const char **host, const char **port) {
        char *colon, *end;
        if (buf[0] == '[') {
                if (!(end = strchr(buf, ']')) || end[1] != ':')
                        return -EINVAL;
                *end = '\0';
                *host = buf + 1;
                *port = end + 2;
        } else {
                if (!(colon = strrchr(buf, ':')))
                        return -EINVAL;
                *colon = '\0';
                *host = buf[0] ? buf : NULL;
                *port = colon + 1;
        }
        if (strspn(*port, "0123456789") != strlen(*port) || !**port || strlen(*port) > 5 || atoi(*port) > 65535)
                return -EINVAL;
        return 0;
}

static void say_listening(int fd) {
        struct sockaddr_storage ss = {};
        socklen_t len = sizeof(ss);
        char host[NI_MAXHOST], port[NI_MAXSERV];
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
            getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
                        NI_NUMERICHOST | NI_NUMERICSERV) != 0)
                return;
        fprintf(stderr, "tierctl metrics: serving http://%s%s%s:%s/metrics\n", ss.ss_family == AF_INET6 ? "[" : "",
                host, ss.ss_family == AF_INET6 ? "]" : "", port);
}

/* Every address the name gives (both families for :PORT): the number of
 * sockets listening, or an exit code (said on stderr) as a negative. */
static int listen_all(const char *address, int *fds) {
        _cleanup_free_ char *buf = strdup(address);
        const char *host, *port;
        struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_family = AF_UNSPEC,
                                  .ai_socktype = SOCK_STREAM },
                        *res;
        int n = 0, r, one = 1, last_errno = 0;

        if (!buf)
                return -EXIT_FAILED;
        if (split_address(buf, &host, &port) < 0) {
                fprintf(stderr, "tierctl metrics: '%s' is not HOST:PORT, [V6]:PORT or :PORT (PORT 0 to 65535)\n",
                        address);
                return -EXIT_USAGE;
        }
        if ((r = getaddrinfo(host, port, &hints, &res)) != 0) {
                fprintf(stderr, "tierctl metrics: %s: %s\n", address, gai_strerror(r));
                return -EXIT_USAGE;
        }
        for (struct addrinfo *ai = res; ai && n < MAX_LISTENERS; ai = ai->ai_next) {
                int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
                if (fd < 0) {
                        last_errno = errno;
                        continue;
                }
                /* IPv6 only on an IPv6 socket: the IPv4 address has its own. */
                if (ai->ai_family == AF_INET6)
                        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
                (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
                        last_errno = errno;
                        close(fd);
                        continue;
                }
                say_listening(fd);
                fds[n++] = fd;
        }
        freeaddrinfo(res);
        if (n == 0) {
                fprintf(stderr, "tierctl metrics: cannot listen on %s: %s\n", address, strerror(last_errno ?: EINVAL));
                return -EXIT_FAILED;
        }
        return n;
}

/* Bound and listening, it needs no privilege, step by step:
 * 1. as root, become nobody: groups first, while it may still change them,
 *    the uid last, which takes the right to change either away;
 * 2. whoever started it, no capability: ambient ones would survive an
 *    exec, and setuid's clearing of the others can be turned off
 *    (SECBIT_NO_SETUID_FIXUP);
 * 3. no exec can give privileges back (setuid binaries, file caps);
 * 4. check: uid 0 or a capability left is a refusal, not a warning. */
static int drop_privileges(void) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct caps[2] = {};

        if ((getuid() == 0 || geteuid() == 0) &&
            (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0))
                goto fail;
        if ((prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) ||
            syscall(SYS_capset, &h, caps) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                goto fail;
        if (syscall(SYS_capget, &h, caps) < 0)
                goto fail;
        if (getuid() == 0 || geteuid() == 0 || caps[0].effective || caps[0].permitted || caps[1].effective ||
            caps[1].permitted) {
                fprintf(stderr, "tierctl metrics: still privileged after dropping: refusing to serve\n");
                return -EPERM;
        }
        return 0;
fail:
        fprintf(stderr, "tierctl metrics: cannot drop privileges: %s\n", strerror(errno));
        return -errno;
}

/* The text format, or tierd_up 0. A failed connection is dropped (late
 * replies would pile up in it, unread) and made again at the next scrape. */
static struct page *render(sd_bus **bus, int64_t now) {
        static bool was_up = true;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        struct metrics ms = {};
        struct page *p = calloc(1, sizeof(*p));
        int r = *bus ? 0 : sd_bus_open_system(bus);

        if (!p)
                return NULL;
        if (r >= 0 && (r = sd_bus_set_method_call_timeout(*bus, BUS_TIMEOUT_USEC)) >= 0)
                r = metrics_read(*bus, &ms, &e);
        if (r < 0 && was_up)
                fprintf(stderr, "tierctl metrics: tierd does not answer (%s): serving tierd_up 0\n",
                        e.message ?: strerror(-r));
        else if (r >= 0 && !was_up)
                fprintf(stderr, "tierctl metrics: tierd answers again\n");
        was_up = r >= 0;
        if (r < 0)
                *bus = sd_bus_flush_close_unref(*bus);
        sd_bus_error_free(&e);
        FILE *f = open_memstream(&p->text, &p->len);
        if (f) {
                metrics_print(f, &ms);
                if (fclose(f) != 0)
                        p->text = mfree(p->text);
        }
        metrics_free(&ms);
        if (!p->text) {
                free(p);
                return NULL;
        }
        p->refs = 1; /* the cache's */
        p->made_msec = now;
        return p;
}

#define TEXT "text/plain; charset=utf-8"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

static void answer(struct conn *c, const char *status, const char *type, const char *extra, const char *body,
                   size_t body_len, int64_t now) {
        int n = snprintf(c->head, sizeof(c->head),
                         "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status,
                         type, body_len, extra);
        c->head_len = n > 0 && (size_t)n < sizeof(c->head) ? (size_t)n : 0;
        c->body = body;
        c->body_len = c->head_only ? 0 : body_len;
        c->off = 0;
        c->state = WRITING;
        c->deadline_msec = now + ANSWER_TIMEOUT_MSEC;
}

#define ANSWER(c, status, text, now) answer(c, status, TEXT, "", text, sizeof(text) - 1, now)

/* A whole request is in (its headers end): the request line decides. */
static void take_request(struct conn *c, int64_t now) {
        char method[16], target[256], version[16];
        if (memchr(c->in, '\0', c->in_len) ||
            sscanf(c->in, "%15s %255s %15s", method, target, version) != 3 ||
            (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0))
                return ANSWER(c, "400 Bad Request", "bad request\n", now);
        c->head_only = strcmp(method, "HEAD") == 0;
        if (!c->head_only && strcmp(method, "GET") != 0)
                return answer(c, "405 Method Not Allowed", TEXT, "Allow: GET, HEAD\r\n", "GET or HEAD only\n", 17, now);
        target[strcspn(target, "?")] = '\0';
        if (strcmp(target, "/") == 0)
                return ANSWER(c, "200 OK", "tierd metrics: /metrics\n", now);
        if (strcmp(target, "/metrics") != 0)
                return ANSWER(c, "404 Not Found", "not found: try /metrics\n", now);
        c->state = WAITING; /* for this turn's page */
}

/* Reads what came. false: the connection is done. */
static bool conn_read(struct conn *c, int64_t now) {
        ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len, MSG_DONTWAIT);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR;
        if (n == 0)
                return false;
        c->in_len += (size_t)n;
        c->in[c->in_len] = '\0';
        if (memmem(c->in, c->in_len, "\r\n\r\n", 4) || memmem(c->in, c->in_len, "\n\n", 2))
                take_request(c, now);
        else if (c->in_len >= sizeof(c->in) - 1)
                ANSWER(c, "431 Request Header Fields Too Large", "request too large\n", now);
        return true;
}

/* Sends what the socket takes; once all is sent, shuts writing and reads
 * (and drops) what the client still sends, until it closes. */
static bool conn_write(struct conn *c, int64_t now) {
        while (c->off < c->head_len + c->body_len) {
                bool in_head = c->off < c->head_len;
                const char *from = in_head ? c->head + c->off : c->body + (c->off - c->head_len);
                size_t len = in_head ? c->head_len - c->off : c->body_len - (c->off - c->head_len);
                ssize_t n = send(c->fd, from, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR;
                c->off += (size_t)n;
        }
        shutdown(c->fd, SHUT_WR);
        c->state = LINGERING;
        c->deadline_msec = now + LINGER_MSEC;
        return true;
}

static bool conn_linger(struct conn *c) {
        char sink[4096];
        ssize_t n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
        return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

static void conn_close(struct conn *c) {
        close(c->fd);
        page_unref(c->page);
        free(c);
}

struct server {
        int listeners[MAX_LISTENERS];
        int n_listeners;
        struct conn *conns[MAX_CONNS];
        size_t n_conns;
        struct page *cache; /* the last rendering: CACHE_MSEC old at most when sent */
        sd_bus *bus;
        int64_t accept_paused_until; /* out of fds or memory: accept later */
};

static void drop_conn(struct server *s, size_t i) {
        conn_close(s->conns[i]);
        s->conns[i] = s->conns[--s->n_conns];
}

/* Full: the oldest connection that has not sent a whole request goes. */
static bool make_room(struct server *s) {
        size_t oldest = SIZE_MAX;
        if (s->n_conns < MAX_CONNS)
                return true;
        for (size_t i = 0; i < s->n_conns; i++)
                if (s->conns[i]->state == READING &&
                    (oldest == SIZE_MAX || s->conns[i]->accepted_msec < s->conns[oldest]->accepted_msec))
                        oldest = i;
        if (oldest == SIZE_MAX)
                return false;
        drop_conn(s, oldest);
        return true;
}

static void accept_new(struct server *s, int fd, int64_t now) {
        while (make_room(s)) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                struct conn *c = cfd >= 0 ? calloc(1, sizeof(*c)) : NULL;
                if (!c) {
                        if (cfd >= 0 || (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED))
                                s->accept_paused_until = now + ACCEPT_RETRY_MSEC;
                        if (cfd >= 0)
                                close(cfd);
                        return;
                }
                c->fd = cfd;
                c->state = READING;
                c->accepted_msec = now;
                c->deadline_msec = now + REQUEST_TIMEOUT_MSEC;
                s->conns[s->n_conns++] = c;
        }
}

/* Every request of this turn for /metrics: one rendering, shared. */
static void serve_waiting(struct server *s, int64_t now) {
        bool any = false;
        for (size_t i = 0; i < s->n_conns; i++)
                any |= s->conns[i]->state == WAITING;
        if (!any)
                return;
        if (!s->cache || now - s->cache->made_msec >= CACHE_MSEC) {
                struct page *p = render(&s->bus, now);
                if (p) {
                        page_unref(s->cache);
                        s->cache = p;
                }
                now = now_msec();
        }
        for (size_t i = 0; i < s->n_conns; i++) {
                struct conn *c = s->conns[i];
                if (c->state != WAITING)
                        continue;
                if (!s->cache) {
                        ANSWER(c, "500 Internal Server Error", "out of memory\n", now);
                        continue;
                }
                c->page = s->cache;
                c->page->refs++;
                answer(c, "200 OK", METRICS_TYPE, "", c->page->text, c->page->len, now);
        }
}

static bool conn_step(struct conn *c, short revents, int64_t now) {
        if (revents & POLLNVAL)
                return false;
        if (!(revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)))
                return true;
        switch (c->state) {
        case READING:
                return conn_read(c, now);
        case WRITING:
                return conn_write(c, now);
        case LINGERING:
                return conn_linger(c);
        default:
                return true;
        }
}

/* Signals are blocked but in ppoll, so one cannot slip in between the
 * check of stopping and the wait. */
static int serve(struct server *s, const sigset_t *waitmask) {
        struct pollfd pfd[MAX_LISTENERS + MAX_CONNS];

        while (!stopping) {
                int64_t now = now_msec(), timeout = -1;
                bool accepting = now >= s->accept_paused_until;
                struct timespec ts;
                size_t k = 0;

                for (int i = 0; i < s->n_listeners; i++)
                        pfd[k++] = (struct pollfd){ .fd = accepting ? s->listeners[i] : -1, .events = POLLIN };
                if (!accepting)
                        timeout = s->accept_paused_until - now;
                for (size_t i = 0; i < s->n_conns; i++) {
                        struct conn *c = s->conns[i];
                        pfd[k++] = (struct pollfd){ .fd = c->fd, .events = c->state == WRITING ? POLLOUT : POLLIN };
                        int64_t left = MAX(c->deadline_msec - now, 0);
                        if (timeout < 0 || left < timeout)
                                timeout = left;
                }
                ts = (struct timespec){ .tv_sec = timeout / 1000, .tv_nsec = (timeout % 1000) * 1000000 };
                if (ppoll(pfd, k, timeout < 0 ? NULL : &ts, waitmask) < 0) {
                        if (errno == EINTR)
                                continue;
                        fprintf(stderr, "tierctl metrics: poll: %s\n", strerror(errno));
                        return EXIT_FAILED;
                }
                now = now_msec();
                /* Downwards: a dropped connection's slot takes the last
                 * one, already seen. Past its deadline, nothing more is
                 * done for it (nor rendered). */
                for (size_t i = s->n_conns; i-- > 0;) {
                        struct conn *c = s->conns[i];
                        if (now >= c->deadline_msec || !conn_step(c, pfd[(size_t)s->n_listeners + i].revents, now))
                                drop_conn(s, i);
                }
                for (int i = 0; i < s->n_listeners; i++)
                        if (pfd[i].revents & POLLIN)
                                accept_new(s, s->listeners[i], now);
                serve_waiting(s, now);
        }
        return EXIT_OK;
}

int metrics_serve(const char *address) {
        struct server s = {};
        struct sigaction sa = { .sa_handler = on_stop }, ign = { .sa_handler = SIG_IGN };
        sigset_t stop_signals, waitmask;
        int n, rc = EXIT_FAILED;

        for (size_t i = 0; i < ARRAY_SIZE(s.listeners); i++)
                s.listeners[i] = -1;
        if ((n = listen_all(address, s.listeners)) < 0)
                return -n;
        s.n_listeners = n;
        if (drop_privileges() >= 0) {
                sigemptyset(&stop_signals);
                sigaddset(&stop_signals, SIGTERM);
                sigaddset(&stop_signals, SIGINT);
                sigprocmask(SIG_BLOCK, &stop_signals, &waitmask);
                sigaction(SIGTERM, &sa, NULL);
                sigaction(SIGINT, &sa, NULL);
                sigaction(SIGPIPE, &ign, NULL);
                rc = serve(&s, &waitmask);
        }
        while (s.n_conns > 0)
                drop_conn(&s, s.n_conns - 1);
        page_unref(s.cache);
        sd_bus_flush_close_unref(s.bus);
        for (int i = 0; i < s.n_listeners; i++)
                close(s.listeners[i]);
        return rc;
}
