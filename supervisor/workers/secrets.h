/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Reads the tenant's credentials file, header files and catalog key. */
int tenant_secrets_load(struct tenant *tn);
/* The tenant's catalog key, derived from a key file (root's, 0600, at
 * least CATALOG_KEY_MIN bytes of text, trailing whitespace left out) and
 * its name. *error says why not. */
int catalog_key_read(const char *path, const char *tenant, struct catalog_key *key, const char **error);
/* Re-reads credentials and "@FILE" header files when they change (rotated
 * keys and tokens apply without a worker restart) and hands them to the
 * workers. */
int secrets_watch_start(struct tierd *t);
