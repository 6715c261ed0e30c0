/* SPDX-License-Identifier: MIT */
/*
 * S3's XML answers, read with expat (entities decoded, any size, any
 * order of elements): a listing's records (<Contents>, <Upload>) each with
 * the fields asked for, and the root's own fields (IsTruncated, markers).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct s3xml_field {
        const char *name; /* the element's name */
        char *value;      /* its text, NUL-terminated ("" if absent) */
        size_t size;
        bool seen;
};

/* A record with every one of its fields: <0 stops the parse with that. */
typedef int (*s3xml_record_fn)(void *ctx, const struct s3xml_field *fields, size_t n);

struct s3xml_spec {
        const char *root;            /* the document element's name; NULL: any */
        const char *record;          /* its children of this name are records; NULL: none */
        struct s3xml_field *fields;  /* wanted in each record (its children) */
        size_t n_fields;
        s3xml_record_fn each;
        void *ctx;
        struct s3xml_field *top;     /* wanted among the root's children */
        size_t n_top;
        char root_seen[64];          /* out: the document element's name */
};

/* 0, or -EIO (not well-formed XML, another root), -E2BIG (a top field
 * longer than its buffer), or what each returned. A record with a field
 * missing or too long for its buffer is skipped (not one of tierd's). */
int s3xml_parse(const char *xml, size_t len, struct s3xml_spec *spec);

/* Whether xml is a well-formed document whose element is root (S3 may
 * answer 200 with an <Error> document). */
bool s3xml_root_is(const char *xml, size_t len, const char *root);
