/* SPDX-License-Identifier: MIT */
#include "fdstore.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "holder-proto.h"
#include "fdio.h"
#include "log.h"
#include "macro.h"
#include "proto.h"

#define HOLDER_START_TIMEOUT_MS 5000

static int inherit(struct fdstore *s, const char *name, int fd) {
        struct fdstore_entry *n = realloc(s->inherited, (s->n_inherited + 1) * sizeof(*n));
        if (!n)
                return -ENOMEM;
        s->inherited = n;
        n[s->n_inherited].name = strdup(name);
        if (!n[s->n_inherited].name)
                return -ENOMEM;
        n[s->n_inherited++].fd = fd;
        return 0;
}

static int systemd_collect(struct fdstore *s) {
        char **names = NULL;
        int n = sd_listen_fds_with_names(true, &names);
        int r = 0;

        if (n < 0)
                return log_error_errno(n, "reading $LISTEN_FDS: %m");
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                fcntl(fd, F_SETFD, FD_CLOEXEC);
                if (r >= 0)
                        r = inherit(s, names && names[i] ? names[i] : "unknown", fd);
                else
                        close(fd);
        }
        for (int i = 0; names && names[i]; i++)
                free(names[i]);
        free(names);
        return r;
}

/* The holder has the groups: what systemd's store kept (a predecessor's,
 * before it moved them) is stale. Closed, and systemd told to drop it. */
static void systemd_drop(struct fdstore *s) {
        char msg[HOLDER_MSG_MAX];
        if (systemd_collect(s) < 0)
                return;
        for (size_t i = 0; i < s->n_inherited; i++) {
                log_info("dropping %s from systemd's fd store: tierd-holder keeps the groups", s->inherited[i].name);
                snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", s->inherited[i].name);
                sd_notify(false, msg);
                safe_close(s->inherited[i].fd);
                free(s->inherited[i].name);
        }
        s->n_inherited = 0;
}

/* Started in its own session, so it outlives tierd and its process group;
 * it exits by itself once tierd has taken everything back for good. */
static int holder_spawn(const char *binary, const char *path) {
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                char *const argv[] = { "tierd-holder", "--socket", (char *)path, "--exit-when-empty", NULL };
                sigset_t none;
                setsid();
                syscall(SYS_close_range, 3, ~0U, 0);
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                /* Double fork: not tierd's child, never reaped by it. */
                if (fork() != 0)
                        _exit(0);
                /* Not tierd's AWS keys (credential_source "env"): it only keeps fds. */
                char *envp[256];
                size_t n = 0;
                for (char **e = environ; e && *e && n < ARRAY_SIZE(envp) - 1; e++)
                        if (strncmp(*e, "AWS_", 4) != 0)
                                envp[n++] = *e;
                envp[n] = NULL;
                execve(binary, argv, envp);
                _exit(127);
        }
        waitpid(pid, NULL, 0);
        return 0;
}

static int holder_open(struct fdstore *s, const char *path, const char *binary) {
        int fd = unix_connect(path, SOCK_SEQPACKET, 0);

        if (fd == -ENOENT || fd == -ECONNREFUSED) {
                log_info("no holder on %s: starting %s", path, binary);
                int r = holder_spawn(binary, path);
                if (r < 0)
                        return log_error_errno(r, "cannot start tierd-holder: %m");
                for (int waited = 0; waited < HOLDER_START_TIMEOUT_MS; waited += 10) {
                        fd = unix_connect(path, SOCK_SEQPACKET, 0);
                        if (fd >= 0 || (fd != -ENOENT && fd != -ECONNREFUSED))
                                break;
                        nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
                }
        }
        if (fd < 0)
                return log_error_errno(fd, "cannot reach tierd-holder on %s: %m", path);
        s->holder_sock = fd;
        return 0;
}

/* Blocks until the previous tierd is gone: the holder serves one at a time. */
static int holder_fetch(struct fdstore *s, const char *path) {
        struct pollfd p = { .fd = s->holder_sock, .events = POLLIN };
        int r = proto_send(s->holder_sock, "FETCH", 5, -1);

        if (r < 0)
                return log_error_errno(r, "holder %s: %m", path);
        if (poll(&p, 1, 1000) == 0)
                log_info("waiting for the previous tierd to hand over (holder %s)", path);
        for (;;) {
                char msg[HOLDER_MSG_MAX + 1];
                size_t n = 0;
                int fd = -1;
                r = proto_recv(s->holder_sock, msg, HOLDER_MSG_MAX, &n, &fd, 0);
                if (r != 0)
                        return log_error_errno(r > 0 ? ECONNRESET : r, "holder %s: %m", path);
                msg[n] = 0;
                if (strcmp(msg, "END") == 0)
                        return 0;
                if (strncmp(msg, "FD ", 3) != 0 || fd < 0) {
                        safe_close(fd);
                        return log_error_errno(EBADMSG, "holder %s: unexpected reply: %m", path);
                }
                r = inherit(s, msg + 3, fd);
                if (r < 0) {
                        close(fd);
                        return r;
                }
        }
}

static int holder_request(struct fdstore *s, const char *msg, int fd) {
        char rep[HOLDER_MSG_MAX + 1];
        size_t n = 0;
        int r = proto_send(s->holder_sock, msg, strlen(msg), fd);
        if (r < 0)
                return r;
        r = proto_recv(s->holder_sock, rep, HOLDER_MSG_MAX, &n, NULL, 0);
        if (r != 0)
                return r > 0 ? -ECONNRESET : r;
        rep[n] = 0;
        if (strcmp(rep, "ERR not held") == 0)
                return -ENOENT;
        if (strcmp(rep, "OK") != 0)
                return log_error_errno(EIO, "holder refused \"%s\": %s", msg, rep);
        return 0;
}

