/* mkfiles DIR N: N one-byte files in DIR, 1000 to a subdirectory (d0/f0 ...),
 * for benchmarks over many files. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
        char path[4096];
        long n;
        if (argc != 3 || (n = atol(argv[2])) <= 0) {
                fprintf(stderr, "usage: mkfiles DIR N\n");
                return 2;
        }
        for (long i = 0; i < n; i++) {
                if (i % 1000 == 0) {
                        snprintf(path, sizeof(path), "%s/d%ld", argv[1], i / 1000);
                        if (mkdir(path, 0755) < 0) {
                                perror(path);
                                return 1;
                        }
                }
                snprintf(path, sizeof(path), "%s/d%ld/f%ld", argv[1], i / 1000, i % 1000);
                int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (fd < 0 || write(fd, "x", 1) != 1) {
                        perror(path);
                        return 1;
                }
                close(fd);
        }
        return 0;
}
