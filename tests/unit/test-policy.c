/* The policy parser: strict JSON, duplicate keys, types, values, messages. */
#include "unit.h"
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include "policy.h"

#define T(extra) "{\"tenants\": [{\"name\": \"alpha\", \"subvolume\": \"/srv/t/alpha\", \"mount\": \"/run/tierd/alpha\", " \
                 "\"backend\": \"file:///var/lib/tierd/alpha\"" extra "}]}"

static struct policy *parse_ok(const char *text) {
        struct policy *p = NULL;
        char *err = NULL;
        int r = policy_parse(text, strlen(text), "test.json", &p, &err);
        if (r < 0)
                fail_msg("refused: %s", err ? err : "?");
        free(err);
        return p;
}

/* Refused, and the message mentions want. */
static void parse_bad(const char *text, const char *want) {
        struct policy *p = NULL;
        char *err = NULL;
        int r = policy_parse(text, strlen(text), "test.json", &p, &err);
        if (r == 0)
                fail_msg("accepted: %s", text);
        assert_int_equal(r, -EINVAL);
        assert_non_null(err);
        if (!strstr(err, want))
                fail_msg("message '%s' does not mention '%s'", err, want);
        assert_non_null(strstr(err, "test.json"));
        free(err);
}

static void test_minimal(void **state) {
        (void)state;
        struct policy *p = parse_ok(T(""));
        assert_int_equal(p->version, 1);
        assert_int_equal(p->n_tenants, 1);
        assert_string_equal(p->tenants[0].name, "alpha");
        assert_int_equal(p->tenants[0].chunk, 256 << 10);
        assert_int_equal(p->tenants[0].readahead, 32 << 20);
        assert_int_equal(p->tenants[0].small_file, 1 << 20);
        assert_int_equal(p->worker_uid_first, 59000);
        assert_int_equal(p->worker_uid_count, 1000);
        assert_non_null(policy_find_tenant(p, "alpha"));
        assert_null(policy_find_tenant(p, "beta"));
        policy_free(p);
}

static void test_settings_and_defaults(void **state) {
        (void)state;
        struct policy *p = parse_ok("{\"version\": 1, \"defaults\": {\"chunk\": \"4M\", \"backend\": \"file:///s\"},"
                                    "\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\"},"
                                    "{\"name\": \"b\", \"subvolume\": \"/t/b\", \"mount\": \"/v/b\", \"chunk\": 65536,"
                                    " \"small_file\": \"0\", \"backend\": \"file:///other\"}]}");
        assert_int_equal(p->tenants[0].chunk, 4 << 20);
        assert_string_equal(p->tenants[0].backend, "file:///s");
        assert_int_equal(p->tenants[1].chunk, 65536);
        assert_int_equal(p->tenants[1].small_file, 0);
        assert_string_equal(p->tenants[1].backend, "file:///other");
        policy_free(p);
}

static void test_strict_json(void **state) {
        (void)state;
        parse_bad("{\"tenants\": [],}", "not valid JSON");
        parse_bad("{\"tenants\": [] /* c */}", "not valid JSON");
        parse_bad("{\"tenants\": [], \"version\": NaN}", "not valid JSON");
        parse_bad("{\"tenants\": []", "not valid JSON");
        parse_bad("{\"tenants\": []} {}", "not valid JSON");
        parse_bad("[]", "must be a JSON object");
        parse_bad("{\"tenants\": [], \"tenants\": []}", "'tenants'");
        parse_bad(T(", \"chunk\": \"1M\", \"chunk\": \"2M\""), "'chunk'");
        parse_bad("{\"tenants\": [], \"t\\u0065nants\": []}", "appears twice");
}

