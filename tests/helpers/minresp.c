/* minresp MOUNTPOINT: the least a pre-content responder can do, for the
 * benchmarks' baseline of what the kernel itself costs per first read: a
 * group like tierd's (same class, flags and mask, a filesystem mark), and
 * for each event an evictable ignore mark and "allow", nothing else.
 * Prints "ready" once marked; answers until killed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/fanotify.h>
#include <unistd.h>

#include "fanotify-uapi.h"

int main(int argc, char **argv) {
        char buf[4096] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
        int g;

        if (argc != 2) {
                fprintf(stderr, "usage: minresp MOUNTPOINT\n");
                return 2;
        }
        g = fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS | FAN_REPORT_TID |
                                  FAN_CLOEXEC | FAN_NONBLOCK,
                          O_RDONLY | O_LARGEFILE | O_CLOEXEC | O_NONBLOCK);
        if (g < 0 || fanotify_mark(g, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, TIERD_PRE_CONTENT_MASK, AT_FDCWD, argv[1]) < 0) {
                perror("minresp: fanotify");
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        for (;;) {
                struct pollfd p = { .fd = g, .events = POLLIN };
                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        return 1;
                ssize_t n;
                while ((n = read(g, buf, sizeof(buf))) > 0)
                        for (struct fanotify_event_metadata *md = (void *)buf; FAN_EVENT_OK(md, n);
                             md = FAN_EVENT_NEXT(md, n)) {
                                if (md->fd < 0)
                                        continue;
                                (void)fanotify_mark(g,
                                                    FAN_MARK_ADD | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY |
                                                            FAN_MARK_EVICTABLE,
                                                    TIERD_PRE_CONTENT_MASK, md->fd, NULL);
                                struct fanotify_response r = { .fd = md->fd, .response = FAN_ALLOW };
                                if (write(g, &r, sizeof(r)) != sizeof(r))
                                        perror("minresp: answer");
                                close(md->fd);
                        }
        }
}
