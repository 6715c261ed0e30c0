/* SPDX-License-Identifier: MIT */
/*
 * The batch engine: one queue of batches, started from the event loop's
 * own turn (on_batches_turn), a bounded number of files at a time.
 */
#include "batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "face.h"
#include "log.h"
#include "utf8.h"

#define BATCH_FILES_RUNNING 16
#define BATCH_STARTS_PER_TURN 64 /* then the event loop serves readers again */
#define BATCH_TELL_EVERY_USEC (250 * 1000ull) /* progress is told at most this often */
#define BATCH_ERRORS_MAX 1000

/* A file in progress: owns its file_ref, and finds its batch by id when
 * done, so a batch may go (teardown) while files are still in progress. */
struct batch_item {
        struct tierd *t;
        uint32_t batch_id;
        uint32_t index;
        struct file_ref ref;
};

struct batch *batch_find(struct tierd *t, uint32_t id) {
        for (struct batch *b = t->batches; b; b = b->next)
                if (b->id == id)
                        return b;
        return NULL;
}

const char *batch_state(const struct batch *b) {
        return b->running > 0 || b->task ? "running" : "waiting";
}

uint64_t batch_total(const struct batch *b) {
        return b->task ? b->task_total : b->n;
}

uint64_t batch_done(const struct batch *b) {
        return b->task ? b->task_done : b->done;
}

/* Its face_data went with batch_removed: every batch is told before it
 * goes, and teardown ends the batches before the face closes. */
static void batch_free(struct batch *b) {
        for (size_t i = b->started; i < b->n; i++)
                file_ref_done(&b->refs[i]);
        free(b->refs);
        for (size_t i = 0; i < b->n_errors; i++)
                free(b->errors[i].message);
        free(b->errors);
        free(b);
}

/* Told when the state changed, else at most every BATCH_TELL_EVERY_USEC. */
static void batch_tell_progress(struct batch *b) {
        uint64_t now = tierd_now_usec(b->t);
        bool state_changed = (b->running > 0) != b->running_told;
        if (!state_changed && now - b->told_usec < BATCH_TELL_EVERY_USEC)
                return;
        b->running_told = b->running > 0;
        b->told_usec = now;
        FACE_TELL(b->t, batch_changed, b);
}

/* Every batch ends told: clients wait for it. result is given when tierd
 * stops under the batch ("aborted"). Still listed while the face hears. */
static void batch_tell_removed(struct batch *b, const char *result) {
        result = result ?: b->canceled ? "canceled" : b->failed ? "failed" : "done";
        FACE_TELL(b->t, batch_removed, b, result);
}

static void batch_record_error(struct batch *b, uint32_t index, int error, const char *message) {
        b->failed++;
        if (b->n_errors >= BATCH_ERRORS_MAX)
                return;
        struct batch_error *e = realloc(b->errors, (b->n_errors + 1) * sizeof(*e));
        if (!e)
                return;
        b->errors = e;
        /* Escaped again: a message cut at its buffer's end may end mid-character. */
        e[b->n_errors] = (struct batch_error){ .index = index, .error = error,
                                               .message = utf8_escape(message ?: strerror(-error)) };
        if (e[b->n_errors].message)
                b->n_errors++;
}

/* Called from deep inside other modules (a worker's reply, a fill's end):
 * records, and leaves starting more to the event loop. */
static void batch_item_done(void *userdata, int error, const char *message) {
        struct batch_item *it = userdata;
        struct tierd *t = it->t;
        struct batch *b = batch_find(t, it->batch_id);

        t->batch_files_running--;
        if (b) {
                b->running--;
                b->done++;
                if (error < 0)
                        batch_record_error(b, it->index, error, message);
        }
        file_ref_done(&it->ref);
        free(it);
        batch_run(t);
}

/* The job's fn, called at once, or after a thread walked the file's path
 * (file_job_when_cached): a file whose job was canceled meanwhile is not
 * started. */
static int batch_item_start(struct tierd *t, const struct file_ref *f, job_done_t done, void *userdata) {
        struct batch_item *it = userdata;
        struct batch *b = batch_find(t, it->batch_id);

        if (!b || b->canceled) {
                done(userdata, -ECANCELED, "canceled while its path was walked: not touched");
                return 0;
        }
        return b->fn(t, f, done, userdata);
}

static void batch_start_next(struct batch *b) {
        struct tierd *t = b->t;
        size_t i = b->started++;
        struct batch_item *it = calloc(1, sizeof(*it));

        if (!it) {
                b->done++;
                batch_record_error(b, (uint32_t)i, -ENOMEM, NULL);
                file_ref_done(&b->refs[i]);
                return;
        }
        *it = (struct batch_item){ .t = t, .batch_id = b->id, .index = (uint32_t)i, .ref = b->refs[i] };
        b->refs[i] = (struct file_ref){};
        b->running++;
        t->batch_files_running++;
        int r = file_job_when_cached(t, &it->ref, batch_item_start, batch_item_done, it);
        if (r < 0)
                batch_item_done(it, r, NULL);
}

