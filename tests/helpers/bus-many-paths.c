/* SPDX-License-Identifier: MIT */
/*
 * Calls org.tierd1.Manager.FileStatus with N paths PREFIX0, PREFIX1, ...
 * (more than argv can carry to busctl) and prints the number of entries
 * answered, or the D-Bus error name.
 *   bus-many-paths N PREFIX
 */
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-bus.h>

static int append_paths(sd_bus_message *m, unsigned long n, const char *prefix) {
        int r = sd_bus_message_open_container(m, 'a', "s");
        for (unsigned long i = 0; r >= 0 && i < n; i++) {
                char path[4096];
                snprintf(path, sizeof(path), "%s%lu", prefix, i);
                r = sd_bus_message_append_basic(m, 's', path);
        }
        return r < 0 ? r : sd_bus_message_close_container(m);
}

int main(int argc, char **argv) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *call = NULL, *reply = NULL;
        sd_bus *bus = NULL;
        unsigned long n = argc > 2 ? strtoul(argv[1], NULL, 10) : 0;
        int r;

        if (argc != 3 || sd_bus_open_system(&bus) < 0 ||
            sd_bus_message_new_method_call(bus, &call, "org.tierd1", "/org/tierd1", "org.tierd1.Manager",
                                           "FileStatus") < 0 ||
            append_paths(call, n, argv[2]) < 0)
                return 2;
        if (sd_bus_call(bus, call, 120 * 1000000ULL, &error, &reply) < 0)
                printf("%s\n", error.name ? error.name : "?");
        else if ((r = sd_bus_message_enter_container(reply, 'a', "(ssssttb)")) >= 0) {
                unsigned long got = 0;
                while (sd_bus_message_skip(reply, "(ssssttb)") > 0)
                        got++;
                printf("%lu\n", got);
        } else
                printf("bad reply\n");
        sd_bus_error_free(&error);
        sd_bus_message_unref(call);
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        return 0;
}
