/* The AWS shared-credentials parser: keys found, mistakes refused, and
 * no secret in any error message. Secret files: a Kubernetes Secret
 * volume's links followed and its atomic update seen, links out of the
 * directory, FIFOs and files others may read refused. */
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include "credentials.h"

static void test_default_profile(void **state) {
        struct proto_credentials c;
        const char *err = NULL;
        (void)state;
        assert_int_equal(credentials_parse("# comment\n[other]\naws_access_key_id = X\n\n[default]\n"
                                           "aws_access_key_id = AKIA123\naws_secret_access_key=s3cr3t/+=\n"
                                           "region = eu-west-1\n", "default", &c, &err), 0);
        assert_string_equal(c.access_key, "AKIA123");
        assert_string_equal(c.secret_key, "s3cr3t/+=");
        assert_string_equal(c.session_token, "");
        assert_int_equal(c.type, PROTO_CREDENTIALS);
        assert_int_equal(credentials_parse("[default]\naws_access_key_id=a\naws_secret_access_key=b\naws_session_token=tok\n",
                                           "default", &c, &err), 0);
        assert_string_equal(c.session_token, "tok");
}

static void expect_error(const char *text, int error) {
        struct proto_credentials c;
        const char *err = NULL;
        assert_int_equal(credentials_parse(text, "default", &c, &err), error);
        assert_non_null(err);
        assert_null(strstr(err, "s3cr3t"));
}
#define expect_bad(text) expect_error(text, -EINVAL)
/* The profile is not there, or lacks a key: a chain passes over the file. */
#define expect_no_keys(text) expect_error(text, -ENOKEY)

static void test_mistakes(void **state) {
        (void)state;
        expect_no_keys("");
        expect_no_keys("[other]\naws_access_key_id=a\naws_secret_access_key=s3cr3t\n");
        expect_no_keys("[default]\naws_access_key_id=a\n");
        expect_no_keys("[default]\naws_secret_access_key=s3cr3t\n");
        expect_bad("[default]\naws_access_key_id=a\naws_secret_access_key=s3 cr3t\n");
        expect_bad("[default]\naws_access_key_id=a\nnonsense line\naws_secret_access_key=s3cr3t\n");
        expect_bad("[default]\naws_access_key_id=\naws_secret_access_key=s3cr3t\n");
}

static char dir[64];

static void put(const char *name, const char *text, mode_t mode) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

static void link_at(const char *target, const char *name) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        assert_int_equal(symlink(target, p), 0);
}

static int read_secret(const char *name, char *buf, size_t size, const char **err) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        *err = "";
        return secret_file_read(p, buf, size, err);
}

/* kubelet's AtomicWriter: the keys in a timestamped directory, ..data a
 * link to it, each key a link through ..data; an update writes a new
 * directory and renames a new ..data link over the old one. */
static void kubelet_write(const char *stamp, const char *value) {
        char p[256], q[256];
        snprintf(p, sizeof(p), "%s/%s", dir, stamp);
        assert_int_equal(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/key", stamp);
        put(p, value, 0600);
        link_at(stamp, "..data_tmp");
        snprintf(p, sizeof(p), "%s/..data_tmp", dir);
        snprintf(q, sizeof(q), "%s/..data", dir);
        assert_int_equal(rename(p, q), 0);
}

static void test_secret_files(void **state) {
        char buf[64];
        const char *err;
        (void)state;
        if (geteuid() != 0)
                skip(); /* a secret file must be root's: only root can make one */
        strcpy(dir, "/tmp/tierd-unit-secret.XXXXXX");
        assert_non_null(mkdtemp(dir));

        kubelet_write("..2026_12_05_08_00_00.000000001", "first\n");
        link_at("..data/key", "key");
        assert_int_equal(read_secret("key", buf, sizeof(buf), &err), 0);
        assert_string_equal(buf, "first\n");
        kubelet_write("..2026_12_05_09_00_00.000000002", "second\n");
        assert_int_equal(read_secret("key", buf, sizeof(buf), &err), 0);
        assert_string_equal(buf, "second\n");

        /* Out of the directory, however it is spelt: refused, with a reason. */
        link_at("/etc/hostname", "absolute");
        link_at("../../etc/hostname", "dotdot");
        link_at("/proc/self/fd/0", "magic");
        for (const char *const *n = (const char *const[]){ "absolute", "dotdot", "magic", NULL }; *n; n++) {
                assert_int_equal(read_secret(*n, buf, sizeof(buf), &err), -EPERM);
                assert_non_null(strstr(err, "out of its directory"));
        }
        /* A FIFO fails at once (a blocking open would stall tierd): a
         * hang here ends the test by SIGALRM, a failure. */
        char p[256];
        snprintf(p, sizeof(p), "%s/fifo", dir);
        assert_int_equal(mkfifo(p, 0600), 0);
        alarm(5);
        assert_int_equal(read_secret("fifo", buf, sizeof(buf), &err), -EPERM);
        alarm(0);
        /* Readable by others, or not root's: refused. */
        put("open", "x", 0644);
        assert_int_equal(read_secret("open", buf, sizeof(buf), &err), -EPERM);
        put("nobody", "x", 0600);
        snprintf(p, sizeof(p), "%s/nobody", dir);
        assert_int_equal(chown(p, 65534, 65534), 0);
        assert_int_equal(read_secret("nobody", buf, sizeof(buf), &err), -EPERM);
        assert_int_equal(read_secret("missing", buf, sizeof(buf), &err), -ENOENT);

        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_default_profile),
                cmocka_unit_test(test_mistakes),
                cmocka_unit_test(test_secret_files),
        };
        return UNIT_RUN("credentials", tests);
}
