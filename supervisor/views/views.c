/* SPDX-License-Identifier: MIT */
#include "views.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "log.h"
#include "macro.h"

int mkdir_parents(const char *path, mode_t mode) {
        char buf[4096];
        if (strlen(path) >= sizeof(buf))
                return -ENAMETOOLONG;
        strcpy(buf, path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

bool path_is_mountpoint(const char *target) {
        struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
        bool found = tb && mnt_table_find_target(tb, target, MNT_ITER_BACKWARD) != NULL;
        mnt_unref_table(tb);
        return found;
}

/* Is target a mount of the subvolume itself (same directory, seen through
 * another mount)? */
static bool view_is_subvolume(const char *target, const char *subvolume) {
        struct stat a, b;
        if (!path_is_mountpoint(target) || stat(target, &a) < 0 || stat(subvolume, &b) < 0)
                return false;
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* nosuid, nodev: a container's root writes through an idmapped view as
 * on-disk uid 0; what it writes must not be a setuid binary or a device on
 * the host. Set on a kept view too: an older tierd's may lack them. */
static int view_harden(struct tenant *tn, const char *target, bool placed) {
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
        if (mount_setattr(AT_FDCWD, target, AT_SYMLINK_NOFOLLOW, &attr, sizeof(attr)) == 0)
                return 0;
        int r = log_error_errno(errno, "tenant %s: cannot make the view %s nosuid,nodev: %m", tn->cfg->name, target);
        if (placed)
                umount2(target, MNT_DETACH);
        return r;
}

int view_place(struct tenant *tn) {
        const char *target = tn->cfg->mount;
        int r = mkdir_parents(target, 0755);
        if (r < 0)
                return log_error_errno(r, "tenant %s: cannot create view mount point %s: %m", tn->cfg->name, target);
        if (view_is_subvolume(target, tn->cfg->subvolume)) {
                /* Left by the tierd this one takes over from: readers may
                 * be inside it, so it stays. */
                tn->view_mounted = true;
                log_info("tenant %s: view %s kept", tn->cfg->name, target);
                return view_harden(tn, target, false);
        }
        if (path_is_mountpoint(target)) {
                log_warning("tenant %s: replacing what is mounted at %s (a stale view?)", tn->cfg->name, target);
                if (umount2(target, MNT_DETACH) < 0)
                        return log_error_errno(errno, "tenant %s: cannot unmount %s: %m", tn->cfg->name, target);
        }
        if (mount(tn->cfg->subvolume, target, NULL, MS_BIND, NULL) < 0)
                return log_error_errno(errno, "tenant %s: cannot bind %s at %s: %m", tn->cfg->name,
                                       tn->cfg->subvolume, target);
        if ((r = view_harden(tn, target, true)) < 0)
                return r;
        tn->view_mounted = true;
        log_info("tenant %s: view %s -> %s", tn->cfg->name, tn->cfg->subvolume, target);
        return 0;
}

void view_remove(struct tenant *tn) {
        if (!tn->view_mounted)
                return;
        if (umount2(tn->cfg->mount, MNT_DETACH) < 0)
                log_error("tenant %s: cannot unmount view %s: %m", tn->cfg->name, tn->cfg->mount);
        tn->view_mounted = false;
}
