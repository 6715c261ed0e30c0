/* SPDX-License-Identifier: MIT */
#pragma once

/* Under systemd (stderr a journal stream), tierd's own log lines go to
 * the journal with fields (PRIORITY, TENANT, CONTAINER, OBJECT, PATH,
 * ERRNO); elsewhere nothing changes. Its workers' lines stay on the
 * stream, each with its priority. */
void journallog_start(void);
