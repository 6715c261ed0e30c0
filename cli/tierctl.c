/* SPDX-License-Identifier: MIT */
/*
 * tierctl: the admin client. Every verb is a call to org.tierd1.Manager on
 * the system bus (DBUS_SYSTEM_BUS_ADDRESS for a private bus).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "paths.h"
#include "tierctl.h"

static void bus_unrefp(sd_bus **b) { sd_bus_flush_close_unref(*b); }

int open_path_no_symlinks(const char *path) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
        return fd < 0 ? -errno : (int)fd;
}

const char *path_error(int r) {
        return r == -ELOOP ? "a symlink on the way: tierctl follows none (give the real path)" : strerror(-r);
}

int call_failed(const char *what, const sd_bus_error *e, int r) {
        fprintf(stderr, "tierctl: %s: %s\n", what, e && e->message ? e->message : strerror(-r));
        return e && sd_bus_error_has_name(e, ERROR_ACCESS_DENIED) ? EXIT_DENIED : EXIT_FAILED;
}

int call_manager(sd_bus *bus, const char *what, sd_bus_message **reply, const char *method, const char *types, ...) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        va_list ap;

        va_start(ap, types);
        int r = sd_bus_call_methodv(bus, BUS_NAME, BUS_PATH, BUS_MANAGER, method, &e, reply, types, ap);
        va_end(ap);
        return r < 0 ? call_failed(what, &e, r) : EXIT_OK;
}

static int verb_reload(sd_bus *bus, int argc, char **argv) {
        (void)argv;
        if (argc > 0)
                return verb_no_args("reload", argc);
        int r = call_manager(bus, "reload", NULL, "ReloadPolicy", "");
        if (r != EXIT_OK)
                return r;
        printf("policy reloaded\n");
        return EXIT_OK;
}

/* For liveness probes: tierd's loop answered, within the bus's timeout. */
static int verb_ping(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint32_t n = 0;
        (void)argv;
        if (argc > 0)
                return verb_no_args("ping", argc);
        int r = call_manager(bus, "ping", &reply, "Ping", "");
        if (r != EXIT_OK)
                return r;
        if (sd_bus_message_read(reply, "u", &n) < 0)
                return EXIT_FAILED;
        printf("tierd answers: %u tenant(s)\n", n);
        return EXIT_OK;
}

/* Each verb's line(s) of the usage, as --help shows them. */
#define U_ARCHIVE "  archive [--rehash] PATH...\n" \
        "                           upload files to their tenant's store (they stay local);\n" \
        "                           --rehash: add a chunk manifest to files archived without\n" \
        "                           one (released ones are restored first)\n"
#define U_RELEASE "  release PATH...          free the local blocks of archived, unchanged files\n"
#define U_FIND "  find PATH... [--state S,...] [--larger SIZE] [--smaller SIZE] [--older AGE]\n" \
        "            [--newer AGE] [--pinned] [-0] [--json]\n" \
        "                           the files beneath PATH that match, read from their\n" \
        "                           records (no file opened, tierd not asked); S: resident,\n" \
        "                           archived, partial, released, dirty; AGE: 30m, 12h, 7d\n"
#define U_DU "  du PATH... [--json]      files, bytes and local bytes beneath PATH, by state\n"
#define U_RESTORE "  restore PATH...          bring released files back whole\n"
#define U_PIN "  pin PATH...              never release these files (released ones come back)\n"
#define U_UNPIN "  unpin PATH...            let these files be released again\n"
#define U_STATUS "  status [--json] [PATH...] per tenant, or per file: resident / partial / released\n"
#define U_JOBS "  jobs [--json]            tierd's jobs: operation, done, total, failed\n"
#define U_CANCEL "  cancel JOB               cancel a job (its number, or its object path)\n"
#define U_RELOAD "  reload                   make tierd read its policy file again\n"
#define U_PING "  ping                     tierd answers at once (for liveness probes)\n"
#define U_TENANT "  tenant import NAME --from BACKEND [--at TIME] [--keep-setuid]\n" \
        "                           make the tree the tenant's catalog (in BACKEND, its\n" \
        "                           store) holds as released stubs; take the catalog over;\n" \
        "                           TIME: @SECONDS or YYYY-MM-DDTHH:MM:SSZ\n" \
        "  tenant set NAME KEY=VALUE...\n" \
        "                           change a tenant's policy keys (VALUE is JSON, or a\n" \
        "                           string; null restores the default): written to the\n" \
        "                           policy file and applied\n"