static bool batch_over(const struct batch *b) {
        return b->task ? b->task_ended : b->running == 0 && (b->started == b->n || b->canceled);
}

bool batch_ends_told(const struct tierd *t) {
        for (const struct batch *b = t->batches; b; b = b->next)
                if (batch_over(b))
                        return false;
        return true;
}

/* From the event loop only: starts files in batch order while there is
 * room (at most BATCH_STARTS_PER_TURN, then readers' events get their
 * turn), and removes the batches that are over. */
static int on_batches_turn(sd_event_source *s, void *userdata) {
        struct tierd *t = userdata;
        unsigned starts = 0;
        bool more = false;
        (void)s;

        t->batches_pumping = true; /* a file done inside fn() must not re-arm us mid-walk */
        for (struct batch *b = t->batches; b; b = b->next)
                while (!b->canceled && b->started < b->n && t->batch_files_running < BATCH_FILES_RUNNING) {
                        if (starts++ == BATCH_STARTS_PER_TURN) {
                                more = true;
                                break;
                        }
                        batch_start_next(b);
                }
        t->batches_pumping = false;
        for (struct batch **p = &t->batches; *p;) {
                struct batch *b = *p;
                if (!batch_over(b)) {
                        batch_tell_progress(b);
                        p = &b->next;
                        continue;
                }
                log_info("job %u (%s): %zu files, %zu failed%s", b->id, b->operation, b->done, b->failed,
                         b->canceled ? ", canceled" : "");
                batch_tell_removed(b, NULL);
                *p = b->next;
                batch_free(b);
        }
        if (more)
                batch_run(t);
        tierd_check_idle(t);
        return 0;
}

void batch_run(struct tierd *t) {
        if (t->batches_pumping || !t->batches)
                return;
        int r = tierd_defer_once(t->event, &t->batches_src, on_batches_turn, t);
        if (r < 0)
                log_error_errno(r, "cannot schedule jobs: %m");
}

/* Appended (batches run in the order they were made), and told. */
static struct batch *batch_new(struct tierd *t, const char *operation, size_t n) {
        struct batch *b = calloc(1, sizeof(*b));
        if (!b || !(b->refs = calloc(n ?: 1, sizeof(struct file_ref)))) {
                free(b);
                return NULL;
        }
        b->t = t;
        b->id = ++t->last_batch_id ?: ++t->last_batch_id; /* 0 means none */
        b->operation = operation;
        b->n = n;
        struct batch **p = &t->batches;
        while (*p)
                p = &(*p)->next;
        *p = b;
        return b;
}

int batch_start_files(struct tierd *t, const char *operation, file_job_t fn, struct file_ref *refs, size_t n,
                      struct batch **ret) {
        struct batch *b = batch_new(t, operation, n);

        if (!b)
                return -ENOMEM;
        b->fn = fn;
        memcpy(b->refs, refs, n * sizeof(*refs));
        memset(refs, 0, n * sizeof(*refs));
        FACE_TELL(t, batch_added, b);
        *ret = b;
        return 0;
}

uint32_t batch_task_start(struct tierd *t, const char *operation, void (*cancel)(void *userdata), void *userdata) {
        struct batch *b = batch_new(t, operation, 0);
        if (!b)
                return 0; /* the task runs anyway, untracked */
        b->task = true;
        b->cancel = cancel;
        b->cancel_userdata = userdata;
        FACE_TELL(t, batch_added, b);
        return b->id;
}

void batch_task_progress(struct tierd *t, uint32_t id, const char *phase, uint64_t done, uint64_t total) {
        struct batch *b = batch_find(t, id);
        if (!b)
                return;
        bool new_phase = phase != b->phase;
        b->phase = phase;
        b->task_done = done;
        b->task_total = total;
        if (new_phase)
                b->told_usec = 0; /* a new phase is told at once */
        batch_tell_progress(b);
}

void batch_task_end(struct tierd *t, uint32_t id, int error, const char *message) {
        struct batch *b = batch_find(t, id);
        if (!b)
                return;
        b->task_ended = true;
        if (error == -ECANCELED)
                b->canceled = true;
        else if (error < 0)
                batch_record_error(b, 0, error, message);
        batch_run(t);
}

int batch_cancel(struct tierd *t, uint32_t id) {
        struct batch *b = batch_find(t, id);
        if (!b)
                return 0;
        if (b->task && !b->cancel)
                return -EOPNOTSUPP;
        b->canceled = true;
        if (b->task && !b->task_ended)
                b->cancel(b->cancel_userdata); /* it ends the batch, now or later */
        batch_run(t);
        return 1;
}

void batch_cancel_all(struct tierd *t) {
        for (struct batch *b = t->batches; b; b = b->next)
                b->canceled = true;
        batch_run(t);
}

void batch_abort_all(struct tierd *t) {
        while (t->batches) {
                struct batch *b = t->batches;
                log_info("job %u (%s): aborted after %zu of %zu files: tierd stops", b->id, b->operation, b->done, b->n);
                batch_tell_removed(b, "aborted");
                t->batches = b->next;
                batch_free(b);
        }
        t->batches_src = sd_event_source_unref(t->batches_src);
}
