/* What AWS's credential services answer: EC2 metadata and container
 * endpoints' JSON, STS's XML (RGW's and AWS's shapes), times; mistakes
 * refused, and no secret in any error text. */
#include "unit.h"
#include <errno.h>
#include <stdio.h>
#include "awsanswer.h"
#include "macro.h"

static void test_times(void **state) {
        int64_t t = 0;
        (void)state;
        assert_int_equal(aws_time_parse("2026-12-06T09:00:00Z", &t), 0);
        assert_int_equal(t, 1796547600);
        assert_int_equal(aws_time_parse("2026-12-06T09:00:00.168766030Z", &t), 0); /* RGW's nanoseconds */
        assert_int_equal(t, 1796547600);
        assert_int_equal(aws_time_parse("2026-12-06T09:00:00+00:00", &t), 0);
        assert_int_equal(t, 1796547600);
        assert_int_equal(aws_time_parse("2026-12-06T09:00:00+02:00", &t), -EINVAL); /* never sent: refused, not misread */
        assert_int_equal(aws_time_parse("tomorrow", &t), -EINVAL);
        assert_int_equal(aws_time_parse("2026-12-06", &t), -EINVAL);
        assert_int_equal(aws_time_parse("", &t), -EINVAL);
}

static void test_json(void **state) {
        struct proto_credentials c = {};
        int64_t exp = -1;
        const char *err = NULL;
        (void)state;
        const char *imds = "{\"Code\": \"Success\", \"LastUpdated\": \"2026-12-06T08:00:00Z\", \"Type\": \"AWS-HMAC\","
                           " \"AccessKeyId\": \"ASIAEXAMPLE\", \"SecretAccessKey\": \"s3cr3t/+=\", \"Token\": \"tok==\","
                           " \"Expiration\": \"2026-12-06T09:00:00Z\"}";
        assert_int_equal(aws_json_credentials(imds, strlen(imds), &c, &exp, &err), 0);
        assert_string_equal(c.access_key, "ASIAEXAMPLE");
        assert_string_equal(c.secret_key, "s3cr3t/+=");
        assert_string_equal(c.session_token, "tok==");
        assert_int_equal(c.type, PROTO_CREDENTIALS);
        assert_int_equal(exp, 1796547600);
        const char *container = "{\"AccessKeyId\": \"A2\", \"SecretAccessKey\": \"S2\", \"Token\": \"T2\"}";
        assert_int_equal(aws_json_credentials(container, strlen(container), &c, &exp, &err), 0);
        assert_int_equal(exp, 0); /* no Expiration said */
        assert_string_equal(c.access_key, "A2");
        static const char *const bad[] = {
                "{\"Code\": \"Failure\", \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"s3cr3t\"}",
                "{\"AccessKeyId\": \"A\"}",
                "{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"s3 cr3t\"}",
                "{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"s3cr3t\", \"Expiration\": \"soon\"}",
                "{\"AccessKeyId\": 7, \"SecretAccessKey\": \"s3cr3t\"}",
                "[\"s3cr3t\"]", "not json s3cr3t", "",
                "{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"s3cr3t\"} trailing",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct proto_credentials k = { .access_key = "kept" };
                err = NULL;
                assert_true(aws_json_credentials(bad[i], strlen(bad[i]), &k, &exp, &err) < 0);
                assert_non_null(err);
                assert_null(strstr(err, "s3cr3t"));
                if (i != 3) /* a bad expiry wipes what it had set */
                        assert_string_equal(k.access_key, "kept");
        }
}