#define U_GC "  gc NAME [--dry-run]      delete the objects of the tenant's store that neither its\n" \
        "                           catalog (within catalog_retention) nor any stub names,\n" \
        "                           if older than gc_grace, and the access traces not saved\n" \
        "                           for trace_keep; --dry-run: only say what\n"
#define U_AUDIT "  audit NAME [--repair]    compare the tenant's stubs, catalog and store; --repair\n" \
        "                           uploads archived files whose object is gone again and\n" \
        "                           snapshots the catalog from the disk\n"
#define U_METRICS "  metrics [--listen ADDRESS]\n" \
        "                           every counter, in the Prometheus text format; --listen:\n" \
        "                           serve them over HTTP at /metrics (ADDRESS: HOST:PORT,\n" \
        "                           [V6]:PORT or :PORT), as nobody if started as root\n"
#define U_MONITOR "  monitor                  tierd's signals as they come (worker exits and starts,\n" \
        "                           property changes), until interrupted\n"
#define U_CONTAINER "  container attach ID --tenant NAME --pid PID [--path /data] [--rootfs DIR]\n" \
        "            [--namespace NS] [--read-only] [--trace NAME]\n" \
        "                           place the tenant's view in a running container (its\n" \
        "                           own root unless --rootfs) and give it a worker;\n" \
        "                           --trace: fetch that access trace ahead of its readers,\n" \
        "                           and record this run into it\n" \
        "  container detach ID      undo it\n" \
        "  container list [--json]  the attached containers\n"
#define U_RELEASE_GROUPS "  release-groups [--holder SOCKET] MOUNTPOINT...\n" \
        "                           the final stop: with tierd stopped for good, make\n" \
        "                           tierd-holder let go of its groups, once a walk of each\n" \
        "                           filesystem found no stub that is not whole (else it\n" \
        "                           names them and changes nothing)\n"
#define U_OCI_HOOK "  oci-hook [createRuntime|poststop]\n" \
        "                           the OCI runtime hook: reads the container state on stdin\n" \
        "                           and the bundle's annotations tierd.io/tenant,\n" \
        "                           tierd.io/mount-path (default /data), tierd.io/read-only,\n" \
        "                           tierd.io/trace (its access trace, as container --trace)\n"
#define U_TRACE "  trace start TENANT NAME  fetch access trace NAME ahead of the tenant's host\n" \
        "                           readers, and record their first touches into it\n" \
        "  trace show TENANT NAME [--json]\n" \
        "                           the trace as stored: runs, and per file its bytes,\n" \
        "                           ranges and the runs that touched it\n"

static int file_verb(sd_bus *bus, const char *verb, int argc, char **argv);
#define FILE_VERB(name) \
        static int verb_##name(sd_bus *bus, int argc, char **argv) { return file_verb(bus, #name, argc, argv); }
FILE_VERB(archive)
FILE_VERB(status)
FILE_VERB(release)
FILE_VERB(restore)
FILE_VERB(pin)
FILE_VERB(unpin)

/* Every verb: what it runs, its usage, and whether it needs the bus (those
 * that do not run before any connection: the OCI hook for containers
 * without our annotation, release-groups with tierd stopped, metrics,
 * which connects again after a failure when it serves). */
static const struct verb {
        const char *name;
        int (*fn)(sd_bus *bus, int argc, char **argv);
        const char *usage;
        bool no_bus;
} verbs[] = {
        { "archive", verb_archive, U_ARCHIVE, false },
        { "release", verb_release, U_RELEASE, false },
        { "restore", verb_restore, U_RESTORE, false },
        { "pin", verb_pin, U_PIN, false },
        { "unpin", verb_unpin, U_UNPIN, false },
        { "status", verb_status, U_STATUS, false },
        { "find", verb_find, U_FIND, true },
        { "du", verb_du, U_DU, true },
        { "jobs", verb_jobs, U_JOBS, false },
        { "cancel", verb_cancel, U_CANCEL, false },
        { "reload", verb_reload, U_RELOAD, false },
        { "ping", verb_ping, U_PING, false },
        { "tenant", verb_tenant, U_TENANT, false },
        { "gc", verb_gc, U_GC, false },
        { "audit", verb_audit, U_AUDIT, false },
        { "metrics", verb_metrics, U_METRICS, true },
        { "monitor", verb_monitor, U_MONITOR, false },
        { "container", verb_container, U_CONTAINER, false },
        { "trace", verb_trace, U_TRACE, false },
        { "release-groups", verb_release_groups, U_RELEASE_GROUPS, true },
        { "oci-hook", verb_oci_hook, U_OCI_HOOK, true },
};

