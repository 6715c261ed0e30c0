/* SPDX-License-Identifier: MIT */
/*
 * Chunk manifests in the worker: built at archive time, and checked on
 * ranged fills so that every byte written comes from a chunk whose SHA-256
 * the manifest vouches for (common/manifest.h).
 */
#pragma once

#include <stdint.h>

#include "backend.h"
#include "mcache.h"
#include "proto.h"

/* Hashes fd's first size bytes whole (into rep->sha256) and per chunk; for
 * two chunks or more stores the manifest as "manifest/<root>" and sets
 * PROTO_REPLY_MANIFEST and rep->manifest. */
int archive_hash_and_manifest(struct backend *b, int fd, uint64_t size, uint64_t chunk, struct proto_reply *rep);

/* Fetches req's range (whole chunks, or up to the end of the object),
 * verifies each chunk against the manifest before handing it to sink. A
 * chunk that does not match is fetched once more; then -EBADMSG, and
 * nothing of it reaches sink. */
int fetch_verified(struct backend *b, struct manifest_cache *mcache, const struct proto_request *req,
                   backend_sink_t sink, void *ctx);