static void test_bad_values(void **state) {
        (void)state;
        parse_bad(T(", \"chunk\": \"10G\"X"), "not valid JSON");
        parse_bad(T(", \"chunk\": \"3K\""), "power of two");
        parse_bad(T(", \"chunk\": \"10Q\""), "not a size");
        parse_bad(T(", \"chunk\": true"), "size");
        parse_bad(T(", \"readahead\": -1"), "non-negative");
        parse_bad(T(", \"colour\": \"blue\""), "unknown key");
        parse_bad("{\"tenants\": [], \"extra\": 1}", "unknown key");
        parse_bad("{\"version\": 2, \"tenants\": []}", "newer");
        parse_bad("{\"version\": \"1\", \"tenants\": []}", "positive integer");
        parse_bad("{}", "'tenants': missing");
        parse_bad("{\"tenants\": [{\"subvolume\": \"/a\"}]}", "'name': missing");
        parse_bad("{\"tenants\": [{\"name\": \"a b\", \"subvolume\": \"/a\"}]}", "letters");
        parse_bad("{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"rel\", \"mount\": \"/m\", \"backend\": \"file:///s\"}]}",
                  "absolute");
        parse_bad("{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/x/../y\", \"mount\": \"/m\", \"backend\": \"file:///s\"}]}",
                  "normalized");
        parse_bad("{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/m\"}]}", "'backend'");
        parse_bad("{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/m\", \"backend\": \"gopher://x\"}]}",
                  "scheme");
        parse_bad("{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/t/a/v\", \"backend\": \"file:///s\"}]}",
                  "overlap");
        parse_bad("{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\", \"backend\": \"file:///s\"},"
                  "{\"name\": \"a\", \"subvolume\": \"/t/b\", \"mount\": \"/v/b\", \"backend\": \"file:///s\"}]}",
                  "two tenants");
        parse_bad("{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\", \"backend\": \"file:///s\"},"
                  "{\"name\": \"b\", \"subvolume\": \"/t/a/b\", \"mount\": \"/v/b\", \"backend\": \"file:///s\"}]}",
                  "overlaps");
        parse_bad("{\"tenants\": [\"a\"]}", "must be an object");
        parse_bad("{\"worker_uids\": \"0-10\", \"tenants\": []}", "non-root");
        parse_bad("{\"worker_uids\": \"10-5\", \"tenants\": []}", "FIRST-LAST");
        parse_bad("{\"worker_uids\": 59000, \"tenants\": []}", "FIRST-LAST");
        parse_bad("{\"worker_uids\": \"7000-7000\", \"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\","
                  " \"backend\": \"file:///s\"}, {\"name\": \"b\", \"subvolume\": \"/t/b\", \"mount\": \"/v/b\", \"backend\": \"file:///s\"}]}",
                  "fewer uids");
        parse_bad("{\"admin_group\": \"\", \"tenants\": []}", "group name");
        parse_bad("{\"admin_group\": \"a b\", \"tenants\": []}", "group name");
        parse_bad("{\"admin_group\": 0, \"tenants\": []}", "group name");
        parse_bad("{\"guard_after\": \"500ms\", \"tenants\": []}", "'guard_after': must be between 1s and 1d");
        parse_bad("{\"guard_after\": 30, \"tenants\": []}", "'guard_after': must be a positive duration");
        struct policy *p = parse_ok("{\"tenants\": []}");
        assert_int_equal(p->guard_after_usec, 30000000);
        policy_free(p);
        p = parse_ok("{\"guard_after\": \"2m\", \"tenants\": []}");
        assert_int_equal(p->guard_after_usec, 120000000);
        policy_free(p);
}

static void test_same_places(void **state) {
        (void)state;
        const char *why = NULL;
        struct policy *a = parse_ok(T("")), *b = parse_ok(T(", \"stall_timeout\": \"5s\", \"readahead\": \"8M\"")),
                      *c = parse_ok("{\"tenants\": [{\"name\": \"alpha\", \"subvolume\": \"/srv/t/alpha\","
                                    " \"mount\": \"/run/tierd/elsewhere\", \"backend\": \"file:///var/lib/tierd/alpha\"}]}");
        assert_true(policy_same_places(a, b, &why));
        assert_false(policy_tenant_worker_equal(&a->tenants[0], &b->tenants[0]));
        assert_true(policy_tenant_worker_equal(&a->tenants[0], &a->tenants[0]));
        assert_false(policy_same_places(a, c, &why));
        assert_non_null(strstr(why, "mount"));
        policy_free(a);
        policy_free(b);
        policy_free(c);
}

