/* SPDX-License-Identifier: MIT */
/*
 * The worker talks to the network; it must not be able to hurt the
 * machine. Each step below removes one kind of power, in an order where
 * every step still has what it needs. Compiled out (TIERD_NO_SANDBOX) only
 * for sanitizer builds, which cannot run under seccomp and Landlock.
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "landlock-uapi.h"
#include "log.h"
#include "macro.h"

#ifdef TIERD_NO_SANDBOX
int sandbox_apply(const struct proto_config *cfg, int store_fd, int control_fd) {
        (void)cfg;
        (void)store_fd;
        (void)control_fd;
        log_warning("this is a sanitizer build: the worker runs without its sandbox");
        return 0;
}
#else

/* The SIGSYS handler's one piece of state: where to report. Set once before
 * the filter is loaded; async-signal-safe use only. */
static int sigsys_report_fd = -1;

static void on_sigsys(int sig, siginfo_t *si, void *ctx) {
        struct proto_reply rep = { .id = PROTO_ID_SECCOMP, .error = -ENOSYS, .bytes = (uint64_t)si->si_syscall };
        static const char msg[] = "tierd-worker: blocked by its seccomp filter, exiting\n";
        (void)sig;
        (void)ctx;
        if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
        }
        if (send(sigsys_report_fd, &rep, sizeof(rep), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        }
        _exit(128 + SIGSYS);
}

/* 1. Drop every capability from the bounding set, then become the
 *    worker's own uid and gid (no supplementary groups): changing uid from
 *    0 clears the permitted, effective and ambient sets too. */
static int drop_privileges(uid_t uid, gid_t gid) {
        pid_t parent = getppid();

        if (uid == 0 || gid == 0)
                return log_error_errno(EINVAL, "refusing to run a worker as root");
        for (int c = 0; c <= CAP_LAST_CAP; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return log_error_errno(errno, "PR_CAPBSET_DROP %d: %m", c);
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return log_error_errno(errno, "cannot become uid %u gid %u: %m", (unsigned)uid, (unsigned)gid);
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return log_error_errno(errno, "cannot clear ambient capabilities: %m");
        /* The uid change cleared the parent-death signal tierd set: set it
         * again. A worker must not outlive its tierd, whose end of the
         * control socket may stay open (in its keeper) after it died. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                return log_error_errno(ESRCH, "tierd is gone");
        return 0;
}

/* 2. No exec can ever give privileges back (setuid binaries, file caps). */
static int no_new_privs(void) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return log_error_errno(errno, "PR_SET_NO_NEW_PRIVS: %m");
        return 0;
}

static int landlock_abi(const struct proto_config *cfg) {
#ifdef TIERD_TEST_HOOKS
        /* Test builds only: a kernel without Landlock, for a tenant whose
         * name says so (this kernel has it, and it cannot be taken away). */
        if (strstr(cfg->tenant, "nolandlock"))
                return 0;
#else
        (void)cfg;
#endif
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        return abi < 0 ? 0 : (int)abi;
}

static int add_path_rule(int ruleset, int fd, uint64_t access) {
        struct landlock_path_beneath_attr rule = { .allowed_access = access, .parent_fd = fd };
        return syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0 ? -errno : 0;
}

/* 3. Landlock: no file at all but the store directory (file://) and the CA
 *    bundle, TCP connect to the backend's port only (ABI 4), and no signal
 *    or abstract socket outside this process (ABI 6). Fds tierd passes keep
 *    working: Landlock checks opens, not use. */
static int landlock_apply(const struct proto_config *cfg, int store_fd) {
        struct tierd_landlock_ruleset_attr attr = {};
        _cleanup_close_ int ruleset = -1;
        size_t attr_size;
        int abi = landlock_abi(cfg), r;

        if (abi < 1 && !cfg->landlock_optional)
                return log_error_errno(EOPNOTSUPP, "Landlock is not available (a kernel without it, or lsm= leaves it "
                                                   "out): the worker will not run with its files and network "
                                                   "unfenced; \"require_landlock\": false in the policy runs it anyway");
        if (abi < 1) {
                log_warning("Landlock is not available: the worker's files and network are not fenced "
                            "(\"require_landlock\": false)");
                return 0;
        }
        attr.handled_access_fs = (1ULL << 13) - 1; /* ABI 1: EXECUTE .. MAKE_SYM */
        if (abi >= 2)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        attr_size = sizeof(attr.handled_access_fs);
        if (abi >= 4) {
                attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
                attr_size += sizeof(attr.handled_access_net);
        } else
                log_warning("Landlock ABI %d: TCP ports are not fenced (needs ABI 4)", abi);
        if (abi >= 6) {
                attr.scoped = LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
                attr_size += sizeof(attr.scoped);
        } else
                log_warning("Landlock ABI %d: signals are not scoped (needs ABI 6)", abi);

        ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
        if (ruleset < 0)
                return log_error_errno(errno, "landlock_create_ruleset: %m");
        if (store_fd >= 0) {
                uint64_t store = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                                 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR |
                                 (attr.handled_access_fs & (LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE));
                if ((r = add_path_rule(ruleset, store_fd, store)) < 0)
                        return log_error_errno(r, "Landlock rule for the store: %m");
        }
        if (cfg->ca_file[0]) {
                _cleanup_close_ int ca = open(cfg->ca_file, O_PATH | O_CLOEXEC);
                if (ca < 0 || (r = add_path_rule(ruleset, ca, LANDLOCK_ACCESS_FS_READ_FILE)) < 0)
                        return log_error_errno(ca < 0 ? errno : r, "Landlock rule for the CA bundle %s: %m", cfg->ca_file);
        }
        if (abi >= 4 && cfg->net_port) {
                struct landlock_net_port_attr port = { .allowed_access = LANDLOCK_ACCESS_NET_CONNECT_TCP,
                                                       .port = cfg->net_port };
                if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_NET_PORT, &port, 0) < 0)
                        return log_error_errno(errno, "Landlock rule for port %u: %m", cfg->net_port);
        }
        if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
                return log_error_errno(errno, "landlock_restrict_self: %m");
        return 0;
}

