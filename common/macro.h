/* SPDX-License-Identifier: MIT */
/* Small helpers in the style of systemd's macro.h: cleanup attributes. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
/* The struct of type whose member ptr points to. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* An array with room for element n (its capacity *cap, elements of size
 * bytes): arr itself while n < *cap, else moved into twice the room (first
 * elements to begin with), *cap raised. NULL when out of memory: arr is
 * left as it was. */
static inline void *array_room(void *arr, size_t n, size_t *cap, size_t size, size_t first) {
        if (n < *cap)
                return arr;
        size_t want = *cap ? *cap * 2 : first;
        void *grown = reallocarray(arr, want, size);
        if (grown)
                *cap = want;
        return grown;
}

static inline void freep(void *p) { free(*(void **)p); }
static inline void *mfree(void *p) {
        free(p);
        return NULL;
}
static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f) { if (*f) fclose(*f); }
static inline void closedirp(DIR **d) { if (*d) closedir(*d); }

#define _cleanup_free_ _cleanup_(freep)
/* Hands a pointer over: the variable forgets it (its cleanup does nothing). */
#define TAKE_PTR(p) ({ typeof(p) _taken = (p); (p) = NULL; _taken; })
#define TAKE_FD(fd) ({ int _taken = (fd); (fd) = -1; _taken; })
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

static inline int safe_close(int fd) {
        if (fd >= 0)
                closep(&fd);
        return -1;
}

/* Moves *fd to a number at or above min (close-on-exec), so that lower
 * numbers are free to be reserved. */
static inline int fd_move_above(int *fd, int min) {
        if (*fd < 0 || *fd >= min)
                return 0;
        int n = fcntl(*fd, F_DUPFD_CLOEXEC, min);
        if (n < 0)
                return -errno;
        close(*fd);
        *fd = n;
        return 0;
}
