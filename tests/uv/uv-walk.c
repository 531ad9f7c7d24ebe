/* libuv's shutdown idiom against the bridge: a walk that closes every handle not closing
 * (uv_walk with close_all) closes the bridge's three handles too, with the walker's callback.
 * In each order (walk then cuv_uv_close, cuv_uv_close then walk, a walk with no cuv_uv_close
 * until later) nothing aborts, every accepted submission's callback runs exactly once on the loop
 * thread with its own result (the kernel had finished: its value came back), close_cb runs once
 * and last, and uv_loop_close then returns 0: nothing of the bridge is left on the loop. The
 * bridge's memory is freed by then (CI's ASan pass: LeakSanitizer, and use after free). */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uvt.h"

#define SLOW_MS 100 /* long enough that the walk surely comes while the kernels run */
#define SLOW 4

/* The walker: closes whatever is not closing, with a callback that counts. */
typedef struct walker {
  cuv_uv_t *bridge;
  int closed;         /* handles it closed */
  int bridge_handles; /* ... of which the bridge's (their data is the bridge) */
  int close_calls;    /* its close callback ran */
  int bridge_closes;  /* ... for one of the bridge's */
} walker_t;

static walker_t *current_walker;

/* Reads the handle, as a walker's callback may: libuv calls it with the bridge's handle, whose
 * memory must still be the bridge's (under ASan, a read of freed memory otherwise). */
static void on_walked_closed(uv_handle_t *handle) {
  current_walker->close_calls++;
  if (handle->data == current_walker->bridge)
    current_walker->bridge_closes++;
}

static void close_all(uv_handle_t *handle, void *arg) {
  walker_t *w = arg;
  if (uv_is_closing(handle))
    return;
  w->closed++;
  if (handle->data == w->bridge)
    w->bridge_handles++;
  uv_close(handle, on_walked_closed);
}

static void walk(uvt_loop_t *l, walker_t *w) {
  *w = (walker_t){.bridge = l->bridge};
  current_walker = w;
  uv_walk(&l->loop, close_all, w);
}

/* SLOW slow kernels, each writing a random value it then downloads. */
typedef struct slow_work {
  uvt_call_t calls[SLOW];
  unsigned values[SLOW];
} slow_work_t;

static void submit_slow(uvt_loop_t *l, slow_work_t *s) {
  for (size_t i = 0; i < SLOW; i++) {
    s->values[i] = cuvt_random_u32() | 1u; /* never 0, the value a fresh buffer may hold */
    s->calls[i] = (uvt_call_t){.loop = l};
    cuv_buffer_t *buf = uvt_buffer(sizeof(unsigned));
    assert_cuv_ok(cuv_uv_submit(l->bridge, uvt_slow_write_then_read(SLOW_MS, s->values[i], buf),
                                uvt_done, &s->calls[i], NULL));
    cuv_buffer_unref(buf);
  }
}

/* Every callback ran once, on the loop thread, with its kernel's value, before close_cb. */
static void assert_delivered(uvt_loop_t *l, slow_work_t *s) {
  uvt_assert_all_ok(s->calls, SLOW);
  for (size_t i = 0; i < SLOW; i++) {
    assert_int_equal((unsigned)s->calls[i].payload, s->values[i]);
    assert_true(s->calls[i].seq < l->close_seq);
  }
  assert_int_equal(l->close_calls, 1);
  uvt_release_outputs(s->calls, SLOW);
}

/* ---- walk, then cuv_uv_close ---- */

/* The walk closes the bridge's handles while its work runs; cuv_uv_close afterwards closes none
 * of them again (libuv asserts on that) and still delivers the work in flight. */
