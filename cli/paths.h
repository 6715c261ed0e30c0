/* SPDX-License-Identifier: MIT */
/* The paths a file verb acts on (cli/paths.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct path_list {
        char **v;
        size_t n, cap;
};

/* A verb's own option without argument: --NAME sets *set. */
struct verb_flag {
        const char *name;
        bool *set;
};

/* PATH... with -r, --files-from FILE, -0 and the verb's flags into ret:
 * EXIT_OK, or an exit code (said on stderr). */
int paths_from_args(const char *verb, int argc, char **argv, const struct verb_flag *flags, size_t n_flags,
                    struct path_list *ret);
void paths_free(struct path_list *l);
/* A verb's flags (getopt_long, anywhere among its operands; "--" ends
 * them) and exactly n_operands operands, moved to argv[0..]: EXIT_OK, or
 * EXIT_USAGE said on stderr with the verb's usage line. */
int verb_flags(const char *verb, const char *usage, int argc, char **argv, const struct verb_flag *flags,
               size_t n_flags, int n_operands);
/* getopt_long returned c ('?' or ':') parsing argv0 (argv0[0]: the
 * verb): says what is wrong; EXIT_USAGE. */
int option_error(const char *verb, char **argv0, int c);