static void test_admin_group(void **state) {
        (void)state;
        struct policy *p = parse_ok("{\"admin_group\": \"tierd-admins\", \"tenants\": []}");
        assert_string_equal(p->admin_group, "tierd-admins");
        policy_free(p);
        p = parse_ok("{\"tenants\": []}");
        assert_null(p->admin_group);
        policy_free(p);
}

static void test_remote_keys(void **state) {
        (void)state;
        struct policy *p = parse_ok("{\"defaults\": {\"endpoint\": \"http://127.0.0.1:9000\", \"region\": \"us-east-1\","
                                    " \"credentials\": \"/etc/tierd/a.cred\", \"stall_timeout\": \"5s\"},"
                                    "\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\","
                                    " \"backend\": \"s3://bkt/a\", \"sse\": \"aws:kms\", \"kms_key_id\": \"k1\"},"
                                    "{\"name\": \"b\", \"subvolume\": \"/t/b\", \"mount\": \"/v/b\","
                                    " \"backend\": \"https://store.example/b\", \"headers\": {\"Authorization\": \"@/etc/tierd/b.token\"}}]}");
        assert_string_equal(p->tenants[0].endpoint, "http://127.0.0.1:9000");
        assert_false(p->tenants[0].virtual_hosted); /* path-style for a custom endpoint */
        assert_int_equal(p->tenants[0].stall_timeout_usec, 5000000);
        assert_int_equal(p->tenants[0].connect_timeout_usec, 10000000);
        assert_string_equal(p->tenants[0].kms_key_id, "k1");
        assert_string_equal(p->tenants[1].headers[0], "Authorization: @/etc/tierd/b.token");
        assert_null(p->tenants[1].headers[1]);
        policy_free(p);
        parse_bad("{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\", \"backend\": \"s3://bkt/a\"}]}",
                  "'credentials': missing: an s3:// backend needs");
        parse_bad(T(", \"endpoint\": \"ftp://x\""), "endpoint");
        parse_bad(T(", \"endpoint\": \"http://host/path\""), "no path");
        parse_bad(T(", \"endpoint\": \"https://host/\""), "no path");
        parse_bad(T(", \"endpoint\": \"http://host#\""), "no path");
        parse_bad(T(", \"endpoint\": \"http:/host\""), "endpoint");
        parse_bad(T(", \"stall_timeout\": \"soon\""), "duration");
        parse_bad(T(", \"stall_timeout\": 30"), "duration");
        parse_bad(T(", \"addressing\": \"sideways\""), "path");
        parse_bad(T(", \"sse\": \"rot13\""), "AES256");
        parse_bad(T(", \"kms_key_id\": \"k\""), "aws:kms");
        parse_bad(T(", \"headers\": {\"Bad Name\": \"x\"}"), "not a header name");
        parse_bad(T(", \"headers\": {\"X\": \"a\\nb\"}"), "control character");
        parse_bad(T(", \"part_size\": \"1M\""), "5M");
        parse_bad(T(", \"region\": \"EU WEST\""), "region");
        /* A path key of the wrong type was once taken as absent. */
        parse_bad(T(", \"credentials\": [\"a\"]"), "'credentials': must be a string");
        parse_bad(T(", \"ca_file\": 7"), "'ca_file': must be a string");
}

#define S3(extra) "{\"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\", " \
                  "\"backend\": \"s3://bkt/a\"" extra "}]}"

