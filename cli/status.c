/* SPDX-License-Identifier: MIT */
/*
 * tierctl status [--json] [PATH...]: per tenant (TenantStatus: one a{sv}
 * each, so new keys reach --json without a change here) or per file
 * (FileStatusFds on files tierctl opened itself). JSON through json-c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "tierctl.h"

#define CALL_TIMEOUT_USEC (60ull * 1000 * 1000)
/* The system bus passes at most 16 fds in one message (dbus-daemon's
 * max_message_unix_fds; more and it drops the connection). */
#define STATUS_FDS_PER_CALL 16

void json_putp(json_object **o) { json_object_put(*o); }

json_object *json_array_new_object(json_object *list) {
        json_object *o = json_object_new_object();
        if (o && json_object_array_add(list, o) < 0) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

void json_print(json_object *o) {
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* 1536 -> "1.5K": binary units, as ls -h and df -h print them. */
const char *human_size(uint64_t v, char buf[16]) {
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

static void strv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
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

static int call_once_with_fds(sd_bus *bus, const char *method, const int *fds, int n, sd_bus_message **reply,
                              sd_bus_error *e) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
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

/* tierd reads at most a few such calls' files at once, and says TryAgain
 * to more: asked again, 20 ms later, doubling up to 1 s, for 30 s. */
static int call_with_fds(sd_bus *bus, const char *method, const int *fds, int n, sd_bus_message **reply,
                         sd_bus_error *e) {
        useconds_t wait = 20000, waited = 0;
        for (;;) {
                int r = call_once_with_fds(bus, method, fds, n, reply, e);
                if (r >= 0 || !sd_bus_error_has_name(e, "org.tierd1.Error.TryAgain") || waited >= 30000000)
                        return r;
                sd_bus_error_free(e);
                usleep(wait);
                waited += wait;
                wait = wait < 500000 ? wait * 2 : 1000000;
        }
}

/* One reply's files, names[0..n) as the caller named them: a table line
 * each, or objects added to out. */
static int print_statuses(sd_bus_message *reply, char **names, int n, json_object *out, int *ret) {
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
                if (!out) {
                        printf("%-9s %-3s %8s %8s %-12s %s\n", state, pinned ? "yes" : "", human_size(size, h1),
                               human_size(resident, h2), tenant, path);
                        continue;
                }
                json_object *o = json_array_new_object(out);
                if (!o)
                        return -ENOMEM;
                json_object_object_add(o, "path", json_object_new_string(path));
                json_object_object_add(o, "tenant", json_object_new_string(tenant));
                json_object_object_add(o, "state", json_object_new_string(state));
                json_object_object_add(o, "pinned", json_object_new_boolean(pinned));
                json_object_object_add(o, "size", json_object_new_uint64(size));
                json_object_object_add(o, "resident", json_object_new_uint64(resident));
                json_object_object_add(o, "released", json_object_new_uint64(size - MIN(size, resident)));
        }
        return r < 0 ? r : 0;
}

int status_files(sd_bus *bus, int n, char **argv, bool json) {
        _cleanup_(json_putp) json_object *out = json ? json_object_new_array() : NULL;
        char **names = NULL;
        int *fds = NULL, nfds = 0, r, ret = EXIT_OK;

        r = open_files(n, argv, &fds, &names, &nfds);
        if (r < 0)
                return EXIT_FAILED;
        if (r > 0)
                ret = EXIT_FAILED;
        if (!json)
                printf("%-9s %-3s %8s %8s %-12s %s\n", "STATE", "PIN", "SIZE", "LOCAL", "TENANT", "PATH");
        for (int at = 0; at < nfds && r >= 0; at += STATUS_FDS_PER_CALL) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                sd_bus_error e = SD_BUS_ERROR_NULL;
                int batch = MIN(nfds - at, STATUS_FDS_PER_CALL);
                r = call_with_fds(bus, "FileStatusFds", fds + at, batch, &reply, &e);
                if (r < 0) {
                        ret = call_failed("FileStatusFds", &e, r);
                        sd_bus_error_free(&e);
                        break;
                }
                if ((r = print_statuses(reply, names + at, batch, out, &ret)) < 0)
                        ret = call_failed("bad reply", NULL, r);
        }
        if (out)
                json_print(out);
        for (int j = 0; j < nfds; j++)
                close(fds[j]);
        free(fds);
        strv_free(names);
        return ret;
}

/* "FillBytes" -> "fill_bytes"; "WorkerPid" -> "worker" { "pid" },
 * "FilesReleased" -> "files" { "released" }: keys tierd adds later come
 * out in the same form. */
static void add_key(json_object *o, const char *key, json_object *v) {
        static const char *const groups[] = { "Worker", "Files" };
        char name[128];
        size_t n = 0;
        for (size_t g = 0; g < ARRAY_SIZE(groups); g++) {
                size_t len = strlen(groups[g]);
                const char *group = groups[g][0] == 'W' ? "worker" : "files";
                json_object *sub = NULL;
                if (strncmp(key, groups[g], len) != 0 || !isupper((unsigned char)key[len]) ||
                    (json_object_object_get_ex(o, group, &sub) && !json_object_is_type(sub, json_type_object)))
                        continue; /* not of the group (or a plain "Worker" came first) */
                if (!sub) {
                        sub = json_object_new_object();
                        json_object_object_add(o, group, sub);
                }
                o = sub;
                key += len;
                break;
        }
        for (const char *p = key; *p && n + 2 < sizeof(name); p++) {
                if (isupper((unsigned char)*p) && p != key)
                        name[n++] = '_';
                name[n++] = (char)tolower((unsigned char)*p);
        }
        name[n] = 0;
        json_object_object_add(o, name, v);
}

/* One tenant's a{sv} as a JSON object (strings, u and t values). */
static int read_tenant(sd_bus_message *reply, json_object **ret) {
        json_object *o = json_object_new_object();
        const char *key, *contents, *s;
        uint64_t t;
        uint32_t u;
        int r;

        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                if ((r = sd_bus_message_read(reply, "s", &key)) < 0 ||
                    (r = sd_bus_message_peek_type(reply, NULL, &contents)) < 0)
                        break;
                if (strcmp(contents, "s") == 0 && (r = sd_bus_message_read(reply, "v", "s", &s)) >= 0)
                        add_key(o, key, json_object_new_string(s));
                else if (strcmp(contents, "u") == 0 && (r = sd_bus_message_read(reply, "v", "u", &u)) >= 0)
                        add_key(o, key, json_object_new_uint64(u));
                else if (strcmp(contents, "t") == 0 && (r = sd_bus_message_read(reply, "v", "t", &t)) >= 0)
                        add_key(o, key, json_object_new_uint64(t));
                else if (r >= 0)
                        r = sd_bus_message_skip(reply, "v"); /* a kind this tierctl does not know */
                if (r < 0 || (r = sd_bus_message_exit_container(reply)) < 0)
                        break;
        }
        if (r < 0) {
                json_object_put(o);
                return r;
        }
        *ret = o;
        return 0;
}

