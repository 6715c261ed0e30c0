/* SPDX-License-Identifier: MIT */
/*
 * The policy file is the one source of truth: tierd reloads it when it
 * changes (inotify on its directory, so an editor's rename and a ConfigMap's
 * "..data" symlink swap are both seen), on SIGHUP, and on D-Bus
 * ReloadPolicy. Changes are debounced, and a file whose bytes did not change
 * (tierd's own SetTenantPolicy write) is not applied twice.
 */
#include "policywatch.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "face.h"
#include "log.h"
#include "macro.h"
#include "reload.h"

#define DEBOUNCE_USEC (300 * 1000ull) /* a burst of writes is one change */

static int on_debounced(sd_event_source *s, uint64_t usec, void *userdata) {
        struct tierd *t = userdata;
        _cleanup_free_ char *why = NULL;
        (void)s;
        (void)usec;

        int r = tierd_reload_policy_if_changed(t, &why);
        if (r == -EINVAL || r == -EXDEV)
                log_error("policy %s changed but is not applied: %s", t->policy_path, why ?: strerror(-r));
        else if (r < 0)
                log_error_errno(r, "policy %s: cannot reload: %m", t->policy_path);
        else if (r > 0)
                FACE_TELL(t, policy_reloaded, t);
        return 0;
}

static void schedule_reload(struct tierd *t) {
        uint64_t now = tierd_now_usec(t);
        if (t->policy_debounce_src) {
                sd_event_source_set_time(t->policy_debounce_src, now + DEBOUNCE_USEC);
                sd_event_source_set_enabled(t->policy_debounce_src, SD_EVENT_ONESHOT);
                return;
        }
        if (sd_event_add_time(t->event, &t->policy_debounce_src, CLOCK_MONOTONIC, now + DEBOUNCE_USEC, 0, on_debounced,
                              t) < 0)
                log_error("cannot schedule a policy reload");
}

static int on_inotify(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        struct tierd *t = userdata;
        bool relevant = false;
        (void)s;
        (void)revents;

        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;
                        /* Our own temporary files come and go: only names that
                         * may be the policy (or, in a ConfigMap, lead to it). */
                        if (ev->len == 0 || strncmp(ev->name, ".tierd-policy.", 14) != 0)
                                relevant = true;
                        p += sizeof(*ev) + ev->len;
                }
        }
        if (relevant)
                schedule_reload(t);
        return 0;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct tierd *t = userdata;
        _cleanup_free_ char *why = NULL;
        (void)s;
        (void)si;

        /* systemctl reload (ExecReload= sends SIGHUP) waits from
         * RELOADING=1 to READY=1: done when the new policy applies, or
         * when it was refused (the old one stays, the error in the log). */
        log_info("SIGHUP: reloading %s", t->policy_path);
        sd_notify(false, "RELOADING=1");
        int r = tierd_reload_policy(t, &why);
        if (r < 0)
                log_error("policy %s not applied: %s", t->policy_path, why ?: strerror(-r));
        else
                FACE_TELL(t, policy_reloaded, t);
        sd_notify(false, "READY=1");
        return 0;
}

int policy_watch_start(struct tierd *t) {
        _cleanup_free_ char *copy = strdup(t->policy_path);
        struct stat st;
        sigset_t mask;
        int r;

        if (!copy)
                return -ENOMEM;
        tierd_policy_remember(t);
        sigemptyset(&mask);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        r = sd_event_add_signal(t->event, &t->sighup_src, SIGHUP, on_sighup, t);
        if (r < 0)
                return log_error_errno(r, "cannot handle SIGHUP: %m");

        /* A directory (a mounted ConfigMap) is watched itself; a file through
         * its directory, where renames over it happen. */
        const char *dir = stat(t->policy_path, &st) == 0 && S_ISDIR(st.st_mode) ? t->policy_path : dirname(copy);
        t->policy_inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (t->policy_inotify_fd < 0)
                return log_error_errno(errno, "inotify_init1: %m");
        if (inotify_add_watch(t->policy_inotify_fd, dir,
                              IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ATTRIB | IN_DONT_FOLLOW) < 0)
                return log_error_errno(errno, "cannot watch %s for policy changes: %m", dir);
        r = sd_event_add_io(t->event, &t->policy_watch_src, t->policy_inotify_fd, EPOLLIN, on_inotify, t);
        if (r < 0)
                return log_error_errno(r, "cannot watch the policy: %m");
        return 0;
}

void policy_watch_stop(struct tierd *t) {
        t->policy_watch_src = sd_event_source_unref(t->policy_watch_src);
        t->policy_debounce_src = sd_event_source_unref(t->policy_debounce_src);
        t->sighup_src = sd_event_source_unref(t->sighup_src);
        t->policy_inotify_fd = safe_close(t->policy_inotify_fd);
}