/* What a worker needs after this point: threads, memory, its fds (fills,
 * the control socket), TCP sockets, the store's files, time. Anything else
 * traps, and the handler reports the call to tierd before exiting. */
static const int allowed_syscalls[] = {
        SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(pread64), SCMP_SYS(pwrite64), SCMP_SYS(readv), SCMP_SYS(writev),
        SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(statx), SCMP_SYS(lseek),
        SCMP_SYS(openat), SCMP_SYS(openat2), SCMP_SYS(mkdirat), SCMP_SYS(renameat), SCMP_SYS(renameat2),
        SCMP_SYS(unlinkat), SCMP_SYS(fsync), SCMP_SYS(fdatasync),
        SCMP_SYS(getdents64), SCMP_SYS(utimensat), /* a file store's listing and refresh, for collections */
        SCMP_SYS(memfd_create), /* a chunk manifest is built in memory, then uploaded from it */
        SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(brk),
        SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(rseq),
        SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask),
        SCMP_SYS(rt_sigaction), SCMP_SYS(sched_yield), SCMP_SYS(gettid), SCMP_SYS(getpid), SCMP_SYS(getuid),
        SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid), SCMP_SYS(getrandom), SCMP_SYS(clock_gettime),
        SCMP_SYS(clock_nanosleep), SCMP_SYS(nanosleep), SCMP_SYS(gettimeofday), SCMP_SYS(time),
        SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(recvfrom), SCMP_SYS(sendto), SCMP_SYS(connect),
        SCMP_SYS(getsockopt), SCMP_SYS(setsockopt), SCMP_SYS(getsockname), SCMP_SYS(getpeername),
        SCMP_SYS(shutdown), SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(select), SCMP_SYS(pselect6),
        SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait),
        SCMP_SYS(pipe2), SCMP_SYS(eventfd2), SCMP_SYS(uname), SCMP_SYS(sysinfo), SCMP_SYS(prlimit64),
        SCMP_SYS(getrusage), SCMP_SYS(sched_getaffinity), SCMP_SYS(tgkill), SCMP_SYS(restart_syscall),
};

