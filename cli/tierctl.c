/* SPDX-License-Identifier: MIT */
/*
 * tierctl: the admin client. Every verb is a call to org.tierd1.Manager on
 * the system bus (DBUS_SYSTEM_BUS_ADDRESS for a private bus).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
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
#include "tierctl.h"

#define CALL_TIMEOUT_USEC (24ull * 3600 * 1000 * 1000) /* archives of big trees take long */

static void bus_unrefp(sd_bus **b) { sd_bus_flush_close_unref(*b); }
static void msg_unrefp(sd_bus_message **m) { sd_bus_message_unref(*m); }

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

/* The files to ask about, opened O_PATH (no symlink followed): an fd is
 * what tierd answers about, so a caller learns only of files it reaches.
 * names[i] is what is printed for fds[i]; a file that cannot be opened is
 * said here and left out. */
static int open_files(int n, char **in, int **ret_fds, char ***ret_names, int *ret_n) {
        int *fds = calloc((size_t)n + 1, sizeof(int));
        char **names = calloc((size_t)n + 1, sizeof(char *));
        int k = 0, failed = 0;
        if (!fds || !names) {
                free(fds);
                free(names);
                return -ENOMEM;
        }
        for (int i = 0; i < n; i++) {
                int fd = open_path_no_symlinks(in[i]);
                if (fd < 0) {
                        fprintf(stderr, "tierctl: %s: %s\n", in[i], path_error(fd));
                        failed++;
                        continue;
                }
                char *name = realpath(in[i], NULL);
                if (!name && !(name = strdup(in[i]))) {
                        close(fd);
                        failed++;
                        continue;
                }
                fds[k] = fd;
                names[k++] = name;
        }
        *ret_fds = fds;
        *ret_names = names;
        *ret_n = k;
        return failed;
}

static void strv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

static int call_with_fds(sd_bus *bus, const char *method, const int *fds, int n, sd_bus_message **reply,
                         sd_bus_error *e) {
        _cleanup_(msg_unrefp) sd_bus_message *m = NULL;
        int r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, BUS_PATH, BUS_MANAGER, method);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "h");
        for (int i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(m, "h", fds[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, e, reply);
        return r;
}

static void json_string(const char *s) {
        putchar('"');
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c == '"' || c == '\\')
                        printf("\\%c", c);
                else if (c < 0x20)
                        printf("\\u%04x", c);
                else
                        putchar(c);
        }
        putchar('"');
}

/* 1536 -> "1.5K": binary units, as ls -h and df -h print them. */
static const char *human_size(uint64_t v, char buf[16]) {
        static const char units[] = "BKMGTPE";
        double d = (double)v;
        size_t u = 0;
        while (d >= 1024 && u + 1 < sizeof(units) - 1) {
                d /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, 16, "%" PRIu64 "B", v);
        else
                snprintf(buf, 16, d < 10 ? "%.1f%c" : "%.0f%c", d, units[u]);
        return buf;
}

/* The system bus passes at most 16 fds in one message (dbus-daemon's
 * max_message_unix_fds; more and it drops the connection). */
#define STATUS_FDS_PER_CALL 16

/* Prints one reply's files, names[0..n) as the caller named them; k counts
 * the JSON objects printed so far. */
static int print_statuses(sd_bus_message *reply, char **names, int n, bool json, int *k, int *ret) {
        const char *path, *err, *tenant, *state;
        uint64_t size, resident;
        char h1[16], h2[16];
        int pinned, i = 0;
        int r = sd_bus_message_enter_container(reply, 'a', "(ssssttb)");
        while (r > 0 && i < n &&
               (r = sd_bus_message_read(reply, "(ssssttb)", &path, &err, &tenant, &state, &size, &resident, &pinned)) > 0) {
                path = names[i++];
                if (*err) {
                        if (*err == '/') /* it names the file already */
                                fprintf(stderr, "tierctl: %s\n", err);
                        else
                                fprintf(stderr, "tierctl: %s: %s\n", path, err);
                        *ret = EXIT_FAILED;
                        continue;
                }
                if (json) {
                        printf("%s{\"path\":", (*k)++ ? "," : "");
                        json_string(path);
                        printf(",\"tenant\":");
                        json_string(tenant);
                        printf(",\"state\":\"%s\",\"pinned\":%s,\"size\":%" PRIu64 ",\"resident\":%" PRIu64
                               ",\"released\":%" PRIu64 "}",
                               state, pinned ? "true" : "false", size, resident, size - MIN(size, resident));
                } else
                        printf("%-9s %-3s %8s %8s %-12s %s\n", state, pinned ? "yes" : "", human_size(size, h1),
                               human_size(resident, h2), tenant, path);
        }
        return r < 0 ? r : 0;
}

