/*
 * Copyright (c) 2026 The btl/ofi authors.  All rights reserved.
 *
 * The order in which progress hands completions to the layer above, with
 * the progress thread running: btl_ofi_context.c itself, linked with
 * libopen-pal for its mutexes and classes, over a fake CQ.
 *
 * ob1 unpacks a non-contiguous message fragment by fragment, and Open MPI
 * 5.0.7's convertor gets the bytes wrong (or crashes in
 * opal_generic_simple_unpack) when a fragment that ends inside an element
 * of the datatype is followed by any other than the next one: a vector of
 * structs of 2 MiB on net arrived with wrong bytes when the progress thread
 * had read a fragment and, before it parked it, the application read the
 * next ones and delivered them first.  These tests stop the thread at exactly that
 * point (in the completion callback of what it read, which it runs without
 * the context lock) and let the application progress or poll the context
 * there; the layer above must still see the CQ's order.
 *
 * Also here, since it needs the same fakes: the stall watch calls the
 * module's on_stall hook (the rails' check of a silent rail 0).
 */

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "btl_ofi.h"

/* What the component's other files define for a real process. */
mca_btl_ofi_component_t mca_btl_ofi_component;

int mca_btl_ofi_endpoints_wake_waited(mca_btl_ofi_module_t *module, bool lone_only)
{
    (void) module;
    (void) lone_only;
    return 0; /* no peers here: the fake CQ completes everything */
}

/* no connected job ends here, and no peer leaves */
volatile int32_t mca_btl_ofi_jobs_ended = 0;
int32_t mca_btl_ofi_jobs_ended_seen = 0;
volatile int32_t mca_btl_ofi_peers_left = 0;
int32_t mca_btl_ofi_peers_left_seen = 0;

void mca_btl_ofi_peers_gone(void)
{
}

#define EVENTS   4
#define WAIT_SEC 10

/** One operation the fake CQ completes; calls the layer above (records its
 * place in the delivery order) unless it is one of our own. */
typedef struct {
    mca_btl_ofi_ctx_hdr_t ctx; /* first: libfabric's op_context */
    int id;
    bool calls_up;
} fake_op_t;

typedef void (*interleave_fn_t)(mca_btl_ofi_context_t *context);

static struct {
    struct fid_cq cq;
    struct fi_ops_cq ops;
    fake_op_t op[EVENTS];
    int queued, next_read; /* op[next_read..queued) are in the CQ */
    int delivered[EVENTS], ndelivered;
    int done_here; /* our own operations completed, by either thread */

    mca_btl_ofi_module_t module;
    mca_btl_ofi_context_t context;

    /* the handshake that lets the application in while the thread holds
     * what it read */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t app;
    bool thread_waiting, app_done;
    interleave_fn_t interleave;
    bool app_declines; /* the layer above cannot take messages yet */
} fake;

static ssize_t fake_read(struct fid_cq *cq, void *buf, size_t count)
{
    struct fi_cq_tagged_entry *entries = buf;
    ssize_t n = 0;

    (void) cq;
    pthread_mutex_lock(&fake.lock);
    while ((size_t) n < count && fake.next_read < fake.queued) {
        memset(entries + n, 0, sizeof(*entries));
        entries[n++].op_context = &fake.op[fake.next_read++].ctx;
    }
    pthread_mutex_unlock(&fake.lock);
    return n > 0 ? n : -FI_EAGAIN;
}

static ssize_t fake_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags)
{
    (void) cq;
    (void) buf;
    (void) flags;
    return -FI_EAGAIN;
}

static bool wait_for(bool *flag)
{
    struct timespec until;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_SEC;
    while (!*flag && 0 == rc) {
        rc = pthread_cond_timedwait(&fake.cond, &fake.lock, &until);
    }
    return *flag;
}

/* The application's side of the handshake: once the thread holds what it
 * read, progress or poll the context, then let the thread go on. */
static void *app_main(void *arg)
{
    (void) arg;
    pthread_mutex_lock(&fake.lock);
    if (wait_for(&fake.thread_waiting)) {
        pthread_mutex_unlock(&fake.lock);
        fake.interleave(&fake.context);
        pthread_mutex_lock(&fake.lock);
    }
    fake.app_done = true;
    pthread_cond_broadcast(&fake.cond);
    pthread_mutex_unlock(&fake.lock);
    return NULL;
}

