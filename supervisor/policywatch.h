/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* Reload the policy when its file (or directory) changes, and on SIGHUP. */
int policy_watch_start(struct tierd *t);
void policy_watch_stop(struct tierd *t);
