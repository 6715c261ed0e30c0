/* SPDX-License-Identifier: MIT */
#pragma once

#include <fcntl.h>
#include <stdint.h>

#include "fanevent.h"
#include "fanotify-uapi.h"

#include "tierd.h"

/* Finds the mounted filesystem holding path (libmount): its mount point,
 * type, and path's place inside it. */
/* The notification group's changes: writes (close after writing) and
 * modifications that need no open for writing (truncate(2) by path). */
#define FSGROUP_NOTIFY_MASK (FAN_CLOSE_WRITE | FAN_MODIFY)

int fsgroup_locate(const char *path, char **mountpoint, char **fstype, char **relative);

/* Makes the private mount and both fanotify groups of fs, marks the whole
 * filesystem and ignores the private mount. Refuses a filesystem that cannot
 * take pre-content marks, with a message saying so. */
int fsgroup_open(struct tiered_fs *fs);
/* A FAN_REPORT_FID notification group of kind ("notif", "use") for fs:
 * the predecessor's from the fd store, or a new one (*created: store it).
 * An fd, or -errno. */
int fsgroup_fid_group(struct tiered_fs *fs, const char *kind, bool *created);
int fsgroup_attach(struct tiered_fs *fs);
/* After events were answered: reading paused near RLIMIT_NOFILE resumes. */
void fsgroup_resume_reading(struct tierd *t);
/* The file's name, for a message: where fd leads ("a file" if nowhere). */
const char *fsgroup_fd_name(int fd, char *buf, size_t size);
/* The file handle of a FAN_REPORT_FID event, or NULL. */
struct file_handle *fanotify_event_fid(const struct fanotify_event_metadata *md);
void fsgroup_close(struct tiered_fs *fs);

/* Inode ignore mark: the file is whole, reads need nothing from us. */
void fsgroup_ignore_file(struct tiered_fs *fs, int fd);
int fsgroup_unignore_file(struct tiered_fs *fs, int fd);
/* Inode ignore mark in the notification group: files with nothing to track
 * (no stub, or dirty already) cost no event per write. Archive removes it. */
int fsgroup_ignore_changes(struct tiered_fs *fs, int fd, bool ignore);

/* Opens the file fh names through the private mount, if it is a regular
 * file, without ever waiting: a FIFO is never opened (-EBADFD), a file
 * someone holds a lease on fails (-EWOULDBLOCK). flags: O_RDONLY or O_RDWR.
 * Every open of an inode an event reported goes through here (or O_PATH). */
int fsgroup_open_regular(struct tiered_fs *fs, const struct file_handle *fh, int flags);
/* The same through the fill mount, for fds a worker is lent (fillwatch.h). */
int fsgroup_open_fill(struct tiered_fs *fs, const struct file_handle *fh, int flags);

/* Reads and handles the notifications queued when called (FAN_CLOSE_WRITE:
 * dirty; not those that come meanwhile: bounded). Used before archive and
 * release decisions so no write made before them is missed. */
void fsgroup_drain_notifications(struct tiered_fs *fs);
/* The same, under a write lease on the file leased: its events are not
 * acted on (opening it would break the lease) but reported: true if any. */
bool fsgroup_drain_notifications_except(struct tiered_fs *fs, const struct file_handle *leased);

/* Reads what a notification group has (at most 16 reads of 64 KiB: then
 * readers' events get their turn) and hands each event to handle. */
void fsgroup_read_notifications(struct tiered_fs *fs, int fd,
                                void (*handle)(struct tiered_fs *fs, const struct fanotify_event_metadata *md));