static void test_walk_then_close(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  slow_work_t s;
  submit_slow(&l, &s);
  walker_t w;
  walk(&l, &w);
  assert_int_equal(w.bridge_handles, 3);
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  assert_int_equal(cuv_uv_close(l.bridge, uvt_on_close, &l), CUV_ECLOSED);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_delivered(&l, &s);
  assert_int_equal(w.close_calls, w.closed); /* the walker's callbacks ran, not the bridge's */
  assert_int_equal(w.bridge_closes, 3);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* The same from inside a timer callback of the running loop (a server's shutdown), with another
 * handle of the program's on the loop; nothing in flight: the close completes in a later
 * callback, never inside cuv_uv_close. */
typedef struct shutdown {
  uvt_loop_t *l;
  uv_timer_t timer;
  walker_t w;
  int close_rc;
  int close_calls_at_return;
} shutdown_t;

static void on_shutdown(uv_timer_t *timer) {
  shutdown_t *d = timer->data;
  walk(d->l, &d->w);
  d->close_rc = cuv_uv_close(d->l->bridge, uvt_on_close, d->l);
  d->close_calls_at_return = d->l->close_calls;
}

static void test_walk_then_close_inside_the_loop(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  shutdown_t d = {.l = &l};
  d.timer.data = &d;
  assert_int_equal(uv_timer_init(&l.loop, &d.timer), 0);
  assert_int_equal(uv_timer_start(&d.timer, on_shutdown, 1, 0), 0);
  uvt_call_t done = {.loop = &l};
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(5), uvt_done, &done, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&done, 1);
  assert_int_equal(done.payload, 5);
  assert_int_equal(d.w.closed, 4); /* the timer and the bridge's three */
  assert_int_equal(d.w.bridge_handles, 3);
  assert_int_equal(d.w.close_calls, 4);
  assert_int_equal(d.close_rc, 0);
  assert_int_equal(d.close_calls_at_return, 0);
  assert_int_equal(l.close_calls, 1);
  uvt_release_outputs(&done, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* ---- cuv_uv_close, then walk ---- */

/* The close has started and waits for the work in flight when the walk closes the handles it
 * was going to close itself. The loop still delivers every callback, and cannot be closed
 * under the bridge meanwhile (the close holds a request, which no walk closes). */
static void test_close_then_walk(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  slow_work_t s;
  submit_slow(&l, &s);
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  walker_t w;
  walk(&l, &w);
  assert_int_equal(w.bridge_handles, 3);
  uv_run(&l.loop, UV_RUN_NOWAIT); /* the walker's close callbacks run; the kernels still do */
  assert_int_equal(w.close_calls, 3);
  assert_int_equal(l.close_calls, 0);
  assert_int_equal(uv_loop_close(&l.loop), UV_EBUSY);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_delivered(&l, &s);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* Closed with nothing in flight, walked before the close could finish. */
static void test_close_then_walk_idle(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  walker_t w;
  walk(&l, &w);
  assert_int_equal(w.bridge_handles, 3);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(w.close_calls, 3);
  assert_int_equal(w.bridge_closes, 3);
  assert_int_equal(l.close_calls, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* The walk comes in the same batch of loop callbacks that ends the close: a threadpool request
 * of the program's, done just before the close's own (one pool thread: main sets
 * UV_THREADPOOL_SIZE=1), walks in its after_work callback; the close's request ends right after
 * and finds every handle of the bridge closed by the walker, and not yet finished by libuv (that
 * comes later in the same loop iteration). The bridge must not be freed before: it waits until
 * the loop no longer lists its handles (under ASan, a use after free otherwise). */
typedef struct batch {
  uvt_loop_t *l;
  uv_work_t work;
  walker_t w;
} batch_t;

static void do_nothing(uv_work_t *work) { (void)work; }

static void walk_after_work(uv_work_t *work, int status) {
  batch_t *b = work->data;
  assert_int_equal(status, 0);
  walk(b->l, &b->w);
}

static void test_walk_in_the_batch_that_ends_the_close(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  batch_t b = {.l = &l};
  b.work.data = &b;
  assert_int_equal(uv_queue_work(&l.loop, &b.work, do_nothing, walk_after_work), 0);
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  uv_sleep(50); /* both requests are done before the loop looks: one batch of after_work calls */
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(b.w.bridge_handles, 3);
  assert_int_equal(b.w.close_calls, 3);
  assert_int_equal(b.w.bridge_closes, 3);
  assert_int_equal(l.close_calls, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* ---- a walk, and no cuv_uv_close until later ---- */

/* The walk ends the bridge's delivery: uv_run returns once the walker's close callbacks ran,
 * with the kernels still running, and the bridge refuses new work, from the loop thread and from
 * others. The work in flight is not lost: cuv_uv_close, called later (it must be, before
 * uv_loop_close, as uv_close must be for a handle), delivers it with its results. */
typedef struct foreign {
  uvt_loop_t *l;
  uvt_call_t call;
  int rc;
} foreign_t;

static void foreign_submit(void *arg) {
  foreign_t *f = arg;
  f->rc = cuv_uv_submit(f->l->bridge, uvt_value(9), uvt_done, &f->call, NULL);
}

/* Runs a loop-thread cuv_uv_submit on the walked bridge with stderr sent to a file, and returns
 * what it printed (at most size - 1 bytes). */
static int submit_capturing_stderr(uvt_loop_t *l, uvt_call_t *call, char *text, size_t size) {
  FILE *capture = tmpfile();
  assert_non_null(capture);
  fflush(stderr);
  int saved = dup(fileno(stderr));
  assert_true(saved >= 0);
  assert_true(dup2(fileno(capture), fileno(stderr)) >= 0);
  int rc = cuv_uv_submit(l->bridge, uvt_value(1), uvt_done, call, NULL);
  fflush(stderr);
  assert_true(dup2(saved, fileno(stderr)) >= 0);
  close(saved);
  rewind(capture);
  size_t n = fread(text, 1, size - 1, capture);
  text[n] = '\0';
  fclose(capture);
  return rc;
}

/* The idiom without cuv_uv_close: uv_run returns with the work in flight (libuv gives the bridge
 * no hook to hold the loop: include/cuv/uv.h, Closing). The loop thread's next submission is
 * refused and reports it once, naming the fix; the fix then delivers everything. */
static void test_walk_without_close(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  slow_work_t s;
  submit_slow(&l, &s);
  walker_t w;
  walk(&l, &w);
  assert_int_equal(w.bridge_handles, 3);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(w.close_calls, 3);
  uvt_call_t late = {.loop = &l};
  char text[512];
  assert_int_equal(submit_capturing_stderr(&l, &late, text, sizeof text), CUV_ECLOSED);
  assert_non_null(strstr(text, "uv_walk"));
  assert_non_null(strstr(text, "cuv_uv_close"));
  assert_non_null(strchr(text, '\n'));
  assert_int_equal(strchr(text, '\n')[1], '\0'); /* one line */
  uvt_call_t later = {.loop = &l};
  assert_int_equal(submit_capturing_stderr(&l, &later, text, sizeof text), CUV_ECLOSED);
  assert_string_equal(text, ""); /* once per bridge */
  foreign_t f = {.l = &l, .call = {.loop = &l}};
  uv_thread_t thread;
  assert_int_equal(uv_thread_create(&thread, foreign_submit, &f), 0);
  assert_int_equal(uv_thread_join(&thread), 0);
  assert_int_equal(f.rc, CUV_ECLOSED);

  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_delivered(&l, &s);
  assert_int_equal(late.calls, 0);
  assert_int_equal(later.calls, 0);
  assert_int_equal(f.call.calls, 0);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* The usual end of a program: uv_run returned (nothing in flight), the walk and its uv_run, then
 * cuv_uv_close: its handles are long closed, and it completes in the next uv_run. */
static void test_walk_after_the_run(void **state) {
  (void)state;
  uvt_loop_t l;
  uvt_open(&l);
  uvt_call_t done = {.loop = &l};
  assert_cuv_ok(cuv_uv_submit(l.bridge, uvt_value(8), uvt_done, &done, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&done, 1);
  walker_t w;
  walk(&l, &w);
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(w.close_calls, 3);
  assert_cuv_ok(cuv_uv_close(l.bridge, uvt_on_close, &l));
  assert_int_equal(l.close_calls, 0); /* never from inside cuv_uv_close */
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(l.close_calls, 1);
  uvt_release_outputs(&done, 1);
  assert_int_equal(uv_loop_close(&l.loop), 0);
}

/* ---- the idiom to its end: walk, uv_run, exit, with no cuv_uv_close ---- */

/* The child: the bridge never comes back to the loop thread, so only the exit can report it. */
static int exit_walked(void) {
  static uvt_loop_t l;
  static slow_work_t s;
  static walker_t w;
  uvt_open(&l);
  submit_slow(&l, &s);
  walk(&l, &w);
  int rc = uv_run(&l.loop, UV_RUN_DEFAULT);
  if (rc != 0 || w.bridge_handles != 3 || cuv_uv_pending(l.bridge) == 0)
    return 1; /* the run must have returned with the work still in flight */
  return 0;
}

static const char *self_path;

static size_t count(const char *text, const char *word) {
  size_t n = 0;
  for (const char *at = text; (at = strstr(at, word)) != NULL; at++)
    n++;
  return n;
}

/* The child's exit reports the walked bridge, once, on stderr, and it exits normally. */
static void test_walk_and_exit_reports(void **state) {
  (void)state;
  char command[4096];
  assert_true((size_t)snprintf(command, sizeof command, "'%s' exit-walked 2>&1 >/dev/null",
                               self_path) < sizeof command);
  FILE *child = popen(command, "r");
  assert_non_null(child);
  static char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, child);
  text[n] = '\0';
  int status = pclose(child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(count(text, "cuv: a uv_walk closed"), 1);
  assert_non_null(strstr(text, "call cuv_uv_close"));
}

int main(int argc, char **argv) {
  setenv("UV_THREADPOOL_SIZE", "1", 1); /* before the pool starts: requests run in their order */
  cuvt_init();
  self_path = argv[0];
  if (argc == 2 && strcmp(argv[1], "exit-walked") == 0)
    return exit_walked();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_walk_then_close),
      cmocka_unit_test(test_walk_then_close_inside_the_loop),
      cmocka_unit_test(test_close_then_walk),
      cmocka_unit_test(test_close_then_walk_idle),
      cmocka_unit_test(test_walk_in_the_batch_that_ends_the_close),
      cmocka_unit_test(test_walk_without_close),
      cmocka_unit_test(test_walk_after_the_run),
      cmocka_unit_test(test_walk_and_exit_reports),
  };
  return cuvt_run(tests);
}
