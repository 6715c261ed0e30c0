/* SPDX-License-Identifier: MIT */
/*
 * The admin verbs on files: archive, release, restore, status. Every path
 * a caller gives is resolved inside a tenant's subvolume only, through
 * tierd's private mount.
 */
#pragma once

#include "tierd.h"

/* A file a caller named, found inside one tenant's subvolume. */
struct file_ref {
        struct tenant *tn;
        char *rel;  /* beneath the tenant's subvolume */
        char *name; /* for messages: the caller's path or the view path, valid UTF-8 */
        dev_t dev;  /* the file found at the call: rel must still lead to it */
        ino_t ino;
};
void file_ref_done(struct file_ref *f);
/* By a host path, in a tenant's view or subvolume. */
int file_ref_from_path(struct tierd *t, const char *path, struct file_ref *ret, char *message, size_t size);
/* By an open file (any mount namespace, any name). */
int file_ref_from_fd(struct tierd *t, int fd, struct file_ref *ret, char *message, size_t size);

/* The errors a file job reports, each a named D-Bus error too:
 *   -ENOENT no such file (or replaced since the call), -EXDEV outside
 *   every tenant, -EINVAL not a regular file, -ENODATA not archived,
 *   -EPINNED pinned, -EBUSY in use or changed, -ECANCELED canceled;
 *   anything else (-EBADMSG a corrupt stub...): failed. */
#define EPINNED ENOSTR /* no call tierd makes returns it: it stands for pinned */

/* done(userdata, 0 or -errno, message for a person or NULL). */
typedef void (*job_done_t)(void *userdata, int error, const char *message);
/* f stays valid until done() is called; done may be called before return. */
typedef int (*file_job_t)(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata);

int job_archive(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata);
/* Uploads an archived file whose object the store lost (tierctl audit
 * --repair): as an archive, but also when the stub says it is archived
 * and unchanged. Released and partial files cannot be: their bytes are
 * not here. */
int job_archive_again(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata);
/* Archive again to add a chunk manifest to a file archived without one
 * (tierctl archive --rehash); a released file is restored for it first. */
int job_rehash(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata);
int job_restore(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata);
/* Local work only; waits for fills of the file in flight to end first. */
int job_release(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata);
/* The release itself, of the file open O_RDWR as fd (name for messages):
 * 0, or -EBUSY with *busy when fills of it are in flight, or an error that
 * message explains. The policy engine's releases come here too. */
int job_release_fd(struct tenant *tn, int fd, const char *name, char *message, size_t size, bool *busy);
/* Pinned files are never released; pinning a released file restores it. */
int job_pin(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata);
int job_unpin(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata);

struct file_status {
        const char *tenant;
        const char *state; /* "resident" when never archived */
        uint64_t size, resident;
        bool pinned;
};
int job_file_status(struct tierd *t, const struct file_ref *f, struct file_status *st, char *message, size_t size);

