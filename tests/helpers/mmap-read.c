/* mmap-read FILE: maps FILE whole (one pre-content event for the whole
 * range) and writes the mapped bytes to stdout. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
        struct stat st;
        int fd;
        if (argc != 2 || (fd = open(argv[1], O_RDONLY)) < 0 || fstat(fd, &st) < 0) {
                perror("mmap-read");
                return 1;
        }
        if (st.st_size == 0)
                return 0;
        char *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
                perror("mmap");
                return 1;
        }
        for (size_t done = 0; done < (size_t)st.st_size;) {
                ssize_t n = write(1, p + done, (size_t)st.st_size - done);
                if (n <= 0) {
                        perror("write");
                        return 1;
                }
                done += (size_t)n;
        }
        return 0;
}
