/* SPDX-License-Identifier: MIT */
/*
 * The paths a file verb acts on (archive, release, restore, pin, unpin,
 * status): its PATH arguments and the options every one of them takes,
 * parsed with getopt_long ("--" ends them):
 *   -r, --recursive    a directory stands for every regular file beneath it
 *                      (on its filesystem; no symbolic link followed)
 *   --files-from FILE  more paths from FILE ("-": stdin), one per line
 *   -0, --null         ... separated by NUL bytes instead (find -print0,
 *                      tierctl find -0)
 * and the verb's own flags (archive --rehash, status --json).
 */
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "tierctl.h"
#include "treewalk.h"

#define MAX_DEPTH 4096
#define MAX_FLAGS 4
#define FLAG_BASE 0x200 /* getopt_long's value for the verb's own flags */

static int push(struct path_list *l, const char *path) {
        char **v = array_room(l->v, l->n, &l->cap, sizeof(*v), 64);
        if (!v)
                return -ENOMEM;
        l->v = v;
        if (!(l->v[l->n] = strdup(path)))
                return -ENOMEM;
        l->n++;
        return 0;
}

void paths_free(struct path_list *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i]);
        free(l->v);
        *l = (struct path_list){};
}

static int on_file(void *userdata, const char *path, const struct stat *st) {
        return S_ISREG(st->st_mode) ? push(userdata, path) : 0;
}

static void on_walk_error(void *userdata, const char *path, int error) {
        (void)userdata;
        fprintf(stderr, "tierctl: %s: %s (left out)\n", path, strerror(-error));
}

/* A directory's regular files, or the path itself (the verb says what is
 * wrong with it if it is neither). */
static int add_path(struct path_list *l, const char *path, bool recursive) {
        /* The directory itself may not be a symbolic link (nor, then, be
         * walked): the verb says so of the path. */
        int fd = recursive ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
        if (fd < 0)
                return push(l, path);
        unsigned long deeper = 0;
        int r = treewalk_paths(fd, path, MAX_DEPTH, on_file, on_walk_error, l, &deeper);
        if (deeper)
                fprintf(stderr, "tierctl: %s: %lu directories deeper than %d left out\n", path, deeper, MAX_DEPTH);
        return r == -ENOMEM ? r : 0;
}

static int add_files_from(struct path_list *l, const char *file, char sep, bool recursive) {
        FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "re");
        char *line = NULL;
        size_t size = 0;
        ssize_t n;
        int r = 0;

        if (!f) {
                fprintf(stderr, "tierctl: --files-from %s: %s\n", file, strerror(errno));
                return -errno;
        }
        while (r >= 0 && (n = getdelim(&line, &size, sep, f)) > 0) {
                if (line[n - 1] == sep)
                        line[--n] = '\0';
                if (n > 0)
                        r = add_path(l, line, recursive);
        }
        if (r >= 0 && ferror(f)) {
                fprintf(stderr, "tierctl: --files-from %s: %s\n", file, strerror(errno));
                r = -EIO;
        }
        free(line);
        if (f != stdin)
                fclose(f);
        return r;
}

int option_error(const char *verb, char **argv0, int c) {
        /* An unknown short option is optopt; a long one, or one missing its
         * value, the word getopt_long just passed. */
        const char *word = argv0[optind - 1];
        bool long_with_value = strncmp(word, "--", 2) == 0 && strchr(word, '=');
        if (c == '?' && optopt && long_with_value) /* --flag=VALUE: optopt is the flag's own value */
                fprintf(stderr, "tierctl: %s: option '%s' takes no value (tierctl %s --help)\n", verb, word, verb);
        else if (c == '?' && optopt)
                fprintf(stderr, "tierctl: %s: unknown option '-%c' (tierctl %s --help)\n", verb, optopt, verb);
        else
                fprintf(stderr, "tierctl: %s: %s option '%s' (tierctl %s --help)\n", verb,
                        c == ':' ? "a value is missing for the" : "unknown", word, verb);
        return EXIT_USAGE;
}

/* The three options of the verbs that take paths. */
struct path_options {
        const char *files_from;
        bool recursive, null;
};

static void on_path_option(void *userdata, int c) {
        struct path_options *o = userdata;
        if (c == 'r')
                o->recursive = true;
        else if (c == '0')
                o->null = true;
        else if (c == 'F')
                o->files_from = optarg;
}

/* getopt_long over a verb's argv: `own` (n_own options, `shortopts`) go
 * to on_option, each of `flags` sets its bool. getopt_long wants argv[0]:
 * the verb's, before argv. Options may stand anywhere among the operands
 * (argv is permuted, operands last, from the index returned); "--" ends
 * them, for a file named like one. A wrong option is said: -EXIT_USAGE. */
static int parse_options(const char *verb, int argc, char **argv, const char *shortopts, const struct option *own,
                         size_t n_own, const struct verb_flag *flags, size_t n_flags,
                         void (*on_option)(void *userdata, int c), void *userdata) {
        struct option options[3 + MAX_FLAGS + 1] = {};
        size_t n = 0;
        int c;

        for (size_t i = 0; i < n_own && i < 3; i++)
                options[n++] = own[i];
        for (size_t i = 0; i < n_flags && i < MAX_FLAGS; i++)
                options[n++] = (struct option){ flags[i].name, no_argument, NULL, FLAG_BASE + (int)i };
        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc + 1, argv - 1, shortopts, options, NULL)) != -1) {
                if (c >= FLAG_BASE && c < FLAG_BASE + MAX_FLAGS)
                        *flags[c - FLAG_BASE].set = true;
                else if (c != '?' && c != ':' && on_option)
                        on_option(userdata, c);
                else
                        return -option_error(verb, argv - 1, c);
        }
        return optind - 1;
}

int paths_from_args(const char *verb, int argc, char **argv, const struct verb_flag *flags, size_t n_flags,
                    struct path_list *ret) {
        static const struct option own[] = {
                { "recursive", no_argument, NULL, 'r' },
                { "files-from", required_argument, NULL, 'F' },
                { "null", no_argument, NULL, '0' },
        };
        struct path_options o = {};
        int first, r = 0;

        *ret = (struct path_list){};
        first = parse_options(verb, argc, argv, ":r0", own, ARRAY_SIZE(own), flags, n_flags, on_path_option, &o);
        if (first < 0)
                return -first;
        for (int i = first; r >= 0 && i < argc; i++)
                r = add_path(ret, argv[i], o.recursive);
        if (r >= 0 && o.files_from)
                r = add_files_from(ret, o.files_from, o.null ? '\0' : '\n', o.recursive);
        if (r < 0) {
                if (r == -ENOMEM)
                        fprintf(stderr, "tierctl: %s: out of memory\n", verb);
                paths_free(ret);
                return EXIT_FAILED;
        }
        return EXIT_OK;
}

int verb_flags(const char *verb, const char *usage, int argc, char **argv, const struct verb_flag *flags,
               size_t n_flags, int n_operands) {
        int first = parse_options(verb, argc, argv, ":", NULL, 0, flags, n_flags, NULL, NULL);

        if (first < 0)
                return -first;
        if (argc - first != n_operands) {
                fprintf(stderr, "tierctl: usage: tierctl %s\n", usage);
                return EXIT_USAGE;
        }
        memmove(argv, argv + first, sizeof(char *) * (size_t)n_operands);
        return EXIT_OK;
}
