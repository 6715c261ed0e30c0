/* SPDX-License-Identifier: MIT */
#pragma once

#include "proto.h"

/* Parses the [profile] section of an AWS shared-credentials file
 * (aws_access_key_id, aws_secret_access_key, optional aws_session_token).
 * Pure: unit-tested. On -EINVAL (a malformed file) or -ENOKEY (no such
 * profile in it, or one without both keys: a chain passes over the file)
 * *error says what is wrong (never a secret). */
int credentials_parse(const char *text, const char *profile, struct proto_credentials *ret, const char **error);

/* Reads a secret file tierd hands to a worker: it must be a regular file
 * owned by root and not readable by group or others. Symbolic links are
 * followed only while they stay inside the file's directory (a Kubernetes
 * Secret volume's layout); a link out of it is -EPERM. */
int secret_file_read(const char *path, char *buf, size_t size, const char **error);
/* The same for a token made to be read by the pod it is mounted in (a
 * projected service-account token, mode 0644): others may read it, only
 * root may write it. */
int token_file_read(const char *path, char *buf, size_t size, const char **error);
/* What a secret file is now (the one secret_file_read would read: links
 * followed within its directory only), without opening its content. */
struct stat;
int secret_file_stat(const char *path, struct stat *st);