/* Where an s3:// tenant's keys come from. */
static void test_credential_sources(void **state) {
        (void)state;
        struct policy *p = parse_ok(S3(", \"credential_source\": \"web_identity\", \"role_arn\": "
                                       "\"arn:aws:iam::123456789012:role/tierd\", \"web_identity_token_file\": \"/run/t/token\","
                                       " \"sts_endpoint\": \"http://127.0.0.1:8000\""));
        assert_int_equal(p->tenants[0].aws.source, CREDS_FROM_WEB_IDENTITY);
        assert_string_equal(p->tenants[0].aws.role_arn, "arn:aws:iam::123456789012:role/tierd");
        assert_string_equal(p->tenants[0].aws.web_identity_token_file, "/run/t/token");
        assert_string_equal(p->tenants[0].aws.sts_endpoint, "http://127.0.0.1:8000");
        assert_null(p->tenants[0].aws.profile); /* AWS_PROFILE, else "default" */
        policy_free(p);
        p = parse_ok(S3(", \"credentials\": \"/etc/tierd/a.cred\", \"profile\": \"team-a\""));
        assert_int_equal(p->tenants[0].aws.source, CREDS_FROM_FILE);
        assert_string_equal(p->tenants[0].aws.profile, "team-a");
        policy_free(p);
        static const char *const sources[] = { "env", "container", "imds", "chain" };
        for (size_t i = 0; i < 4; i++) {
                char text[512];
                snprintf(text, sizeof(text), S3(", \"credential_source\": \"%s\""), sources[i]);
                p = parse_ok(text);
                assert_string_equal(policy_creds_source_name(p->tenants[0].aws.source), sources[i]);
                policy_free(p);
        }
        parse_bad(S3(""), "or \"credential_source\"");
        parse_bad(S3(", \"credential_source\": \"file\""), "'credentials': missing");
        parse_bad(S3(", \"credential_source\": \"vault\""), "must be \"file\", \"env\"");
        parse_bad(S3(", \"credential_source\": \"env\", \"role_arn\": \"tierd\""), "not a role's ARN");
        parse_bad(S3(", \"credential_source\": \"env\", \"profile\": \"a b\""), "not a profile name");
        parse_bad(S3(", \"credential_source\": \"env\", \"web_identity_token_file\": \"token\""),
                  "'web_identity_token_file'");
        parse_bad(S3(", \"credential_source\": \"env\", \"sts_endpoint\": \"http://h/path\""), "no path");
}

static void test_invalid_utf8(void **state) {
        (void)state;
        parse_bad("{\"tenants\": [], \"\xff\": 1}", "not valid JSON");
}

