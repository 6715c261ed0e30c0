/* SPDX-License-Identifier: MIT */
/*
 * The admin verbs on files: archive, release, restore, status. Every path
 * a caller gives is resolved inside a tenant's subvolume only, through
 * tierd's private mount.
 */
#pragma once

#include "tierd.h"

/* done(userdata, 0 or -errno, message for a person or NULL). */
typedef void (*job_done_t)(void *userdata, int error, const char *message);

int job_archive(struct tierd *t, const char *path, job_done_t done, void *userdata);
int job_restore(struct tierd *t, const char *path, job_done_t done, void *userdata);
/* Local work only; waits for fills of the file in flight to end first. */
int job_release(struct tierd *t, const char *path, job_done_t done, void *userdata);

struct file_status {
        const char *tenant;
        const char *state; /* "resident" when never archived */
        uint64_t size, resident;
};
int job_file_status(struct tierd *t, const char *path, struct file_status *st, char *message, size_t size);

enum { USAGE_RESIDENT, USAGE_ARCHIVED, USAGE_PARTIAL, USAGE_RELEASED, USAGE_DIRTY, _USAGE_MAX };
struct tenant_usage {
        uint64_t files[_USAGE_MAX];
        uint64_t resident_bytes, released_bytes;
};
int job_tenant_usage(struct tenant *tn, struct tenant_usage *u);
