/* randread FILE COUNT SEED [distinct]: COUNT preads of 4 KiB at random
 * 4 KiB-aligned offsets of FILE (a fixed sequence for a seed; "distinct":
 * no offset twice, so every read of a released file needs a fill). Prints
 * the seconds taken and a checksum of every byte read, which is the same
 * for two files with the same bytes. For benchmarks. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t next(uint64_t *s) { /* splitmix64 */
        uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

int main(int argc, char **argv) {
        struct stat st;
        struct timespec a, b;
        char buf[4096];
        uint64_t seed, sum = 0;
        long count;

        if (argc < 4 || argc > 5 || (count = atol(argv[2])) <= 0) {
                fprintf(stderr, "usage: randread FILE COUNT SEED [distinct]\n");
                return 2;
        }
        seed = strtoull(argv[3], NULL, 0);
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < 4096) {
                fprintf(stderr, "randread: %s: %s\n", argv[1], fd < 0 ? strerror(errno) : "smaller than 4 KiB");
                return 1;
        }
        uint64_t blocks = (uint64_t)st.st_size / 4096;
        uint64_t *order = malloc(sizeof(uint64_t) * (size_t)count);
        if (!order)
                return 1;
        if (argc == 5) { /* a partial Fisher-Yates: count distinct blocks */
                if ((uint64_t)count > blocks) {
                        fprintf(stderr, "randread: only %" PRIu64 " distinct blocks\n", blocks);
                        return 2;
                }
                uint64_t *perm = malloc(sizeof(uint64_t) * blocks);
                if (!perm)
                        return 1;
                for (uint64_t i = 0; i < blocks; i++)
                        perm[i] = i;
                for (long i = 0; i < count; i++) {
                        uint64_t j = (uint64_t)i + next(&seed) % (blocks - (uint64_t)i), t = perm[i];
                        perm[i] = perm[j];
                        perm[j] = t;
                        order[i] = perm[i];
                }
                free(perm);
        } else
                for (long i = 0; i < count; i++)
                        order[i] = next(&seed) % blocks;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < count; i++) {
                ssize_t n = pread(fd, buf, sizeof(buf), (off_t)(order[i] * 4096));
                if (n != (ssize_t)sizeof(buf)) {
                        fprintf(stderr, "randread: %s: pread at %" PRIu64 ": %s\n", argv[1], order[i] * 4096,
                                n < 0 ? strerror(errno) : "short");
                        return 1;
                }
                for (size_t k = 0; k < sizeof(buf); k += 8) {
                        uint64_t w;
                        memcpy(&w, buf + k, 8);
                        sum = (sum ^ w) * 0x100000001b3ull;
                }
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("%.6f %016" PRIx64 "\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9, sum);
        free(order);
        return 0;
}
