/* SPDX-License-Identifier: MIT */
#include "wholefs.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <linux/btrfs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "macro.h"

/* The mount tierd cloned at start (by its id: what is at the mountpoint
 * now may be another): the directory of the filesystem it shows
 * (mountinfo's root), its source and its device number. */
static int admin_mount(uint64_t mnt_id, char *root, size_t root_len, char *source, size_t source_len, dev_t *dev) {
        struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
        struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
        struct libmnt_fs *fs;
        int r = tb && it ? -ENOENT : -ENOMEM;
        while (r == -ENOENT && mnt_table_next_fs(tb, it, &fs) == 0) {
                const char *rt = mnt_fs_get_root(fs), *src = mnt_fs_get_srcpath(fs);
                if ((uint64_t)mnt_fs_get_id(fs) != mnt_id)
                        continue;
                snprintf(root, root_len, "%s", rt ?: "");
                snprintf(source, source_len, "%s", src ?: "");
                *dev = mnt_fs_get_devno(fs);
                r = 0;
        }
        mnt_free_iter(it);
        mnt_unref_table(tb);
        return r;
}

/* btrfs: a device of the filesystem, as its kernel opened it (mountinfo's
 * source may name another by now). */
static int btrfs_device(int fd, char *path, size_t len) {
        struct btrfs_ioctl_fs_info_args fi = { 0 };
        if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
                return -errno;
        for (uint64_t id = 0; id <= fi.max_id; id++) {
                _cleanup_free_ struct btrfs_ioctl_dev_info_args *di = calloc(1, sizeof(*di));
                if (!di)
                        return -ENOMEM;
                di->devid = id;
                if (ioctl(fd, BTRFS_IOC_DEV_INFO, di) < 0)
                        continue; /* no device of that id */
                snprintf(path, len, "%s", (const char *)di->path);
                return path[0] == '/' ? 0 : -ENODEV;
        }
        return -ENODEV;
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
 * superblock already mounted. It must not change how the filesystem is
 * mounted: btrfs takes a rw request on a read-only filesystem as a
 * remount rw (and drops its options), so btrfs is always asked for "ro",
 * which changes nothing on a rw one; ext4 and xfs refuse a mismatch
 * (EBUSY), so they are asked for what the filesystem is. */
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
        if ((btrfs || (fstatvfs(fs_root_fd, &sv) == 0 && (sv.f_flag & ST_RDONLY))) &&
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

int wholefs_open(uint64_t mnt_id, const char *fstype, int fs_root_fd, const char **why) {
        char root[4096], source[4096];
        struct stat st;
        dev_t dev = 0;
        *why = NULL;
        int r = admin_mount(mnt_id, root, sizeof(root), source, sizeof(source), &dev);
        if (r < 0)
                return *why = "the mount tierd started with is gone (unmounted or moved)", r;
        /* Mounted at its root: every directory is beneath it already. */
        if (strcmp(root, "/") == 0) {
                int fd = openat(fs_root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                return fd < 0 ? (*why = "opening its root", -errno) : fd;
        }
        /* The device to mount the root from: one of the filesystem's own. */
        if (strcmp(fstype, "btrfs") == 0) {
                if ((r = btrfs_device(fs_root_fd, source, sizeof(source))) < 0)
                        return *why = "finding a device of the btrfs filesystem", r;
        } else if (stat(source, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != dev)
                return *why = "its mount's source is not the filesystem's block device (any more)", -ENODEV;
        return mount_root(fstype, source, fs_root_fd, why);
}
