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
/* By a host path, in a tenant's view or subvolume: 0; -EAGAIN: *ret is
 * set, but whether the path leads to a file is not known (a directory
 * on the way is not in the kernel's lookup cache: file_job_when_cached
 * finds out); another -errno: message says why. */
int file_ref_from_path(struct tierd *t, const char *path, struct file_ref *ret, char *message, size_t size);
/* The tenant and the name beneath its subvolume of a host path, nothing
 * opened: 0, or -errno and message why. */
int file_ref_name(struct tierd *t, const char *path, struct file_ref *ret, char *message, size_t size);
/* By an open file (any mount namespace, any name): 0; -EAGAIN: *ret is
 * set (the fd's inode), but its name was not walked (not in the lookup
 * cache: file_job_when_cached walks it); another -errno: message why. */
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

/* fn(t, f, done, userdata) once f's path is in the kernel's lookup cache:
 * at once if it is, else after a thread walked it (pathwarm.c). Every
 * job a caller starts goes through here: file_ref_open resolves from
 * that cache only. */
int file_job_when_cached(struct tierd *t, const struct file_ref *f, file_job_t fn, job_done_t done, void *userdata);
/* Brings f's path into the lookup cache on a thread, for a caller who
 * will ask again (at most 64 a tenant wait so). */
void file_ref_warm(struct tierd *t, const struct file_ref *f);
struct file_status {
        const char *tenant;
        const char *state; /* "resident" when never archived */
        uint64_t size, resident;
        bool pinned;
};
/* The status of the file open as fd (O_PATH will do; name for messages),
 * but its tenant: 0, or -errno and message why. Reads its stub: on a
 * thread when a caller named many (pathwarm_check's want_status). */
int file_status_fd(int fd, const char *name, struct file_status *st, char *message, size_t size);

/* A named path walked on a thread: what opening it said, and what it is. */
struct path_check {
        int error; /* 0, or -errno: file_ref_open_error() says it */
        dev_t dev;
        ino_t ino;
        bool regular;
        /* Set by the caller: the thread reads a regular file's status too
         * (all but its tenant), or says why not in status_error and
         * status_msg (malloc'd: the caller frees it). */
        bool want_status;
        int status_error;
        char *status_msg;
        struct file_status status;
};
/* Walks each of refs' paths on a thread (the loop walks no path a caller
 * names past the lookup cache), into checks[i]; then done(userdata) on
 * the loop, maybe before the return. 0, or -ENOMEM (nothing started).
 * refs and checks stay valid until done. */
int pathwarm_check(struct tierd *t, const struct file_ref *refs, struct path_check *checks, size_t n,
                   void (*done)(void *userdata), void *userdata);
/* -errno (what opening f said) as a job's error, and message why. */
int file_ref_open_error(const struct file_ref *f, int error, char *message, size_t size);
/* tierd stops: paths not walked yet are not (their callers hear
 * -ECANCELED), so a stop never waits for a caller's 100,000 walks. */
void pathwarm_stop(struct tenant *tn);
/* At the tenant's end: jobs waiting for their paths are dropped. */
void pathwarm_free(struct tenant *tn);

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