/* The policy engine's keys: defaults, values, and each kind of mistake. */
static void test_engine_keys(void **state) {
        (void)state;
        struct policy *p = parse_ok(T(""));
        assert_int_equal(p->tenants[0].quota, 0);
        assert_true(p->tenants[0].high_watermark == 0.90 && p->tenants[0].low_watermark == 0.80);
        assert_int_equal(p->tenants[0].archive_after_usec, 0);
        assert_null(p->tenants[0].pin[0]);
        assert_false(p->tenants[0].restore_whole);
        assert_int_equal(p->tenants[0].trace_window_usec, 60000000);
        assert_false(p->tenants[0].hydrate_pinned);
        policy_free(p);
        p = parse_ok(T(", \"hydrate_pinned\": true"));
        assert_true(p->tenants[0].hydrate_pinned);
        policy_free(p);
        p = parse_ok(T(""));
        assert_true(p->tenants[0].fill_check == 0.0625);
        policy_free(p);
        p = parse_ok(T(", \"fill_check\": 1"));
        assert_true(p->tenants[0].fill_check == 1);
        policy_free(p);
        p = parse_ok(T(", \"fill_check\": 0"));
        assert_true(p->tenants[0].fill_check == 0);
        assert_false(p->tenants[0].restore_progressive);
        policy_free(p);
        p = parse_ok(T(", \"trace_window\": \"0s\"")); /* the tenant's traces off */
        assert_int_equal(p->tenants[0].trace_window_usec, 0);
        policy_free(p);
        p = parse_ok("{\"defaults\": {\"quota\": \"10G\", \"high_watermark\": 0.95, \"backend\": \"file:///s\"},"
                     " \"tenants\": [{\"name\": \"a\", \"subvolume\": \"/t/a\", \"mount\": \"/v/a\","
                     " \"low_watermark\": 0.5, \"archive_after\": \"7d\", \"archive_min_size\": \"64K\","
                     " \"archive_rate\": \"50M\", \"prefetch_rate\": \"20M\", \"restore_rate\": \"100M\", \"pin\": [\"models/*\", \"*.db\"], \"restore\": \"whole\"}]}");
        const struct policy_tenant *t = &p->tenants[0];
        assert_int_equal(t->quota, 10ull << 30);
        assert_true(t->high_watermark == 0.95 && t->low_watermark == 0.5);
        assert_int_equal(t->archive_after_usec, 7ull * 86400 * 1000000);
        assert_int_equal(t->archive_min_size, 64 << 10);
        assert_int_equal(t->archive_rate, 50 << 20);
        assert_int_equal(t->prefetch_rate, 20 << 20);
        assert_int_equal(t->restore_rate, 100 << 20);
        assert_string_equal(t->pin[0], "models/*");
        assert_string_equal(t->pin[1], "*.db");
        assert_null(t->pin[2]);
        assert_true(t->restore_whole);
        policy_free(p);

        parse_bad(T(", \"quota\": 10"), "'quota'");                       /* 10 bytes: 10, not "10G" */
        parse_bad(T(", \"quota\": \"10X\""), "not a size");
        parse_bad(T(", \"prefetch_rate\": \"fast\""), "not a size");
        parse_bad(T(", \"restore_rate\": -1"), "restore_rate");
        parse_bad(T(", \"high_watermark\": 1.5"), "fraction");
        parse_bad(T(", \"high_watermark\": \"0.9\""), "number");
        parse_bad(T(", \"low_watermark\": 0.95"), "above high_watermark");
        parse_bad(T(", \"archive_after\": 30"), "duration");
        parse_bad(T(", \"archive_after\": \"soon\""), "duration");
        parse_bad(T(", \"pin\": \"*.db\""), "array");
        parse_bad(T(", \"pin\": [\"/abs\"]"), "relative");
        parse_bad(T(", \"pin\": [1]"), "string");
        parse_bad(T(", \"restore\": \"lazy\""), "\"range\", \"progressive\", \"whole\" or \"open\"");
        parse_bad(T(", \"archive_rate\": -1"), "non-negative");
        parse_bad(T(", \"trace_window\": \"soon\""), "a duration such as \"0s\"");
        parse_bad(T(", \"hydrate_pinned\": \"yes\""), "hydrate_pinned");
        parse_bad(T(", \"fill_check\": 2"), "fill_check");
        parse_bad(T(", \"fill_check\": \"all\""), "fill_check");
        parse_bad(T(", \"trace_window\": \"2h\""), "at most");
        parse_bad(T(", \"archive_after\": \"0s\""), "positive duration"); /* zero is only for trace_window */
}

