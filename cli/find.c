/* SPDX-License-Identifier: MIT */
/*
 * tierctl find and tierctl du: what a tree holds, by state, read from each
 * file's stub record (security.tierd, lgetxattr) and lstat as tierctl walks
 * it (common/treewalk.c: directories opened, never a file, one filesystem,
 * no symbolic link followed). Nothing is asked of tierd, and anyone may run
 * them on what they may list.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "paths.h"
#include "size.h"
#include "stub.h"
#include "tierctl.h"
#include "treewalk.h"

#define MAX_DEPTH 4096

enum file_state { FILE_RESIDENT, FILE_ARCHIVED, FILE_PARTIAL, FILE_RELEASED, FILE_DIRTY, FILE_STATES };
/* As tierctl status names them; "resident": never archived. */
static const char *const state_names[] = { "resident", "archived", "partial", "released", "dirty" };

/* The file's state from its record, without opening it: -errno, or
 * -EBADMSG for a record that does not parse. */
static int file_state(const char *path) {
        static const enum file_state of_stub[] = { [STUB_ARCHIVED] = FILE_ARCHIVED, [STUB_PARTIAL] = FILE_PARTIAL,
                                                   [STUB_RELEASED] = FILE_RELEASED, [STUB_DIRTY] = FILE_DIRTY };
        char text[STUB_TEXT_MAX];
        struct stub s;
        const char *err;
        ssize_t n = lgetxattr(path, STUB_XATTR, text, sizeof(text));
        if (n < 0)
                return errno == ENODATA || errno == ENOTSUP ? FILE_RESIDENT : -errno;
        if (stub_parse(text, (size_t)n, &s, &err) < 0)
                return -EBADMSG;
        int state = s.state < _STUB_STATE_MAX ? (int)of_stub[s.state] : -EBADMSG;
        stub_done(&s);
        return state;
}

struct tally {
        uint64_t files, bytes, local;
};

struct walk_ctx {
        bool du, json, null, pinned_only;
        unsigned states; /* find: bit per state wanted, 0: any */
        int64_t larger, smaller;      /* sizes, -1: none */
        int64_t older, newer;         /* mtime bounds (seconds), INT64_MIN/MAX: none */
        struct tally by_state[FILE_STATES];
        unsigned failed;
};

static void report_match(struct walk_ctx *c, const char *path, int state, const struct stat *st, bool pinned) {
        if (!c->json) {
                fputs(path, stdout);
                putchar(c->null ? '\0' : '\n');
                return;
        }
        /* One object per line: a long listing streams. */
        _cleanup_(json_putp) json_object *o = json_object_new_object();
        json_object_object_add(o, "path", json_object_new_string(path));
        json_object_object_add(o, "state", json_object_new_string(state_names[state]));
        json_object_object_add(o, "size", json_object_new_uint64((uint64_t)st->st_size));
        json_object_object_add(o, "local", json_object_new_uint64((uint64_t)st->st_blocks * 512));
        json_object_object_add(o, "mtime", json_object_new_int64(st->st_mtim.tv_sec));
        json_object_object_add(o, "pinned", json_object_new_boolean(pinned));
        json_print(o);
}

static int visit(void *userdata, const char *path, const struct stat *st) {
        struct walk_ctx *c = userdata;
        if (!S_ISREG(st->st_mode))
                return 0;
        int state = file_state(path);
        if (state < 0) {
                fprintf(stderr, "tierctl: %s: %s\n", path,
                        state == -EBADMSG ? "its stub record does not parse" : strerror(-state));
                c->failed++;
                return 0;
        }
        if (c->du) {
                struct tally *t = &c->by_state[state];
                t->files++;
                t->bytes += (uint64_t)st->st_size;
                t->local += (uint64_t)st->st_blocks * 512;
                return 0;
        }
        bool pinned = lgetxattr(path, STUB_PIN_XATTR, NULL, 0) >= 0;
        if ((c->states && !(c->states & (1u << state))) || (c->larger >= 0 && st->st_size <= c->larger) ||
            (c->smaller >= 0 && st->st_size >= c->smaller) || st->st_mtim.tv_sec >= c->older ||
            st->st_mtim.tv_sec < c->newer || (c->pinned_only && !pinned))
                return 0;
        report_match(c, path, state, st, pinned);
        return 0;
}

static void on_walk_error(void *userdata, const char *path, int error) {
        struct walk_ctx *c = userdata;
        fprintf(stderr, "tierctl: %s: %s (left out)\n", path, strerror(-error));
        c->failed++;
}

/* A directory's files, or the file PATH names (a symbolic link is neither:
 * it is said, not followed). false: PATH itself could not be read. */
static bool walk_path(struct walk_ctx *c, const char *path) {
        struct stat st;
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), r;
        unsigned long deeper = 0;
        if (fd < 0 && (errno == ENOTDIR || errno == ELOOP) && lstat(path, &st) == 0) {
                if (!S_ISREG(st.st_mode)) {
                        fprintf(stderr, "tierctl: %s: not a directory or a regular file%s\n", path,
                                S_ISLNK(st.st_mode) ? " (a symbolic link: give the real path)" : "");
                        c->failed++;
                        return false;
                }
                visit(c, path, &st);
                return true;
        }
        if (fd < 0) {
                fprintf(stderr, "tierctl: %s: %s\n", path, strerror(errno));
                c->failed++;
                return false;
        }
        if ((r = treewalk_paths(fd, path, MAX_DEPTH, visit, on_walk_error, c, &deeper)) < 0) {
                fprintf(stderr, "tierctl: %s: %s\n", path, strerror(-r));
                c->failed++;
        }
        if (deeper)
                fprintf(stderr, "tierctl: %s: %lu directories deeper than %d left out\n", path, deeper, MAX_DEPTH);
        return true;
}

