/* SPDX-License-Identifier: MIT */
/*
 * Each tenant's file table for the policy engine: its files by handle, with
 * their local bytes, state and last use. tierd's own accounting: built by
 * one scan at start (bounded memory, ~60 bytes a file) and kept exact by
 * what tierd does (fills, releases, archives) and hears (opens, writes,
 * deletes, through the use group).
 */
#pragma once

#include <fcntl.h>
#include <stdint.h>

#include "engine.h"
#include "tierd.h"

#define STATE_DIR_DEFAULT "/var/lib/tierd"

struct usage;

/* Builds the table of a tenant with a quota or archive_after (else nothing,
 * and every call below is a no-op for it). */
int usage_scan(struct tenant *tn);
void usage_free(struct tenant *tn);
/* Last uses, kept in t->state_dir/<tenant>.lastuse across restarts: saved
 * now and then and at stop, loaded after the scan. */
int usage_save(struct tenant *tn);
bool usage_tracked(const struct tenant *tn);

/* The file behind fd (any open of it) changed: refresh its entry. */
void usage_update_fd(struct tenant *tn, int fd);
/* An event named the file by handle: last use now; refreshed after a write;
 * forgotten when deleted. The tenant is found among those on fs. */
void usage_opened(struct tiered_fs *fs, const struct file_handle *fh);
void usage_written(struct tiered_fs *fs, const struct file_handle *fh);
void usage_deleted(struct tiered_fs *fs, const struct file_handle *fh);

/* Bytes the tenant holds locally, by tierd's accounting. */
uint64_t usage_used(const struct tenant *tn);
/* The engine's view: files[0..n). */
const struct engine_file *usage_files(const struct tenant *tn, size_t *n);
/* Index of fd's file in the table, or SIZE_MAX. */
size_t usage_index_of_fd(const struct tenant *tn, int fd);
/* Opens the file at index (through the private mount), or -errno. */
int usage_open_index(const struct tenant *tn, size_t index, int flags);
/* Pinned by its mark or by one of the tenant's globs, by its name now. */
bool usage_pinned_fd(const struct tenant *tn, int fd);
/* Drops deleted files' slots once they are half the table. */
void usage_compact(struct tenant *tn);
/* Marks the file at index (its extents turned out shared, it was busy). */
void usage_flag_index(struct tenant *tn, size_t index, uint8_t flag);
void usage_unflag_index(struct tenant *tn, size_t index, uint8_t flag);
void usage_clear_flag(struct tenant *tn, uint8_t flag);
