/* SPDX-License-Identifier: MIT */
/*
 * tierctl metrics --listen ADDRESS: a small HTTP/1.1 server for Prometheus.
 *
 * Each GET /metrics reads tierd's objects over the system bus (5 s at most)
 * and answers with the text format; with tierd absent or not answering it
 * still answers 200, with tierd_up 0, so an alert can tell a stopped tierd
 * from a stopped exporter. One thread, one poll loop: at most MAX_CONNS
 * connections, each with CONN_TIMEOUT to send its request and take its
 * answer, so a client that stalls holds one slot for that long and never
 * the server. Every answer closes its connection.
 *
 * It needs nothing tierd does not give every local user (reading tierd's
 * properties is open to everyone), so started as root it binds first (a
 * port under 1024 is allowed) and then becomes nobody.
 */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "metrics.h"
#include "tierctl.h"

#define MAX_LISTENERS 4
#define MAX_CONNS 16
#define REQUEST_MAX 8192
#define CONN_TIMEOUT_MSEC 10000
#define BUS_TIMEOUT_USEC (5 * 1000 * 1000ull)
#define NOBODY 65534

struct conn {
        int fd;
        int64_t deadline_msec;
        size_t in_len;
        char in[REQUEST_MAX];
        char *out; /* the whole answer, once the request is read */
        size_t out_len, out_off;
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

/* HOST:PORT, [V6]:PORT or :PORT (every address) into host (NULL: any)
 * and port, both pointing into buf. */
static int split_address(char *buf, const char **host, const char **port) {
        char *colon;
        if (buf[0] == '[') {
                char *end = strchr(buf, ']');
                if (!end || end[1] != ':')
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
        return **port ? 0 : -EINVAL;
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
 * sockets listening, or -errno said on stderr. */
static int listen_all(const char *address, int *fds) {
        _cleanup_free_ char *buf = strdup(address);
        const char *host, *port;
        struct addrinfo hints = { .ai_flags = AI_PASSIVE, .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
        int n = 0, r, one = 1, last_errno = 0;

        if (!buf)
                return -ENOMEM;
        if (split_address(buf, &host, &port) < 0) {
                fprintf(stderr, "tierctl metrics: '%s' is not HOST:PORT, [V6]:PORT or :PORT\n", address);
                return -EINVAL;
        }
        if ((r = getaddrinfo(host, port, &hints, &res)) != 0) {
                fprintf(stderr, "tierctl metrics: %s: %s\n", address, gai_strerror(r));
                return -EINVAL;
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
                return -(last_errno ?: EINVAL);
        }
        return n;
}

/* Root only to bind: then nobody, in this order (groups first, while it
 * may still change them; the uid last, which takes the right to change
 * either away), and no way back through an exec. */
static int drop_privileges(void) {
        if (geteuid() != 0)
                return 0;
        if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0 ||
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                fprintf(stderr, "tierctl metrics: cannot become nobody: %s\n", strerror(errno));
                return -errno;
        }
        return 0;
}

/* The text format, or tierd_up 0. The bus connection is dropped when it
 * failed (a restarted dbus-daemon) and made again at the next scrape. */
static char *render(sd_bus **bus, size_t *len) {
        static bool was_up = true;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        struct metrics ms = {};
        char *text = NULL;
        int r = *bus ? 0 : sd_bus_open_system(bus);

        if (r >= 0 && (r = sd_bus_set_method_call_timeout(*bus, BUS_TIMEOUT_USEC)) >= 0)
                r = metrics_read(*bus, &ms, &e);
        if (r < 0 && was_up)
                fprintf(stderr, "tierctl metrics: tierd does not answer (%s): serving tierd_up 0\n",
                        e.message ?: strerror(-r));
        else if (r >= 0 && !was_up)
                fprintf(stderr, "tierctl metrics: tierd answers again\n");
        was_up = r >= 0;
        if (r < 0 && *bus && sd_bus_is_open(*bus) <= 0)
                *bus = sd_bus_flush_close_unref(*bus);
        sd_bus_error_free(&e);
        FILE *f = open_memstream(&text, len);
        if (!f)
                return NULL;
        metrics_print(f, &ms);
        metrics_free(&ms);
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

static int respond(struct conn *c, const char *status, const char *type, const char *extra, const char *body,
                   size_t body_len, bool head) {
        FILE *f = open_memstream(&c->out, &c->out_len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status,
                type, body_len, extra);
        if (!head)
                fwrite(body, 1, body_len, f);
        return fclose(f) == 0 ? 0 : -ENOMEM;
}

#define TEXT "text/plain; charset=utf-8"

/* The request line only: headers and a body are not needed. */
static int handle_request(struct conn *c, sd_bus **bus) {
        char method[16], target[256];
        c->in[c->in_len] = '\0';
        if (sscanf(c->in, "%15s %255s HTTP/1.%*c", method, target) != 2)
                return respond(c, "400 Bad Request", TEXT, "", "bad request\n", 12, false);
        bool head = strcmp(method, "HEAD") == 0;
        if (!head && strcmp(method, "GET") != 0)
                return respond(c, "405 Method Not Allowed", TEXT, "Allow: GET, HEAD\r\n", "GET or HEAD only\n", 17,
                               false);
        target[strcspn(target, "?")] = '\0';
        if (strcmp(target, "/") == 0)
                return respond(c, "200 OK", TEXT, "", "tierd metrics: /metrics\n", 24, head);
        if (strcmp(target, "/metrics") != 0)
                return respond(c, "404 Not Found", TEXT, "", "not found: try /metrics\n", 24, head);
        size_t len = 0;
        _cleanup_free_ char *text = render(bus, &len);
        if (!text)
                return respond(c, "500 Internal Server Error", TEXT, "", "out of memory\n", 14, head);
        return respond(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", "", text, len, head);
}

/* false: the connection is done (answered, closed by the peer, or failed). */
static bool conn_step(struct conn *c, short revents, sd_bus **bus) {
        if (!c->out && (revents & (POLLIN | POLLHUP | POLLERR))) {
                ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len, MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR;
                if (n == 0)
                        return false;
                c->in_len += (size_t)n;
                c->in[c->in_len] = '\0';
                if (strstr(c->in, "\r\n\r\n") || strstr(c->in, "\n\n")) {
                        if (handle_request(c, bus) < 0)
                                return false;
                } else if (c->in_len >= sizeof(c->in) - 1) {
                        if (respond(c, "431 Request Header Fields Too Large", TEXT, "", "request too large\n", 18,
                                    false) < 0)
                                return false;
                } else
                        return true;
        }
        if (!c->out)
                return true;
        while (c->out_off < c->out_len) {
                ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR;
                c->out_off += (size_t)n;
        }
        return false;
}

static void conn_close(struct conn *c) {
        close(c->fd);
        free(c->out);
        free(c);
}

/* Signals are blocked but in ppoll, so one cannot slip in between the
 * check of stopping and the wait. */
static void serve(const int *listeners, int n_listeners, const sigset_t *waitmask) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        struct conn *conns[MAX_CONNS];
        struct pollfd pfd[MAX_LISTENERS + MAX_CONNS];
        size_t n_conns = 0;

        while (!stopping) {
                int64_t now = now_msec(), timeout = -1;
                struct timespec ts;
                size_t k = 0;
                for (int i = 0; i < n_listeners; i++)
                        /* Full: new clients wait in the backlog. */
                        pfd[k++] = (struct pollfd){ .fd = n_conns < MAX_CONNS ? listeners[i] : -1, .events = POLLIN };
                for (size_t i = 0; i < n_conns; i++) {
                        pfd[k++] = (struct pollfd){ .fd = conns[i]->fd, .events = conns[i]->out ? POLLOUT : POLLIN };
                        int64_t left = conns[i]->deadline_msec - now;
                        if (timeout < 0 || left < timeout)
                                timeout = left < 0 ? 0 : left;
                }
                ts = (struct timespec){ .tv_sec = timeout / 1000, .tv_nsec = (timeout % 1000) * 1000000 };
                if (ppoll(pfd, k, timeout < 0 ? NULL : &ts, waitmask) < 0) {
                        if (errno != EINTR)
                                break;
                        continue;
                }
                now = now_msec();
                for (size_t i = n_conns; i-- > 0;) {
                        struct pollfd *p = &pfd[(size_t)n_listeners + i];
                        if (!conn_step(conns[i], p->revents, &bus) || now >= conns[i]->deadline_msec ||
                            (p->revents & POLLNVAL)) {
                                conn_close(conns[i]);
                                conns[i] = conns[--n_conns];
                        }
                }
                for (int i = 0; i < n_listeners; i++)
                        while ((pfd[i].revents & POLLIN) && n_conns < MAX_CONNS) {
                                int fd = accept4(listeners[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                                struct conn *c = fd >= 0 ? malloc(sizeof(*c)) : NULL;
                                if (!c) {
                                        if (fd >= 0)
                                                close(fd);
                                        break;
                                }
                                c->fd = fd;
                                c->deadline_msec = now + CONN_TIMEOUT_MSEC;
                                c->in_len = c->out_len = c->out_off = 0;
                                c->out = NULL;
                                conns[n_conns++] = c;
                        }
        }
        while (n_conns > 0)
                conn_close(conns[--n_conns]);
}

int metrics_serve(const char *address) {
        int listeners[MAX_LISTENERS];
        struct sigaction sa = { .sa_handler = on_stop }, ign = { .sa_handler = SIG_IGN };
        sigset_t stop_signals, waitmask;
        int n;

        for (size_t i = 0; i < ARRAY_SIZE(listeners); i++)
                listeners[i] = -1;
        if ((n = listen_all(address, listeners)) < 0)
                return n == -EINVAL ? EXIT_USAGE : EXIT_FAILED;
        if (drop_privileges() < 0)
                return EXIT_FAILED;
        sigemptyset(&stop_signals);
        sigaddset(&stop_signals, SIGTERM);
        sigaddset(&stop_signals, SIGINT);
        sigprocmask(SIG_BLOCK, &stop_signals, &waitmask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGPIPE, &ign, NULL);
        serve(listeners, n, &waitmask);
        for (int i = 0; i < n; i++)
                close(listeners[i]);
        return EXIT_OK;
}
