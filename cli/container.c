/* SPDX-License-Identifier: MIT */
/*
 * tierctl oci-hook: the OCI runtime hook (createRuntime and poststop) that
 * attaches a tenant's view to a container, and tierctl container
 * attach/detach/list for hosts that start containers some other way.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "ocihook.h"
#include "paths.h"
#include "tierctl.h"

#define DEFAULT_MOUNT_PATH "/data"
#define HOOK_CALL_TIMEOUT_USEC (8 * 1000 * 1000ull) /* under the hook's own timeout (10 s in contrib/oci) */
#define ERROR_NO_SUCH_CONTAINER "org.tierd1.Error.NoSuchContainer"

/* All of fd, at most max bytes, NUL-terminated. */
static char *read_all(int fd, size_t max, size_t *ret_len) {
        size_t n = 0, cap = 4096;
        char *buf = malloc(cap);
        while (buf) {
                if (n + 1 >= cap) {
                        char *grown = cap >= max ? NULL : realloc(buf, cap * 2);
                        if (!grown) {
                                free(buf);
                                return NULL;
                        }
                        buf = grown;
                        cap *= 2;
                }
                ssize_t k = read(fd, buf + n, cap - n - 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        free(buf);
                        return NULL;
                }
                if (k == 0)
                        break;
                n += (size_t)k;
        }
        if (buf) {
                buf[n] = 0;
                *ret_len = n;
        }
        return buf;
}

static int hook_fail(const char *id, const char *fmt, const char *arg) {
        fprintf(stderr, "tierctl oci-hook: container %s: ", id ?: "?");
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
        return EXIT_FAILED;
}

/* No tierd on this node's bus: the container would start without its
 * tenant's data, so createRuntime fails it (the runtime then refuses to
 * start it), saying where it looked. */
static int hook_unserved(const struct oci_hook *h, const char *why) {
        const char *addr = getenv("DBUS_SYSTEM_BUS_ADDRESS");
        fprintf(stderr,
                "tierctl oci-hook: container %s: tierd is not serving on this node (system bus %s: %s): "
                "refused, it would start without tenant %s's data\n",
                h->id, addr ?: "unix:path=/run/dbus/system_bus_socket", why, h->tenant);
        return EXIT_FAILED;
}

static double elapsed_ms(const struct timespec *start) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (double)(now.tv_sec - start->tv_sec) * 1e3 + (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

struct attach_args {
        const char *id, *tenant, *rootfs, *mount_path, *k8s_namespace;
        const char *trace; /* NULL: none */
        uint32_t pid;
        bool read_only;
};

static int call_attach(sd_bus *bus, const struct attach_args *a, char **ret_path, sd_bus_error *e) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *path;
        int r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, BUS_PATH, BUS_MANAGER, "AttachContainer");
        if (r >= 0)
                r = sd_bus_message_append(m, "ssusss", a->id, a->tenant, a->pid, a->rootfs, a->mount_path,
                                          a->k8s_namespace);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && a->read_only)
                r = sd_bus_message_append(m, "{sv}", "ReadOnly", "b", 1);
        if (r >= 0 && a->trace)
                r = sd_bus_message_append(m, "{sv}", "Trace", "s", a->trace);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_call(bus, m, HOOK_CALL_TIMEOUT_USEC, e, &reply);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0 && !(*ret_path = strdup(path)))
                r = -ENOMEM;
        return r;
}

/* Within the hook's timeout too. */
static int detach(sd_bus *bus, const char *id, sd_bus_error *e) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, BUS_PATH, BUS_MANAGER, "DetachContainer");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", id);
        return r < 0 ? r : sd_bus_call(bus, m, HOOK_CALL_TIMEOUT_USEC, e, NULL);
}

