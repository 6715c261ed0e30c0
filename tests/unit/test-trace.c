/* Access traces (supervisor/traces/traceformat.c): parsed strictly,
 * formatted back the same, merged across runs with ageing. */
#include "unit.h"
#include <errno.h>
#include "traceformat.h"

static const char *K1 = "sha256/1111", *K2 = "sha256/2222";

static void test_names(void **state) {
        (void)state;
        assert_true(trace_name_valid("web"));
        assert_true(trace_name_valid("ns/Deployment/web-1.2:x"));
        assert_false(trace_name_valid(""));
        assert_false(trace_name_valid("/web"));
        assert_false(trace_name_valid("web/"));
        assert_false(trace_name_valid("a//b"));
        assert_false(trace_name_valid("a/../b"));
        assert_false(trace_name_valid("./k8s/ns/web/app")); /* the key would be k8s/ns/web/app's */
        assert_false(trace_name_valid("a/./b"));
        assert_false(trace_name_valid("a/."));
        assert_false(trace_name_valid("."));
        assert_true(trace_name_valid(".a/b.c/.d"));
        assert_false(trace_name_valid("a b"));
        assert_true(trace_path_valid("a/b.so", 6));
        assert_false(trace_path_valid("/a", 2));
        assert_false(trace_path_valid("a/../b", 6));
        assert_false(trace_path_valid("a/./b", 5));
        assert_false(trace_path_valid("a/", 2));
        assert_false(trace_path_valid("a\0b", 3));
        assert_false(trace_path_valid("\xff", 1));
        char key[80];
        assert_int_equal(trace_store_key("web", key, sizeof(key)), 0);
        assert_string_equal(key, "trace/4b5e57f6eb2f42b9039b3d1e13929295f231749c510cbe341cd68036d9af97e2"); /* the SHA-256 of "web" */
        assert_int_equal(trace_store_key("web", key, 71), 0);
        assert_int_equal(trace_store_key("web", key, 70), -ENAMETOOLONG);
        assert_int_equal(trace_store_key("../x", key, sizeof(key)), -EINVAL);
}

static void run_of(struct trace *run, uint32_t at_a, bool with_b, const char *key_a) {
        *run = (struct trace){ .name = "web" };
        assert_int_equal(trace_add(run, "lib/a.so", key_a, 1 << 20, 0, 4096, at_a, false), 0);
        assert_int_equal(trace_add(run, "lib/a.so", key_a, 1 << 20, 0, 4096, at_a + 1, false), 0); /* once */
        if (with_b)
                assert_int_equal(trace_add(run, "bin/b", K2, 8192, 0, 8192, 5, false), 0);
}

static void test_round_trip(void **state) {
        (void)state;
        struct trace run, back = {};
        const char *why = NULL;
        run_of(&run, 10, true, K1);
        assert_int_equal(run.n_files, 2);
        assert_int_equal(run.files[0].n, 1);
        char *text = trace_format(&run);
        assert_non_null(text);
        assert_int_equal(trace_parse(text, strlen(text), &back, &why), 0);
        assert_int_equal(back.runs, 1);
        assert_int_equal(back.n_files, 2);
        assert_string_equal(back.files[1].path, "bin/b");
        assert_int_equal(back.files[1].r[0].end, 8192);
        assert_int_equal(trace_bytes(&back), 4096 + 8192);
        assert_int_equal(trace_ranges(&back), 2);
        free(text);
        trace_done(&back);
        trace_done(&run);
}

static void test_merge_ages_out(void **state) {
        (void)state;
        struct trace all = { .name = "web" }, run;
        /* Run 1: a and b; b first. */
        run_of(&run, 10, true, K1);
        assert_int_equal(trace_merge(&all, &run), 0);
        trace_done(&run);
        assert_int_equal(all.runs, 1);
        assert_int_equal(all.n_files, 2);
        assert_string_equal(all.files[0].path, "bin/b"); /* first touched */
        /* Runs 2 and 3: a only. b, seen once, is kept after run 2 and gone after run 3. */
        run_of(&run, 1, false, K1);
        assert_int_equal(trace_merge(&all, &run), 0);
        trace_done(&run);
        assert_int_equal(all.n_files, 2);
        run_of(&run, 1, false, K1);
        assert_int_equal(trace_merge(&all, &run), 0);
        trace_done(&run);
        assert_int_equal(all.runs, 3);
        assert_int_equal(all.n_files, 1);
        assert_string_equal(all.files[0].path, "lib/a.so");
        assert_int_equal(all.files[0].r[0].seen, 3);
        assert_int_equal(all.files[0].r[0].last, 3);
        /* a's content changed: its old ranges go, the run's come. */
        run = (struct trace){ .name = "web" };
        assert_int_equal(trace_add(&run, "lib/a.so", K2, 1 << 20, 8192, 12288, 7, false), 0);
        assert_int_equal(trace_merge(&all, &run), 0);
        trace_done(&run);
        assert_int_equal(all.files[0].n, 1);
        assert_string_equal(all.files[0].key, K2);
        assert_int_equal(all.files[0].r[0].start, 8192);
        assert_int_equal(all.files[0].r[0].seen, 1);
        trace_done(&all);
}

