/* pread-at FILE OFFSET LENGTH: one pread(2), the bytes to stdout; exits 1
 * with the error (EIO...) printed if the read fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
        if (argc != 4) {
                fprintf(stderr, "usage: pread-at FILE OFFSET LENGTH\n");
                return 2;
        }
        size_t len = strtoull(argv[3], NULL, 0);
        char *buf = malloc(len ? len : 1);
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0 || !buf) {
                perror(argv[1]);
                return 1;
        }
        ssize_t n = pread(fd, buf, len, (off_t)strtoull(argv[2], NULL, 0));
        if (n < 0) {
                fprintf(stderr, "pread-at: %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        fwrite(buf, 1, (size_t)n, stdout);
        return 0;
}
