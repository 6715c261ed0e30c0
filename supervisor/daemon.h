/* SPDX-License-Identifier: MIT */
#pragma once

#include "face.h"

/* tierd's life, from its command line to its exit status: serves the
 * policy's tenants, shown by face (NULL: none). */
int tierd_main(int argc, char **argv, const struct tierd_face *face);