static int status_files(sd_bus *bus, int n, char **argv, bool json) {
        char **names = NULL;
        int *fds = NULL, nfds = 0, r, ret = EXIT_OK, k = 0;

        r = open_files(n, argv, &fds, &names, &nfds);
        if (r < 0)
                return EXIT_FAILED;
        if (r > 0)
                ret = EXIT_FAILED;
        if (json)
                printf("[");
        else
                printf("%-9s %-3s %8s %8s %-12s %s\n", "STATE", "PIN", "SIZE", "LOCAL", "TENANT", "PATH");
        for (int at = 0; at < nfds && r >= 0; at += STATUS_FDS_PER_CALL) {
                _cleanup_(msg_unrefp) sd_bus_message *reply = NULL;
                sd_bus_error e = SD_BUS_ERROR_NULL;
                int batch = MIN(nfds - at, STATUS_FDS_PER_CALL);
                r = call_with_fds(bus, "FileStatusFds", fds + at, batch, &reply, &e);
                if (r < 0) {
                        ret = call_failed("FileStatusFds", &e, r);
                        sd_bus_error_free(&e);
                        break;
                }
                if ((r = print_statuses(reply, names + at, batch, json, &k, &ret)) < 0)
                        ret = call_failed("bad reply", NULL, r);
        }
        if (json)
                printf("]\n");
        for (int j = 0; j < nfds; j++)
                close(fds[j]);
        free(fds);
        strv_free(names);
        return ret;
}

/* The tenant's quota and the bytes tierd counts against it (0, 0 if the
 * properties cannot be read). */
static void tenant_quota(sd_bus *bus, const char *name, uint64_t *quota, uint64_t *used) {
        char *path = NULL;
        *quota = *used = 0;
        if (sd_bus_path_encode("/org/tierd1/tenant", name, &path) < 0)
                return;
        sd_bus_get_property_trivial(bus, BUS_NAME, path, BUS_TENANT, "Quota", NULL, 't', quota);
        sd_bus_get_property_trivial(bus, BUS_NAME, path, BUS_TENANT, "UsedBytes", NULL, 't', used);
        free(path);
}

