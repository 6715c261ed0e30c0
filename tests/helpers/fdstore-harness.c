/* SPDX-License-Identifier: MIT */
/*
 * Plays systemd's part for tierd's fd-store path, as a service manager with
 * Restart=always and FileDescriptorStoreMax= would: receives sd_notify
 * datagrams on $NOTIFY_SOCKET (READY=1, FDSTORE=1 + FDNAME= with fds,
 * FDSTOREREMOVE=1), restarts the service 100 ms after it exits, and hands the
 * stored fds to the next one as $LISTEN_FDS / $LISTEN_FDNAMES / $LISTEN_PID.
 * SIGTERM or SIGINT: stops the service with that signal (as KillSignal=
 * would), then flushes the store and exits, as systemd does when a unit
 * stops for good.
 *   fdstore-harness SOCKET PIDFILE COMMAND [ARGS...]
 * Prints one line per event: "ready PID", "stored NAME", "exited PID",
 * "started PID with N fds", "reloading", "status TEXT".
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FDS 256

static struct { char name[256]; int fd; } store[MAX_FDS];
static int n_store;

static void store_remove(const char *name) {
        for (int i = 0; i < n_store; i++)
                if (strcmp(store[i].name, name) == 0) {
                        close(store[i].fd);
                        store[i--] = store[--n_store];
                }
}

static pid_t start(char **argv, const char *sock) {
        pid_t pid = fork();
        if (pid != 0)
                return pid;
        /* Stored fds at 3, 4, ...: first out of the way, then in place. */
        int tmp[MAX_FDS];
        char names[MAX_FDS * 257] = "", buf[32];
        for (int i = 0; i < n_store; i++)
                tmp[i] = fcntl(store[i].fd, F_DUPFD, 3 + n_store + 16);
        for (int i = 0; i < n_store; i++) {
                dup2(tmp[i], 3 + i);
                close(tmp[i]);
                if (i)
                        strcat(names, ":");
                strcat(names, store[i].name);
        }
        for (int fd = 3 + n_store; fd < 3 + 2 * n_store + 64; fd++)
                close(fd);
        if (n_store > 0) { /* as systemd: nothing stored, nothing set */
                snprintf(buf, sizeof(buf), "%d", n_store);
                setenv("LISTEN_FDS", buf, 1);
                setenv("LISTEN_FDNAMES", names, 1);
                snprintf(buf, sizeof(buf), "%d", (int)getpid());
                setenv("LISTEN_PID", buf, 1);
        }
        setenv("NOTIFY_SOCKET", sock, 1);
        setenv("INVOCATION_ID", "0123456789abcdef0123456789abcdef", 1);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(argv[0], argv);
        _exit(127);
}

static void receive(int sock) {
        char data[4096], control[CMSG_SPACE(sizeof(int) * MAX_FDS) + CMSG_SPACE(sizeof(struct ucred))];
        struct iovec iov = { data, sizeof(data) - 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control) };
        int fds[MAX_FDS], nfds = 0;
        ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return;
        data[n] = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        memcpy(fds + nfds, CMSG_DATA(c), k * sizeof(int));
                        nfds += k;
                }
        bool fdstore = strstr(data, "FDSTORE=1") != NULL, remove = strstr(data, "FDSTOREREMOVE=1") != NULL;
        char *name = strstr(data, "FDNAME="), *end;
        char nm[256] = "stored";
        if (name) {
                name += 7;
                end = strchrnul(name, '\n');
                snprintf(nm, sizeof(nm), "%.*s", (int)(end - name), name);
        }
        if (remove)
                store_remove(nm), printf("removed %s\n", nm);
        for (int i = 0; i < nfds; i++) {
                if (fdstore && n_store < MAX_FDS) {
                        snprintf(store[n_store].name, sizeof(store[n_store].name), "%s", nm);
                        store[n_store++].fd = fds[i];
                        printf("stored %s\n", nm);
                } else
                        close(fds[i]);
        }
        if (strstr(data, "RELOADING=1"))
                printf("reloading\n");
        const char *status = strstr(data, "STATUS=");
        if (status && (status == data || status[-1] == '\n'))
                printf("status %.*s\n", (int)strcspn(status + 7, "\n"), status + 7);
        if (strstr(data, "READY=1"))
                printf("ready\n");
        if (strstr(data, "STOPPING=1"))
                printf("stopping\n");
}

int main(int argc, char **argv) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        sigset_t mask;
        bool stopping = false;
        pid_t child;
        FILE *f;

        if (argc < 4 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "usage: fdstore-harness SOCKET PIDFILE COMMAND [ARGS...]\n");
                return 2;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        strcpy(sa.sun_path, argv[1]);
        unlink(argv[1]);
        int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                perror("notify socket");
                return 1;
        }
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        child = start(argv + 3, argv[1]);
        for (;;) {
                if (child > 0 && (f = fopen(argv[2], "w"))) {
                        fprintf(f, "%d\n", (int)child);
                        fclose(f);
                        printf("started %d with %d fds\n", (int)child, n_store);
                        child = -child; /* announced */
                }
                struct pollfd p[2] = { { sock, POLLIN, 0 }, { sfd, POLLIN, 0 } };
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        return 1;
                if (p[0].revents)
                        receive(sock);
                if (!p[1].revents)
                        continue;
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) != sizeof(si))
                        continue;
                if (si.ssi_signo == SIGCHLD) {
                        int status;
                        pid_t pid;
                        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                                while (poll(p, 1, 0) > 0 && p[0].revents)
                                        receive(sock); /* what it sent before dying */
                                printf("exited %d\n", (int)pid);
                                if (stopping) {
                                        for (int i = 0; i < n_store; i++)
                                                close(store[i].fd);
                                        unlink(argv[1]);
                                        return 0;
                                }
                                usleep(100 * 1000); /* RestartSec= default */
                                child = start(argv + 3, argv[1]);
                        }
                } else {
                        stopping = true;
                        kill(-child > 0 ? -child : child, (int)si.ssi_signo);
                }
        }
}
