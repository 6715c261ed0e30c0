/* SPDX-License-Identifier: MIT */
/*
 * tierctl release-groups [--holder SOCKET] MOUNTPOINT...: the explicit
 * final stop. While tierd is stopped for good, tierd-holder keeps its
 * pre-content groups and the holder's guard answers reads of files not
 * whole EIO; once the groups are gone, those reads return zeros. So the
 * holder lets go only after a walk of every filesystem whose groups it
 * keeps found no stub there that is not whole (released, or partly
 * restored). Otherwise this names them and changes nothing.
 *
 * The walk runs while tierctl is not connected to the holder, whose guard
 * serves one client at a time and goes on serving the walk's own opens.
 * It goes through a detached clone of each mount (open_tree), which has
 * no submounts, so it stays on that filesystem; the mount must show the
 * filesystem from its root, or the walk would miss what lies outside it.
 * While no tierd runs, nothing but root makes a stub.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "holder-proto.h"
#include "fdio.h"
#include "macro.h"
#include "proto.h"
#include "stub.h"
#include "tierctl.h"
#include "treewalk.h"

#define REPLY_TIMEOUT_SEC 5 /* a holder serving a running tierd reads nothing from us */
#define SHOW_MAX 5
#define WALK_DEPTH_MAX 4096
#define FS_MAX 64

struct fs_walk {
        const char *mountpoint;
        uint64_t fsid;
        bool held;
        unsigned long stubs, not_whole, skipped;
        char shown[SHOW_MAX][PATH_MAX];
        unsigned n_shown;
        char xattr[STUB_TEXT_MAX];
};

/* One reply. -EAGAIN: none in time; -EOPNOTSUPP: "ERR ..." (a holder
 * older than this tierctl knows neither LIST nor RELEASE). */
static int holder_request(int sock, const char *request, char *line, size_t size) {
        size_t n = 0;
        int r = request ? proto_send(sock, request, strlen(request), -1) : 0;
        if (r >= 0)
                r = proto_recv(sock, line, size - 1, &n, NULL, 0);
        if (r == 1)
                return -ECONNRESET;
        if (r < 0)
                return r;
        line[n] = 0;
        return strncmp(line, "ERR", 3) == 0 ? -EOPNOTSUPP : 0;
}

/* The filesystems whose pre-content groups the holder keeps, by id; its
 * generation (bumped by every tierd that stores, fetches or serves) and
 * whether its guard runs (tierd stopped for good). */
static int holder_list(int sock, uint64_t *fsids, size_t *n, uint64_t *generation, bool *guarding) {
        char line[HOLDER_MSG_MAX + 1], state[16] = "";
        int r = holder_request(sock, "LIST", line, sizeof(line));
        *n = 0;
        for (; r >= 0 && strncmp(line, "END ", 4) != 0; r = holder_request(sock, NULL, line, sizeof(line))) {
                uint64_t fsid;
                if (strncmp(line, "NAME ", 5) != 0)
                        return -EPROTO;
                if (!holder_group_fsid(line + 5, "pre", &fsid))
                        continue;
                if (*n >= FS_MAX)
                        return -E2BIG; /* never let go of groups not checked */
                fsids[(*n)++] = fsid;
        }
        if (r >= 0 && sscanf(line, "END %" SCNu64 " %15s", generation, state) != 2)
                return -EPROTO;
        *guarding = strcmp(state, "guarding") == 0;
        return r;
}

static int holder_failed(const char *path, int r) {
        if (r == -ENOENT || r == -ECONNREFUSED)
                fprintf(stderr, "tierctl: no tierd-holder listens on %s: nothing keeps tierd's groups\n", path);
        else if (r == -EAGAIN)
                fprintf(stderr, "tierctl: tierd-holder (%s) did not answer in %d s: it serves a running tierd. "
                                "Stop tierd for good first (systemctl stop tierd, or SIGINT), then run this again\n",
                        path, REPLY_TIMEOUT_SEC);
        else if (r == -EOPNOTSUPP)
                fprintf(stderr, "tierctl: tierd-holder (%s) refused: it is older than tierctl (update it: restart it "
                                "while tierd runs), or a tierd came since the check (run this again)\n", path);
        else if (r == -E2BIG)
                fprintf(stderr, "tierctl: tierd-holder (%s) keeps the groups of more than %d filesystems: "
                                "more than this can check\n", path, FS_MAX);
        else
                fprintf(stderr, "tierctl: talking to tierd-holder (%s): %s\n", path, strerror(-r));
        return EXIT_FAILED;
}

