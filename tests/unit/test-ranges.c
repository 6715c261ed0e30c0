/* Range arithmetic: the populated record and fill rounding. */
#include "unit.h"
#include "ranges.h"

static void test_add_merges(void **state) {
        struct range_set s = {};
        (void)state;
        assert_int_equal(range_set_add(&s, 10, 20), 0);
        assert_int_equal(range_set_add(&s, 30, 40), 0);
        assert_int_equal(s.n, 2);
        assert_int_equal(range_set_add(&s, 20, 30), 0); /* touching: one range */
        assert_int_equal(s.n, 1);
        assert_int_equal(s.r[0].start, 10);
        assert_int_equal(s.r[0].end, 40);
        assert_int_equal(range_set_add(&s, 0, 5), 0);
        assert_int_equal(range_set_add(&s, 50, 60), 0);
        assert_int_equal(range_set_add(&s, 3, 55), 0); /* swallows everything */
        assert_int_equal(s.n, 1);
        assert_int_equal(s.r[0].start, 0);
        assert_int_equal(s.r[0].end, 60);
        assert_int_equal(range_set_add(&s, 7, 7), 0); /* empty: no-op */
        assert_int_equal(s.n, 1);
        range_set_done(&s);
}

static void test_covers_and_missing(void **state) {
        struct range_set s = {}, m = {};
        (void)state;
        range_set_add(&s, 0, 100);
        range_set_add(&s, 200, 300);
        assert_true(range_set_covers(&s, 0, 100));
        assert_true(range_set_covers(&s, 250, 260));
        assert_false(range_set_covers(&s, 50, 250));
        assert_true(range_set_covers(&s, 5, 5));
        assert_true(range_set_overlaps(&s, 99, 101));
        assert_false(range_set_overlaps(&s, 100, 200));
        assert_int_equal(range_set_missing(&s, 50, 350, &m), 0);
        assert_int_equal(m.n, 2);
        assert_int_equal(m.r[0].start, 100);
        assert_int_equal(m.r[0].end, 200);
        assert_int_equal(m.r[1].start, 300);
        assert_int_equal(m.r[1].end, 350);
        assert_int_equal(range_set_total(&s), 200);
        range_set_done(&s);
        range_set_done(&m);
}

static void test_round_to_chunks(void **state) {
        uint64_t a, b;
        (void)state;
        a = 5000, b = 6000;
        assert_true(range_round_to_chunks(&a, &b, 4096, 1 << 20));
        assert_int_equal(a, 4096);
        assert_int_equal(b, 8192);
        a = 1000, b = 2000; /* clipped to the file size */
        assert_true(range_round_to_chunks(&a, &b, 1 << 20, 1500));
        assert_int_equal(a, 0);
        assert_int_equal(b, 1500);
        a = 2000, b = 3000; /* entirely past the end: nothing */
        assert_false(range_round_to_chunks(&a, &b, 4096, 1500));
        a = UINT64_MAX - 10, b = UINT64_MAX; /* no overflow */
        assert_true(range_round_to_chunks(&a, &b, 4096, UINT64_MAX));
        assert_int_equal(b, UINT64_MAX);
        assert_int_equal(round_up_u64(4097, 4096), 8192);
        assert_int_equal(round_up_u64(0, 4096), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_add_merges),
                cmocka_unit_test(test_covers_and_missing),
                cmocka_unit_test(test_round_to_chunks),
        };
        return UNIT_RUN("ranges", tests);
}
