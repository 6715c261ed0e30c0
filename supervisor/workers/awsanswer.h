/* SPDX-License-Identifier: MIT */
/*
 * What AWS's credential services answer, read (supervisor/workers/
 * awsanswer.c): the JSON of EC2's instance metadata and of container
 * credentials endpoints, and STS's XML. Pure: unit-tested and fuzzed.
 * Error texts never hold a secret.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* The three keys (token optional), checked: printable, no space, each
 * fits. On failure ret is left as it was. */
int aws_keys_set(struct proto_credentials *ret, const char *access_key, const char *secret_key, const char *token);

/* "2026-12-06T09:00:00Z" (fractions of a second and "+00:00" too): the
 * time in seconds since the epoch, UTC. */
int aws_time_parse(const char *text, int64_t *ret);

/* {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} (with "Code"
 * "Success" from EC2): the keys, and when they expire (0: never said). */
int aws_json_credentials(const char *text, size_t len, struct proto_credentials *ret, int64_t *expires,
                         const char **error);

/* An AssumeRole*Response's <Credentials>: the keys and their Expiration.
 * An <ErrorResponse>: -EACCES, and its Code and Message in why. */
int aws_sts_credentials(const char *xml, size_t len, struct proto_credentials *ret, int64_t *expires, char *why,
                        size_t why_size);
