/* SPDX-License-Identifier: MIT */
/*
 * Layout: a header page, then fixed slots indexed by fd number. A slot's
 * state word is written last and cleared first, so a tierd killed in the
 * middle leaves either a whole record or none. Plain stores to a shared
 * mapping: recording costs no system call beyond the handle lookup.
 */
#include "inflight.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fanevent.h"
#include "log.h"
#include "macro.h"

#define INFLIGHT_MAGIC "TIERDJ1"
#define INFLIGHT_HEADER 4096
#define SLOT_EVENT 0x45564e54u /* "EVNT" */

struct inflight_header {
        char magic[8];
        uint32_t slot_size;
        uint32_t reading;
        uint64_t n_slots;
        uint64_t high; /* above every number ever recorded */
        /* While reading: the group read and the fd numbers its events get. */
        uint64_t reading_fsid;
        uint32_t n_candidates;
        int32_t candidates[INFLIGHT_MAX_CANDIDATES];
};

struct inflight_slot {
        uint32_t state;
        uint32_t mask;
        int32_t pid;
        uint32_t has_range;
        uint32_t handle_bytes;
        int32_t handle_type;
        uint64_t fsid;
        uint64_t offset, count;
        unsigned char handle[MAX_HANDLE_SZ];
};

struct inflight {
        size_t size;
        struct inflight_header *hdr;
        struct inflight_slot *slots;
};

static size_t inflight_size(uint64_t n_slots) { return INFLIGHT_HEADER + n_slots * sizeof(struct inflight_slot); }

static bool header_valid(const struct inflight_header *h, size_t file_size) {
        return memcmp(h->magic, INFLIGHT_MAGIC, 8) == 0 && h->slot_size == sizeof(struct inflight_slot) &&
               h->n_slots <= (1u << 24) && inflight_size(h->n_slots) <= file_size;
}

int inflight_open(int fd, unsigned nofile, struct inflight **ret) {
        _cleanup_free_ struct inflight *j = calloc(1, sizeof(*j));
        struct inflight_header hdr = {};
        struct stat st;
        uint64_t n_slots = nofile;

        if (!j)
                return -ENOMEM;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size > 0) {
                /* A predecessor's record: keep its slots, grow if we may
                 * use higher fd numbers. */
                if (pread(fd, &hdr, sizeof(hdr), 0) != sizeof(hdr) || !header_valid(&hdr, (size_t)st.st_size))
                        return log_error_errno(EBADMSG, "the in-flight record handed over is not tierd's: %m");
                n_slots = MAX(n_slots, hdr.n_slots);
        }
        j->size = inflight_size(n_slots);
        /* Sparse: only slots in use take memory. */
        if ((uint64_t)st.st_size < j->size && ftruncate(fd, (off_t)j->size) < 0)
                return log_error_errno(errno, "sizing the in-flight record: %m");
        j->hdr = mmap(NULL, j->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (j->hdr == MAP_FAILED)
                return log_error_errno(errno, "mapping the in-flight record: %m");
        j->slots = (struct inflight_slot *)((char *)j->hdr + INFLIGHT_HEADER);
        if (st.st_size == 0) {
                memcpy(j->hdr->magic, INFLIGHT_MAGIC, 8);
                j->hdr->slot_size = sizeof(struct inflight_slot);
        }
        j->hdr->n_slots = n_slots;
        *ret = j;
        j = NULL;
        return 0;
}

void inflight_free(struct inflight *j) {
        if (!j)
                return;
        munmap(j->hdr, j->size);
        free(j);
}

unsigned inflight_slots(const struct inflight *j) { return (unsigned)j->hdr->n_slots; }
unsigned inflight_high(const struct inflight *j) { return (unsigned)MIN(j->hdr->high, j->hdr->n_slots); }

