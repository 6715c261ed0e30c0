/* The policy engine's decisions over synthetic file tables. */
#include "unit.h"
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include "engine.h"

#define MB (1ull << 20)

static const struct engine_limits limits = { .quota = 100 * MB, .high = 0.9, .low = 0.8 };

static struct engine_file archived(uint64_t local, uint32_t last_use) {
        return (struct engine_file){ .size = local, .local = local, .last_use = last_use, .state = ENGINE_ARCHIVED };
}

static void test_watermarks(void **state) {
        (void)state;
        assert_true(engine_fits(&limits, 90 * MB, 10 * MB));
        assert_false(engine_fits(&limits, 90 * MB, 10 * MB + 1));
        assert_false(engine_over_high(&limits, 90 * MB));
        assert_true(engine_over_high(&limits, 90 * MB + 1));
        struct engine_limits none = { 0 };
        assert_true(engine_fits(&none, UINT64_MAX, UINT64_MAX));
        assert_false(engine_over_high(&none, UINT64_MAX));
        /* Sizes that overflow saturate: never "fits". */
        assert_false(engine_fits(&limits, UINT64_MAX - 1, 2));
}

static void test_lru_order_until_low(void **state) {
        (void)state;
        struct engine_file f[] = { archived(10 * MB, 300), archived(10 * MB, 100), archived(10 * MB, 200),
                                   archived(65 * MB, 400) };
        uint32_t out[8];
        uint64_t freed;
        /* 95 MB used: down to 80 MB takes the two least recently used. */
        size_t k = engine_plan_release(f, 4, &limits, 95 * MB, 0, SIZE_MAX, out, 8, &freed);
        assert_int_equal(k, 2);
        assert_int_equal(out[0], 1);
        assert_int_equal(out[1], 2);
        assert_int_equal(freed, 20 * MB);
        /* Nothing to do under the low watermark. */
        assert_int_equal(engine_plan_release(f, 4, &limits, 80 * MB, 0, SIZE_MAX, out, 8, &freed), 0);
}

static void test_pins_dirty_shared_skip(void **state) {
        (void)state;
        struct engine_file f[] = { archived(10 * MB, 1), archived(10 * MB, 2), archived(10 * MB, 3), archived(10 * MB, 4),
                                   archived(10 * MB, 5), archived(10 * MB, 6) };
        f[0].flags = ENGINE_PINNED;
        f[1].state = ENGINE_DIRTY;
        f[2].flags = ENGINE_SHARED;
        f[3].state = ENGINE_LOCAL;
        f[4].state = ENGINE_PARTIAL; /* releasable */
        uint32_t out[8];
        uint64_t freed;
        size_t k = engine_plan_release(f, 6, &limits, 100 * MB, 0, 5, out, 8, &freed); /* 5: being filled */
        assert_int_equal(k, 1);
        assert_int_equal(out[0], 4);
        assert_int_equal(freed, 10 * MB);
}

static void test_everything_pinned(void **state) {
        (void)state;
        struct engine_file f[] = { archived(50 * MB, 1), archived(50 * MB, 2) };
        f[0].flags = f[1].flags = ENGINE_PINNED;
        uint32_t out[2];
        uint64_t freed;
        assert_int_equal(engine_plan_release(f, 2, &limits, 100 * MB, 4096, SIZE_MAX, out, 2, &freed), 0);
        assert_int_equal(freed, 0);
        assert_false(engine_fits(&limits, 100 * MB, 4096));
}

static void test_ties(void **state) {
        (void)state;
        /* Same last use: the larger first, then the lower index. */
        struct engine_file f[] = { archived(5 * MB, 7), archived(20 * MB, 7), archived(5 * MB, 7) };
        uint32_t out[3];
        uint64_t freed;
        size_t k = engine_plan_release(f, 3, &limits, 100 * MB, 0, SIZE_MAX, out, 3, &freed);
        assert_int_equal(k, 1);
        assert_int_equal(out[0], 1);
        k = engine_plan_release(f, 3, &limits, 100 * MB + 20 * MB, 0, SIZE_MAX, out, 3, &freed);
        assert_int_equal(k, 3);
        assert_int_equal(out[1], 0);
        assert_int_equal(out[2], 2);
}

static void test_never_fits(void **state) {
        (void)state;
        /* 150M quota, 100M pinned, a fill of 100M: it can never fit, so
         * nothing is released for it. */
        struct engine_limits l = { .quota = 150 * MB, .high = 0.9, .low = 0.8 };
        struct engine_file f[11];
        for (int i = 0; i < 10; i++)
                f[i] = archived(5 * MB, (uint32_t)i);
        f[10] = archived(100 * MB, 99);
        f[10].flags = ENGINE_PINNED;
        uint32_t out[16];
        uint64_t freed;
        assert_int_equal(engine_plan_release(f, 11, &l, 150 * MB, 100 * MB, SIZE_MAX, out, 16, &freed), 0);
        assert_int_equal(freed, 0);
        /* The watermark (need 0) still releases what it can. */
        assert_int_equal(engine_plan_release(f, 11, &l, 150 * MB, 0, SIZE_MAX, out, 16, &freed), 6);
}

