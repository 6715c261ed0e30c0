/* The worker's manifest cache: hits, misses, the byte bound, LRU order. */
#include "unit.h"
#include "mcache.h"

static void test_lru(void **state) {
        (void)state;
        struct manifest_cache *c = mcache_new(3 * 100);
        uint8_t root[32] = { 1 }, other[32] = { 2 }, page[100], got[100];

        for (int i = 0; i < 3; i++) {
                memset(page, i, sizeof(page));
                mcache_put(c, root, (uint64_t)i * 100, page, sizeof(page));
        }
        assert_true(mcache_get(c, root, 0, 100, got)); /* 0 is now the most recent */
        assert_int_equal(got[0], 0);
        assert_false(mcache_get(c, other, 0, 100, got));
        assert_false(mcache_get(c, root, 0, 50, got)); /* another length: another part */
        memset(page, 9, sizeof(page));
        mcache_put(c, root, 900, page, sizeof(page)); /* evicts 100, the least recent */
        assert_false(mcache_get(c, root, 100, 100, got));
        assert_true(mcache_get(c, root, 0, 100, got));
        assert_true(mcache_get(c, root, 900, 100, got));
        assert_int_equal(got[99], 9);
        uint8_t big[400] = { 0 };
        mcache_put(c, root, 5000, big, sizeof(big)); /* larger than the bound: not kept */
        assert_false(mcache_get(c, root, 5000, sizeof(big), big));
        mcache_free(c);

        c = mcache_new(0); /* no cache */
        mcache_put(c, root, 0, page, sizeof(page));
        assert_false(mcache_get(c, root, 0, 100, got));
        mcache_free(c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lru),
        };
        return UNIT_RUN("mcache", tests);
}
