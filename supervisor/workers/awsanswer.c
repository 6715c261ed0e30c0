/* SPDX-License-Identifier: MIT */
#include "awsanswer.h"

#include <errno.h>
#include <expat.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"

int aws_time_parse(const char *text, int64_t *ret) {
        struct tm tm = {};
        const char *p = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!p)
                return -EINVAL;
        if (*p == '.') /* a fraction of a second: left out */
                p += 1 + strspn(p + 1, "0123456789");
        if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0 && strcmp(p, "UTC") != 0)
                return -EINVAL;
        time_t t = timegm(&tm);
        if (t == (time_t)-1 || tm.tm_year < 70)
                return -EINVAL;
        *ret = (int64_t)t;
        return 0;
}

/* What a key may hold: printable ASCII, no space, fits. */
static int copy_key(char *dst, size_t size, const char *v, bool required) {
        size_t n = v ? strlen(v) : 0;
        if (n == 0)
                return required ? -EINVAL : 0;
        if (n >= size)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
                        return -EINVAL;
        memcpy(dst, v, n + 1);
        return 0;
}

int aws_keys_set(struct proto_credentials *ret, const char *ak, const char *sk, const char *token) {
        struct proto_credentials c = { .type = PROTO_CREDENTIALS };
        int r = copy_key(c.access_key, sizeof(c.access_key), ak, true);
        if (r == 0)
                r = copy_key(c.secret_key, sizeof(c.secret_key), sk, true);
        if (r == 0)
                r = copy_key(c.session_token, sizeof(c.session_token), token, false);
        if (r == 0)
                *ret = c;
        explicit_bzero(&c, sizeof(c));
        return r;
}

static const char *json_string(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                                                                  : NULL;
}

int aws_json_credentials(const char *text, size_t len, struct proto_credentials *ret, int64_t *expires,
                         const char **error) {
        json_tokener *tok = json_tokener_new();
        json_object *o = tok ? json_tokener_parse_ex(tok, text, (int)MIN(len, (size_t)INT32_MAX)) : NULL;
        const char *code, *expiration;
        int r = 0;

        if (!tok)
                return -ENOMEM;
        bool trailing = false; /* anything but white space after the object */
        for (size_t i = tok ? json_tokener_get_parse_end(tok) : len; i < len; i++)
                trailing |= text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\n';
        if (!o || json_tokener_get_error(tok) != json_tokener_success || !json_object_is_type(o, json_type_object) ||
            trailing) {
                *error = "the answer is not a JSON object";
                r = -EBADMSG;
        } else if ((code = json_string(o, "Code")) && strcmp(code, "Success") != 0) {
                *error = "the answer's Code is not \"Success\"";
                r = -EACCES;
        } else if (aws_keys_set(ret, json_string(o, "AccessKeyId"), json_string(o, "SecretAccessKey"), json_string(o, "Token")) < 0) {
                *error = "the answer has no AccessKeyId and SecretAccessKey, or one holds a space or a control character";
                r = -EBADMSG;
        } else if (!(expiration = json_string(o, "Expiration")))
                *expires = 0;
        else if (aws_time_parse(expiration, expires) < 0) {
                *error = "the answer's Expiration is not a time (2026-01-31T12:00:00Z)";
                explicit_bzero(ret, sizeof(*ret));
                r = -EBADMSG;
        }
        json_object_put(o);
        json_tokener_free(tok);
        return r;
}

/* STS's XML: the text of <Credentials>' and <Error>'s children. */
enum { F_ACCESS, F_SECRET, F_TOKEN, F_EXPIRATION, F_CODE, N_FIELDS };
static const struct { const char *parent, *name; size_t size; } sts_fields[N_FIELDS] = {
        [F_ACCESS] = { "Credentials", "AccessKeyId", 128 },     [F_SECRET] = { "Credentials", "SecretAccessKey", 256 },
        [F_TOKEN] = { "Credentials", "SessionToken", 4096 },    [F_EXPIRATION] = { "Credentials", "Expiration", 64 },
        [F_CODE] = { "Error", "Code", 128 },
};