static void test_big_fill(void **state) {
        (void)state;
        /* A fill bigger than the low watermark: release until it fits the quota. */
        struct engine_file f[] = { archived(30 * MB, 1), archived(30 * MB, 2), archived(30 * MB, 3) };
        uint32_t out[3];
        uint64_t freed;
        size_t k = engine_plan_release(f, 3, &limits, 90 * MB, 85 * MB, SIZE_MAX, out, 3, &freed);
        assert_int_equal(k, 3);
        assert_true(engine_fits(&limits, 90 * MB - freed, 85 * MB));
}

static void test_archive_plan(void **state) {
        (void)state;
        struct engine_file f[] = {
                { .size = 10, .mtime = 100, .state = ENGINE_LOCAL },      /* too small */
                { .size = 5000, .mtime = 900, .state = ENGINE_LOCAL },    /* too recent */
                { .size = 5000, .mtime = 200, .state = ENGINE_DIRTY },
                { .size = 5000, .mtime = 100, .state = ENGINE_LOCAL },
                { .size = 5000, .mtime = 50, .state = ENGINE_ARCHIVED },  /* done already */
                { .size = 5000, .mtime = 50, .state = ENGINE_LOCAL, .flags = ENGINE_GONE },
                { .size = 5000, .mtime = 2000, .state = ENGINE_LOCAL },   /* in the future */
        };
        uint32_t out[8];
        size_t k = engine_plan_archive(f, 7, 1000, 500, 4096, out, 8);
        assert_int_equal(k, 2);
        assert_int_equal(out[0], 3);
        assert_int_equal(out[1], 2);
        assert_int_equal(engine_plan_archive(f, 7, 1000, 500, 4096, out, 1), 1);
}

static long max_rss_kib(void) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return ru.ru_maxrss;
}

/* A million files: planned in bounded time and memory (32 bytes a file in
 * the table, 4 more while planning). */
static void test_million(void **state) {
        (void)state;
        const size_t n = 1000000;
        long before = max_rss_kib();
        struct engine_file *f = calloc(n, sizeof(*f));
        uint32_t *out = calloc(n, sizeof(*out));
        struct timespec a, b;
        uint64_t freed, used = 0;

        assert_non_null(f);
        assert_non_null(out);
        assert_int_equal(sizeof(*f), 32);
        for (size_t i = 0; i < n; i++) {
                f[i] = archived(200 * 1024, (uint32_t)((i * 2654435761u) % 1000003));
                used += f[i].local;
        }
        struct engine_limits l = { .quota = used / 2, .high = 0.9, .low = 0.8 };
        clock_gettime(CLOCK_MONOTONIC, &a);
        size_t k = engine_plan_release(f, n, &l, used, 0, SIZE_MAX, out, n, &freed);
        clock_gettime(CLOCK_MONOTONIC, &b);
        /* A plan of 64, as tierd makes them: one pass. */
        struct timespec c;
        uint64_t freed64;
        assert_int_equal(engine_plan_release(f, n, &l, used, 0, SIZE_MAX, out + k, 64, &freed64), 64);
        clock_gettime(CLOCK_MONOTONIC, &c);
        printf("# a plan of 64 over 1,000,000 files: %.3f s\n",
               (double)(c.tv_sec - b.tv_sec) + (double)(c.tv_nsec - b.tv_nsec) / 1e9);
        double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        assert_true(used - freed <= (uint64_t)((double)l.quota * 0.8));
        assert_true(k > n / 2);
        for (size_t i = 1; i < k; i++)
                assert_true(f[out[i - 1]].last_use <= f[out[i]].last_use);
        long grown = max_rss_kib() - before;
        printf("# 1,000,000 files: planned in %.3f s, %ld KiB of peak memory (%.0f bytes a file)\n", secs, grown,
               (double)grown * 1024 / (double)n);
        assert_true(secs < 10);
        assert_true(grown * 1024 / (long)n <= 100);
        free(f);
        free(out);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_watermarks),
                cmocka_unit_test(test_lru_order_until_low),
                cmocka_unit_test(test_pins_dirty_shared_skip),
                cmocka_unit_test(test_everything_pinned),
                cmocka_unit_test(test_ties),
                cmocka_unit_test(test_big_fill),
                cmocka_unit_test(test_never_fits),
                cmocka_unit_test(test_archive_plan),
                cmocka_unit_test(test_million),
        };
        return UNIT_RUN("engine", tests);
}
