/* SPDX-License-Identifier: MIT */
/*
 * Views inside containers, with the new mount API (shared/DESIGN.md,
 * "Containers"): the old mount(2) cannot bind into another namespace, and
 * setns(CLONE_NEWNS) fails in a multithreaded process, so the steps inside
 * the container's namespace run in a forked child that reports back the
 * step it failed at.
 */
#include "nsmount.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "mount-uapi.h"

uint64_t nsmount_mntns_id(pid_t pid) {
        char p[64];
        uint64_t id = 0;
        snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || ioctl(fd, NS_GET_MNTNS_ID, &id) < 0)
                return 0;
        return id;
}

int nsmount_clone(int source_fd, const char *name, const struct nsmount_options *o, uint64_t *ret_mnt_id) {
        /* Private: a clone of a shared mount would join its peer group, and
         * mounts made in the container would appear on the host (and the
         * host's in the container). */
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | o->atime,
                                   .attr_clr = MOUNT_ATTR__ATIME, .propagation = MS_PRIVATE };
        struct statx stx;

        /* Not AT_RECURSIVE: mounts the admin placed under the subvolume
         * are not the tenant's data. */
        _cleanup_close_ int fd = open_tree(source_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (fd < 0)
                return log_error_errno(errno, "open_tree(%s): %m", name);
        if (o->read_only)
                attr.attr_set |= MOUNT_ATTR_RDONLY;
        if (o->userns_fd >= 0) {
                attr.attr_set |= MOUNT_ATTR_IDMAP;
                attr.userns_fd = (uint64_t)o->userns_fd;
        }
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return log_error_errno(errno, "mount_setattr(%s%s): %m", name,
                                       o->userns_fd >= 0 ? ", idmapped" : "");
        if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID_UNIQUE, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID_UNIQUE))
                return log_error_errno(errno ?: EIO, "statx(%s): no unique mount id: %m", name);
        *ret_mnt_id = stx.stx_mnt_id;
        return TAKE_FD(fd);
}

static int open_in_root(int root_fd, const char *path) {
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                /* On the root's own mount: not on /proc, /dev or a volume
                                 * the runtime mounted there already. */
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
        long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
        return fd < 0 ? -errno : (int)fd;
}

/* Opens path under root_fd as if root_fd were "/", creating missing
 * directories one component at a time, each inside the root. */
static int open_or_create_in_root(int root_fd, const char *path) {
        char prefix[4096];
        size_t n = strlen(path);
        int fd = open_in_root(root_fd, path);

        if (fd != -ENOENT)
                return fd;
        if (n >= sizeof(prefix))
                return -ENAMETOOLONG;
        for (size_t i = 1; i <= n; i++) {
                if (path[i] != '/' && path[i] != 0)
                        continue;
                memcpy(prefix, path, i);
                prefix[i] = 0;
                char *slash = strrchr(prefix, '/');
                *slash = 0;
                _cleanup_close_ int parent = open_in_root(root_fd, prefix[0] ? prefix : "/");
                if (parent < 0)
                        return parent;
                if (mkdirat(parent, slash + 1, 0755) < 0 && errno != EEXIST)
                        return -errno;
        }
        return open_in_root(root_fd, path);
}

enum { STEP_SETNS = 1, STEP_ROOT, STEP_TARGET, STEP_MOVE, STEP_UNMOUNT };
static const char *const step_names[] = {
        [STEP_SETNS] = "entering the container's mount namespace",
        [STEP_ROOT] = "opening the container's root",
        [STEP_TARGET] = "resolving the mount path inside the container's root",
        [STEP_MOVE] = "moving the view into place",
        [STEP_UNMOUNT] = "unmounting the view",
};

struct child_result {
        int error; /* positive errno */
        int step;
};

#define CHILD_TIMEOUT_MS 10000

/* Runs fn in a grandchild inside mntns_fd; its result comes back on a
 * pipe. A lookup in the container's tree can hang (a dead NFS or FUSE
 * mount): tierd waits at most CHILD_TIMEOUT_MS, kills it, and never waits
 * for it, since init reaps a grandchild. */
