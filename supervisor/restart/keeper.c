/* SPDX-License-Identifier: MIT */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "macro.h"

#define KEEPER_NAME "keeper" /* also in handover.c */
/* After tierd's death, how long the keeper waits for a successor. */
#define KEEPER_LINGER_SEC 60

/* In the child: raw system calls only (it shares tierd's fd table, not its
 * memory, and glibc's state after a raw clone is not to be trusted). */
static void __attribute__((noreturn)) keeper_main(pid_t parent) {
        sigset_t all;
        int sig;

        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        prctl(PR_SET_NAME, "tierd-keeper");
        /* Told when tierd dies; then it lingers for a successor to fetch
         * the fds it keeps, and is killed by it. */
        prctl(PR_SET_PDEATHSIG, SIGUSR1);
        if (getppid() == parent)
                while (sigwait(&all, &sig) == 0 && sig != SIGUSR1)
                        ;
        struct timespec ts = { .tv_sec = KEEPER_LINGER_SEC };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
        _exit(0);
}

static int on_keeper_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        struct tierd *t = userdata;
        (void)s;
        if (!t->stopping && !t->handing_over)
                log_warning("keeper %d ended (%s %d)", (int)si->si_pid,
                            si->si_code == CLD_EXITED ? "status" : "signal", si->si_status);
        t->keeper_pidfd = safe_close(t->keeper_pidfd);
        /* Someone killed it: a new one, or the next crash would lose the
         * events being read. */
        if (!t->stopping && !t->handing_over) {
                fdstore_forget(&t->store, KEEPER_NAME);
                keeper_start(t);
        }
        return 0;
}

int keeper_start(struct tierd *t) {
        pid_t parent = getpid();

        /* Without a store no successor could find it: it would only keep
         * the dead tierd's groups, and its readers, waiting. */
        if (t->store.kind == FDSTORE_NONE)
                return 0;
        /* No CLONE_VM: a copy of our memory, like fork; the same fd table. */
        long pid = syscall(SYS_clone, CLONE_FILES | SIGCHLD, NULL, NULL, NULL, 0);
        int r;

        if (pid < 0)
                return log_error_errno(errno, "cannot start the keeper: %m");
        if (pid == 0)
                keeper_main(parent);
        t->keeper_pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        if (t->keeper_pidfd < 0) {
                r = -errno;
                kill((pid_t)pid, SIGKILL);
                return log_error_errno(r, "pidfd_open: %m");
        }
        fcntl(t->keeper_pidfd, F_SETFD, FD_CLOEXEC);
        r = sd_event_add_child(t->event, NULL, (pid_t)pid, WEXITED, on_keeper_exit, t);
        if (r < 0)
                log_warning_errno(r, "cannot watch the keeper: %m");
        r = fdstore_put(&t->store, KEEPER_NAME, t->keeper_pidfd);
        if (r < 0)
                return r;
        log_debug("keeper %ld shares tierd's fd table", pid);
        return 0;
}

void keeper_stop(struct tierd *t) {
        if (t->keeper_pidfd < 0)
                return;
        fdstore_forget(&t->store, KEEPER_NAME);
        syscall(SYS_pidfd_send_signal, t->keeper_pidfd, SIGKILL, NULL, 0);
        t->keeper_pidfd = safe_close(t->keeper_pidfd);
}