static void usage(FILE *f) {
        fprintf(f, "Usage: tierctl VERB [ARGS]    tierctl --help | --version    tierctl VERB --help\n\n");
        for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
                fputs(verbs[i].usage, f);
        fprintf(f, "\nFile verbs (archive, release, restore, pin, unpin, status) take -r (a\n"
                   "directory stands for the regular files beneath it), --files-from FILE (one\n"
                   "path a line; \"-\": stdin) and -0 (NUL-separated, as find -0 writes them); \"--\"\n"
                   "ends the options. They run as tierd jobs; on a terminal they show a progress\n"
                   "bar, and Ctrl-C cancels what has not started.\n"
                   "Talks to tierd over the D-Bus system bus (DBUS_SYSTEM_BUS_ADDRESS).\n"
                   "Exit: 0 ok, 1 failed, 2 usage, 3 access denied.\n");
}

int verb_no_args(const char *verb, int argc) {
        if (argc == 0)
                return EXIT_OK;
        fprintf(stderr, "tierctl: %s takes no arguments\n", verb);
        return EXIT_USAGE;
}

/* The manager's method for a file verb: "release" -> "Release". */
static const char *method_of(const char *verb, bool rehash) {
        static const char *const methods[][2] = { { "archive", "Archive" }, { "release", "Release" },
                                                  { "restore", "Restore" }, { "pin", "Pin" }, { "unpin", "Unpin" } };
        if (rehash)
                return "Rehash";
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
                if (strcmp(verb, methods[i][0]) == 0)
                        return methods[i][1];
        return NULL;
}

/* The file verbs: paths (cli/paths.c: -r, --files-from, -0) and flags. */
static int file_verb(sd_bus *bus, const char *verb, int argc, char **argv) {
        bool rehash = false, json = false;
        const struct verb_flag archive_flags[] = { { "rehash", &rehash } }, status_flags[] = { { "json", &json } };
        bool archive = strcmp(verb, "archive") == 0, status = strcmp(verb, "status") == 0;
        struct path_list l;
        int r = paths_from_args(verb, argc, argv, archive ? archive_flags : status ? status_flags : NULL,
                                archive || status ? 1 : 0, &l);
        if (r != EXIT_OK)
                return r;
        if (status)
                r = l.n > 0 ? status_files(bus, (int)l.n, l.v, json) : status_tenants(bus, json);
        else if (l.n == 0) {
                fprintf(stderr, "tierctl: %s needs at least one PATH (or -r DIR, --files-from FILE)\n", verb);
                r = EXIT_USAGE;
        } else
                r = verb_file_job(bus, method_of(verb, rehash), verb, (int)l.n, l.v);
        paths_free(&l);
        return r;
}

int main(int argc, char **argv) {
        _cleanup_(bus_unrefp) sd_bus *bus = NULL;
        const struct verb *v = NULL;
        int r;

        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_USAGE : EXIT_OK;
        }
        if (strcmp(argv[1], "--version") == 0) {
                puts("tierctl " TIERD_VERSION);
                return EXIT_OK;
        }
        for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
                if (strcmp(argv[1], verbs[i].name) == 0)
                        v = &verbs[i];
        if (!v) {
                fprintf(stderr, "tierctl: unknown verb '%s'\n", argv[1]);
                usage(stderr);
                return EXIT_USAGE;
        }
        argv += 2;
        argc -= 2;
        /* Its own usage (first after the verb: a file may be named -h). */
        if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
                printf("Usage:\n%s", v->usage);
                return EXIT_OK;
        }
        if (v->no_bus)
                return v->fn(NULL, argc, argv);
        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "tierctl: cannot connect to the system bus: %s\n", strerror(-r));
                return EXIT_FAILED;
        }
        return v->fn(bus, argc, argv);
}