static bool fake_complete(mca_btl_ofi_ctx_hdr_t *hdr, size_t len, int status, bool may_call_up)
{
    fake_op_t *op = (fake_op_t *) hdr;

    (void) len;
    (void) status;
    if (!may_call_up) {
        /* the progress thread: the first time, stop here for the
         * application */
        pthread_mutex_lock(&fake.lock);
        if (!fake.thread_waiting) {
            fake.thread_waiting = true;
            pthread_cond_broadcast(&fake.cond);
            (void) wait_for(&fake.app_done);
        }
        pthread_mutex_unlock(&fake.lock);
    }
    if (!op->calls_up) {
        pthread_mutex_lock(&fake.lock);
        ++fake.done_here;
        pthread_mutex_unlock(&fake.lock);
        return true;
    }
    if (!may_call_up || fake.app_declines) {
        return false; /* parked for the application */
    }
    fake.delivered[fake.ndelivered++] = op->id;
    return true;
}

static int setup(void **state)
{
    mca_btl_ofi_component_t *c = &mca_btl_ofi_component;

    (void) state;
    memset(&fake, 0, sizeof(fake));
    pthread_mutex_init(&fake.lock, NULL);
    pthread_cond_init(&fake.cond, NULL);
    fake.ops.size = sizeof(fake.ops);
    fake.ops.read = fake_read;
    fake.ops.readerr = fake_readerr;
    fake.cq.ops = &fake.ops;
    for (int i = 0; i < EVENTS; ++i) {
        fake.op[i].ctx.complete = fake_complete;
        fake.op[i].id = i;
        fake.op[i].calls_up = true;
    }

    fake.context.lock = 0;
    OBJ_CONSTRUCT(&fake.context.pending_sends, opal_list_t);
    OBJ_CONSTRUCT(&fake.context.unposted_recvs, opal_list_t);
    fake.context.cq = &fake.cq;
    fake.context.module = &fake.module;
    fake.context.deferred = calloc(MCA_BTL_OFI_DEFERRED_INITIAL, sizeof(mca_btl_ofi_event_t));
    fake.context.deferred_size = MCA_BTL_OFI_DEFERRED_INITIAL;
    fake.module.contexts = &fake.context;
    fake.module.num_contexts = 1;

    memset(c, 0, sizeof(*c));
    c->output = -1;
    c->num_cq_read = 1; /* the thread reads one completion at a time */
    c->progress_idle_us = 100;
    c->threaded = true;     /* the locks are real: our thread runs */
    c->app_threads = false; /* MPI_THREAD_SINGLE, where no deliverer flag is taken */
    c->modules[0] = &fake.module;
    c->module_count = 1;
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    mca_btl_ofi_progress_thread_stop();
    OBJ_DESTRUCT(&fake.context.unposted_recvs);
    OBJ_DESTRUCT(&fake.context.pending_sends);
    free(fake.context.deferred);
    pthread_cond_destroy(&fake.cond);
    pthread_mutex_destroy(&fake.lock);
    mca_btl_ofi_component.module_count = 0;
    return 0;
}

/* Queue every operation in the CQ, start the progress thread and the
 * application thread, and once the handshake is over progress as the
 * application does until everything that calls up was delivered. */
static void run(interleave_fn_t interleave, int expect_delivered)
{
    struct timespec start, now;

    fake.interleave = interleave;
    fake.queued = EVENTS;
    assert_int_equal(0, pthread_create(&fake.app, NULL, app_main, NULL));
    /* the thread comes with the first exposed registration */
    mca_btl_ofi_progress_thread_enable(
        &(mca_btl_ofi_progress_setup_t){ .look = mca_btl_ofi_contexts_look });
    mca_btl_ofi_progress_expose(1, true);
    assert_int_equal(0, pthread_join(fake.app, NULL));
    assert_true(fake.thread_waiting);

    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        (void) mca_btl_ofi_context_progress(&fake.context);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (fake.ndelivered < expect_delivered && now.tv_sec - start.tv_sec < WAIT_SEC);
    mca_btl_ofi_progress_thread_stop();
    mca_btl_ofi_progress_expose(-1, false);
}

