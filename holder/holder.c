/* SPDX-License-Identifier: MIT */
/*
 * tierd-holder keeps tierd's fanotify group fds and its in-flight record
 * open while tierd is restarted, upgraded or dead: if the last fd of a
 * pre-content group closed, the kernel would allow every pending read and
 * readers of released files would see zeros. It parses nothing but the
 * fixed records of common/holder-proto.h, talks to no network and changes
 * rarely, so it need not be restarted when tierd is. While no tierd serves
 * the groups, its guard (guard.c) answers their events.
 */
#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "holder.h"
#include "log.h"
#include "macro.h"
#include "proto.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

static int reply(int sock, const char *text, int fd) { return proto_send(sock, text, strlen(text), fd); }

struct held *holder_find(struct holder *h, const char *name) {
        for (size_t i = 0; i < h->n; i++)
                if (strcmp(h->fds[i].name, name) == 0)
                        return &h->fds[i];
        return NULL;
}

void holder_drop(struct holder *h, struct held *e) {
        log_info("released %s", e->name);
        close(e->fd);
        *e = h->fds[--h->n];
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static bool name_valid(const char *name) {
        size_t n = strlen(name);
        if (n == 0 || n > HOLDER_NAME_MAX)
                return false;
        for (const char *p = name; *p; p++)
                if (*p <= ' ' || *p > '~')
                        return false;
        return true;
}

/* STORE NAME, with the fd to hold under that name. */
static int serve_store(struct holder *h, int sock, const char *name, int fd) {
        if (fd < 0)
                return reply(sock, "ERR no fd", -1);
        if (!name_valid(name) || holder_find(h, name) || h->n >= HOLDER_MAX_FDS) {
                close(fd);
                return reply(sock, "ERR bad, duplicate or one name too many", -1);
        }
        strcpy(h->fds[h->n].name, name);
        h->fds[h->n++].fd = fd;
        h->generation++;
        log_info("holding %s (%zu fds)", name, h->n);
        return reply(sock, "OK", -1);
}

/* What is held, for tierctl release-groups: the guard goes on. */
static int serve_list(struct holder *h, int sock) {
        char line[HOLDER_MSG_MAX];
        for (size_t i = 0; i < h->n; i++) {
                snprintf(line, sizeof(line), "NAME %s", h->fds[i].name);
                int r = reply(sock, line, -1);
                if (r < 0)
                        return r;
        }
        snprintf(line, sizeof(line), "END %" PRIu64 " %s", h->generation, h->guarding ? "guarding" : "waiting");
        return reply(sock, line, -1);
}

/* The explicit final stop: tierctl release-groups checked first that no
 * file on these filesystems is a stub not whole, and no tierd has come
 * since (the generation its LIST saw). */
static int serve_release(struct holder *h, int sock, uint64_t generation) {
        size_t n = h->n;
        if (generation != h->generation)
                return reply(sock, "ERR a tierd came since the check", -1);
        if (!h->guarding)
                return reply(sock, "ERR the guard is not running: a tierd may come back", -1);
        guard_settle(h, 0, true); /* what it read is answered first */
        h->guarding = false;
        /* The dead tierd's keeper shares its fds, the groups too:
         * groups nobody answers would hold every open. */
        struct held *keeper = holder_find(h, "keeper");
        if (keeper && syscall(SYS_pidfd_send_signal, keeper->fd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
                log_warning("cannot end the last tierd's keeper: %m");
        while (h->n > 0)
                holder_drop(h, &h->fds[0]);
        h->exit_when_empty = true;
        log_info("let go of %zu fds on request (tierctl release-groups): exiting", n);
        return reply(sock, "OK", -1);
}

/* Whoever takes the groups serves them: the guard reads no more (it
 * answered all it read). */
static int serve_fetch(struct holder *h, int sock) {
        char line[HOLDER_MSG_MAX];
        guard_stop(h);
        h->generation++;
        for (size_t i = 0; i < h->n; i++) {
                snprintf(line, sizeof(line), "FD %s", h->fds[i].name);
                int r = reply(sock, line, h->fds[i].fd);
                if (r < 0)
                        return r;
        }
        return reply(sock, "END", -1);
}

static int serve_request(struct holder *h, int sock, char *msg, int fd) {
        if (strncmp(msg, "STORE ", 6) == 0)
                return serve_store(h, sock, msg + 6, fd);
        safe_close(fd);
        if (strncmp(msg, "REMOVE ", 7) == 0) {
                struct held *e = holder_find(h, msg + 7);
                if (!e)
                        return reply(sock, "ERR not held", -1);
                holder_drop(h, e);
                return reply(sock, "OK", -1);
        }
        if (strncmp(msg, "GUARD-AFTER ", 12) == 0) {
                const char *digits = msg + 12;
                size_t n = strspn(digits, "0123456789");
                unsigned long long ms = n && n <= 9 && !digits[n] ? strtoull(digits, NULL, 10) : 0;
                if (ms < HOLDER_GUARD_AFTER_MIN_MS || ms > HOLDER_GUARD_AFTER_MAX_MS)
                        return reply(sock, "ERR guard delay out of range", -1);
                h->guard_after_usec = ms * 1000;
                return reply(sock, "OK", -1);
        }
        if (strcmp(msg, "GUARD") == 0) {
                h->guard_at_once = true;
                return reply(sock, "OK", -1);
        }
        /* Serving: from its departure on, the guard waits guard_after. A
         * tierd that dies before this (a crash loop) does not restart that
         * clock, nor cancel a guard asked for at once. */
        if (strcmp(msg, "READY") == 0) {
                h->generation++;
                h->client_ready = true;
                h->guard_at_once = false;
                return reply(sock, "OK", -1);
        }
        if (strcmp(msg, "LIST") == 0)
                return serve_list(h, sock);
        if (strncmp(msg, "RELEASE ", 8) == 0)
                return serve_release(h, sock, strtoull(msg + 8, NULL, 10));
        if (strcmp(msg, "FETCH") == 0)
                return serve_fetch(h, sock);
        return reply(sock, "ERR unknown request", -1);
}

/* One client: tierd, which stays connected while it runs. */
static void serve_client(struct holder *h, int sock) {
        struct ucred cred;
        socklen_t len = sizeof(cred);

        /* Only root, or the holder's own user, may hand or take group fds. */
        if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
            (cred.uid != 0 && cred.uid != geteuid())) {
                log_error("refusing a client with uid %u", (unsigned)cred.uid);
                return;
        }
        log_info("client %d connected", (int)cred.pid);
        /* tierd's end of this socket may outlive tierd (its keeper shares
         * its fds): the client is gone when its process is. */
        _cleanup_close_ int pidfd = -1;
        len = sizeof(pidfd);
        if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
                pidfd = -1;
        for (;;) {
                struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
                char msg[HOLDER_MSG_MAX + 1];
                size_t n = 0;
                int fd = -1;
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[1].revents & POLLIN)
                        break;
                int r = proto_recv(sock, msg, HOLDER_MSG_MAX, &n, &fd, 0);
                if (r == 1)
                        break;
                if (r < 0) {
                        log_error_errno(r, "bad request from tierd %d: %m", (int)cred.pid);
                        break;
                }
                msg[n] = 0;
                if (serve_request(h, sock, msg, fd) < 0)
                        break;
        }
        if (h->client_ready || !h->had_client)
                h->gone_usec = now_usec();
        h->had_client = true;
        log_info("tierd %d gone%s; holding %zu fds%s", (int)cred.pid, h->client_ready ? "" : " before it served",
                 h->n, h->guard_at_once ? ", guarded at once" : "");
        h->client_ready = false;
}

static int holder_listen(struct holder *h) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *dir = strdup(h->path);
        char *slash;

        if (!dir || strlen(h->path) >= sizeof(sa.sun_path))
                return log_error_errno(ENAMETOOLONG, "socket path %s: %m", h->path);
        strcpy(sa.sun_path, h->path);
        if ((slash = strrchr(dir, '/')) && slash != dir) {
                *slash = 0;
                if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                        return log_error_errno(errno, "cannot create %s: %m", dir);
        }
        /* One holder per socket, even when two start at once. */
        _cleanup_free_ char *lock = NULL;
        if (asprintf(&lock, "%s.lock", h->path) < 0)
                return -ENOMEM;
        h->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (h->lock_fd < 0)
                return log_error_errno(errno, "cannot open %s: %m", lock);
        if (flock(h->lock_fd, LOCK_EX | LOCK_NB) < 0)
                return log_error_errno(errno == EWOULDBLOCK ? EADDRINUSE : errno, "another holder runs on %s: %m",
                                       h->path);
        h->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (h->listen_fd < 0)
                return -errno;
        /* A socket file left by a holder that died: nothing listens on it. */
        if (connect(h->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                return log_error_errno(EADDRINUSE, "a holder already listens on %s", h->path);
        if (errno == ECONNREFUSED)
                unlink(h->path);
        close(h->listen_fd);
        h->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (h->listen_fd < 0)
                return -errno;
        mode_t old = umask(077);
        int r = bind(h->listen_fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0)
                return log_error_errno(errno, "cannot bind %s: %m", h->path);
        if (listen(h->listen_fd, 8) < 0)
                return -errno;
        return 0;
}

/* One wait: for a tierd to connect and, while the guard runs, for events
 * of the groups it guards. 1: a tierd came and went; 0: something else;
 * <0: the socket failed. */
static int holder_turn(struct holder *h) {
        _cleanup_free_ struct pollfd *p = calloc(h->n + 1, sizeof(*p));
        size_t np = 1;
        uint64_t fsid;

        if (!p)
                return -ENOMEM;
        p[0] = (struct pollfd){ .fd = h->listen_fd, .events = POLLIN };
        for (size_t i = 0; h->guarding && i < h->n; i++)
                if (guard_is_group(&h->fds[i], &fsid))
                        p[np++] = (struct pollfd){ .fd = h->fds[i].fd, .events = POLLIN };
        if (poll(p, np, h->n_waiting ? 1 : guard_due_ms(h, now_usec())) < 0)
                return errno == EINTR ? 0 : log_error_errno(errno, "poll: %m");
        if (p[0].revents & POLLIN) {
                int sock = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (sock < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                return 0;
                        return log_error_errno(errno, "accept: %m");
                }
                serve_client(h, sock);
                close(sock);
                return 1;
        }
        for (size_t i = 1; i < np; i++)
                if (p[i].revents & POLLIN)
                        guard_serve(h, p[i].fd, now_usec());
        if (h->n_waiting)
                guard_settle(h, now_usec(), false);
        if (guard_due_ms(h, now_usec()) == 0)
                guard_start(h);
        return 0;
}

static volatile sig_atomic_t terminate;
static void on_sigterm(int sig) {
        (void)sig;
        terminate = 1;
}

static void usage(void) {
        fprintf(stderr, "Usage: tierd-holder [--socket PATH] [--exit-when-empty]\n"
                        "Keeps tierd's fanotify groups and in-flight record open across tierd restarts, and\n"
                        "answers reads of files not whole EIO while no tierd runs (its guard)\n"
                        "(default socket " HOLDER_DEFAULT_SOCKET ").\n");
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "exit-when-empty", no_argument, NULL, 'e' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct holder h = { .path = HOLDER_DEFAULT_SOCKET, .listen_fd = -1, .lock_fd = -1,
                             .guard_after_usec = HOLDER_GUARD_AFTER_DEFAULT_MS * 1000ull };
        int c, r;

        log_set_ident("tierd-holder");
        while ((c = getopt_long(argc, argv, "s:eh", options, NULL)) >= 0)
                switch (c) {
                case 's': h.path = optarg; break;
                case 'e': h.exit_when_empty = true; break;
                case 'h': usage(); return EXIT_SUCCESS;
                default: usage(); return 2;
                }
        h.waiting_max = guard_waiting_room();
        if (optind != argc) {
                usage();
                return 2;
        }
        /* A client that dies mid-reply must not kill the holder. */
        signal(SIGPIPE, SIG_IGN);
        /* Nor a hangup (it may open a tty's event fd as a session leader),
         * an interrupt, or a stop that would close the groups while stubs
         * could read as zeros: SIGTERM ends it only holding no group. */
        signal(SIGHUP, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_sigterm }, NULL);
        h.fds = calloc(HOLDER_MAX_FDS, sizeof(*h.fds));
        if (!h.fds)
                return EXIT_FAILURE;
        r = holder_listen(&h);
        if (r < 0)
                return EXIT_FAILURE;
        log_info("listening on %s", h.path);
        for (;;) {
                r = holder_turn(&h);
                if (r < 0)
                        return EXIT_FAILURE;
                if (terminate) {
                        terminate = 0;
                        if (!guard_holds_groups(&h)) {
                                log_info("SIGTERM: holding no group: exiting");
                                unlink(h.path);
                                return EXIT_SUCCESS;
                        }
                        log_error("SIGTERM ignored: closing the groups it holds would let every file not whole "
                                  "read as zeros. Start tierd, restore released files (tierctl restore), or send "
                                  "SIGKILL to let go of them anyway");
                }
                if (r > 0 && h.exit_when_empty && h.n == 0) {
                        log_info("nothing left to hold: exiting");
                        unlink(h.path);
                        return EXIT_SUCCESS;
                }
        }
}
