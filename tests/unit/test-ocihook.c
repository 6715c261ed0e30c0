/* The OCI hook's input: a pod's owner from its name, and the trace name a
 * Kubernetes container gets without tierd.io/trace. */
#include "unit.h"
#include <errno.h>
#include <stdio.h>
#include "ocihook.h"

static void owner_is(const char *pod, const char *want) {
        char out[254];
        assert_int_equal(oci_pod_owner(pod, out, sizeof(out)), 0);
        assert_string_equal(out, want);
}

static void test_pod_owner(void **state) {
        char small[4];
        (void)state;
        owner_is("web-7d4b9c8f6b-x2x7q", "web");       /* Deployment: ReplicaSet hash, then generateName */
        owner_is("my-app-5b6d8c7f4-kq2zp", "my-app");  /* a 9-character hash */
        owner_is("backup-28374650-x2x7q", "backup");   /* CronJob: its Job's minutes */
        owner_is("fluentd-x2x7q", "fluentd");          /* DaemonSet, Job, a bare ReplicaSet */
        owner_is("db-0", "db");                        /* StatefulSet */
        owner_is("db-12", "db");
        owner_is("web-6d4b9c8f6b-24567", "web");       /* a suffix of digits only, after a hash: not an ordinal */
        owner_is("fluentd-24567", "fluentd");
        owner_is("my-nginx", "my-nginx");              /* 'i' is never generated: its own name */
        owner_is("web-hello", "web-hello");            /* vowels are never generated */
        owner_is("solo", "solo");
        owner_is("web-x2x7q7", "web-x2x7q7");          /* six characters: not a generated suffix */
        owner_is("web-abcdef12-x2x7q", "web-abcdef12"); /* 'a', 'e', '1' in no hash: only the suffix goes */
        /* A name generateName cut at 58 characters before its suffix. */
        owner_is("analytics-platform-ingest-api-server-production-7d4b9c8f6bx2x7q",
                 "analytics-platform-ingest-api-server-production");
        owner_is("a-very-long-daemonset-name-that-goes-on-and-on-for-a-whilebcdfg",
                 "a-very-long-daemonset-name-that-goes-on-and-on-for-a");
        assert_int_equal(oci_pod_owner("0", small, sizeof(small)), 0);
        assert_int_equal(oci_pod_owner("-0", small, sizeof(small)), -EINVAL); /* nothing left */
        assert_int_equal(oci_pod_owner("longer", small, sizeof(small)), -ENAMETOOLONG);
}

/* The trace a createRuntime config gives: NULL for none. */
static const char *trace_of(struct oci_hook *h, const char *annotations) {
        char state[256], config[2048];
        const char *why = NULL;
        snprintf(state, sizeof(state), "{\"id\":\"c1\",\"bundle\":\"/b\",\"status\":\"creating\",\"pid\":42}");
        snprintf(config, sizeof(config), "{\"root\":{\"path\":\"rootfs\"},\"annotations\":{\"tierd.io/tenant\":\"t\"%s}}",
                 annotations);
        assert_int_equal(oci_hook_parse_state(h, state, strlen(state), &why), 0);
        assert_int_equal(oci_hook_parse_config(h, config, strlen(config), NULL, &why), 0);
        assert_true(h->ours);
        return h->trace;
}

static void test_owner_trace(void **state) {
        struct oci_hook h = {};
        (void)state;
        /* CRI-O's keys, then containerd's. */
        assert_string_equal(trace_of(&h, ",\"io.kubernetes.pod.namespace\":\"team-a\",\"io.kubernetes.pod.name\":"
                                         "\"web-7d4b9c8f6b-x2x7q\",\"io.kubernetes.container.name\":\"app\""),
                            "k8s/team-a/web/app");
        oci_hook_done(&h);
        assert_string_equal(trace_of(&h, ",\"io.kubernetes.cri.sandbox-namespace\":\"ns\",\"io.kubernetes.cri.sandbox-name\":"
                                         "\"db-0\",\"io.kubernetes.cri.container-name\":\"pg\""),
                            "k8s/ns/db/pg");
        oci_hook_done(&h);
        /* tierd.io/trace wins; "" turns tracing off. */
        assert_string_equal(trace_of(&h, ",\"tierd.io/trace\":\"mine\",\"io.kubernetes.pod.namespace\":\"n\","
                                         "\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"c\""),
                            "mine");
        oci_hook_done(&h);
        assert_string_equal(trace_of(&h, ",\"tierd.io/trace\":\"\",\"io.kubernetes.pod.namespace\":\"n\","
                                         "\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"c\""),
                            "");
        oci_hook_done(&h);
        /* Not Kubernetes (no pod name, no namespace, no container name), or
         * two runtimes' names that disagree: none. */
        assert_null(trace_of(&h, ""));
        oci_hook_done(&h);
        assert_null(trace_of(&h, ",\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"c\""));
        oci_hook_done(&h);
        assert_null(trace_of(&h, ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"p\""));
        oci_hook_done(&h);
        assert_null(trace_of(&h, ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"p\","
                                 "\"io.kubernetes.cri.sandbox-name\":\"q\",\"io.kubernetes.container.name\":\"c\""));
        oci_hook_done(&h);
}

/* Names tierd would refuse: no trace, never a refused start. */
static void test_owner_trace_refused_parts(void **state) {
        static const char *const bad[] = {
                ",\"io.kubernetes.pod.namespace\":\"a b\",\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"c\"",
                ",\"io.kubernetes.pod.namespace\":\"ns@x\",\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"c\"",
                ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"x//y\",\"io.kubernetes.container.name\":\"c\"",
                ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"/web\",\"io.kubernetes.container.name\":\"c\"",
                ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"/c\"",
                ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"a/\"",
                ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"w\u00e9b\",\"io.kubernetes.container.name\":\"c\"",
                ",\"io.kubernetes.pod.namespace\":\"..\",\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"c\"",
                ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"p\",\"io.kubernetes.container.name\":\"\"",
        };
        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct oci_hook h = {};
                assert_null(trace_of(&h, bad[i]));
                oci_hook_done(&h);
        }
}

static void test_owner_trace_too_long(void **state) {
        struct oci_hook h = {};
        char ann[1024], pod[254];
        (void)state;
        memset(pod, 'p', 253);
        pod[253] = 0;
        snprintf(ann, sizeof(ann), ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"%s\","
                 "\"io.kubernetes.container.name\":\"c\"", pod);
        assert_null(trace_of(&h, ann)); /* over 200 bytes: no trace, never a refused start */
        oci_hook_done(&h);
        snprintf(ann, sizeof(ann), ",\"io.kubernetes.pod.namespace\":\"n\",\"io.kubernetes.pod.name\":\"%.190s\","
                 "\"io.kubernetes.container.name\":\"c\"", pod);
        assert_non_null(trace_of(&h, ann));
        assert_int_equal(strlen(h.trace), 4 + 2 + 190 + 2);
        oci_hook_done(&h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pod_owner),
                cmocka_unit_test(test_owner_trace),
                cmocka_unit_test(test_owner_trace_refused_parts),
                cmocka_unit_test(test_owner_trace_too_long),
        };
        return UNIT_RUN("ocihook", tests);
}
