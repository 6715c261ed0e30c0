/* SPDX-License-Identifier: MIT */
#include "fanevent.h"

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
