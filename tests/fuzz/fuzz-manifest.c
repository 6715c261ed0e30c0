/* Fuzz target for the chunk manifest codec: any bytes as a manifest head
 * and pages must be refused or parsed within bounds, never read or write
 * out of them. LLVMFuzzerTestOneInput is libFuzzer's entry point (clang
 * -fsanitize=fuzzer); built without it, main() mutates a valid manifest
 * at random for a fixed number of rounds under ASan+UBSan (make check). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

#include "manifest.h"

/* The input: 8 bytes of chunk count, 32 of root, then the object. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct manifest m;
        uint64_t chunks;
        if (size < 40)
                return 0;
        memcpy(&chunks, data, 8);
        const uint8_t *root = data + 8, *obj = data + 40;
        size_t len = size - 40, head = manifest_head_length(chunks % (1ull << 40));
        if (head == 0 || head > len)
                return 0;
        /* The root given may not be the object's: a parse must then refuse.
         * Make it match half the time, so the page checks run too. */
        uint8_t real[32];
        EVP_Digest(obj, head, real, NULL, EVP_sha256(), NULL);
        if (root[0] & 1)
                root = real;
        if (manifest_parse_head(obj, head, root, &m) < 0)
                return 0;
        for (int level = (int)m.levels - 2; level >= 0; level--)
                for (uint64_t idx = 0; idx < m.count[level]; idx += MANIFEST_FANOUT * 7 + 1) {
                        uint64_t off, n;
                        manifest_page_range(&m, (unsigned)level, idx, &off, &n);
                        if (off > len || n > len - off || n > MANIFEST_PAGE)
                                continue;
                        const uint8_t *parent = NULL;
                        if (level + 2 < (int)m.levels) {
                                uint64_t poff, pn;
                                manifest_page_range(&m, (unsigned)level + 1, idx / MANIFEST_FANOUT, &poff, &pn);
                                if (poff > len || pn > len - poff)
                                        continue;
                                parent = obj + poff;
                        }
                        manifest_check_page(&m, (unsigned)level, idx / MANIFEST_FANOUT, obj + off, n, parent);
                }
        return 0;
}

#ifndef FUZZING_WITH_LIBFUZZER
int main(int argc, char **argv) {
        unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 20000;
        uint64_t chunks = 300;
        uint8_t (*leaves)[32] = calloc(chunks, 32), *obj, root[32];
        size_t len;

        srandom(12345);
        for (uint64_t i = 0; i < chunks; i++)
                EVP_Digest(&i, sizeof(i), leaves[i], NULL, EVP_sha256(), NULL);
        if (manifest_build((const uint8_t(*)[32])leaves, chunks, 4096, chunks * 4096, &obj, &len, root) < 0)
                return 1;
        uint8_t *in = malloc(40 + len);
        for (unsigned r = 0; r < rounds; r++) {
                uint64_t c = r % 5 == 0 ? (uint64_t)random() : chunks;
                memcpy(in, &c, 8);
                memcpy(in + 8, root, 32);
                in[8] = (uint8_t)(r & 1); /* every other round: the real root */
                memcpy(in + 40, obj, len);
                for (int k = random() % 4; k >= 0; k--)
                        in[40 + (size_t)random() % len] ^= (uint8_t)(1u << (random() % 8));
                LLVMFuzzerTestOneInput(in, 40 + (size_t)(random() % 3 == 0 ? (size_t)random() % len : len));
        }
        printf("1..1\nok 1 - %u mutated manifests refused or parsed within bounds\n# ok - fuzz-manifest\n", rounds);
        free(in);
        free(obj);
        free(leaves);
        return 0;
}
#endif
