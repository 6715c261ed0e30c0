/* SPDX-License-Identifier: MIT */
/*
 * The attached containers' records in the state directory, one JSON file
 * each, written atomically. A record that does not parse is removed: the
 * container is then served by the host worker until it is attached again.
 */
#include "containerstate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json-strict.h"
#include "fdio.h"
#include "log.h"
#include "macro.h"

#define RECORD_MAX 16384

static char *state_dir(const struct tierd *t) {
        char *p = NULL;
        return asprintf(&p, "%s/containers", t->state_dir) < 0 ? NULL : p;
}

void container_state_save(const struct container *c) {
        const struct tierd *t = c->tenant->t;
        _cleanup_free_ char *dir = state_dir(t), *path = NULL, *tmp = NULL;
        _cleanup_close_ int fd = -1;
        json_object *o = json_object_new_object();

        if (!dir || !o || asprintf(&path, "%s/%s.json", dir, c->id) < 0 || asprintf(&tmp, "%s.tmp", path) < 0) {
                path = tmp = NULL; /* asprintf leaves them undefined on failure */
                goto fail;
        }
        json_object_object_add(o, "id", json_object_new_string(c->id));
        json_object_object_add(o, "tenant", json_object_new_string(c->tenant->cfg->name));
        json_object_object_add(o, "pid", json_object_new_int64(c->pid));
        json_object_object_add(o, "start_time", json_object_new_uint64(c->start_time));
        json_object_object_add(o, "mntns_id", json_object_new_uint64(c->mntns_id));
        json_object_object_add(o, "view_mnt_id", json_object_new_uint64(c->view_mnt_id));
        json_object_object_add(o, "attached_usec", json_object_new_uint64(c->attached_usec));
        json_object_object_add(o, "rootfs", json_object_new_string(c->rootfs));
        json_object_object_add(o, "mount_path", json_object_new_string(c->mount_path));
        json_object_object_add(o, "k8s_namespace", json_object_new_string(c->k8s_namespace));
        json_object_object_add(o, "read_only", json_object_new_boolean(c->read_only));
        json_object_object_add(o, "idmapped", json_object_new_boolean(c->idmapped));
        if ((mkdir(t->state_dir, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST))
                goto fail;
        const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || fsync(fd) < 0 || rename(tmp, path) < 0) {
                if (fd >= 0)
                        unlink(tmp);
                goto fail;
        }
        if ((errno = -fsync_dir_of(path)) > 0)
                goto fail;
        json_object_put(o);
        return;
fail:
        log_error("container %s: cannot record it in %s (a restarted tierd will serve it by the host worker): %m",
                  c->id, t->state_dir);
        json_object_put(o);
}

void container_state_forget(struct tierd *t, const char *id) {
        _cleanup_free_ char *dir = state_dir(t), *path = NULL;
        if (dir && asprintf(&path, "%s/%s.json", dir, id) < 0)
                path = NULL;
        else if (path && unlink(path) < 0 && errno != ENOENT)
                log_error("container %s: cannot remove its record %s: %m", id, path);
}

static const char *get_str(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
                       ? json_object_get_string(v) : NULL;
}

static bool get_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return false;
        *ret = json_object_get_uint64(v);
        return true;
}

static bool get_bool(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) &&
               json_object_get_boolean(v);
}

static int adopt_one(struct tierd *t, int dir_fd, const char *name) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *why = NULL, *dup = NULL;
        _cleanup_json_ json_object *o = NULL;
        char text[RECORD_MAX];
        ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text));
        struct container_record rec = {};
        uint64_t pid = 0;

        if (n <= 0 || n == (ssize_t)sizeof(text) || json_parse_strict(text, (size_t)n, &o, &why, &dup) < 0 ||
            !json_object_is_type(o, json_type_object))
                return -EINVAL;
        struct container_request req = {
                .id = get_str(o, "id"), .tenant = get_str(o, "tenant"), .rootfs = get_str(o, "rootfs"),
                .mount_path = get_str(o, "mount_path"), .k8s_namespace = get_str(o, "k8s_namespace"),
                .read_only = get_bool(o, "read_only"),
        };
        if (!req.id || !req.tenant || !req.rootfs || !req.mount_path || !req.k8s_namespace || !get_u64(o, "pid", &pid) ||
            pid > INT32_MAX || !get_u64(o, "start_time", &rec.start_time) || !get_u64(o, "mntns_id", &rec.mntns_id) ||
            !get_u64(o, "view_mnt_id", &rec.view_mnt_id) || !get_u64(o, "attached_usec", &rec.attached_usec))
                return -EINVAL;
        rec.idmapped = get_bool(o, "idmapped");
        req.pid = (pid_t)pid;
        return container_adopt(t, &req, &rec);
}

void containers_adopt(struct tierd *t) {
        _cleanup_free_ char *dir = state_dir(t);
        int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        _cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

        if (!d) {
                safe_close(fd);
                return; /* none recorded */
        }
        for (struct dirent *de; (de = readdir(d));) {
                size_t len = strlen(de->d_name);
                if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
                        continue;
                if (adopt_one(t, dirfd(d), de->d_name) < 0 && unlinkat(dirfd(d), de->d_name, 0) < 0)
                        log_error("cannot remove the stale container record %s/%s: %m", dir, de->d_name);
        }
}
