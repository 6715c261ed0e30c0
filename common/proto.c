/* SPDX-License-Identifier: MIT */
#include "proto.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83 /* Linux 6.16 */
#endif

int proto_refuse_fds(int sock) {
        int no = 0;
        return setsockopt(sock, SOL_SOCKET, SO_PASSRIGHTS, &no, sizeof(no)) < 0 ? -errno : 0;
}

int proto_send(int sock, const void *msg, size_t size, int fd) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = (void *)msg, .iov_len = size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (fd >= 0) {
                mh.msg_control = control.buf;
                mh.msg_controllen = sizeof(control.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        for (;;) {
                ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
                if (n >= 0)
                        return (size_t)n == size ? 0 : -EIO;
                if (errno != EINTR)
                        return -errno;
        }
}

int proto_recv(int sock, void *msg, size_t size, size_t *len, int *fd, int flags) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 4)];
        } control;
        struct iovec iov = { .iov_base = msg, .iov_len = size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf) };
        ssize_t n;

        if (fd)
                *fd = -1;
        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        /* Close every fd we did not ask for, before judging the record. */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < nfds; i++) {
                        int f;
                        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (fd && *fd < 0)
                                *fd = f;
                        else
                                close(f);
                }
        }
        if (n == 0)
                return 1;
        if (len)
                *len = (size_t)n;
        if ((len ? (size_t)n > size : (size_t)n != size) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                if (fd && *fd >= 0) {
                        close(*fd);
                        *fd = -1;
                }
                return -EBADMSG;
        }
        return 0;
}