static uint64_t num(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_uint64(v) : 0;
}

static const char *str(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : "";
}

static void print_tenant_line(json_object *o) {
        json_object *w = NULL, *f = NULL;
        char h1[16], h2[16], h3[16], h4[16], h5[16], files[96], quota_col[40];
        json_object_object_get_ex(o, "worker", &w);
        json_object_object_get_ex(o, "files", &f);
        snprintf(files, sizeof(files), "%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64, num(f, "resident"),
                 num(f, "archived"), num(f, "partial"), num(f, "released"), num(f, "dirty"));
        if (num(o, "quota"))
                snprintf(quota_col, sizeof(quota_col), "%s/%s", human_size(num(o, "used_bytes"), h4),
                         human_size(num(o, "quota"), h5));
        else
                snprintf(quota_col, sizeof(quota_col), "-");
        printf("%-12s %-10s %7" PRIu64 " %8s %8s %-15s %-32s %8" PRIu64 " %8s %6" PRIu64 "  %s\n", str(o, "name"),
               str(w, "state"), num(w, "pid"), human_size(num(o, "resident_bytes"), h1),
               human_size(num(o, "released_bytes"), h2), quota_col, files, num(o, "fills"),
               human_size(num(o, "fill_bytes"), h3), num(o, "fill_errors"), str(o, "mount"));
}

int status_tenants(sd_bus *bus, bool json) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(json_putp) json_object *out = json_object_new_array();
        int r;

        r = call_manager(bus, "TenantStatus", &reply, "TenantStatus", "");
        if (r != EXIT_OK)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'a', "{sv}")) > 0) {
                json_object *o;
                if ((r = read_tenant(reply, &o)) < 0 || (r = sd_bus_message_exit_container(reply)) < 0)
                        break;
                json_object_array_add(out, o);
        }
        if (r < 0)
                return call_failed("bad reply", NULL, r);
        if (json) {
                json_print(out);
                return EXIT_OK;
        }
        printf("%-12s %-10s %7s %8s %8s %-15s %-32s %8s %8s %6s  %s\n", "TENANT", "WORKER", "PID", "LOCAL", "REMOTE",
               "QUOTA used/max", "FILES local/arch/part/rel/dirty", "FILLS", "FETCHED", "ERRORS", "VIEW");
        for (size_t i = 0; i < json_object_array_length(out); i++)
                print_tenant_line(json_object_array_get_idx(out, i));
        return EXIT_OK;
}
