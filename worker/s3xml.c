/* SPDX-License-Identifier: MIT */
#include "s3xml.h"

#include <errno.h>
#include <expat.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct state {
        XML_Parser p;
        struct s3xml_spec *spec;
        unsigned depth;
        bool in_record, record_bad;
        struct s3xml_field *capture; /* the field whose text comes now */
        size_t len;                  /* of its text so far */
        bool overflow;
        int error;
};

static struct s3xml_field *find(struct s3xml_field *f, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(f[i].name, name) == 0)
                        return &f[i];
        return NULL;
}

static void clear(struct s3xml_field *f, size_t n) {
        for (size_t i = 0; i < n; i++) {
                f[i].value[0] = 0;
                f[i].seen = false;
        }
}

static void XMLCALL on_start(void *userdata, const XML_Char *name, const XML_Char **attrs) {
        struct state *s = userdata;
        struct s3xml_spec *sp = s->spec;
        (void)attrs;
        s->depth++;
        s->capture = NULL;
        if (s->depth == 1) {
                snprintf(sp->root_seen, sizeof(sp->root_seen), "%s", name);
                if (sp->root && strcmp(name, sp->root) != 0) {
                        s->error = -EIO;
                        XML_StopParser(s->p, XML_FALSE);
                }
        } else if (s->depth == 2 && sp->record && strcmp(name, sp->record) == 0) {
                s->in_record = true;
                s->record_bad = false;
                clear(sp->fields, sp->n_fields);
        } else if (s->depth == 2)
                s->capture = find(sp->top, sp->n_top, name);
        else if (s->depth == 3 && s->in_record)
                s->capture = find(sp->fields, sp->n_fields, name);
        if (s->capture) {
                s->capture->value[0] = 0;
                s->len = 0;
                s->overflow = false;
        }
}

static void XMLCALL on_text(void *userdata, const XML_Char *text, int len) {
        struct state *s = userdata;
        struct s3xml_field *f = s->capture;
        if (!f || len <= 0)
                return;
        if (s->len + (size_t)len >= f->size) {
                s->overflow = true;
                return;
        }
        memcpy(f->value + s->len, text, (size_t)len);
        s->len += (size_t)len;
        f->value[s->len] = 0;
}

static void XMLCALL on_end(void *userdata, const XML_Char *name) {
        struct state *s = userdata;
        struct s3xml_spec *sp = s->spec;
        (void)name;
        if (s->capture) {
                if (!s->overflow)
                        s->capture->seen = true;
                else if (s->in_record)
                        s->record_bad = true; /* a key longer than any of ours */
                else {
                        s->error = -E2BIG;
                        XML_StopParser(s->p, XML_FALSE);
                }
                s->capture = NULL;
        }
        if (s->depth == 2 && s->in_record) {
                bool whole = !s->record_bad;
                for (size_t i = 0; whole && i < sp->n_fields; i++)
                        whole = sp->fields[i].seen;
                s->in_record = false;
                int r = whole && sp->each ? sp->each(sp->ctx, sp->fields, sp->n_fields) : 0;
                if (r < 0) {
                        s->error = r;
                        XML_StopParser(s->p, XML_FALSE);
                }
        }
        s->depth--;
}

bool s3xml_root_is(const char *xml, size_t len, const char *root) {
        struct s3xml_spec spec = { .root = root };
        return s3xml_parse(xml, len, &spec) == 0;
}

int s3xml_parse(const char *xml, size_t len, struct s3xml_spec *spec) {
        struct state s = { .spec = spec };
        int r = 0;

        spec->root_seen[0] = 0;
        clear(spec->top, spec->n_top);
        /* S3 keeps a long CompleteMultipartUpload alive with whitespace
         * before the document, which XML does not allow before its
         * declaration. */
        while (len > 0 && (*xml == ' ' || *xml == '\t' || *xml == '\r' || *xml == '\n')) {
                xml++;
                len--;
        }
        if (len > (size_t)INT32_MAX)
                return -E2BIG;
        if (!(s.p = XML_ParserCreate("UTF-8")))
                return -ENOMEM;
        XML_SetUserData(s.p, &s);
        XML_SetElementHandler(s.p, on_start, on_end);
        XML_SetCharacterDataHandler(s.p, on_text);
        if (XML_Parse(s.p, xml, (int)len, XML_TRUE) != XML_STATUS_OK)
                r = s.error ? s.error : -EIO;
        XML_ParserFree(s.p);
        return r;
}