/* A file read while whole counts all its ranges; one whole all along does
 * not age; one neither ages out. */
static void test_merge_resident_unknown(void **state) {
        (void)state;
        struct trace all = { .name = "web" }, run = { .name = "web" };
        assert_int_equal(trace_add(&run, "a", K1, 1 << 20, 0, 4096, 1, false), 0);
        assert_int_equal(trace_add(&run, "a", K1, 1 << 20, 65536, 69632, 2, false), 0);
        assert_int_equal(trace_add(&run, "b", K1, 1 << 20, 0, 4096, 3, false), 0);
        assert_int_equal(trace_add(&run, "c", K1, 1 << 20, 0, 4096, 4, false), 0);
        assert_int_equal(trace_merge(&all, &run), 0);
        trace_done(&run);
        for (int k = 0; k < 3; k++) {
                run = (struct trace){ .name = "web" };
                /* a: one read while whole, of another range than stored. */
                assert_int_equal(trace_add(&run, "a", K1, 1 << 20, 8192, 12288, 9, true), 0);
                for (size_t i = 0; i < all.n_files; i++)
                        all.files[i].unknown = strcmp(all.files[i].path, "b") == 0;
                assert_int_equal(trace_merge(&all, &run), 0);
                trace_done(&run);
        }
        assert_int_equal(all.runs, 4);
        assert_int_equal(all.n_files, 2); /* c aged out */
        for (size_t i = 0; i < all.n_files; i++) {
                if (strcmp(all.files[i].path, "a") == 0) {
                        assert_int_equal(all.files[i].n, 3);
                        assert_int_equal(all.files[i].r[0].seen, 4);
                } else {
                        assert_string_equal(all.files[i].path, "b");
                        assert_int_equal(all.files[i].r[0].seen, 1);
                }
        }
        trace_done(&all);
}

static void refused(const char *text) {
        struct trace t = {};
        const char *why = NULL;
        assert_int_equal(trace_parse(text, strlen(text), &t, &why), -EINVAL);
        assert_non_null(why);
        assert_int_equal(t.n_files, 0);
}

static void test_hostile(void **state) {
        (void)state;
        refused("");
        refused("[]");
        refused("{\"tierd_trace\":2,\"name\":\"w\",\"runs\":1,\"files\":[]}");
        refused("{\"tierd_trace\":1,\"name\":\"../w\",\"runs\":1,\"files\":[]}");
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"runs\":0,\"files\":[]}");
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"runs\":1,\"files\":[],\"x\":1}");
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"name\":\"v\",\"runs\":1,\"files\":[]}");
        /* A path out of the subvolume, a range past the file, seen in more runs than there were. */
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"runs\":1,\"files\":[{\"path\":\"../etc/shadow\",\"key\":\"k\","
                "\"size\":10,\"ranges\":[[0,10,1,1,0]]}]}");
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"runs\":1,\"files\":[{\"path\":\"a\",\"key\":\"k\","
                "\"size\":10,\"ranges\":[[0,11,1,1,0]]}]}");
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"runs\":1,\"files\":[{\"path\":\"a\",\"key\":\"k\","
                "\"size\":10,\"ranges\":[[0,10,2,1,0]]}]}");
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"runs\":1,\"files\":[{\"path\":\"a\",\"key\":\"k\","
                "\"size\":10,\"ranges\":[[5,5,1,1,0]]}]}");
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"runs\":1,\"files\":[{\"path\":\"a\",\"key\":\"k\","
                "\"size\":-1,\"ranges\":[[0,1,1,1,0]]}]}");
        refused("{\"tierd_trace\":1,\"name\":\"w\",\"runs\":1,\"files\":[{\"path\":\"a\",\"key\":\"k\","
                "\"size\":10,\"ranges\":[[0,1,1,1,0]]},{\"path\":\"a\",\"key\":\"k\",\"size\":10,"
                "\"ranges\":[[0,1,1,1,0]]}]}");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_merge_ages_out),
                cmocka_unit_test(test_merge_resident_unknown),
                cmocka_unit_test(test_hostile),
        };
        return UNIT_RUN("trace", tests);
}