/* The mount at path must be a mount point showing its filesystem from
 * the root (btrfs: subvol=/). *fsid as tierd names its groups. */
static int fs_root_check(const char *path, uint64_t *fsid) {
        struct statx stx;
        struct statfs sf;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;

        if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0 || statfs(path, &sf) < 0) {
                int r = -errno;
                fprintf(stderr, "tierctl: %s: %s\n", path, strerror(-r));
                return r;
        }
        if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
                fprintf(stderr, "tierctl: %s is not a mount point: give the tiered filesystem's mount point\n", path);
                return -EINVAL;
        }
        memcpy(fsid, &sf.f_fsid, sizeof(*fsid));
        f = fopen("/proc/self/mountinfo", "re");
        while (f && getline(&line, &cap, f) > 0) {
                unsigned long long id;
                char root[PATH_MAX];
                if (sscanf(line, "%llu %*u %*s %4095s", &id, root) != 2 || id != stx.stx_mnt_id)
                        continue;
                if (strcmp(root, "/") == 0)
                        return 0;
                fprintf(stderr, "tierctl: %s shows %s of its filesystem, not all of it: give a mount of the whole "
                                "filesystem (btrfs: subvol=/), or files outside it go unchecked\n", path, root);
                return -EINVAL;
        }
        fprintf(stderr, "tierctl: %s: its mount is not in /proc/self/mountinfo\n", path);
        return -ENOENT;
}

static bool stub_whole(const struct stub *s) {
        return s->size == 0 || s->state == STUB_ARCHIVED || s->state == STUB_DIRTY ||
               (s->state == STUB_PARTIAL && range_set_covers(&s->populated, 0, s->size));
}

static int visit(void *userdata, int dir_fd, const char *name, const struct stat *st) {
        struct fs_walk *w = userdata;
        _cleanup_(stub_done) struct stub s = {};
        const char *err = "";

        if (!S_ISREG(st->st_mode))
                return 0;
        ssize_t n = treewalk_xattr(dir_fd, name, STUB_XATTR, w->xattr, sizeof(w->xattr));
        if (n == -ENODATA)
                return 0;
        w->stubs++;
        /* A stub that cannot be read or parsed is not known to be whole. */
        if (n >= 0 && stub_parse(w->xattr, (size_t)n, &s, &err) == 0 && stub_whole(&s))
                return 0;
        w->not_whole++;
        if (w->n_shown < SHOW_MAX) {
                char link[64], dir[PATH_MAX];
                snprintf(link, sizeof(link), "/proc/thread-self/fd/%d", dir_fd);
                ssize_t k = readlink(link, dir, sizeof(dir) - 1);
                dir[k > 0 ? k : 0] = 0;
                /* Inside the detached clone: its path from the mount's root. */
                int len = snprintf(w->shown[w->n_shown], PATH_MAX, "%s%s/%s", w->mountpoint,
                                   strcmp(dir, "/") ? dir : "", name);
                if (len >= 0)
                        w->n_shown++; /* cut at PATH_MAX if longer */
        }
        return 0;
}

