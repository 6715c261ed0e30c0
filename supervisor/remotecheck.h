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
