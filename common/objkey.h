/* SPDX-License-Identifier: MIT */
/*
 * The keys tierd makes in a store, beneath the backend's prefix. A store's
 * listing is read through object_key_parse only: a key of another form is
 * not tierd's, and nothing tierd does ever deletes it.
 */
#pragma once

#include "proto.h"

#define OBJECT_CATALOG_PREFIX "catalog/"

/* The key of o (its kind and the fields that kind uses). */
void object_key_format(const struct proto_object *o, char key[STUB_KEY_MAX]);
/* The fixed beginning of every key of a kind ("sha256/"...), or NULL. */
const char *object_kind_prefix(uint32_t kind);
/* 0 and o's kind, hash or numbers if key is exactly one of tierd's forms
 * (lowercase hex, nothing after it), else -EINVAL. */
int object_key_parse(const char *key, struct proto_object *o);
