/* SPDX-License-Identifier: MIT */
#include "loopnice.h"

#include <errno.h>
#include <sys/resource.h>

#include "log.h"

void loop_nice_raise(void) {
        /* setpriority(PRIO_PROCESS, 0) names the calling thread on Linux. */
        if (getpriority(PRIO_PROCESS, 0) > LOOP_NICE && setpriority(PRIO_PROCESS, 0, LOOP_NICE) < 0)
                log_warning_errno(errno, "cannot raise the event loop's priority to nice %d (start tierd with "
                                  "Nice=%d, or give it CAP_SYS_NICE): %m", LOOP_NICE, LOOP_NICE);
}

void loop_nice_leave(void) {
        if (getpriority(PRIO_PROCESS, 0) < 0)
                (void)setpriority(PRIO_PROCESS, 0, 0);
}
