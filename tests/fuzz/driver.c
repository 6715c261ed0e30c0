/* The fuzz targets' own driver, for make check without clang: each seed
 * of the target's corpus (tests/fuzz/corpus/<target>/, read only) as it
 * is, then ROUNDS random mutations of them (bit flips, random bytes,
 * truncation, insertion, duplication, splices of two seeds), each given to
 * LLVMFuzzerTestOneInput under ASan+UBSan. A target may bring its own main
 * instead (this one is weak). libFuzzer (make fuzz) does all this better,
 * guided by coverage. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEEDS_MAX 256
#define INPUT_MAX (1 << 16)

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
}

static size_t mutate(uint8_t *buf, size_t n, const uint8_t *other, size_t other_n) {
        for (int k = (int)(rnd() % 4); k >= 0; k--) {
                switch (rnd() % 6) {
                case 0: if (n) buf[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8)); break;
                case 1: if (n) buf[rnd() % n] = (uint8_t)rnd(); break;
                case 2: if (n) n = rnd() % n; break;
                case 3: { /* insert random bytes */
                        size_t at = n ? rnd() % n : 0, len = 1 + rnd() % 8;
                        if (n + len > INPUT_MAX)
                                break;
                        memmove(buf + at + len, buf + at, n - at);
                        for (size_t i = 0; i < len; i++)
                                buf[at + i] = (uint8_t)rnd();
                        n += len;
                        break;
                }
                case 4: { /* duplicate a slice */
                        if (!n)
                                break;
                        size_t from = rnd() % n, len = 1 + rnd() % (n - from), at = rnd() % n;
                        if (n + len > INPUT_MAX)
                                break;
                        memmove(buf + at + len, buf + at, n - at);
                        memmove(buf + at, buf + (from >= at ? from + len : from), len);
                        n += len;
                        break;
                }
                default: { /* splice: our head, the other seed's tail */
                        if (!n || !other_n)
                                break;
                        size_t cut = rnd() % n, from = rnd() % other_n, len = other_n - from;
                        if (cut + len > INPUT_MAX)
                                len = INPUT_MAX - cut;
                        memcpy(buf + cut, other + from, len);
                        n = cut + len;
                }
                }
        }
        return n;
}

__attribute__((weak)) int main(int argc, char **argv) {
        static uint8_t *seed[SEEDS_MAX], buf[INPUT_MAX * 2];
        static size_t seed_n[SEEDS_MAX];
        unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
        const char *dir = argc > 2 ? argv[2] : NULL;
        size_t n_seeds = 0;
        char path[4096];

        DIR *d = dir ? opendir(dir) : NULL;
        if (!d) {
                fprintf(stderr, "usage: %s ROUNDS CORPUS_DIR (a directory of seeds)\n", argv[0]);
                return 2;
        }
        for (struct dirent *de; (de = readdir(d)) && n_seeds < SEEDS_MAX;) {
                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                FILE *f = fopen(path, "rb");
                if (!f)
                        continue;
                seed[n_seeds] = malloc(INPUT_MAX);
                seed_n[n_seeds] = fread(seed[n_seeds], 1, INPUT_MAX, f);
                fclose(f);
                n_seeds++;
        }
        closedir(d);
        if (!n_seeds) {
                fprintf(stderr, "%s: no seeds in %s\n", argv[0], dir);
                return 2;
        }
        for (size_t i = 0; i < n_seeds; i++)
                LLVMFuzzerTestOneInput(seed[i], seed_n[i]);
        for (unsigned long r = 0; r < rounds; r++) {
                size_t a = rnd() % n_seeds, b = rnd() % n_seeds;
                memcpy(buf, seed[a], seed_n[a]);
                size_t n = mutate(buf, seed_n[a], seed[b], seed_n[b]);
                /* A copy of exactly n bytes: ASan sees any read past the input. */
                uint8_t *in = malloc(n ? n : 1);
                memcpy(in, buf, n);
                LLVMFuzzerTestOneInput(in, n);
                free(in);
        }
        printf("1..1\nok 1 - %zu seeds and %lu mutations of them: no crash, no leak, no undefined behaviour\n", n_seeds,
               rounds);
        for (size_t i = 0; i < n_seeds; i++)
                free(seed[i]);
        return 0;
}
