/* SPDX-License-Identifier: MIT */
/*
 * What a new worker is given: a clean process image (its control socket
 * on PROTO_CONTROL_FD and nothing else of tierd's) and its config, the
 * first message on that socket. The worker's lifecycle is workers.c's.
 */
#include "workerspawn.h"

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "loopnice.h"
#include "resolver.h"

/* In the child, between fork and exec: only async-signal-safe calls. */
void worker_exec(const char *path, int sock, pid_t parent, const char *vg_log) {
        static char *const argv[] = { "tierd-worker", NULL };
        (void)vg_log;
        /* Configuration comes over the socket only; JOURNAL_STREAM says
         * what its stderr (tierd's) is, so its lines carry priorities. */
        char *const envp[] = { (char *)log_stream_env(), NULL };
        sigset_t none;

        /* A worker outliving tierd would keep writing fills nobody tracks
         * while the next tierd's worker fetches the same ranges. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(127);
        /* A tenant's worker at the priority of anything else, not at the
         * event loop's it was forked from. */
        loop_nice_leave();
        if (dup2(sock, PROTO_CONTROL_FD) < 0)
                _exit(127);
        /* Nothing of tierd's leaks into the worker: no group fd, no file. */
        syscall(SYS_close_range, PROTO_CONTROL_FD + 1, ~0U, 0);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
#ifdef TIERD_WORKER_UNDER_VALGRIND
        /* Test build only (make valgrind-daemons, no sandbox): the worker
         * runs under valgrind memcheck, its report in TIERD_VALGRIND_LOG. */
        char log_arg[4200];
        snprintf(log_arg, sizeof(log_arg), "--log-file=%s", vg_log ? vg_log : "/dev/null");
        char *const vg_argv[] = { "valgrind", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite",
                                  "--show-leak-kinds=definite", log_arg, (char *)path, NULL };
        execve("/usr/bin/valgrind", vg_argv, envp);
#endif
        execve(path, argv, envp);
        _exit(127);
}

#define DEFAULT_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* The worker reads no file and asks no DNS server: tierd names the one
 * port it may connect to (its store's, or its proxy's), the CA bundle it
 * may read and the addresses of that host (resolver.c, on a thread: never
 * here, on the loop). */
static void worker_network(const struct tenant *tn, struct proto_config *cfg) {
        const char *proxy;
        unsigned port;
        bool tls, lookup;

        if (resolver_worker_target(tn, &port, &tls, &proxy, &lookup) < 0)
                return; /* no port: Landlock lets it connect nowhere (a file:// store needs none) */
        snprintf(cfg->proxy, sizeof(cfg->proxy), "%s", proxy);
        cfg->net_port = port;
        if (tls && !tn->cfg->ca_file && access(DEFAULT_CA_BUNDLE, R_OK) == 0)
                snprintf(cfg->ca_file, sizeof(cfg->ca_file), "%s", DEFAULT_CA_BUNDLE);
        snprintf(cfg->resolve, sizeof(cfg->resolve), "%s", resolver_answer(tn));
        cfg->resolve_needed = lookup;
}

void worker_config(struct tenant *tn, struct proto_config *cfg) {
        const struct policy_tenant *p = tn->cfg;
        snprintf(cfg->tenant, sizeof(cfg->tenant), "%s", p->name);
        snprintf(cfg->backend, sizeof(cfg->backend), "%s", p->backend);
        snprintf(cfg->endpoint, sizeof(cfg->endpoint), "%s", p->endpoint ?: "");
        snprintf(cfg->region, sizeof(cfg->region), "%s", p->region ?: "us-east-1");
        snprintf(cfg->ca_file, sizeof(cfg->ca_file), "%s", p->ca_file ?: "");
        snprintf(cfg->sse, sizeof(cfg->sse), "%s", p->sse ?: "");
        snprintf(cfg->kms_key_id, sizeof(cfg->kms_key_id), "%s", p->kms_key_id ?: "");
        snprintf(cfg->headers, sizeof(cfg->headers), "%s", tn->headers);
        cfg->virtual_hosted = p->virtual_hosted;
        cfg->connect_timeout_usec = p->connect_timeout_usec;
        cfg->stall_timeout_usec = p->stall_timeout_usec;
        cfg->multipart_threshold = p->multipart_threshold;
        cfg->manifest_cache = p->manifest_cache;
        cfg->part_size = p->part_size;
        cfg->uid = cfg->gid = (uint32_t)tn->worker_uid;
        cfg->landlock_optional = tn->t->policy->landlock_optional;
        worker_network(tn, cfg);
}
