/* The chunk manifest codec: build, head, pages, and every way to tamper. */
#include "unit.h"
#include <errno.h>
#include <openssl/evp.h>
#include "manifest.h"

static uint8_t (*leaves_for(uint64_t n))[32] {
        uint8_t (*l)[32] = calloc(n, 32);
        for (uint64_t i = 0; i < n; i++)
                EVP_Digest(&i, sizeof(i), l[i], NULL, EVP_sha256(), NULL);
        return l;
}

/* Walks from the head to chunk i's leaf, checking each page; 0 and the
 * leaf, or -EBADMSG. */
static int leaf_of(const uint8_t *obj, size_t len, uint64_t chunks, const uint8_t root[32], uint64_t i, uint8_t out[32]) {
        struct manifest m;
        int r = manifest_parse_head(obj, manifest_head_length(chunks), root, &m);
        if (r < 0)
                return r;
        const uint8_t *parent = NULL;
        for (int level = (int)m.levels - 2; level >= 0; level--) {
                uint64_t idx = manifest_index_at((unsigned)level, i), off, n;
                manifest_page_range(&m, (unsigned)level, idx, &off, &n);
                if (off + n > len)
                        return -EBADMSG;
                r = manifest_check_page(&m, (unsigned)level, idx / MANIFEST_FANOUT, obj + off, n, parent);
                if (r < 0)
                        return r;
                parent = obj + off;
        }
        memcpy(out, m.levels == 1 ? m.top + i * 32 : manifest_hash_in_page(parent, i), 32);
        return 0;
}

static void roundtrip(uint64_t chunks) {
        uint8_t (*l)[32] = leaves_for(chunks), root[32], leaf[32];
        uint8_t *obj;
        size_t len;
        assert_int_equal(manifest_build((const uint8_t(*)[32])l, chunks, 4096, chunks * 4096 - 100, &obj, &len, root), 0);
        for (uint64_t i = 0; i < chunks; i += chunks / 7 + 1) {
                assert_int_equal(leaf_of(obj, len, chunks, root, i, leaf), 0);
                assert_memory_equal(leaf, l[i], 32);
        }
        assert_int_equal(leaf_of(obj, len, chunks, root, chunks - 1, leaf), 0);
        assert_memory_equal(leaf, l[chunks - 1], 32);
        /* Any flipped byte is caught on the way to some leaf. */
        for (size_t at = 0; at < len; at += len / 13 + 1) {
                obj[at] ^= 1;
                bool caught = false;
                for (uint64_t i = 0; i < chunks && !caught; i++)
                        caught = leaf_of(obj, len, chunks, root, i, leaf) < 0 || memcmp(leaf, l[i], 32) != 0;
                assert_true(caught);
                obj[at] ^= 1;
        }
        free(obj);
        free(l);
}

static void test_roundtrip(void **state) {
        (void)state;
        roundtrip(2);
        roundtrip(128);
        roundtrip(129);
        roundtrip(128 * 128 + 3); /* three levels */
}

static void test_head_small(void **state) {
        (void)state;
        /* 50 GiB in 1 MiB chunks: the head is at most a page of hashes. */
        assert_true(manifest_head_length(51200) <= MANIFEST_HEADER + MANIFEST_PAGE);
        assert_true(manifest_head_length(1ull << 30) <= MANIFEST_HEADER + MANIFEST_PAGE);
}

/* The layout known from the sizes alone (what a fill plans its first GET
 * with) is the one the parsed head gives, and the built object's length. */
static void test_shape_before_head(void **state) {
        (void)state;
        static const uint64_t counts[] = { 2, 128, 129, 1024, 128 * 128 + 3 };
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
                uint64_t chunks = counts[k];
                uint8_t (*l)[32] = leaves_for(chunks), root[32], *obj;
                size_t len;
                struct manifest shape, m;
                assert_int_equal(manifest_build((const uint8_t(*)[32])l, chunks, 4096, chunks * 4096, &obj, &len, root), 0);
                assert_true(manifest_shape(&shape, chunks));
                assert_int_equal(manifest_length(&shape), len);
                assert_int_equal(manifest_parse_head(obj, manifest_head_length(chunks), root, &m), 0);
                assert_int_equal(shape.levels, m.levels);
                for (unsigned level = 0; level < m.levels; level++) {
                        assert_int_equal(shape.count[level], m.count[level]);
                        assert_int_equal(shape.offset[level], m.offset[level]);
                }
                free(obj);
                free(l);
        }
        struct manifest m;
        assert_false(manifest_shape(&m, 1ull << 60)); /* nine levels: more than a manifest has */
}

static void test_refused(void **state) {
        (void)state;
        uint8_t (*l)[32] = leaves_for(4), root[32], *obj;
        size_t len;
        struct manifest m;
        assert_int_equal(manifest_build((const uint8_t(*)[32])l, 1, 4096, 4096, &obj, &len, root), -EINVAL); /* one chunk */
        assert_int_equal(manifest_build((const uint8_t(*)[32])l, 4, 4096, 4096, &obj, &len, root), -EINVAL); /* size != chunks */
        assert_int_equal(manifest_build((const uint8_t(*)[32])l, 4, 4096, 4 * 4096, &obj, &len, root), 0);
        size_t head = manifest_head_length(4);
        assert_int_equal(manifest_parse_head(obj, head, root, &m), 0);
        assert_int_equal(manifest_parse_head(obj, head - 1, root, &m), -EBADMSG); /* truncated */
        obj[8] = 2;                                                              /* version 2 */
        assert_int_equal(manifest_parse_head(obj, head, root, &m), -EBADMSG);
        obj[8] = 1;
        obj[0] = 'X';                                                            /* not a manifest */
        assert_int_equal(manifest_parse_head(obj, head, root, &m), -EBADMSG);
        obj[0] = 'T';
        uint8_t other[32] = { 1 };
        assert_int_equal(manifest_parse_head(obj, head, other, &m), -EBADMSG);   /* another root */
        assert_int_equal(manifest_parse_head(obj, 10, root, &m), -EBADMSG);
        free(obj);
        free(l);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip),
                cmocka_unit_test(test_head_small),
                cmocka_unit_test(test_shape_before_head),
                cmocka_unit_test(test_refused),
        };
        return UNIT_RUN("manifest", tests);
}
