/* SPDX-License-Identifier: MIT */
/*
 * Calls org.tierd1.Manager.GetTenant with a name of SIZE bytes (more than
 * argv can carry to busctl) and prints the D-Bus error name, or "ok".
 *   bus-big-arg SIZE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

int main(int argc, char **argv) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
        char *name = malloc(size + 1);

        if (!name || sd_bus_open_system(&bus) < 0)
                return 2;
        memset(name, 'x', size);
        name[size] = 0;
        if (sd_bus_call_method(bus, "org.tierd1", "/org/tierd1", "org.tierd1.Manager", "GetTenant", &error, &reply, "s",
                               name) < 0)
                printf("%s\n", error.name ? error.name : "?");
        else
                printf("ok\n");
        sd_bus_error_free(&error);
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        free(name);
        return 0;
}
