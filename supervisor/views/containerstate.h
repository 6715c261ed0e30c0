/* SPDX-License-Identifier: MIT */
/*
 * Attached containers outlive a tierd restart: each is recorded in
 * STATE_DIR/containers/<id>.json, so the next tierd serves them with their
 * own workers again, and DetachContainer still finds them.
 */
#pragma once

#include "containers.h"

void container_state_save(const struct container *c);
void container_state_forget(struct tierd *t, const char *id);
/* At start: the recorded containers whose init still runs are adopted;
 * the records of the others are removed. */
void containers_adopt(struct tierd *t);
