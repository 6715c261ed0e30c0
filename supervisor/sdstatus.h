/* SPDX-License-Identifier: MIT */
#pragma once

#include "tierd.h"

/* systemd's one-line STATUS=, kept up to date while $NOTIFY_SOCKET is set. */
int sdstatus_start(struct tierd *t);
