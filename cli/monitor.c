/* SPDX-License-Identifier: MIT */
/* tierctl monitor: tierd's signals as they arrive, one block each. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "tierctl.h"

static int on_signal(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        char when[32];
        time_t now = time(NULL);
        (void)userdata;
        (void)error;
        strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
        printf("%s %s %s.%s\n", when, sd_bus_message_get_path(m), sd_bus_message_get_interface(m),
               sd_bus_message_get_member(m));
        sd_bus_message_dump(m, stdout, 0);
        fflush(stdout);
        return 0;
}

int verb_monitor(sd_bus *bus, int argc, char **argv) {
        (void)argv;
        if (argc > 0)
                return verb_no_args("monitor", argc);
        int r = sd_bus_match_signal(bus, NULL, BUS_NAME, NULL, NULL, NULL, on_signal, NULL);
        if (r < 0)
                return call_failed("AddMatch", NULL, r);
        /* Subscribed before anything is printed: a caller waiting for
         * this line misses no signal. */
        printf("monitoring %s (Ctrl-C to stop)\n", BUS_NAME);
        fflush(stdout);
        for (;;) {
                r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return call_failed("reading the bus", NULL, r);
                if (r > 0)
                        continue;
                r = sd_bus_wait(bus, UINT64_MAX);
                if (r < 0 && r != -EINTR)
                        return call_failed("waiting on the bus", NULL, r);
        }
}