/* systemd runs us (INVOCATION_ID, NOTIFY_SOCKET) and keeps fds for us:
 * systemd 254+ says how many in $FDSTORE; older ones (Debian 12's 252)
 * cannot tell, and the unit must set FileDescriptorStoreMax=. A notify
 * socket alone (podman --sdnotify) stores nothing. */
bool systemd_fd_store_usable(void) {
        const char *max = getenv("FDSTORE");
        if (!getenv("NOTIFY_SOCKET") || !getenv("INVOCATION_ID"))
                return false;
        if (max && strtoul(max, NULL, 10) == 0) {
                log_warning("systemd keeps no fds for tierd (FileDescriptorStoreMax=0): using tierd-holder");
                return false;
        }
        return true;
}

int fdstore_open(struct fdstore *s, const char *holder_path, const char *holder_binary) {
        int r;

        *s = (struct fdstore){ .holder_sock = -1, .holder_path = holder_path, .holder_binary = holder_binary };
        /* A holder that listens comes first, even under systemd: it may
         * guard the groups a stopped tierd left it (holder/guard.c). */
        if (holder_path && (r = unix_connect(holder_path, SOCK_SEQPACKET, 0)) >= 0) {
                s->kind = FDSTORE_HOLDER;
                s->holder_sock = r;
                if (systemd_fd_store_usable())
                        systemd_drop(s);
                return holder_fetch(s, holder_path);
        }
        if (systemd_fd_store_usable()) {
                s->kind = FDSTORE_SYSTEMD;
                return systemd_collect(s);
        }
        if (!holder_path) {
                log_warning("no holder (--no-holder): if tierd dies, reads of released files get zeros until it "
                            "restarts");
                return 0;
        }
        s->kind = FDSTORE_HOLDER;
        r = holder_open(s, holder_path, holder_binary);
        if (r < 0)
                return r;
        return holder_fetch(s, holder_path);
}

int fdstore_take(struct fdstore *s, const char *name) {
        for (size_t i = 0; i < s->n_inherited; i++)
                if (s->inherited[i].fd >= 0 && strcmp(s->inherited[i].name, name) == 0) {
                        int fd = s->inherited[i].fd;
                        s->inherited[i].fd = -1;
                        return fd;
                }
        return -ENOENT;
}

int fdstore_put(struct fdstore *s, const char *name, int fd) {
        char msg[HOLDER_MSG_MAX];
        int r;

        switch (s->kind) {
        case FDSTORE_SYSTEMD:
                snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
                r = sd_pid_notify_with_fds(0, false, msg, &fd, 1);
                if (r == 0)
                        r = -ENOTCONN;
                if (r < 0)
                        return log_error_errno(r, "cannot store %s in systemd's fd store (FileDescriptorStoreMax= "
                                                  "set?): %m", name);
                return 0;
        case FDSTORE_HOLDER:
                snprintf(msg, sizeof(msg), "STORE %s", name);
                r = holder_request(s, msg, fd);
                if (r < 0)
                        return log_error_errno(r, "cannot store %s in tierd-holder: %m", name);
                return 0;
        default:
                return 0;
        }
}

int fdstore_forget(struct fdstore *s, const char *name) {
        char msg[HOLDER_MSG_MAX];

        switch (s->kind) {
        case FDSTORE_SYSTEMD:
                snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
                return sd_notify(false, msg) < 0 ? -EIO : 0;
        case FDSTORE_HOLDER:
                snprintf(msg, sizeof(msg), "REMOVE %s", name);
                return holder_request(s, msg, -1);
        default:
                return 0;
        }
}

int fdstore_guard_after(struct fdstore *s, uint64_t usec) {
        char msg[HOLDER_MSG_MAX];
        int r;

        if (s->kind != FDSTORE_HOLDER)
                return 0;
        snprintf(msg, sizeof(msg), "GUARD-AFTER %llu", (unsigned long long)(usec / 1000));
        r = holder_request(s, msg, -1);
        if (r < 0)
                log_warning("tierd-holder on %s refused \"%s\" (%s): it keeps the groups but never answers for an "
                            "absent tierd; restart it to update it", s->holder_path, msg, strerror(-r));
        return r;
}

int fdstore_to_holder(struct fdstore *s) {
        int r;

        if (s->kind == FDSTORE_HOLDER)
                return 0;
        if (!s->holder_path || !s->holder_binary)
                return -ENOTCONN;
        r = holder_open(s, s->holder_path, s->holder_binary);
        if (r < 0)
                return r;
        s->kind = FDSTORE_HOLDER;
        return 0;
}

void fdstore_ready(struct fdstore *s) {
        if (s->kind == FDSTORE_HOLDER)
                holder_request(s, "READY", -1); /* an older holder does not know it: nothing changes */
}

int fdstore_guard(struct fdstore *s) {
        return s->kind == FDSTORE_HOLDER ? holder_request(s, "GUARD", -1) : -ENOTCONN;
}

int fdstore_move_above(struct fdstore *s, int min) {
        int r = fd_move_above(&s->holder_sock, min);
        for (size_t i = 0; r >= 0 && i < s->n_inherited; i++)
                r = fd_move_above(&s->inherited[i].fd, min);
        return r;
}

void fdstore_done(struct fdstore *s) {
        for (size_t i = 0; i < s->n_inherited; i++) {
                safe_close(s->inherited[i].fd);
                free(s->inherited[i].name);
        }
        free(s->inherited);
        s->inherited = NULL;
        s->n_inherited = 0;
        s->holder_sock = safe_close(s->holder_sock);
}