#define STS_DEPTH 8 /* <Response><Result><Credentials><Key>: deeper names are not kept */
struct sts_parse {
        char names[STS_DEPTH][32]; /* the open elements' */
        unsigned depth;
        int field; /* collecting into, or -1 */
        char value[N_FIELDS][4096];
        size_t len[N_FIELDS];
        bool too_long;
};

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs) {
        struct sts_parse *p = ud;
        const char *parent = p->depth >= 1 && p->depth <= STS_DEPTH ? p->names[p->depth - 1] : "";
        (void)attrs;
        p->field = -1;
        for (int i = 0; i < N_FIELDS; i++)
                if (strcmp(name, sts_fields[i].name) == 0 && strcmp(parent, sts_fields[i].parent) == 0) {
                        p->field = i;
                        p->len[i] = 0;
                }
        if (p->depth < STS_DEPTH)
                snprintf(p->names[p->depth], sizeof(p->names[0]), "%s", name);
        p->depth++;
}

static void XMLCALL on_end(void *ud, const XML_Char *name) {
        struct sts_parse *p = ud;
        (void)name;
        p->field = -1;
        p->depth--;
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len) {
        struct sts_parse *p = ud;
        if (p->field < 0 || len <= 0)
                return;
        size_t *n = &p->len[p->field], cap = MIN(sizeof(p->value[0]), sts_fields[p->field].size);
        if (*n + (size_t)len >= cap) {
                p->too_long = true;
                return;
        }
        memcpy(p->value[p->field] + *n, s, (size_t)len);
        *n += (size_t)len;
        p->value[p->field][*n] = 0;
}

static int sts_read(const char *xml, size_t len, struct sts_parse *p) {
        XML_Parser x = XML_ParserCreate("UTF-8");
        if (!x)
                return -ENOMEM;
        XML_SetUserData(x, p);
        XML_SetElementHandler(x, on_start, on_end);
        XML_SetCharacterDataHandler(x, on_text);
        int ok = len <= INT32_MAX && XML_Parse(x, xml, (int)len, 1) == XML_STATUS_OK;
        XML_ParserFree(x);
        return ok && !p->too_long ? 0 : -EBADMSG;
}

int aws_sts_credentials(const char *xml, size_t len, struct proto_credentials *ret, int64_t *expires, char *why,
                        size_t why_size) {
        struct sts_parse *p = calloc(1, sizeof(*p));
        int r;
        if (!p)
                return -ENOMEM;
        p->field = -1;
        r = sts_read(xml, len, p);
        if (r < 0)
                snprintf(why, why_size, "STS's answer is not XML of the expected shape");
        else if (p->len[F_CODE]) {
                /* Its code only, and only if it looks like one: a message
                 * may echo what was sent (the token), and goes to logs and
                 * the bus. */
                bool code = p->len[F_CODE] <= 64 && strspn(p->value[F_CODE], "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                                             "abcdefghijklmnopqrstuvwxyz.") == p->len[F_CODE];
                snprintf(why, why_size, "STS said %s", code ? p->value[F_CODE] : "an error code that is not one");
                r = -EACCES;
        } else if (!p->len[F_EXPIRATION] || aws_time_parse(p->value[F_EXPIRATION], expires) < 0) {
                snprintf(why, why_size, "STS's answer has no <Credentials> with an <Expiration>");
                r = -EBADMSG;
        } else if (aws_keys_set(ret, p->value[F_ACCESS], p->value[F_SECRET], p->value[F_TOKEN]) < 0) {
                snprintf(why, why_size, "STS's <Credentials> lack a key, or one holds a space or a control character");
                r = -EBADMSG;
        }
        explicit_bzero(p, sizeof(*p));
        free(p);
        return r;
}
