/* mremap-read FILE: maps the first half of FILE, grows the mapping to the
 * whole file with mremap (no new pre-content event), and writes the bytes
 * to stdout. The second half must not read as zeros. */
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv) {
        struct stat st;
        int fd;
        if (argc != 2 || (fd = open(argv[1], O_RDONLY)) < 0 || fstat(fd, &st) < 0 || st.st_size < 8192) {
                perror("mremap-read");
                return 1;
        }
        size_t half = ((size_t)st.st_size / 2) & ~(size_t)4095;
        char *p = mmap(NULL, half, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED || (p = mremap(p, half, (size_t)st.st_size, MREMAP_MAYMOVE)) == MAP_FAILED) {
                perror("mmap/mremap");
                return 1;
        }
        return fwrite(p, 1, (size_t)st.st_size, stdout) == (size_t)st.st_size ? 0 : 1;
}
