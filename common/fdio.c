/* SPDX-License-Identifier: MIT */
#include "fdio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "macro.h"

int open_path_beneath(int dir_fd, const char *path) {
        struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                           RESOLVE_NO_XDEV };
        return (int)syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
}

bool path_beneath_is(int dir_fd, const char *path, const struct stat *st) {
        _cleanup_close_ int fd = open_path_beneath(dir_fd, path);
        struct stat again;
        return fd >= 0 && fstat(fd, &again) == 0 && again.st_ino == st->st_ino && again.st_dev == st->st_dev;
}

int write_full(int fd, const void *buf, size_t n) {
        for (size_t done = 0; done < n;) {
                ssize_t w = write(fd, (const char *)buf + done, n - done);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                if (w == 0)
                        return -EIO;
                done += (size_t)w;
        }
        return 0;
}

unsigned fd_numbers_in_use(int pidfd, unsigned fallback) {
        char path[64], line[128];
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int pid = -1;
        unsigned high = 0;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        if (pidfd < 0 || !(f = fopen(path, "re")))
                return fallback;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Pid: %d", &pid) == 1)
                        break;
        snprintf(path, sizeof(path), "/proc/%d/fd", pid);
        if (pid <= 0 || !(d = opendir(path)))
                return fallback;
        while ((de = readdir(d)))
                high = MAX(high, (unsigned)strtoul(de->d_name, NULL, 10) + 1);
        return high ? high : fallback;
}

int fsync_dir_of(const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_close_ int fd = -1;

        if (!copy)
                return -ENOMEM;
        fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return fsync(fd) < 0 ? -errno : 0;
}

int unix_connect(const char *path, int type, unsigned timeout_sec) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = timeout_sec };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if ((timeout_sec && (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
                             setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)) ||
            connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}
