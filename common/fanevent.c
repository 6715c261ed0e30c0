/* SPDX-License-Identifier: MIT */
#include "fanevent.h"

#include <errno.h>
#include <sys/ioctl.h>
#include <unistd.h>

bool fanotify_event_range(const struct fanotify_event_metadata *md, uint64_t *offset, uint64_t *count) {
        const char *p = (const char *)md + md->metadata_len, *end = (const char *)md + md->event_len;
        while (p + sizeof(struct fanotify_event_info_header) <= end) {
                const struct fanotify_event_info_header *h = (const void *)p;
                if (h->len < sizeof(*h) || p + h->len > end)
                        break;
                if (h->info_type == FAN_EVENT_INFO_TYPE_RANGE && h->len >= sizeof(struct fanotify_event_info_range)) {
                        const struct fanotify_event_info_range *r = (const void *)p;
                        *offset = r->offset;
                        *count = r->count;
                        return true;
                }
                p += h->len;
        }
        return false;
}

bool fanotify_answer_number(int group_fd, int number, uint32_t response) {
        struct fanotify_response resp = { .fd = number, .response = response };
        return group_fd >= 0 && write(group_fd, &resp, sizeof(resp)) == sizeof(resp);
}

size_t fanotify_queued(int group_fd) {
        int queued = 0;
        if (group_fd < 0 || ioctl(group_fd, FIONREAD, &queued) < 0 || queued <= 0)
                return 0;
        return (size_t)queued / FAN_EVENT_METADATA_LEN;
}

size_t fanotify_drain(int group_fd, void *buf, size_t len, size_t max, fanotify_handler *handle, void *userdata) {
        size_t done = 0;
        if (max == 0 && (max = fanotify_queued(group_fd)) == 0)
                return 0;
        while (done < max) {
                ssize_t n = read(group_fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                for (const struct fanotify_event_metadata *md = buf; FAN_EVENT_OK(md, n);
                     md = FAN_EVENT_NEXT(md, n), done++)
                        handle(md, userdata);
        }
        return done;
}