/* The catalog's keys and garbage collection's: defaults and mistakes. */
static void test_gc_keys(void **state) {
        (void)state;
        struct policy *p = parse_ok(T(""));
        assert_false(p->tenants[0].catalog);
        assert_int_equal(p->tenants[0].catalog_retention_usec, 7ull * 86400 * 1000000);
        assert_int_equal(p->tenants[0].gc_grace_usec, 86400ull * 1000000);
        assert_int_equal(p->tenants[0].trace_keep_usec, 30ull * 86400 * 1000000);
        policy_free(p);
        p = parse_ok(T(", \"trace_keep\": \"0s\""));
        assert_int_equal(p->tenants[0].trace_keep_usec, 0); /* never collected */
        policy_free(p);
        parse_bad(T(", \"trace_keep\": \"500ms\""), "at least 1s");
        parse_bad(T(", \"trace_keep\": \"forever\""), "duration");
        parse_bad(T(", \"catalog\": true"), "'catalog_key': missing");
        p = parse_ok(T(", \"catalog\": true, \"catalog_key\": \"/etc/tierd/k\", \"catalog_retention\": \"30d\", "
                       "\"gc_grace\": \"2h\""));
        assert_string_equal(p->tenants[0].catalog_key, "/etc/tierd/k");
        assert_true(p->tenants[0].catalog);
        assert_int_equal(p->tenants[0].catalog_retention_usec, 30ull * 86400 * 1000000);
        assert_int_equal(p->tenants[0].gc_grace_usec, 2ull * 3600 * 1000000);
        policy_free(p);
        parse_bad(T(", \"gc_grace\": \"500ms\""), "at least 1s"); /* ages in a store are whole seconds */
        parse_bad(T(", \"gc_grace\": 86400"), "duration");
        parse_bad(T(", \"catalog_retention\": \"a week\""), "duration");
        parse_bad(T(", \"catalog\": \"yes\""), "'catalog'");
        /* "open": whole, before the open returns. */
        p = parse_ok(T(", \"restore\": \"open\""));
        assert_true(p->tenants[0].restore_whole && p->tenants[0].restore_open);
        policy_free(p);
        p = parse_ok(T(", \"restore\": \"whole\""));
        assert_true(p->tenants[0].restore_whole && !p->tenants[0].restore_open);
        assert_false(p->tenants[0].restore_progressive);
        policy_free(p);
        /* "progressive": ranges first, then the rest in the background. */
        p = parse_ok(T(", \"restore\": \"progressive\""));
        assert_true(p->tenants[0].restore_progressive && !p->tenants[0].restore_whole);
        policy_free(p);
        /* Setuid mounts: refused unless the tenant says so (supervisor/views/hostmounts.h). */
        p = parse_ok(T(""));
        assert_false(p->tenants[0].allow_setuid_mounts);
        policy_free(p);
        p = parse_ok(T(", \"allow_setuid_mounts\": true"));
        assert_true(p->tenants[0].allow_setuid_mounts);
        policy_free(p);
        parse_bad(T(", \"allow_setuid_mounts\": 1"), "'allow_setuid_mounts'");
        assert_string_equal(policy_patch_root_only_key("{\"allow_setuid_mounts\": true}"), "allow_setuid_mounts");
}

/* Containers: which Kubernetes namespaces, or outside Kubernetes which
 * container ids, may attach a tenant's view. */