static void test_sts(void **state) {
        struct proto_credentials c = {};
        int64_t exp = 0;
        char why[512];
        (void)state;
        /* RGW's shape: no declaration, no namespace. */
        const char *rgw = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
                          "<SubjectFromWebIdentityToken>alice</SubjectFromWebIdentityToken><AssumedRoleUser><Arn>x</Arn>"
                          "</AssumedRoleUser><Credentials><AccessKeyId>PJztlGCf5OdbYiqbcs5</AccessKeyId>"
                          "<Expiration>2026-12-06T09:00:00.168766030Z</Expiration><SecretAccessKey>s3cr3t</SecretAccessKey>"
                          "<SessionToken>a+b/c==</SessionToken></Credentials></AssumeRoleWithWebIdentityResult>"
                          "</AssumeRoleWithWebIdentityResponse>";
        assert_int_equal(aws_sts_credentials(rgw, strlen(rgw), &c, &exp, why, sizeof(why)), 0);
        assert_string_equal(c.access_key, "PJztlGCf5OdbYiqbcs5");
        assert_string_equal(c.secret_key, "s3cr3t");
        assert_string_equal(c.session_token, "a+b/c==");
        assert_int_equal(exp, 1796547600);
        /* AWS's: a declaration, a namespace, entities, metadata after. */
        const char *aws = "<?xml version=\"1.0\"?>\n<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/"
                          "doc/2011-06-15/\">\n <AssumeRoleWithWebIdentityResult>\n  <Credentials>\n"
                          "   <SessionToken>t&amp;k</SessionToken>\n   <SecretAccessKey>s2</SecretAccessKey>\n"
                          "   <Expiration>2026-12-06T09:00:00Z</Expiration>\n   <AccessKeyId>ASIA2</AccessKeyId>\n"
                          "  </Credentials>\n </AssumeRoleWithWebIdentityResult>\n <ResponseMetadata><RequestId>r"
                          "</RequestId></ResponseMetadata>\n</AssumeRoleWithWebIdentityResponse>\n";
        assert_int_equal(aws_sts_credentials(aws, strlen(aws), &c, &exp, why, sizeof(why)), 0);
        assert_string_equal(c.session_token, "t&k");
        assert_string_equal(c.access_key, "ASIA2");
        const char *error = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized"
                            "</Message></Error><RequestId>r</RequestId></ErrorResponse>";
        assert_int_equal(aws_sts_credentials(error, strlen(error), &c, &exp, why, sizeof(why)), -EACCES);
        assert_string_equal(why, "STS said AccessDenied");
        /* A code that is not one (a line break, the token echoed): not said. */
        const char *forged = "<ErrorResponse><Error><Code>Denied&#10;tierd: fake line</Code><Message>bad token "
                             "eyJsecret</Message></Error></ErrorResponse>";
        assert_int_equal(aws_sts_credentials(forged, strlen(forged), &c, &exp, why, sizeof(why)), -EACCES);
        assert_string_equal(why, "STS said an error code that is not one");
        static const char *const bad[] = {
                "<R><Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>s3cr3t</SecretAccessKey></Credentials></R>",
                "<R><Credentials><AccessKeyId>A</AccessKeyId><Expiration>2026-12-06T09:00:00Z</Expiration></Credentials></R>",
                "<R><Other><AccessKeyId>A</AccessKeyId><SecretAccessKey>s3cr3t</SecretAccessKey>"
                "<Expiration>2026-12-06T09:00:00Z</Expiration></Other></R>",
                "<R><Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>s3cr3t",
                "", "s3cr3t",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                why[0] = 0;
                assert_true(aws_sts_credentials(bad[i], strlen(bad[i]), &c, &exp, why, sizeof(why)) < 0);
                assert_true(why[0]);
                assert_null(strstr(why, "s3cr3t"));
        }
}

/* A field longer than its key may be: refused, never cut. */
static void test_sts_too_long(void **state) {
        (void)state;
        char xml[8192], why[512];
        struct proto_credentials c;
        int64_t exp;
        int n = snprintf(xml, sizeof(xml), "<R><Credentials><AccessKeyId>");
        memset(xml + n, 'A', 200);
        snprintf(xml + n + 200, sizeof(xml) - (size_t)n - 200, "</AccessKeyId><SecretAccessKey>s</SecretAccessKey>"
                 "<Expiration>2026-12-06T09:00:00Z</Expiration></Credentials></R>");
        assert_true(aws_sts_credentials(xml, strlen(xml), &c, &exp, why, sizeof(why)) < 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_times), cmocka_unit_test(test_json), cmocka_unit_test(test_sts),
                cmocka_unit_test(test_sts_too_long),
        };
        return cmocka_run_group_tests_name("awsanswer", tests, NULL, NULL);
}
