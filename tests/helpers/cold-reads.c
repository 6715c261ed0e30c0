/* cold-reads DIR ORIG FIRST N: for i in FIRST..FIRST+N-1, opens DIR/b<i>,
 * reads 4 KiB at offset 8192 (a first read: a cold fill when the file is
 * released), closes it, and checks the bytes against ORIG/b<i>. Prints each
 * read's latency in microseconds, one a line. Exit 0; 1 if a read failed
 * (its errno on stderr); 3 on wrong bytes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OFFSET 8192
#define LEN 4096

static long long now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int read_at(const char *path, char *buf) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = pread(fd, buf, LEN, OFFSET);
        int r = n < 0 ? -errno : n == LEN ? 0 : -EIO;
        close(fd);
        return r;
}

int main(int argc, char **argv) {
        char path[4096], got[LEN], want[LEN];

        if (argc != 5) {
                fprintf(stderr, "usage: cold-reads DIR ORIG FIRST N\n");
                return 2;
        }
        long first = atol(argv[3]), n = atol(argv[4]);
        for (long i = first; i < first + n; i++) {
                snprintf(path, sizeof(path), "%s/b%ld", argv[1], i);
                long long t0 = now_us();
                int r = read_at(path, got);
                long long us = now_us() - t0;
                if (r < 0) {
                        fprintf(stderr, "cold-reads: %s: %s\n", path, strerror(-r));
                        return 1;
                }
                printf("%lld\n", us);
                snprintf(path, sizeof(path), "%s/b%ld", argv[2], i);
                if (read_at(path, want) < 0 || memcmp(got, want, LEN) != 0) {
                        fprintf(stderr, "cold-reads: %s/b%ld: wrong bytes\n", argv[1], i);
                        return 3;
                }
        }
        return 0;
}
