/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Reads the tenant's credentials file, header files and catalog key. */
int tenant_secrets_load(struct tenant *tn);
/* A catalog key file: root's, 0600, at least CATALOG_KEY_MIN bytes (its
 * text, trailing whitespace left out). *error says why not. */
int catalog_key_read(const char *path, struct catalog_key *key, const char **error);
/* Re-reads credentials files when they change (rotated keys apply without a
 * restart) and hands them to the workers. */
int secrets_watch_start(struct tierd *t);
