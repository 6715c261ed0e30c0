/* SPDX-License-Identifier: MIT */
/*
 * Tiered filesystems tierd mounts itself. With mount(2) a stub would be
 * readable (as zeros) between the mount and the mark; with the new mount
 * API the filesystem is mounted detached, tierd marks it, and only then
 * moves it onto its mountpoint.
 */
#include "bootmount.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "views.h"

/* Filesystem options ("compress=zstd", "ro") go to the superblock. */
static int apply_fs_options(int fsfd, const char *options) {
        _cleanup_free_ char *copy = options ? strdup(options) : NULL;
        char *save = NULL;
        if (options && !copy)
                return -ENOMEM;
        for (char *o = copy ? strtok_r(copy, ",", &save) : NULL; o; o = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(o, '=');
                if (eq)
                        *eq = 0;
                int r = eq ? fsconfig(fsfd, FSCONFIG_SET_STRING, o, eq + 1, 0) : fsconfig(fsfd, FSCONFIG_SET_FLAG, o, NULL, 0);
                if (r < 0)
                        return log_error_errno(errno, "mount option '%s' refused: %m", o);
        }
        return 0;
}

/* Per-mount options ("noatime", "nodev") are attributes of the mount. */
static int mount_attributes(const char *vfs, unsigned *ret) {
        static const struct { unsigned long ms; unsigned attr; } map[] = {
                { MS_RDONLY, MOUNT_ATTR_RDONLY },     { MS_NOSUID, MOUNT_ATTR_NOSUID },
                { MS_NODEV, MOUNT_ATTR_NODEV },       { MS_NOEXEC, MOUNT_ATTR_NOEXEC },
                { MS_NOATIME, MOUNT_ATTR_NOATIME },   { MS_RELATIME, MOUNT_ATTR_RELATIME },
                { MS_STRICTATIME, MOUNT_ATTR_STRICTATIME }, { MS_NODIRATIME, MOUNT_ATTR_NODIRATIME },
        };
        unsigned long flags = 0;
        *ret = 0;
        if (vfs && mnt_optstr_get_flags(vfs, &flags, mnt_get_builtin_optmap(MNT_LINUX_MAP)) < 0)
                return -EINVAL;
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (flags & map[i].ms)
                        *ret |= map[i].attr;
        return 0;
}

int bootmount_open(const struct policy_filesystem *f, int *ret_mnt_fd, const char **why) {
        /* Without a cache the string is ours (with one, the cache's). */
        _cleanup_free_ char *dev = mnt_resolve_spec(f->source, NULL);
        struct stat dst, mst;
        int r;

        *ret_mnt_fd = -1;
        if (!dev)
                return *why = "no block device has this source", -ENODEV;
        if (stat(dev, &dst) < 0 || !S_ISBLK(dst.st_mode))
                return *why = "the source is not a block device", -ENOTBLK;
        if ((r = mkdir_parents(f->mountpoint, 0755)) < 0)
                return *why = "cannot create the mountpoint", r;
        if (path_is_mountpoint(f->mountpoint)) {
                if (stat(f->mountpoint, &mst) == 0 && mst.st_dev == dst.st_rdev)
                        return 1;
                /* btrfs reports an anonymous st_dev: ask the mount table. */
                struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
                struct libmnt_fs *m = tb ? mnt_table_find_target(tb, f->mountpoint, MNT_ITER_BACKWARD) : NULL;
                bool same = m && mnt_fs_get_srcpath(m) && strcmp(mnt_fs_get_srcpath(m), dev) == 0;
                mnt_unref_table(tb);
                if (same)
                        return 1;
                return *why = "something else is mounted at the mountpoint", -EBUSY;
        }
        _cleanup_close_ int fsfd = fsopen(f->type, FSOPEN_CLOEXEC);
        if (fsfd < 0)
                return *why = "fsopen: the kernel has no such filesystem type", -errno;
        if (fsconfig(fsfd, FSCONFIG_SET_STRING, "source", dev, 0) < 0)
                return *why = "the source was refused", -errno;
        _cleanup_free_ char *vfs = NULL, *fsopts = NULL;
        unsigned attrs;
        if (f->options && mnt_split_optstr(f->options, NULL, &vfs, &fsopts, 0, 0) < 0)
                return *why = "the mount options cannot be parsed", -EINVAL;
        if ((r = mount_attributes(vfs, &attrs)) < 0)
                return *why = "the mount options cannot be parsed", r;
        if ((r = apply_fs_options(fsfd, fsopts)) < 0)
                return *why = "a mount option was refused", r;
        if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return *why = "the filesystem cannot be mounted (wrong type, or damaged?)", -errno;
        /* nosuid,nodev always: tenants write here (through views). */
        int mnt = fsmount(fsfd, FSMOUNT_CLOEXEC, attrs | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return *why = "fsmount", -errno;
        log_info("mounted %s (%s, %s) detached, to be marked before it appears at %s", f->source, dev, f->type,
                 f->mountpoint);
        *ret_mnt_fd = mnt;
        return 0;
}

int bootmount_attach(int mnt_fd, const char *mountpoint) {
        if (move_mount(mnt_fd, "", AT_FDCWD, mountpoint, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return log_error_errno(errno, "cannot move the marked filesystem onto %s: %m", mountpoint);
        log_info("%s mounted, marked", mountpoint);
        return 0;
}

void bootmount_remove(const char *mountpoint) {
        if (umount2(mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                log_error("cannot unmount %s: %m", mountpoint);
        else
                log_info("%s unmounted", mountpoint);
}
