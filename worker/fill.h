/* SPDX-License-Identifier: MIT */
#pragma once

#include "backend.h"
#include "mcache.h"
#include "proto.h"

/* Serve one request from tierd: fd is the fill fd (FILL, VERIFY) or the file
 * to archive (ARCHIVE). Fills rep with the outcome. */
void worker_serve(struct backend *b, struct manifest_cache *mcache, const struct proto_request *req, int fd,
                  struct proto_reply *rep);