static void test_container_keys(void **state) {
        (void)state;
        const char *why = NULL;
        struct policy *p = parse_ok(T(""));
        assert_false(policy_container_allowed(&p->tenants[0], true, "c1", "team-a", &why));
        assert_non_null(strstr(why, "namespaces"));
        assert_false(policy_container_allowed(&p->tenants[0], true, "c1", "", &why));
        assert_non_null(strstr(why, "containers"));
        policy_free(p);
        p = parse_ok(T(", \"namespaces\": [\"team-a\", \"b2\"], \"containers\": [\"build-*\"]"));
        assert_true(policy_container_allowed(&p->tenants[0], true, "anything", "team-a", &why));
        assert_true(policy_container_allowed(&p->tenants[0], true, "anything", "b2", &why));
        assert_false(policy_container_allowed(&p->tenants[0], true, "build-1", "team-b", &why)); /* k8s: the namespace decides */
        assert_true(policy_container_allowed(&p->tenants[0], true, "build-1", "", &why));
        assert_false(policy_container_allowed(&p->tenants[0], true, "test-1", "", &why));
        /* Outside Kubernetes an annotation is anyone's: only the id counts. */
        assert_false(policy_container_allowed(&p->tenants[0], false, "anything", "team-a", &why));
        assert_non_null(strstr(why, "\"kubernetes\": true"));
        assert_true(policy_container_allowed(&p->tenants[0], false, "build-1", "team-b", &why));
        policy_free(p);
        p = parse_ok("{\"kubernetes\": true, \"tenants\": []}");
        assert_true(p->kubernetes);
        policy_free(p);
        parse_bad("{\"kubernetes\": \"yes\", \"tenants\": []}", "'kubernetes'");
        /* Landlock: required unless the policy says otherwise. */
        p = parse_ok("{\"tenants\": []}");
        assert_false(p->landlock_optional);
        policy_free(p);
        p = parse_ok("{\"require_landlock\": false, \"tenants\": []}");
        assert_true(p->landlock_optional);
        policy_free(p);

        parse_bad(T(", \"namespaces\": \"team-a\""), "array");
        parse_bad(T(", \"namespaces\": [\"Team-A\"]"), "not a Kubernetes namespace name");
        parse_bad(T(", \"namespaces\": [\"-a\"]"), "not a Kubernetes namespace name");
        parse_bad(T(", \"namespaces\": [\"a234567890123456789012345678901234567890123456789012345678901234\"]"),
                  "not a Kubernetes namespace name");
        parse_bad(T(", \"containers\": [\"\"]"), "non-empty");
        parse_bad("{\"defaults\": {\"namespaces\": [\"a\"]}, \"tenants\": []}", "unknown key");
}

/* "filesystems": what tierd mounts itself. */
static void test_filesystems(void **state) {
        (void)state;
#define FS(x) "{\"filesystems\": [" x "], \"tenants\": []}"
        struct policy *p = parse_ok(FS("{\"source\": \"LABEL=tier\", \"mountpoint\": \"/srv/tier\", \"type\": \"btrfs\","
                                       " \"options\": \"noatime,compress=zstd\"},"
                                       "{\"source\": \"/dev/vdb\", \"mountpoint\": \"/srv/x\", \"type\": \"xfs\"}"));
        assert_int_equal(p->n_filesystems, 2);
        assert_string_equal(p->filesystems[0].source, "LABEL=tier");
        assert_string_equal(p->filesystems[0].options, "noatime,compress=zstd");
        assert_string_equal(p->filesystems[1].type, "xfs");
        assert_null(p->filesystems[1].options);
        struct policy *q = parse_ok(FS("{\"source\": \"LABEL=tier\", \"mountpoint\": \"/srv/tier\", \"type\": \"btrfs\"}"));
        const char *why = NULL;
        assert_false(policy_same_places(p, q, &why));
        assert_string_equal(why, "filesystems changed");
        policy_free(p);
        policy_free(q);
        parse_bad(FS("{\"source\": \"sdb\", \"mountpoint\": \"/srv/t\", \"type\": \"btrfs\"}"), "'source'");
        parse_bad(FS("{\"source\": \"UUID=\", \"mountpoint\": \"/srv/t\", \"type\": \"btrfs\"}"), "'source'");
        parse_bad(FS("{\"source\": \"/dev/sdb\", \"mountpoint\": \"srv\", \"type\": \"btrfs\"}"), "absolute");
        parse_bad(FS("{\"source\": \"/dev/sdb\", \"mountpoint\": \"/srv/t\", \"type\": \"vfat\"}"), "'type'");
        parse_bad(FS("{\"source\": \"/dev/sdb\", \"mountpoint\": \"/srv/t\"}"), "missing");
        parse_bad(FS("{\"source\": \"/dev/sdb\", \"mountpoint\": \"/srv/t\", \"type\": \"xfs\", \"options\": \"a b\"}"),
                  "'options'");
        parse_bad(FS("{\"source\": \"/dev/a\", \"mountpoint\": \"/srv/t\", \"type\": \"xfs\"},"
                     "{\"source\": \"/dev/b\", \"mountpoint\": \"/srv/t/x\", \"type\": \"xfs\"}"), "overlaps");
        parse_bad(FS("{\"source\": \"/dev/a\", \"mountpoint\": \"/srv/t\", \"type\": \"xfs\", \"uid\": 1}"), "unknown key");
        parse_bad("{\"filesystems\": {}, \"tenants\": []}", "array");
#undef FS
}