static int status_tenants(sd_bus *bus, bool json) {
        _cleanup_(msg_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        const char *name, *subvol, *mount, *backend, *wstate;
        uint32_t pid;
        uint64_t res, rel, f_res, f_arch, f_part, f_rel, f_dirty, fills, fbytes, ferr, quota, used;
        char h1[16], h2[16], h3[16], h4[16], h5[16], files[96], quota_col[40];
        int r, k = 0;

        r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_MANAGER, "TenantStatus", &e, &reply, "");
        if (r < 0) {
                int ret = call_failed("TenantStatus", &e, r);
                sd_bus_error_free(&e);
                return ret;
        }
        if (json)
                printf("[");
        else
                printf("%-12s %-10s %7s %8s %8s %-15s %-32s %8s %8s %6s  %s\n", "TENANT", "WORKER", "PID", "LOCAL",
                       "REMOTE", "QUOTA used/max", "FILES local/arch/part/rel/dirty", "FILLS", "FETCHED", "ERRORS", "VIEW");
        r = sd_bus_message_enter_container(reply, 'a', "(sssssutttttttttt)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(sssssutttttttttt)", &name, &subvol, &mount, &backend, &wstate,
                                                  &pid, &res, &rel, &f_res, &f_arch, &f_part, &f_rel, &f_dirty, &fills,
                                                  &fbytes, &ferr)) > 0) {
                tenant_quota(bus, name, &quota, &used);
                if (json) {
                        printf("%s{\"name\":", k++ ? "," : "");
                        json_string(name);
                        printf(",\"subvolume\":");
                        json_string(subvol);
                        printf(",\"mount\":");
                        json_string(mount);
                        printf(",\"backend\":");
                        json_string(backend);
                        printf(",\"worker\":{\"state\":\"%s\",\"pid\":%u},\"resident_bytes\":%" PRIu64
                               ",\"released_bytes\":%" PRIu64 ",\"files\":{\"resident\":%" PRIu64 ",\"archived\":%" PRIu64
                               ",\"partial\":%" PRIu64 ",\"released\":%" PRIu64 ",\"dirty\":%" PRIu64 "},\"fills\":%" PRIu64
                               ",\"fill_bytes\":%" PRIu64 ",\"fill_errors\":%" PRIu64 ",\"quota\":%" PRIu64
                               ",\"used_bytes\":%" PRIu64 "}",
                               wstate, pid, res, rel, f_res, f_arch, f_part, f_rel, f_dirty, fills, fbytes, ferr, quota,
                               used);
                } else {
                        snprintf(files, sizeof(files), "%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64, f_res,
                                 f_arch, f_part, f_rel, f_dirty);
                        if (quota)
                                snprintf(quota_col, sizeof(quota_col), "%s/%s", human_size(used, h4),
                                         human_size(quota, h5));
                        else
                                snprintf(quota_col, sizeof(quota_col), "-");
                        printf("%-12s %-10s %7u %8s %8s %-15s %-32s %8" PRIu64 " %8s %6" PRIu64 "  %s\n", name, wstate,
                               pid, human_size(res, h1), human_size(rel, h2), quota_col, files, fills,
                               human_size(fbytes, h3), ferr, mount);
                }
        }
        if (json)
                printf("]\n");
        return r < 0 ? call_failed("bad reply", NULL, r) : EXIT_OK;
}

static int verb_reload(sd_bus *bus, int argc, char **argv) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        (void)argv;
        if (argc > 0)
                return verb_no_args("reload", argc);
        int r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_MANAGER, "ReloadPolicy", &e, NULL, "");
        if (r < 0) {
                r = call_failed("reload", &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        printf("policy reloaded\n");
        return EXIT_OK;
}

/* For liveness probes: tierd's loop answered, within the bus's timeout. */
static int verb_ping(sd_bus *bus, int argc, char **argv) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint32_t n = 0;
        (void)argv;
        if (argc > 0)
                return verb_no_args("ping", argc);
        int r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_MANAGER, "Ping", &e, &reply, "");
        if (r < 0) {
                r = call_failed("ping", &e, r);
                sd_bus_error_free(&e);
                return r;
        }
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
#define U_RESTORE "  restore PATH...          bring released files back whole\n"
#define U_PIN "  pin PATH...              never release these files (released ones come back)\n"
#define U_UNPIN "  unpin PATH...            let these files be released again\n"
#define U_STATUS "  status [--json] [PATH...] per tenant, or per file: resident / partial / released\n"
#define U_JOBS "  jobs                     tierd's jobs: operation, done, total, failed\n"
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
        "                           if older than gc_grace; --dry-run: only say what\n"
#define U_AUDIT "  audit NAME [--repair]    compare the tenant's stubs, catalog and store; --repair\n" \
        "                           uploads archived files whose object is gone again and\n" \
        "                           snapshots the catalog from the disk\n"
#define U_METRICS "  metrics                  every counter, in the Prometheus text format\n"
#define U_MONITOR "  monitor                  tierd's signals as they come (worker exits and starts,\n" \
        "                           property changes), until interrupted\n"
#define U_CONTAINER "  container attach ID --tenant NAME --pid PID [--path /data] [--rootfs DIR]\n" \
        "            [--namespace NS] [--read-only]\n" \
        "                           place the tenant's view in a running container (its\n" \
        "                           own root unless --rootfs) and give it a worker\n" \
        "  container detach ID      undo it   container list   the attached containers\n"
