/* SPDX-License-Identifier: MIT */
/*
 * FileStatusFds: the status of files a caller passes open, for anyone.
 */
#pragma once

#include <systemd/sd-bus.h>

/* Answered once a thread read the files' stubs (later: the call waits). */
int status_bus_method_file_status_fds(sd_bus_message *m, void *userdata, sd_bus_error *error);
/* The bus is closing: calls waiting for a thread are told ShuttingDown. */
void status_bus_close(void);