/* A directory given as the policy (a mounted ConfigMap) holds policy.json. */
static void test_directory(void **state) {
        (void)state;
        char dir[] = "/tmp/test-policy.XXXXXX", file[64];
        struct policy *p = NULL;
        char *err = NULL;
        FILE *f;

        assert_non_null(mkdtemp(dir));
        snprintf(file, sizeof(file), "%s/policy.json", dir);
        assert_non_null(f = fopen(file, "w"));
        fputs(T(""), f);
        fclose(f);
        assert_int_equal(policy_load_file(dir, &p, &err), 0);
        assert_string_equal(p->tenants[0].name, "alpha");
        policy_free(p);
        unlink(file);
        assert_true(policy_load_file(dir, &p, &err) < 0);
        assert_non_null(err);
        free(err);
        rmdir(dir);
}

/* SetTenantPolicy's editor: keys set and removed, everything validated. */
static void test_edit_tenant(void **state) {
        (void)state;
        const char *text = T(", \"chunk\": \"2M\"");
        char *out = NULL, *err = NULL;
        struct policy *p;

        assert_int_equal(policy_edit_tenant(text, strlen(text), "t.json", "alpha", "{\"readahead\": \"4M\", \"chunk\": null}",
                                            &out, &err), 0);
        p = parse_ok(out);
        assert_int_equal(p->tenants[0].readahead, 4 << 20);
        assert_int_equal(p->tenants[0].chunk, 256 << 10); /* the default again */
        policy_free(p);
        free(out);

        static const struct { const char *patch; int r; const char *want; } bad[] = {
                { "{\"chunk\": \"-5\"}", -EINVAL, "chunk" },
                { "{\"bogus\": 1}", -EINVAL, "bogus" },
                { "{\"chunk\": 1,}", -EINVAL, "not valid JSON" },
                { "{\"chunk\": 1, \"chunk\": 2}", -EINVAL, "twice" },
                { "[1]", -EINVAL, "JSON object" },
                { "{\"name\": \"beta\"}", -EINVAL, "renamed" },
                { "{\"subvolume\": \"relative\"}", -EINVAL, "subvolume" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                out = err = NULL;
                assert_int_equal(policy_edit_tenant(text, strlen(text), "t.json", "alpha", bad[i].patch, &out, &err), bad[i].r);
                assert_null(out);
                if (!err || !strstr(err, bad[i].want))
                        fail_msg("%s: message '%s' does not mention '%s'", bad[i].patch, err ? err : "", bad[i].want);
                free(err);
        }
        err = NULL;
        assert_int_equal(policy_edit_tenant(text, strlen(text), "t.json", "beta", "{}", &out, &err), -ENOENT);
        free(err);
        /* A broken file is not edited. */
        err = NULL;
        assert_int_equal(policy_edit_tenant("{\"tenants\": [", 13, "t.json", "alpha", "{}", &out, &err), -EINVAL);
        free(err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_minimal),
                cmocka_unit_test(test_settings_and_defaults),
                cmocka_unit_test(test_strict_json),
                cmocka_unit_test(test_bad_values),
                cmocka_unit_test(test_remote_keys), cmocka_unit_test(test_credential_sources),
                cmocka_unit_test(test_admin_group),
                cmocka_unit_test(test_same_places),
                cmocka_unit_test(test_invalid_utf8),
                cmocka_unit_test(test_edit_tenant),
                cmocka_unit_test(test_engine_keys),
                cmocka_unit_test(test_gc_keys),
                cmocka_unit_test(test_directory),
                cmocka_unit_test(test_container_keys),
                cmocka_unit_test(test_filesystems),
        };
        return UNIT_RUN("policy", tests);
}