int verb_oci_hook(sd_bus *unused, int argc, char **argv) {
        (void)unused; /* no bus yet: most containers are not ours */
        _cleanup_(oci_hook_done) struct oci_hook h = {};
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *state_text = NULL, *config_text = NULL, *config_path = NULL, *object = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        const char *why = NULL;
        struct timespec start;
        size_t len;
        int r;

        clock_gettime(CLOCK_MONOTONIC, &start);
        if (argc > 1) {
                fprintf(stderr, "tierctl: usage: tierctl oci-hook [createRuntime|poststop] < STATE\n");
                return EXIT_USAGE;
        }
        if (!(state_text = read_all(STDIN_FILENO, OCI_STATE_MAX, &len)))
                return hook_fail(NULL, "cannot read the container state on stdin%s", "");
        if (oci_hook_parse_state(&h, state_text, len, &why) < 0)
                return hook_fail(h.id, "%s", why);
        if (asprintf(&config_path, "%s/config.json", h.bundle) < 0) {
                config_path = NULL;
                return EXIT_FAILED;
        }
        _cleanup_close_ int cfd = open(config_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (cfd < 0 || !(config_text = read_all(cfd, OCI_CONFIG_MAX, &len)))
                return hook_fail(h.id, "cannot read the bundle's config.json: %s", strerror(errno));
        r = oci_hook_parse_config(&h, config_text, len, argc == 1 ? argv[0] : NULL, &why);
        if (r < 0)
                return hook_fail(h.id, "%s", why ?: strerror(-r));
        if (!h.ours)
                return EXIT_OK; /* not ours: no bus, no cost */

        r = sd_bus_open_system(&bus);
        if (r < 0 && strcmp(h.stage, "poststop") == 0)
                return hook_fail(h.id, "cannot reach the system bus to detach: %s", strerror(-r));
        if (r < 0)
                return hook_unserved(&h, strerror(-r));
        if (strcmp(h.stage, "poststop") == 0) {
                r = detach(bus, h.id, &e);
                /* Already detached when its init died, or by a tierd restart. */
                if (r < 0 && !sd_bus_error_has_name(&e, ERROR_NO_SUCH_CONTAINER)) {
                        r = call_failed("oci-hook poststop", &e, r);
                        sd_bus_error_free(&e);
                        return r;
                }
                sd_bus_error_free(&e);
                return EXIT_OK;
        }
        struct attach_args a = { .id = h.id, .tenant = h.tenant, .rootfs = h.rootfs, .pid = h.pid,
                                 .mount_path = h.mount_path, .k8s_namespace = h.k8s_namespace,
                                 .read_only = h.read_only, .trace = h.trace };
        r = call_attach(bus, &a, &object, &e);
        if (r < 0 && (sd_bus_error_has_names(&e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER) ||
                      r == -ENOENT || r == -ECONNREFUSED)) {
                r = hook_unserved(&h, e.message ?: strerror(-r));
                sd_bus_error_free(&e);
                return r;
        }
        if (r < 0) {
                /* Non-zero: the runtime refuses to start a container whose data is missing. */
                r = call_failed("oci-hook createRuntime", &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        fprintf(stderr, "tierctl oci-hook: container %s: tenant %s at %s (%.1f ms)\n", h.id, h.tenant, h.mount_path,
                elapsed_ms(&start));
        return EXIT_OK;
}

static int container_attach_verb(sd_bus *bus, int argc, char **argv) {
        static const struct option options[] = {
                { "tenant", required_argument, NULL, 't' }, { "pid", required_argument, NULL, 'p' },
                { "path", required_argument, NULL, 'P' },   { "rootfs", required_argument, NULL, 'r' },
                { "namespace", required_argument, NULL, 'n' }, { "read-only", no_argument, NULL, 'R' },
                { "trace", required_argument, NULL, 'T' }, {},
        };
        struct attach_args a = { .rootfs = "", .mount_path = DEFAULT_MOUNT_PATH, .k8s_namespace = "" };
        _cleanup_free_ char *object = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int c, r;

        optind = 1;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 't': a.tenant = optarg; break;
                case 'p': {
                        char *end;
                        errno = 0;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (errno || *end || end == optarg || v > INT32_MAX) {
                                fprintf(stderr, "tierctl: --pid: '%s' is not a pid\n", optarg);
                                return EXIT_USAGE;
                        }
                        a.pid = (uint32_t)v;
                        break;
                }
                case 'P': a.mount_path = optarg; break;
                case 'r': a.rootfs = optarg; break;
                case 'n': a.k8s_namespace = optarg; break;
                case 'R': a.read_only = true; break;
                case 'T': a.trace = optarg; break;
                default: return EXIT_USAGE;
                }
        if (optind + 1 != argc || !a.tenant || !a.pid) {
                fprintf(stderr, "tierctl: usage: tierctl container attach ID --tenant NAME --pid PID [--path /data] "
                                "[--rootfs DIR] [--namespace NS] [--read-only] [--trace NAME]\n");
                return EXIT_USAGE;
        }
        a.id = argv[optind];
        r = call_attach(bus, &a, &object, &e);
        if (r < 0) {
                r = call_failed("container attach", &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        printf("container %s: tenant %s's view at %s (%s)\n", a.id, a.tenant, a.mount_path, object);
        return EXIT_OK;
}

static int container_list_verb(sd_bus *bus, int argc, char **argv) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(json_putp) json_object *list = NULL;
        const char *id, *tenant, *path, *object;
        bool json = false;
        const struct verb_flag flags[] = { { "json", &json } };
        uint32_t pid;
        int r;

        if ((r = verb_flags("container", "container list [--json]", argc - 1, argv + 1, flags, ARRAY_SIZE(flags),
                            0)) != EXIT_OK)
                return r;
        r = call_manager(bus, "container list", &reply, "ListContainers", "");
        if (r != EXIT_OK)
                return r;
        if ((r = sd_bus_message_enter_container(reply, 'a', "(ssuso)")) < 0)
                return EXIT_FAILED;
        if (json && !(list = json_object_new_array()))
                return EXIT_FAILED;
        if (!json)
                printf("%-24s %-16s %8s  %s\n", "CONTAINER", "TENANT", "PID", "VIEW");
        while ((r = sd_bus_message_read(reply, "(ssuso)", &id, &tenant, &pid, &path, &object)) > 0) {
                if (!json) {
                        printf("%-24s %-16s %8u  %s\n", id, tenant, pid, path);
                        continue;
                }
                json_object *o = json_array_new_object(list);
                if (!o)
                        return EXIT_FAILED;
                json_object_object_add(o, "container", json_object_new_string(id));
                json_object_object_add(o, "tenant", json_object_new_string(tenant));
                json_object_object_add(o, "pid", json_object_new_int64(pid));
                json_object_object_add(o, "view", json_object_new_string(path));
                json_object_object_add(o, "object", json_object_new_string(object));
        }
        if (r < 0)
                return EXIT_FAILED;
        if (json)
                json_print(list);
        return EXIT_OK;
}

int verb_container(sd_bus *bus, int argc, char **argv) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        if (argc >= 1 && strcmp(argv[0], "attach") == 0)
                return container_attach_verb(bus, argc, argv);
        if (argc >= 1 && strcmp(argv[0], "list") == 0)
                return container_list_verb(bus, argc, argv);
        if (argc == 2 && strcmp(argv[0], "detach") == 0) {
                r = detach(bus, argv[1], &e);
                if (r < 0) {
                        r = call_failed("container detach", &e, r);
                        sd_bus_error_free(&e);
                        return r;
                }
                return EXIT_OK;
        }
        fprintf(stderr, "tierctl: usage: tierctl container attach|detach|list ...\n");
        return EXIT_USAGE;
}
