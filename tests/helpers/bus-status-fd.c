/* SPDX-License-Identifier: MIT */
/*
 * Calls org.tierd1.Manager.FileStatusFds with FILE opened O_PATH, once,
 * without asking again (busctl cannot pass an fd; tierctl status retries
 * TryAgain), and prints the file's state, or the D-Bus error name.
 *   bus-status-fd FILE
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

int main(int argc, char **argv) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *name, *msg, *tenant, *state = "?";
        uint64_t size, resident;
        int pinned, r;
        sd_bus *bus = NULL;
        int fd = argc > 1 ? open(argv[1], O_PATH | O_CLOEXEC) : -1;

        if (fd < 0 || sd_bus_open_system(&bus) < 0)
                return 2;
        r = sd_bus_call_method(bus, "org.tierd1", "/org/tierd1", "org.tierd1.Manager", "FileStatusFds", &error, &reply,
                               "ah", 1, fd);
        if (r < 0)
                printf("%s\n", error.name ? error.name : "?");
        else if (sd_bus_message_read(reply, "a(ssssttb)", 1, &name, &msg, &tenant, &state, &size, &resident, &pinned) > 0)
                printf("%s\n", state);
        else
                printf("?\n");
        sd_bus_error_free(&error);
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        close(fd);
        return r < 0;
}
