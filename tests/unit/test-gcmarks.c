/* The collection's sets of hashes (supervisor/store/gcmarks.c): merged
 * and sorted in one go on a thread, found by binary search, kept sorted
 * as archives add to them. */
#include "unit.h"
#include "gcmarks.h"

static void hash_of(uint8_t h[32], unsigned v) {
        memset(h, 0, 32);
        for (int i = 0; i < 4; i++)
                h[i] = (uint8_t)(v >> (8 * (3 - i)));
        h[31] = (uint8_t)(v * 7); /* not only the first bytes differ */
}

static void test_merge_sort(void **state) {
        (void)state;
        struct hashes into = {}, from = {};
        uint8_t h[32];

        hash_of(h, 2);
        assert_false(hashes_has(&into, h)); /* empty */
        for (unsigned v = 5000; v > 0; v -= 2) { /* the even ones, backwards */
                hash_of(h, v);
                assert_int_equal(hashes_add(v % 4 == 0 ? &into : &from, h), 0);
        }
        size_t total = into.n + from.n;
        assert_int_equal(hashes_merge_sort(&into, &from), 0);
        assert_int_equal(into.n, total);
        assert_int_equal(from.n, 0); /* emptied */
        assert_null(from.h);
        for (size_t i = 1; i < into.n; i++)
                assert_true(memcmp(into.h[i - 1], into.h[i], 32) <= 0);
        for (unsigned v = 1; v <= 5000; v++) {
                hash_of(h, v);
                assert_int_equal(hashes_has(&into, h), v % 2 == 0);
        }
        struct hashes none = {};
        assert_int_equal(hashes_merge_sort(&into, &none), 0); /* nothing to add */
        assert_int_equal(into.n, total);
        hashes_done(&into);
}

static void test_insert_sorted(void **state) {
        (void)state;
        struct hashes s = {};
        uint8_t h[32];
        const unsigned order[] = { 50, 10, 30, 10, 70, 20, 50 };

        for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
                hash_of(h, order[i]);
                assert_int_equal(hashes_insert_sorted(&s, h), 0);
        }
        assert_int_equal(s.n, 5); /* each once */
        for (size_t i = 1; i < s.n; i++)
                assert_true(memcmp(s.h[i - 1], s.h[i], 32) < 0);
        hash_of(h, 30);
        assert_true(hashes_has(&s, h));
        hash_of(h, 40);
        assert_false(hashes_has(&s, h));
        hashes_done(&s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_merge_sort),
                cmocka_unit_test(test_insert_sorted),
        };
        return UNIT_RUN("gcmarks", tests);
}
