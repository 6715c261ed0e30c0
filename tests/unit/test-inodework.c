/* What takes an inode lock, on a tenant's threads (supervisor/events/
 * inodework.c): a file's jobs one at a time and in order, done() on the
 * loop in order, and a reader's job never queued behind work no reader
 * waits for, even when all the threads that work may take are blocked. */
#include "unit.h"
#include <pthread.h>
#include <unistd.h>
#include "inodework.h"

struct job {
        struct inode_job j;
        int id;
        bool block;     /* work waits for the gate */
        bool started, ended;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int order[16], n_order, done_order[16], n_done;

static void work(struct inode_job *ij) {
        struct job *jb = (struct job *)ij;
        pthread_mutex_lock(&lock);
        jb->started = true;
        order[n_order++] = jb->id;
        pthread_cond_broadcast(&cond);
        while (jb->block && !gate_open)
                pthread_cond_wait(&cond, &lock);
        jb->ended = true;
        pthread_mutex_unlock(&lock);
}

static void done(struct inode_job *ij) { done_order[n_done++] = ((struct job *)ij)->id; }

static struct tierd t;
static struct policy_tenant cfg = { .name = "unit" };
static struct tenant tn = { .t = &t, .cfg = &cfg };

static int setup(void **state) {
        (void)state;
        gate_open = false;
        n_order = n_done = 0;
        assert_int_equal(sd_event_new(&t.event), 0);
        assert_int_equal(inode_work_open(&t), 0);
        tn.inode_lane = NULL;
        tn.inode_work_over = false;
        return 0;
}

static int teardown(void **state) {
        (void)state;
        inode_work_stop(&tn);
        inode_work_close(&t);
        t.event = sd_event_unref(t.event);
        return 0;
}

static void job_init(struct job *jb, int id, bool reader, bool block) {
        *jb = (struct job){ .j = { .reader = reader, .work = work, .done = done }, .id = id, .block = block };
}

/* Waits (5 s at most) for job jb to start. */
static bool started(struct job *jb) {
        for (int i = 0; i < 500; i++) {
                pthread_mutex_lock(&lock);
                bool s = jb->started;
                pthread_mutex_unlock(&lock);
                if (s)
                        return true;
                usleep(10000);
        }
        return false;
}

static void open_gate(void) {
        pthread_mutex_lock(&lock);
        gate_open = true;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
}

static void run_loop_until(int n) {
        for (int i = 0; i < 500 && n_done < n; i++)
                assert_true(sd_event_run(t.event, 10000) >= 0);
        assert_int_equal(n_done, n);
}

static void test_file_order(void **state) {
        (void)state;
        struct job a, b, c;
        job_init(&a, 1, false, true);
        job_init(&b, 2, true, false);
        job_init(&c, 3, false, false);
        inode_work_submit(&tn, &a.j, NULL);
        inode_work_submit(&tn, &b.j, &a.j);
        inode_work_submit(&tn, &c.j, &b.j);
        assert_true(started(&a));
        usleep(50000);
        pthread_mutex_lock(&lock);
        assert_false(b.started); /* a reader's, but after a of the same file */
        pthread_mutex_unlock(&lock);
        open_gate();
        run_loop_until(3);
        assert_int_equal(order[0], 1);
        assert_int_equal(order[1], 2);
        assert_int_equal(order[2], 3);
        assert_int_equal(done_order[0], 1);
        assert_int_equal(done_order[2], 3);
}

static void test_reader_first(void **state) {
        (void)state;
        struct job bg[INODE_THREADS], r;
        /* Background work of as many files as it may take threads, blocked,
         * and one more; then a reader's job, in the same turn. */
        for (int i = 0; i < INODE_THREADS; i++) {
                job_init(&bg[i], 10 + i, false, true);
                inode_work_submit(&tn, &bg[i].j, NULL);
        }
        job_init(&r, 1, true, false);
        inode_work_submit(&tn, &r.j, NULL);
        assert_true(started(&r));
        pthread_mutex_lock(&lock);
        assert_false(bg[INODE_THREADS - 1].started); /* its cap: all threads but one */
        pthread_mutex_unlock(&lock);
        open_gate();
        run_loop_until(INODE_THREADS + 1);
}

static void test_reader_after_one_background(void **state) {
        (void)state;
        struct job warm, bg, r;
        /* One thread, idle: a blocked job no reader waits for, then a
         * reader's, in the same turn: the reader's gets a thread of its own. */
        job_init(&warm, 1, false, false);
        inode_work_submit(&tn, &warm.j, NULL);
        run_loop_until(1);
        job_init(&bg, 2, false, true);
        job_init(&r, 3, true, false);
        inode_work_submit(&tn, &bg.j, NULL);
        inode_work_submit(&tn, &r.j, NULL);
        assert_true(started(&r));
        open_gate();
        run_loop_until(3);
}

static void test_promote(void **state) {
        (void)state;
        struct job bg[INODE_THREADS];
        /* The last background job waits for a place (its cap); a reader
         * comes to wait for it: it goes. */
        for (int i = 0; i < INODE_THREADS; i++) {
                job_init(&bg[i], 10 + i, false, i < INODE_THREADS - 1);
                inode_work_submit(&tn, &bg[i].j, NULL);
        }
        usleep(50000);
        pthread_mutex_lock(&lock);
        assert_false(bg[INODE_THREADS - 1].started);
        pthread_mutex_unlock(&lock);
        inode_work_promote(&tn, &bg[INODE_THREADS - 1].j);
        assert_true(started(&bg[INODE_THREADS - 1]));
        open_gate();
        run_loop_until(INODE_THREADS);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_file_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reader_first, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reader_after_one_background, setup, teardown),
                cmocka_unit_test_setup_teardown(test_promote, setup, teardown),
        };
        return UNIT_RUN("inodework", tests);
}