static void print_du(const struct walk_ctx *c, const char *path) {
        struct tally total = {};
        char h1[16], h2[16];
        for (int s = 0; s < FILE_STATES; s++) {
                total.files += c->by_state[s].files;
                total.bytes += c->by_state[s].bytes;
                total.local += c->by_state[s].local;
        }
        if (c->json) {
                _cleanup_(json_putp) json_object *o = json_object_new_object(), *states = json_object_new_object();
                for (int s = 0; s <= FILE_STATES; s++) {
                        const struct tally *t = s < FILE_STATES ? &c->by_state[s] : &total;
                        json_object *e = json_object_new_object();
                        json_object_object_add(e, "files", json_object_new_uint64(t->files));
                        json_object_object_add(e, "bytes", json_object_new_uint64(t->bytes));
                        json_object_object_add(e, "local_bytes", json_object_new_uint64(t->local));
                        json_object_object_add(s < FILE_STATES ? states : o, s < FILE_STATES ? state_names[s] : "total", e);
                }
                json_object_object_add(o, "path", json_object_new_string(path));
                json_object_object_add(o, "states", json_object_get(states));
                json_print(o);
                return;
        }
        printf("%s\n  %-9s %10s %8s %8s\n", path, "state", "files", "size", "local");
        for (int s = 0; s <= FILE_STATES; s++) {
                const struct tally *t = s < FILE_STATES ? &c->by_state[s] : &total;
                printf("  %-9s %10" PRIu64 " %8s %8s\n", s < FILE_STATES ? state_names[s] : "total", t->files,
                       human_size(t->bytes, h1), human_size(t->local, h2));
        }
}

/* "released,partial" into a bit per state. */
static int parse_states(const char *list, unsigned *ret) {
        _cleanup_free_ char *copy = strdup(list);
        char *save = NULL;
        *ret = 0;
        if (!copy)
                return -ENOMEM;
        for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                size_t s = 0;
                while (s < FILE_STATES && strcmp(w, state_names[s]) != 0)
                        s++;
                if (s == FILE_STATES)
                        return -EINVAL;
                *ret |= 1u << s;
        }
        return *ret ? 0 : -EINVAL;
}

/* One option of find's: 0, or -EINVAL said on stderr. */
static int find_option(struct walk_ctx *c, int opt, const char *arg) {
        uint64_t v;
        int64_t now = time(NULL);
        switch (opt) {
        case 's':
                if (parse_states(arg, &c->states) < 0)
                        goto bad;
                return 0;
        case 'L':
        case 'S':
                if (size_parse(arg, &v) < 0 || v > INT64_MAX)
                        goto bad;
                *(opt == 'L' ? &c->larger : &c->smaller) = (int64_t)v;
                return 0;
        case 'o':
        case 'n':
                if (duration_parse(arg, &v) < 0)
                        goto bad;
                *(opt == 'o' ? &c->older : &c->newer) = now - (int64_t)(v / 1000000);
                return 0;
        }
bad:
        fprintf(stderr, "tierctl: find: bad value '%s'%s\n", arg,
                opt == 's' ? " (states: resident, archived, partial, released, dirty, comma-separated)"
                : opt == 'o' || opt == 'n' ? " (a duration: 30m, 12h, 7d)"
                                           : " (a size: 4096, 512K, 1G)");
        return -EINVAL;
}

static int find_or_du(bool du, int argc, char **argv) {
        static const struct option find_options[] = {
                { "state", required_argument, NULL, 's' }, { "larger", required_argument, NULL, 'L' },
                { "smaller", required_argument, NULL, 'S' }, { "older", required_argument, NULL, 'o' },
                { "newer", required_argument, NULL, 'n' },   { "pinned", no_argument, NULL, 'p' },
                { "null", no_argument, NULL, '0' },          { "json", no_argument, NULL, 'j' },
                {},
        };
        static const struct option du_options[] = { { "json", no_argument, NULL, 'j' }, {} };
        struct walk_ctx c = { .du = du, .larger = -1, .smaller = -1, .older = INT64_MAX, .newer = INT64_MIN };
        const char *verb = du ? "du" : "find";
        int opt;

        optind = 0;
        opterr = 0;
        while ((opt = getopt_long(argc + 1, argv - 1, du ? ":" : ":0", du ? du_options : find_options, NULL)) != -1) {
                if (opt == '?' || opt == ':')
                        return option_error(verb, argv - 1, opt);
                if (opt == 'j')
                        c.json = true;
                else if (opt == '0')
                        c.null = true;
                else if (opt == 'p')
                        c.pinned_only = true;
                else if (find_option(&c, opt, optarg) < 0)
                        return EXIT_USAGE;
        }
        if (optind - 1 >= argc) {
                fprintf(stderr, "tierctl: %s needs at least one PATH\n", verb);
                return EXIT_USAGE;
        }
        for (int i = optind - 1; i < argc; i++) {
                memset(c.by_state, 0, sizeof(c.by_state));
                if (walk_path(&c, argv[i]) && du)
                        print_du(&c, argv[i]);
        }
        return fflush(stdout) == 0 && c.failed == 0 ? EXIT_OK : EXIT_FAILED;
}

int verb_find(sd_bus *bus, int argc, char **argv) {
        (void)bus;
        return find_or_du(false, argc, argv);
}

int verb_du(sd_bus *bus, int argc, char **argv) {
        (void)bus;
        return find_or_du(true, argc, argv);
}
