/* SPDX-License-Identifier: MIT */
#include "wholefs.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <linux/btrfs.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "macro.h"

/* The admin's mount at mountpoint (the topmost one): the directory of the
 * filesystem it shows (mountinfo's root) and its source device. */
static int admin_mount(const char *mountpoint, char *root, size_t root_len, char *source, size_t source_len) {
        struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
        struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
        struct libmnt_fs *fs;
        int r = tb && it ? -ENOENT : -ENOMEM;
        while (r == -ENOENT && mnt_table_next_fs(tb, it, &fs) == 0) {
                const char *t = mnt_fs_get_target(fs), *rt = mnt_fs_get_root(fs), *src = mnt_fs_get_srcpath(fs);
                if (!t || strcmp(t, mountpoint) != 0)
                        continue;
                snprintf(root, root_len, "%s", rt ?: "");
                snprintf(source, source_len, "%s", src ?: "");
                r = 0;
        }
        mnt_free_iter(it);
        mnt_unref_table(tb);
        return r;
}

/* Do the two directories belong to one filesystem? btrfs gives each
 * subvolume an fsid of its own in statfs: ask for the filesystem's. */
static bool same_fs(int a, int b, bool btrfs) {
        if (btrfs) {
                struct btrfs_ioctl_fs_info_args x = { 0 }, y = { 0 };
                return ioctl(a, BTRFS_IOC_FS_INFO, &x) == 0 && ioctl(b, BTRFS_IOC_FS_INFO, &y) == 0 &&
                       memcmp(x.fsid, y.fsid, sizeof(x.fsid)) == 0;
        }
        struct statfs x, y;
        return fstatfs(a, &x) == 0 && fstatfs(b, &y) == 0 && memcmp(&x.f_fsid, &y.f_fsid, sizeof(x.f_fsid)) == 0;
}

/* A detached, read-only mount of the filesystem's root (btrfs: its top
 * level, subvolid 5, not the default subvolume). The kernel gives the
 * superblock already mounted; "ro" is asked for only if it is read-only
 * already, so this never changes how the filesystem is mounted. */
static int mount_root(const char *fstype, const char *source, int fs_root_fd, const char **why) {
        bool btrfs = strcmp(fstype, "btrfs") == 0;
        struct statvfs sv;
        _cleanup_close_ int fsfd = fsopen(fstype, FSOPEN_CLOEXEC);
        if (fsfd < 0)
                return *why = "fsopen", -errno;
        if (fsconfig(fsfd, FSCONFIG_SET_STRING, "source", source, 0) < 0)
                return *why = "fsconfig source", -errno;
        if (btrfs && fsconfig(fsfd, FSCONFIG_SET_STRING, "subvolid", "5", 0) < 0)
                return *why = "fsconfig subvolid=5", -errno;
        if (fstatvfs(fs_root_fd, &sv) == 0 && (sv.f_flag & ST_RDONLY) &&
            fsconfig(fsfd, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0)
                return *why = "fsconfig ro", -errno;
        if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return *why = "mounting the filesystem's root", -errno;
        _cleanup_close_ int mnt = fsmount(fsfd, FSMOUNT_CLOEXEC,
                                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (mnt < 0)
                return *why = "fsmount", -errno;
        int fd = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return *why = "opening the filesystem's root", -errno;
        if (!same_fs(fd, fs_root_fd, btrfs)) {
                close(fd);
                return *why = "the device mounted is another filesystem", -EXDEV;
        }
        return fd;
}

int wholefs_open(const char *mountpoint, const char *fstype, int fs_root_fd, const char **why) {
        char root[4096], source[4096];
        *why = NULL;
        int r = admin_mount(mountpoint, root, sizeof(root), source, sizeof(source));
        if (r < 0)
                return *why = "its mount is not in the mount table", r;
        /* Mounted at its root: every directory is beneath it already. */
        if (strcmp(root, "/") == 0) {
                int fd = openat(fs_root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                return fd < 0 ? (*why = "opening its root", -errno) : fd;
        }
        if (!source[0] || source[0] != '/')
                return *why = "it mounts a directory of a filesystem without a device to mount its root from", -ENODEV;
        return mount_root(fstype, source, fs_root_fd, why);
}