static int run_in_namespace(int mntns_fd, int (*fn)(void *data, int *step), void *data, const char **why) {
        struct child_result res = { .error = EIO, .step = STEP_SETNS };
        int result_pipe[2], pid_pipe[2];
        pid_t pid, grandchild = -1;

        if (pipe2(result_pipe, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(pid_pipe, O_CLOEXEC) < 0) {
                int r = -errno;
                close(result_pipe[0]);
                close(result_pipe[1]);
                return r;
        }
        pid = fork();
        if (pid == 0) {
                pid_t g = fork();
                if (g == 0) {
                        int step = STEP_SETNS, r = setns(mntns_fd, CLONE_NEWNS) < 0 ? -errno : fn(data, &step);
                        struct child_result out = { .error = -r, .step = step };
                        (void)!write(result_pipe[1], &out, sizeof(out));
                        _exit(r < 0 ? 1 : 0);
                }
                (void)!write(pid_pipe[1], &g, sizeof(g));
                _exit(g < 0 ? 1 : 0);
        }
        close(result_pipe[1]);
        close(pid_pipe[1]);
        _cleanup_close_ int rfd = result_pipe[0], pfd = pid_pipe[0];
        if (pid < 0)
                return -errno;
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        if (read(pfd, &grandchild, sizeof(grandchild)) != (ssize_t)sizeof(grandchild) || grandchild <= 0) {
                if (why)
                        *why = "cannot fork";
                return -ECHILD;
        }
        _cleanup_close_ int gfd = pidfd_open(grandchild, 0);
        struct pollfd p = { .fd = rfd, .events = POLLIN };
        int k = poll(&p, 1, CHILD_TIMEOUT_MS);
        if (k == 0) {
                if (gfd >= 0)
                        syscall(SYS_pidfd_send_signal, gfd, SIGKILL, NULL, 0);
                if (why)
                        *why = "timed out in the container's mount namespace (a hung filesystem there?)";
                return -ETIMEDOUT;
        }
        if (k < 0 || read(rfd, &res, sizeof(res)) != (ssize_t)sizeof(res))
                res = (struct child_result){ .error = EIO, .step = STEP_SETNS };
        if (res.error && why)
                *why = step_names[res.step >= STEP_SETNS && res.step <= STEP_UNMOUNT ? res.step : STEP_SETNS];
        return -res.error;
}

struct place_args {
        int clone_fd;
        const char *root, *path;
};

static int place_in_child(void *data, int *step) {
        struct place_args *a = data;
        /* After setns our root is the namespace's: the container's own once
         * it pivoted, the host-like tree (holding rootfs) before. */
        *step = STEP_ROOT;
        _cleanup_close_ int root = open(a->root[0] ? a->root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        *step = STEP_TARGET;
        _cleanup_close_ int target = open_or_create_in_root(root, a->path);
        if (target < 0)
                return target;
        *step = STEP_MOVE;
        if (move_mount(a->clone_fd, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

int nsmount_place(int clone_fd, int mntns_fd, const char *root, const char *path, const char **why) {
        struct place_args a = { .clone_fd = clone_fd, .root = root, .path = path };
        return run_in_namespace(mntns_fd, place_in_child, &a, why);
}

struct remove_args {
        const char *root, *path;
        uint64_t mnt_id;
        int proc_fd; /* tierd's own /proc, opened before entering the namespace */
};

/* The mount at path beneath root (root taken as "/": a symlink cannot
 * lead out of it), unmounted if it is the one we placed: 1 done, 0 not
 * there or not ours. The unmount goes through the fd found and checked,
 * by its magic link in tierd's /proc, never by the path again: whatever
 * the container swaps or renames meanwhile (a component for a symlink to
 * /proc), only that mount can be the one unmounted. */
static int unmount_if_ours(int root, const char *path, uint64_t mnt_id, int proc_fd) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
        struct statx stx;
        char link[32];
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
        if (fd < 0)
                return 0;
        if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID_UNIQUE, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID_UNIQUE) ||
            stx.stx_mnt_id != mnt_id)
                return 0;
#ifdef TIERD_TEST_HOOKS
        /* Test builds: a pause between finding the view and unmounting it,
         * for a container to swap the path under tierd. */
        const char *pause = getenv("TIERD_TEST_DETACH_PAUSE_MS");
        if (pause)
                usleep((useconds_t)atoi(pause) * 1000);
#endif
        snprintf(link, sizeof(link), "self/fd/%d", fd);
        if (fchdir(proc_fd) < 0)
                return -errno;
        return umount2(link, MNT_DETACH) < 0 ? -errno : 1;
}

static int remove_in_child(void *data, int *step) {
        struct remove_args *a = data;

        *step = STEP_UNMOUNT;
        /* Where the container sees it, or still under rootfs if it never
         * pivoted. Only ever the mount we placed. */
        _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        int r = unmount_if_ours(root, a->path, a->mnt_id, a->proc_fd);
        if (r != 0 || !a->root[0])
                return MIN(r, 0);
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int rootfs = (int)syscall(SYS_openat2, root, a->root, &how, sizeof(how));
        if (rootfs < 0)
                return 0; /* gone already */
        return MIN(unmount_if_ours(rootfs, a->path, a->mnt_id, a->proc_fd), 0);
}

int nsmount_remove(int mntns_fd, const char *root, const char *path, uint64_t mnt_id) {
        _cleanup_close_ int proc_fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0)
                return -errno;
        struct remove_args a = { .root = root, .path = path, .mnt_id = mnt_id, .proc_fd = proc_fd };
        return run_in_namespace(mntns_fd, remove_in_child, &a, NULL);
}
