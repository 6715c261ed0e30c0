/* SPDX-License-Identifier: MIT */
/*
 * Views inside containers: a clone of a subvolume's mount placed in another
 * mount namespace. setns(CLONE_NEWNS) is refused to a multithreaded
 * process, so each step that enters the namespace runs in a forked child.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct nsmount_options {
        bool read_only;
        int userns_fd; /* >= 0: an idmapped clone, owners as that user namespace sees them */
        uint64_t atime;  /* MOUNT_ATTR_RELATIME, _NOATIME or _STRICTATIME: the source's may differ */
};

/* A detached, private clone of the mount at source_fd (not its
 * submounts; name for messages), nosuid and nodev, with the options
 * applied. Returns the clone's fd and its unique mount id. */
int nsmount_clone(int source_fd, const char *name, const struct nsmount_options *o, uint64_t *ret_mnt_id);
/* Moves the clone onto path inside root (rootfs, or "" for the namespace's
 * own root), in the mount namespace mntns_fd. path is resolved inside root
 * only and on the root's own mount (RESOLVE_IN_ROOT, RESOLVE_NO_XDEV: a
 * symlink in the image cannot point it elsewhere, nor onto /proc, /dev or
 * a volume); missing directories are created. Gives up after 10 s. Negative errno; *why says which step. */
int nsmount_place(int clone_fd, int mntns_fd, const char *root, const char *path, const char **why);
/* Unmounts mount mnt_id at path (the container's, or under root before its
 * pivot_root) in mntns_fd; nothing if another mount is there now. */
int nsmount_remove(int mntns_fd, const char *root, const char *path, uint64_t mnt_id);
/* The mount namespace id of a process (NS_GET_MNTNS_ID); 0 if unknown. */
uint64_t nsmount_mntns_id(pid_t pid);
