/* SPDX-License-Identifier: MIT */
/*
 * Before a release: can the archived copy be read back? The worker asks the
 * store for the object (HEAD, or a stat for file://) and compares its size
 * with the stub's; the object's key must be the stub's SHA-256.
 */
#pragma once

#include "stub.h"
#include "tierd.h"

/* done(userdata, 0) when the copy is there, of the right size; else a
 * negative errno (-ENOENT gone, -EBADMSG another size or a key that is not
 * the stub's SHA-256) and a message in msg (static storage of the call). */
int remote_check(struct tenant *tn, const struct stub *s, void (*done)(void *userdata, int error, const char *msg),
                 void *userdata);

/* What a check (or an archive) found out about the stub's copy in the last
 * REMOTE_CHECK_FRESH_USEC: 1 there, a negative errno not there (or a key that
 * is not the stub's SHA-256: known without asking), 0 not known. The quota
 * engine releases without waiting only what is known there. */
#define REMOTE_CHECK_FRESH_USEC (10 * 60 * 1000 * 1000ull)
int remote_check_recent(struct tenant *tn, const struct stub *s);
/* An archive put (or found) the object just now, of size bytes. */
void remote_check_remember(struct tenant *tn, const uint8_t sha256[32], uint64_t size);
void remote_check_free(struct tenant *tn);
