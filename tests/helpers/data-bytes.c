/* data-bytes FILE: bytes of FILE's content backed by data (SEEK_DATA /
 * SEEK_HOLE), not counting holes. st_blocks would also count xattr blocks,
 * which xfs allocates for a stub record. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
        struct stat st;
        long long total = 0;
        int fd;
        if (argc != 2 || (fd = open(argv[1], O_RDONLY)) < 0 || fstat(fd, &st) < 0) {
                perror("data-bytes");
                return 1;
        }
        for (off_t pos = 0; pos < st.st_size;) {
                off_t data = lseek(fd, pos, SEEK_DATA);
                if (data < 0)
                        break; /* ENXIO: only a hole up to the end */
                off_t hole = lseek(fd, data, SEEK_HOLE);
                if (hole < 0) {
                        perror("SEEK_HOLE");
                        return 1;
                }
                total += hole - data;
                pos = hole;
        }
        printf("%lld\n", total);
        return 0;
}