#define U_RELEASE_GROUPS "  release-groups [--holder SOCKET] MOUNTPOINT...\n" \
        "                           the final stop: with tierd stopped for good, make\n" \
        "                           tierd-holder let go of its groups, once a walk of each\n" \
        "                           filesystem found no stub that is not whole (else it\n" \
        "                           names them and changes nothing)\n"
#define U_OCI_HOOK "  oci-hook [createRuntime|poststop]\n" \
        "                           the OCI runtime hook: reads the container state on stdin\n" \
        "                           and the bundle's annotations tierd.io/tenant,\n" \
        "                           tierd.io/mount-path (default /data), tierd.io/read-only\n"

static int verb_archive(sd_bus *bus, int argc, char **argv);
static int verb_status(sd_bus *bus, int argc, char **argv);
#define FILE_VERB(name, method) \
        static int verb_##name(sd_bus *bus, int argc, char **argv) { \
                return verb_file_job(bus, method, #name, argc, argv); \
        }
FILE_VERB(release, "Release")
FILE_VERB(restore, "Restore")
FILE_VERB(pin, "Pin")
FILE_VERB(unpin, "Unpin")

/* Every verb: what it runs, its usage, and whether it needs the bus (those
 * that do not run before any connection: the OCI hook for containers
 * without our annotation, release-groups with tierd stopped). */
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
        { "jobs", verb_jobs, U_JOBS, false },
        { "cancel", verb_cancel, U_CANCEL, false },
        { "reload", verb_reload, U_RELOAD, false },
        { "ping", verb_ping, U_PING, false },
        { "tenant", verb_tenant, U_TENANT, false },
        { "gc", verb_gc, U_GC, false },
        { "audit", verb_audit, U_AUDIT, false },
        { "metrics", verb_metrics, U_METRICS, false },
        { "monitor", verb_monitor, U_MONITOR, false },
        { "container", verb_container, U_CONTAINER, false },
        { "release-groups", verb_release_groups, U_RELEASE_GROUPS, true },
        { "oci-hook", verb_oci_hook, U_OCI_HOOK, true },
};

static void usage(FILE *f) {
        fprintf(f, "Usage: tierctl VERB [ARGS]    tierctl --help | --version    tierctl VERB --help\n\n");
        for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
                fputs(verbs[i].usage, f);
        fprintf(f, "\nFile verbs run as tierd jobs; on a terminal they show a progress bar, and\n"
                   "Ctrl-C cancels what has not started.\n"
                   "Talks to tierd over the D-Bus system bus (DBUS_SYSTEM_BUS_ADDRESS).\n"
                   "Exit: 0 ok, 1 failed, 2 usage, 3 access denied.\n");
}

int verb_no_args(const char *verb, int argc) {
        if (argc == 0)
                return EXIT_OK;
        fprintf(stderr, "tierctl: %s takes no arguments\n", verb);
        return EXIT_USAGE;
}

/* "--rehash" may stand anywhere among the paths. */
static int verb_archive(sd_bus *bus, int argc, char **argv) {
        bool rehash = false;
        int n = 0;
        for (int i = 0; i < argc; i++) {
                if (strcmp(argv[i], "--rehash") == 0)
                        rehash = true;
                else
                        argv[n++] = argv[i];
        }
        return verb_file_job(bus, rehash ? "Rehash" : "Archive", "archive", n, argv);
}

/* "--json" may stand anywhere among the paths. */
static int verb_status(sd_bus *bus, int argc, char **argv) {
        bool json = false;
        int n = 0;
        for (int i = 0; i < argc; i++) {
                if (strcmp(argv[i], "--json") == 0)
                        json = true;
                else
                        argv[n++] = argv[i];
        }
        return n > 0 ? status_files(bus, n, argv, json) : status_tenants(bus, json);
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
        /* Its own usage, whatever else the line says. */
        for (int i = 0; i < argc; i++)
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
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