static int fs_walk(struct fs_walk *w) {
        _cleanup_close_ int tree = open_tree(AT_FDCWD, w->mountpoint, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (tree < 0)
                return -errno;
        int root = openat(tree, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        return treewalk(root, WALK_DEPTH_MAX, visit, w, &w->skipped);
}

/* Walks every filesystem given; 0 if all were walked whole. */
static int walk_all(struct fs_walk *fs, size_t n_fs, unsigned long *not_whole, unsigned long *stubs) {
        for (size_t i = 0; i < n_fs; i++) {
                int r = fs_walk(&fs[i]);
                if (r < 0) {
                        fprintf(stderr, "tierctl: cannot walk %s: %s\n", fs[i].mountpoint, strerror(-r));
                        return r;
                }
                if (fs[i].skipped) {
                        fprintf(stderr, "tierctl: %s has directories deeper than %d: they cannot be checked\n",
                                fs[i].mountpoint, WALK_DEPTH_MAX);
                        return -ELOOP;
                }
                *not_whole += fs[i].not_whole;
                *stubs += fs[i].stubs;
                for (unsigned k = 0; k < fs[i].n_shown; k++)
                        fprintf(stderr, "  %s\n", fs[i].shown[k]);
        }
        return 0;
}

/* Every filesystem whose group is held must be among those given. */
static int match_held(struct fs_walk *fs, size_t n_fs, const uint64_t *held, size_t n_held) {
        for (size_t h = 0; h < n_held; h++) {
                bool given = false;
                for (size_t i = 0; i < n_fs; i++)
                        if (fs[i].fsid == held[h])
                                given = fs[i].held = true;
                if (!given) {
                        fprintf(stderr, "tierctl: tierd-holder keeps the groups of a filesystem not given (id %016" PRIx64
                                        "): give its mount point too\n", held[h]);
                        return -EINVAL;
                }
        }
        for (size_t i = 0; i < n_fs; i++)
                if (!fs[i].held)
                        fprintf(stderr, "tierctl: %s: tierd-holder keeps no group of it (checked anyway)\n",
                                fs[i].mountpoint);
        return 0;
}

int verb_release_groups(sd_bus *unused, int argc, char **argv) {
        (void)unused; /* tierd is stopped: the holder, not the bus */
        const char *holder = HOLDER_DEFAULT_SOCKET;
        uint64_t held[FS_MAX], generation = 0;
        size_t n_held = 0, n_fs = 0;
        bool guarding = false;
        struct rlimit rl;
        unsigned long not_whole = 0, stubs = 0;
        char line[HOLDER_MSG_MAX + 1];
        int r;

        if (argc >= 2 && strcmp(argv[0], "--holder") == 0) {
                holder = argv[1];
                argv += 2;
                argc -= 2;
        }
        if (argc < 1 || argc > FS_MAX || argv[0][0] == '-') {
                fprintf(stderr, "Usage: tierctl release-groups [--holder SOCKET] MOUNTPOINT...\n");
                return EXIT_USAGE;
        }
        if (geteuid() != 0) {
                fprintf(stderr, "tierctl: release-groups: only root may\n");
                return EXIT_DENIED;
        }
        _cleanup_free_ struct fs_walk *fs = calloc((size_t)argc, sizeof(*fs));
        if (!fs)
                return EXIT_FAILED;
        for (int i = 0; i < argc; i++, n_fs++) {
                fs[i].mountpoint = argv[i];
                if (fs_root_check(argv[i], &fs[i].fsid) < 0)
                        return EXIT_FAILED;
        }
        int sock = unix_connect(holder, SOCK_SEQPACKET, REPLY_TIMEOUT_SEC);
        r = sock < 0 ? sock : holder_list(sock, held, &n_held, &generation, &guarding);
        safe_close(sock);
        if (r < 0)
                return holder_failed(holder, r);
        if (n_held == 0) {
                printf("tierd-holder (%s) keeps no group: nothing to let go of\n", holder);
                return EXIT_OK;
        }
        if (!guarding) {
                fprintf(stderr, "tierctl: tierd-holder's guard is not running: tierd was killed and may come back "
                                "(within guard_after), or was never stopped for good. Stop it for good first "
                                "(systemctl stop tierd, or SIGINT), then run this again\n");
                return EXIT_FAILED;
        }
        /* One open directory per level of the walk. */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (match_held(fs, n_fs, held, n_held) < 0 || walk_all(fs, n_fs, &not_whole, &stubs) < 0)
                return EXIT_FAILED;
        if (not_whole > 0) {
                fprintf(stderr, "tierctl: %lu file(s) are stubs not whole (released, or partly restored; the first "
                                "ones above): they would read as zeros without tierd's groups. Restore them first "
                                "(start tierd; tierctl restore PATH...), stop it for good, and run this again. "
                                "Nothing was changed\n", not_whole);
                return EXIT_FAILED;
        }
        /* The holder refuses if any tierd stored, fetched or served since
         * the generation the check began with, or if its guard stopped. */
        char request[64];
        snprintf(request, sizeof(request), "RELEASE %" PRIu64, generation);
        _cleanup_close_ int last = unix_connect(holder, SOCK_SEQPACKET, REPLY_TIMEOUT_SEC);
        r = last < 0 ? last : holder_request(last, request, line, sizeof(line));
        if (r < 0 || strcmp(line, "OK") != 0)
                return holder_failed(holder, r < 0 ? r : -EPROTO);
        printf("tierd-holder let go of the groups of %zu filesystem(s) and exits: no file there is a stub not whole "
               "(%lu stubs checked, all whole)\n", n_held, stubs);
        return EXIT_OK;
}
