/* SPDX-License-Identifier: MIT */
/*
 * Where an s3:// tenant's AWS keys come from (its "credential_source"),
 * and temporary keys fetched again before they expire: supervisor/workers/
 * awscreds.c.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "tierd.h"

/* Decides the tenant's source from its policy and tierd's environment (at
 * load and reload). Keys from the environment are read now; a file is
 * left to secrets.c (awscreds_file); temporary keys are fetched from now
 * on, off the loop. <0: the source cannot be used (logged). */
int awscreds_plan(struct tenant *tn);
/* The shared-credentials file and profile the tenant's keys are read
 * from; NULL: they come from elsewhere. */
const char *awscreds_file(const struct tenant *tn);
const char *awscreds_profile(const struct tenant *tn);
/* Whether the first fetch of temporary keys ended, well, or badly for
 * good or for HOLD (or none is needed): a worker's requests wait for it
 * (workers.c). */
bool awscreds_answered(const struct tenant *tn);
/* From the secrets' check, on the loop: fetches that are due. */
void awscreds_tick(struct tenant *tn);
void awscreds_stop(struct tenant *tn);