/* Calls allowed with one argument only so: (argument & mask) == value.
 * A fill fd lent to the worker must change nothing the fill mount's watch
 * does not hear (supervisor/events/fillwatch.c), so no truncate (a mount
 * mark hears none), no shared mapping of a file (its writes raise no
 * event), no fallocate but the punch fills use (one that fails part-way
 * may have grown the file, unheard), no fork (a child's pid is no
 * worker's), no locks or leases on a kept fd. */
#define NEW_NS                                                                                              \
        (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |       \
         CLONE_NEWNET | CLONE_NEWTIME)
static const struct {
        int nr;
        unsigned arg;
        uint64_t mask, value;
} arg_rules[] = {
        /* Threads only, and no new namespaces (a user namespace would reach
         * raw sockets and netfilter). */
        { SCMP_SYS(clone), 0, NEW_NS | CLONE_THREAD, CLONE_THREAD },
        { SCMP_SYS(mmap), 3, MAP_SHARED, 0 },
        { SCMP_SYS(mmap), 3, MAP_SHARED | MAP_ANONYMOUS, MAP_SHARED | MAP_ANONYMOUS },
        /* int arguments: only their low 32 bits are the caller's. */
        { SCMP_SYS(fallocate), 1, 0xffffffffu, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE },
        { SCMP_SYS(fcntl), 1, 0xffffffffu, F_GETFD }, { SCMP_SYS(fcntl), 1, 0xffffffffu, F_SETFD },
        { SCMP_SYS(fcntl), 1, 0xffffffffu, F_GETFL }, { SCMP_SYS(fcntl), 1, 0xffffffffu, F_SETFL },
        { SCMP_SYS(fcntl), 1, 0xffffffffu, F_DUPFD }, { SCMP_SYS(fcntl), 1, 0xffffffffu, F_DUPFD_CLOEXEC },
        /* Its own thread's nice (pid 0), raised for prefetch and background
         * threads (main.c): no other process's, even of its uid. */
        { SCMP_SYS(sched_setattr), 0, 0xffffffffu, 0 },
};

static int seccomp_apply(int control_fd) {
        struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
        int r = 0;

        if (!ctx)
                return log_error_errno(ENOMEM, "seccomp_init: %m");
        sigsys_report_fd = control_fd;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSYS, &sa, NULL) < 0)
                r = -errno;
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(allowed_syscalls); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed_syscalls[i], 0);
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(arg_rules); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, arg_rules[i].nr, 1,
                                     SCMP_CMP64(arg_rules[i].arg, SCMP_CMP_MASKED_EQ, arg_rules[i].mask,
                                                arg_rules[i].value));
        /* clone3, whose flags sit behind a pointer, says ENOSYS and glibc
         * falls back to clone. */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        /* Sockets: TCP (stream) over IPv4 and IPv6 only: no raw, no UDP, no
         * netlink. A unix socket (nscd, a name lookup) fails rather than
         * ending the worker. */
        const uint64_t type_mask = ~(uint64_t)(SOCK_NONBLOCK | SOCK_CLOEXEC) & 0xffffffffu;
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_INET),
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, type_mask, SOCK_STREAM));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_INET6),
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, type_mask, SOCK_STREAM));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
        /* A connected pair inside the process (curl's wakeup pipe) reaches nobody. */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
        /* The worker's own threads may be signalled; kill(2) of anything is not. */
        if (r == 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0)
                return log_error_errno(r, "seccomp: %m");
        return 0;
}

int sandbox_apply(const struct proto_config *cfg, int store_fd, int control_fd) {
        int r;
        if ((r = drop_privileges(cfg->uid, cfg->gid)) < 0)
                return r;
        if ((r = no_new_privs()) < 0)
                return r;
        if ((r = landlock_apply(cfg, store_fd)) < 0)
                return r;
        return seccomp_apply(control_fd);
}
#endif
