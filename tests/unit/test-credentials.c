/* The AWS shared-credentials parser: keys found, mistakes refused, and
 * no secret in any error message. */
#include "unit.h"
#include <errno.h>
#include "credentials.h"

static void test_default_profile(void **state) {
        struct proto_credentials c;
        const char *err = NULL;
        (void)state;
        assert_int_equal(credentials_parse("# comment\n[other]\naws_access_key_id = X\n\n[default]\n"
                                           "aws_access_key_id = AKIA123\naws_secret_access_key=s3cr3t/+=\n"
                                           "region = eu-west-1\n", &c, &err), 0);
        assert_string_equal(c.access_key, "AKIA123");
        assert_string_equal(c.secret_key, "s3cr3t/+=");
        assert_string_equal(c.session_token, "");
        assert_int_equal(c.type, PROTO_CREDENTIALS);
        assert_int_equal(credentials_parse("[default]\naws_access_key_id=a\naws_secret_access_key=b\naws_session_token=tok\n",
                                           &c, &err), 0);
        assert_string_equal(c.session_token, "tok");
}

static void expect_bad(const char *text) {
        struct proto_credentials c;
        const char *err = NULL;
        assert_int_equal(credentials_parse(text, &c, &err), -EINVAL);
        assert_non_null(err);
        assert_null(strstr(err, "s3cr3t"));
}

static void test_mistakes(void **state) {
        (void)state;
        expect_bad("");
        expect_bad("[other]\naws_access_key_id=a\naws_secret_access_key=s3cr3t\n");
        expect_bad("[default]\naws_access_key_id=a\n");
        expect_bad("[default]\naws_secret_access_key=s3cr3t\n");
        expect_bad("[default]\naws_access_key_id=a\naws_secret_access_key=s3 cr3t\n");
        expect_bad("[default]\naws_access_key_id=a\nnonsense line\naws_secret_access_key=s3cr3t\n");
        expect_bad("[default]\naws_access_key_id=\naws_secret_access_key=s3cr3t\n");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_default_profile),
                cmocka_unit_test(test_mistakes),
        };
        return UNIT_RUN("credentials", tests);
}