void inflight_reading(struct inflight *j, uint64_t fsid, const int *candidates, unsigned n) {
        j->hdr->reading_fsid = fsid;
        j->hdr->n_candidates = MIN(n, (unsigned)INFLIGHT_MAX_CANDIDATES);
        for (unsigned i = 0; i < j->hdr->n_candidates; i++)
                j->hdr->candidates[i] = candidates[i];
        __atomic_store_n(&j->hdr->reading, 1u, __ATOMIC_RELEASE);
}

void inflight_reading_done(struct inflight *j) { __atomic_store_n(&j->hdr->reading, 0u, __ATOMIC_RELEASE); }

unsigned inflight_was_reading(const struct inflight *j, uint64_t *fsid, int *candidates) {
        if (!j->hdr->reading)
                return 0;
        unsigned n = MIN(j->hdr->n_candidates, (uint32_t)INFLIGHT_MAX_CANDIDATES);
        *fsid = j->hdr->reading_fsid;
        for (unsigned i = 0; i < n; i++)
                candidates[i] = j->hdr->candidates[i];
        return n;
}

static void record(struct inflight *j, int number, int file_fd, uint64_t fsid, uint32_t mask, int32_t pid,
                   bool has_range, uint64_t offset, uint64_t count) {
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } h;
        struct inflight_slot *s;
        int mount_id;

        if (number < 0 || (uint64_t)number >= j->hdr->n_slots)
                return;
        s = &j->slots[number];
        __atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
        h.fh.handle_bytes = MAX_HANDLE_SZ;
        if (name_to_handle_at(file_fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0) {
                log_warning("event fd %d: no file handle (%m): a tierd restart before it is answered answers it EIO",
                            number);
                h.fh.handle_bytes = 0;
                h.fh.handle_type = 0;
        }
        s->mask = mask;
        s->pid = pid;
        s->has_range = has_range;
        s->offset = offset;
        s->count = count;
        s->fsid = fsid;
        s->handle_bytes = h.fh.handle_bytes;
        s->handle_type = h.fh.handle_type;
        memcpy(s->handle, h.fh.f_handle, h.fh.handle_bytes);
        /* high first: a valid slot is always below it. */
        if ((uint64_t)number >= j->hdr->high)
                __atomic_store_n(&j->hdr->high, (uint64_t)number + 1, __ATOMIC_RELEASE);
        __atomic_store_n(&s->state, SLOT_EVENT, __ATOMIC_RELEASE);
}

void inflight_record(struct inflight *j, uint64_t fsid, const struct fanotify_event_metadata *md) {
        uint64_t offset = 0, count = 0;
        bool has_range = fanotify_event_range(md, &offset, &count);
        record(j, md->fd, md->fd, fsid, (uint32_t)md->mask, md->pid, has_range, offset, count);
}

void inflight_record_unknown(struct inflight *j, int number, int file_fd, uint64_t fsid) {
        record(j, number, file_fd, fsid, FAN_PRE_ACCESS, 0, false, 0, 0);
}

void inflight_forget(struct inflight *j, int event_fd) {
        if (event_fd >= 0 && (uint64_t)event_fd < j->hdr->n_slots)
                __atomic_store_n(&j->slots[event_fd].state, 0, __ATOMIC_RELEASE);
}

bool inflight_get(const struct inflight *j, int number, struct inflight_event *out) {
        const struct inflight_slot *s;

        if (number < 0 || (uint64_t)number >= j->hdr->n_slots)
                return false;
        s = &j->slots[number];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != SLOT_EVENT)
                return false;
        *out = (struct inflight_event){ .fsid = s->fsid, .mask = s->mask, .pid = s->pid, .has_range = s->has_range,
                                       .offset = s->offset, .count = s->count };
        out->h.fh.handle_bytes = MIN(s->handle_bytes, (uint32_t)MAX_HANDLE_SZ);
        out->h.fh.handle_type = s->handle_type;
        memcpy(out->h.fh.f_handle, s->handle, out->h.fh.handle_bytes);
        return true;
}