static void app_progresses(mca_btl_ofi_context_t *context)
{
    (void) mca_btl_ofi_context_progress(context);
}

static void app_polls(mca_btl_ofi_context_t *context)
{
    /* a posting path making room (a send refused with EAGAIN) */
    mca_btl_ofi_context_poll(context);
}

/* The layer above got exactly EXPECT, in that order. */
static void assert_delivered(const int *expect, int n)
{
    assert_int_equal(n, fake.ndelivered);
    for (int i = 0; i < n; ++i) {
        assert_int_equal(expect[i], fake.delivered[i]);
    }
}

static const int in_cq_order[EVENTS] = { 0, 1, 2, 3 };

/* The application progresses the context while the thread holds the first
 * completion it read: what the application reads then must not reach the
 * layer above before it. */
static void test_progress_while_thread_holds(void **state)
{
    (void) state;
    run(app_progresses, EVENTS);
    assert_delivered(in_cq_order, EVENTS);
}

/* A posting path polls the context meanwhile: what it parks must not go
 * ahead of what the thread parks after it. */
static void test_poll_while_thread_holds(void **state)
{
    (void) state;
    run(app_polls, EVENTS);
    assert_delivered(in_cq_order, EVENTS);
}

/* Our own operations (receive buffers, atomics the target applies) are
 * completed by whichever thread read them, the progress thread too; only
 * the others wait for the application, still in CQ order. */
static void test_thread_runs_own_completions(void **state)
{
    static const int up[] = { 0, 3 };

    (void) state;
    fake.op[1].calls_up = false;
    fake.op[2].calls_up = false;
    run(app_progresses, 2);
    assert_delivered(up, 2);
    assert_int_equal(2, fake.done_here);
}

/* The application declines what calls up (recv_complete while the layer
 * above cannot take messages yet, in MPI_Init) and a posting path parks
 * more completions behind it meanwhile: what the application took back from
 * the ring and declined again must stay ahead of those, so that once the
 * layer above takes messages it gets the CQ's order. */
static void test_app_declines_then_takes(void **state)
{
    (void) state;
    mca_btl_ofi_component.num_cq_read = 2;
    fake.app_declines = true;
    fake.queued = EVENTS;
    (void) mca_btl_ofi_context_progress(&fake.context); /* reads 0 and 1, parks them */
    mca_btl_ofi_context_poll(&fake.context);            /* parks 2 and 3 behind them */
    (void) mca_btl_ofi_context_progress(&fake.context); /* takes 0 and 1: declined again */
    assert_int_equal(0, fake.ndelivered);
    assert_int_equal(EVENTS, fake.context.deferred_count);

    fake.app_declines = false;
    for (int pass = 0; pass < EVENTS && fake.ndelivered < EVENTS; ++pass) {
        (void) mca_btl_ofi_context_progress(&fake.context);
    }
    assert_delivered(in_cq_order, EVENTS);
}

static int stall_hook_calls;

static void count_stall_hook(mca_btl_ofi_module_t *module, int64_t now)
{
    (void) now;
    assert_ptr_equal(&fake.module, module);
    ++stall_hook_calls;
}

/* Progress for about @p ms with nothing in the CQ: the stall watch's turn. */
static void progress_idle_for(int ms)
{
    struct timespec start, now;

    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        (void) mca_btl_ofi_progress_module(&fake.module);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

/* The lead with rails checks its silent rail 0 through module->on_stall
 * (btl_ofi_rdma.c): the stall watch must call it once wake-ups are due,
 * and only while operations are outstanding. */
static void test_stall_watch_calls_hook(void **state)
{
    (void) state;
    mca_btl_ofi_component.wake_after_us = 100; /* progress_wake_us as init scales it */
    fake.module.on_stall = count_stall_hook;
    stall_hook_calls = 0;

    progress_idle_for(5);
    assert_int_equal(0, stall_hook_calls); /* nothing outstanding */

    fake.context.outstanding = 1;
    (void) mca_btl_ofi_progress_module(&fake.module);
    assert_int_equal(0, stall_hook_calls); /* the stall has just begun */
    progress_idle_for(20);
    assert_true(stall_hook_calls > 0);

    fake.context.outstanding = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_progress_while_thread_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poll_while_thread_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thread_runs_own_completions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_app_declines_then_takes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stall_watch_calls_hook, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
