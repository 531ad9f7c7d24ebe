/* cuv_queue_fd (lib/queue_fd.c, lib/queue.c): the queue's descriptor polls readable exactly while
 * a drain would deliver something, which is when the owner's look (cuv_queue_poll) sets its
 * next_poll_ns to 1. Checked with poll(2) as any loop would wait on it:
 * - readable once a submission completed, unreadable after the drain that delivered everything,
 *   readable again at the next completion, and readable at once when first asked for a queue
 *   that holds work already; a look whose budget ran out, and a drain of a few
 *   (cuv__queue_drain_max, the look's slices: lib/queue.h, so this test links the static
 *   archive), leave it readable for the rest; the notify hook still fires beside it;
 * - a loop thread that only polls and drains, fed by several submitting threads, runs every
 *   callback exactly once with outputs equal to a host computation on random data, and never
 *   wakes to a drain that finds nothing;
 * - many short submissions racing the drain's clearing never leave one undelivered while the
 *   descriptor reads unready (a lost wake-up would show as a 30 s poll timeout, a watchdog);
 * - bad arguments, a closed queue, no descriptor left (a child process under a low
 *   RLIMIT_NOFILE), and cuv_queue_destroy closing it.
 * poll's timeouts are watchdogs, never assertions on time; cmocka asserts only on this thread. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "counted.h"
#include "internal.h"
#include "queue.h"

#define WATCHDOG_MS 30000
#define SLICE 16 /* lib/queue_poll.c's POLL_SLICE: callbacks between looks at the clock */
#define readable cuvt_readable

/* Whether the queue has something to deliver, as its owner learns it: a look with budget 0
 * delivers nothing and sets next_poll_ns to 1 exactly then. Asserts nothing (a child calls it). */
static bool due(cuv_queue_t *q) {
  uint64_t next = 0;
  return cuv_queue_poll(q, 0, &next) == 0 && next == 1;
}

static void count_notify(cuv_queue_t *queue, void *arg) {
  atomic_fetch_add((atomic_int *)arg, 1);
}

/* One chain's record: what it uploads, the factor, and what its callback saw. */
typedef struct job {
  float *in, *got;
  unsigned n;
  float factor;
  cuv_buffer_t *buf;
  int calls, status, submit_rc;
} job_t;

static void job_done(int status, cuv_output_t *output, void *arg) {
  job_t *j = arg;
  j->calls++;
  j->status = status;
  if (status == 0 && output->data)
    memcpy(j->got, output->data, j->n * sizeof(float));
}

static void job_init(job_t *j, unsigned n) {
  static const float factors[] = {2.0f, 0.5f, -3.0f, 1.0f};
  j->n = n;
  j->in = malloc(n * sizeof(float));
  j->got = calloc(n, sizeof(float));
  assert_non_null(j->in);
  assert_non_null(j->got);
  cuvt_random_ints(j->in, n); /* integers times these factors: exact in float */
  j->factor = factors[cuvt_random_u32() % 4];
  j->buf = cuvt_buffer(n * sizeof(float));
  j->calls = 0;
  j->status = 1;
}

/* Upload, scale on the device, download. */
static cuv_op_t *job_op(job_t *j) {
  size_t bytes = j->n * sizeof(float);
  cuv_op_t *op = cuv_seq(cuv_memcpy_htod(j->buf, 0, j->in, bytes, CUV_COPY_STAGE),
                         cuvt_scale(j->buf, j->n, j->factor));
  return cuv_seq(op, cuv_download(j->buf, 0, bytes));
}

static void job_check(job_t *j) {
  assert_int_equal(j->calls, 1);
  assert_cuv_ok(j->status);
  for (unsigned i = 0; i < j->n; i++) {
    float want = j->in[i] * j->factor;
    if (j->got[i] != want)
      print_error("element %u: got %g, want %g\n", i, (double)j->got[i], (double)want);
    assert_true(j->got[i] == want);
  }
}

static void job_free(job_t *j) {
  cuv_buffer_unref(j->buf);
  free(j->in);
  free(j->got);
}

/* Polls and drains until *calls reaches want; every wake-up must find something. */
static void loop_until(cuv_queue_t *q, int fd, const int *calls, int want) {
  while (*calls < want) {
    if (!readable(fd, WATCHDOG_MS))
      fail_msg("descriptor unready for 30 s: %d of %d callbacks, something due: %d", *calls, want,
               due(q));
    assert_true(cuv_queue_drain(q) > 0); /* readable means there was something to deliver */
  }
}

static void test_readiness_follows_the_queue(void **state) {
  atomic_int notifies = 0;
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, count_notify, &notifies));
  int fd = -1, again = -1;
  assert_cuv_ok(cuv_queue_fd(q, &fd));
  assert_true(fd >= 0);
  assert_cuv_ok(cuv_queue_fd(q, &again));
  assert_int_equal(again, fd); /* one descriptor per queue */
  assert_false(readable(fd, 0)); /* nothing submitted */
  int flags = fcntl(fd, F_GETFD);
  assert_true(flags >= 0 && (flags & FD_CLOEXEC));
  assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);

  for (int round = 0; round < 3; round++) {
    job_t j;
    job_init(&j, 1000 + cuvt_random_u32() % 1000);
    int before = atomic_load(&notifies);
    assert_cuv_ok(cuv_submit(q, job_op(&j), job_done, &j, NULL));
    if (!readable(fd, WATCHDOG_MS))
      fail_msg("round %d: not readable 30 s after a submission", round);
    assert_true(due(q)); /* the owner's look agrees with the descriptor */
    assert_int_equal(atomic_load(&notifies) - before, 1); /* the hook fired too, once */
    assert_int_equal(cuv_queue_drain(q), 1);
    job_check(&j);
    assert_false(readable(fd, 0)); /* the drain delivered everything */
    assert_false(due(q));
    assert_int_equal(cuv_queue_drain(q), 0);
    assert_false(readable(fd, 0)); /* a drain of nothing changes nothing */
    job_free(&j);
  }
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* Asked for only once work waits: readable at once, as the queue is. */
static void test_made_late_shows_waiting_work(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  job_t j;
  job_init(&j, 777);
  assert_cuv_ok(cuv_submit(q, job_op(&j), job_done, &j, NULL));
  assert_cuv_ok(cuv_queue_wait(q, -1));
  int fd;
  assert_cuv_ok(cuv_queue_fd(q, &fd));
  assert_true(readable(fd, 0));
  assert_int_equal(cuv_queue_drain(q), 1);
  job_check(&j);
  assert_false(readable(fd, 0));
  job_free(&j);
  assert_cuv_ok(cuv_queue_destroy(q));
}

static void count_done(int status, cuv_output_t *output, void *arg) {
  if (status == 0)
    (*(int *)arg)++;
}

/* n bare values submitted on a new stream into q, each counted in *calls: the stream. */
static cuv_stream_t *submit_values(cuv_queue_t *q, int n, int *calls) {
  cuv_stream_t *s;
  assert_cuv_ok(cuv_stream_create(&s, cuvt_device()));
  cuv_submit_opts_t opts = {.stream = s};
  for (int i = 0; i < n; i++)
    assert_cuv_ok(cuv_submit(q, cuv_value(NULL, NULL), count_done, calls, &opts));
  return s;
}

/* Once everything was delivered: the stream and the queue go. */
static void destroy_values(cuv_queue_t *q, cuv_stream_t *s) {
  assert_cuv_ok(cuv_stream_synchronize(s));
  cuv_stream_destroy(s);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* A drain of one at a time leaves the rest queued, and the descriptor readable for it. */
static void test_drain_of_a_few_leaves_it_readable(void **state) {
  enum { N = 5 };
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int fd, calls = 0;
  assert_cuv_ok(cuv_queue_fd(q, &fd));
  cuv_stream_t *s = submit_values(q, N, &calls);
  while (calls < N) {
    if (!readable(fd, WATCHDOG_MS))
      fail_msg("unready for 30 s with %d of %d callbacks", calls, N);
    assert_int_equal(cuv__queue_drain_max(q, 1), 1);
    /* Only this thread drains: once something is due, it stays so, and so must the descriptor. */
    if (due(q))
      assert_true(readable(fd, 0));
  }
  assert_false(readable(fd, 0));
  assert_false(due(q));
  destroy_values(q, s);
}

/* A look whose budget ran out (1 ns: one slice of at most SLICE callbacks) leaves the rest queued:
 * its next_poll_ns is then 1 and the descriptor stays readable, so a level-triggered loop comes
 * back for the rest; the look after the last callback leaves it unreadable, next_poll_ns 0. */
static void test_look_out_of_budget_leaves_it_readable(void **state) {
  enum { N = 3 * SLICE + 5 };
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int fd, calls = 0, looks = 0, left = 0;
  assert_cuv_ok(cuv_queue_fd(q, &fd));
  cuv_stream_t *s = submit_values(q, N, &calls);
  uint64_t next = 0;
  for (int before = 0; calls < N; before = calls, looks++) {
    if (!readable(fd, WATCHDOG_MS))
      fail_msg("unready for 30 s with %d of %d callbacks", calls, N);
    int ran = cuv_queue_poll(q, 1, &next);
    assert_true(ran >= 1 && ran <= SLICE); /* readable: something was due; one slice ran */
    assert_int_equal(calls, before + ran);
    /* Only this thread delivers: what the look left is still there, and so is the descriptor. */
    if (next == 1) {
      left++;
      assert_true(readable(fd, 0));
    }
  }
  assert_false(readable(fd, 0));
  assert_int_equal(cuv_queue_poll(q, 1, &next), 0);
  assert_true(next == 0);
  assert_true(looks >= (N + SLICE - 1) / SLICE);
  print_message("# %d callbacks in %d looks, %d of them leaving work behind\n", N, looks, left);
  destroy_values(q, s);
}

/* ---- several submitting threads, one loop thread (this one) ---- */

#define SUBMITTERS 4
#define PER_THREAD 40

typedef struct feeder {
  cuv_queue_t *q;
  job_t *jobs;
} feeder_t;

static void *feed(void *arg) {
  feeder_t *f = arg;
  for (int i = 0; i < PER_THREAD; i++)
    f->jobs[i].submit_rc = cuv_submit(f->q, job_op(&f->jobs[i]), job_done, &f->jobs[i], NULL);
  return NULL;
}

/* Counts the callbacks of all jobs (they run on this thread, in cuv_queue_drain). */
static int calls_of(const job_t *jobs, int n) {
  int sum = 0;
  for (int i = 0; i < n; i++)
    sum += jobs[i].calls;
  return sum;
}

static void test_threads_feed_a_poll_loop(void **state) {
  enum { ALL = SUBMITTERS * PER_THREAD };
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int fd;
  assert_cuv_ok(cuv_queue_fd(q, &fd));
  cuvt_kernel_ok("scale"); /* looked up here, not first on a feeder */
  job_t *jobs = calloc(ALL, sizeof *jobs);
  assert_non_null(jobs);
  for (int i = 0; i < ALL; i++)
    job_init(&jobs[i], 64 + cuvt_random_u32() % 4096);
  pthread_t threads[SUBMITTERS];
  feeder_t feeders[SUBMITTERS];
  for (int t = 0; t < SUBMITTERS; t++) {
    feeders[t] = (feeder_t){q, jobs + t * PER_THREAD};
    assert_int_equal(pthread_create(&threads[t], NULL, feed, &feeders[t]), 0);
  }
  int wakeups = 0;
  for (int seen = 0; (seen = calls_of(jobs, ALL)) < ALL; wakeups++) {
    if (!readable(fd, WATCHDOG_MS))
      fail_msg("descriptor unready for 30 s: %d of %d callbacks, something due: %d", seen, ALL,
               due(q));
    int ran = cuv_queue_drain(q);
    if (ran <= 0)
      print_error("wake-up %d: the drain found nothing (%d)\n", wakeups, ran);
    assert_true(ran > 0);
  }
  for (int t = 0; t < SUBMITTERS; t++)
    assert_int_equal(pthread_join(threads[t], NULL), 0);
  print_message("# %d callbacks in %d wake-ups\n", ALL, wakeups);
  for (int i = 0; i < ALL; i++) {
    assert_cuv_ok(jobs[i].submit_rc);
    job_check(&jobs[i]);
    job_free(&jobs[i]);
  }
  free(jobs);
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_false(readable(fd, 0));
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* ---- completions racing the drain's clearing ----
 * Two threads submit short work in small bursts, each waiting for its burst's callbacks before
 * the next: the queue goes empty again and again, and a burst's completions land while a drain
 * clears the descriptor. After each drain, this thread (the only one that drains, so a queue it
 * sees ready stays ready) checks that a ready queue polls readable: a clearing that raced a push
 * shows there, or as a poll that times out. */

#define RACERS 2
#define RACE_OPS 4000
#define RACE_BURST 4

typedef struct racer {
  cuv_queue_t *q;
  cuv_stream_t *stream;
  int *slots;            /* calls per submission of this racer */
  atomic_int delivered;  /* its callbacks so far */
  int refused, gave_up;
} racer_t;

typedef struct slot_ref {
  racer_t *racer;
  int i;
} slot_ref_t;

static void slot_done(int status, cuv_output_t *output, void *arg) {
  slot_ref_t *ref = arg;
  if (status == 0)
    ref->racer->slots[ref->i]++;
  atomic_fetch_add(&ref->racer->delivered, 1);
  free(ref);
}

/* Waits for the loop to deliver n callbacks of r; false after about a minute (the loop's
 * watchdog fails the test first). */
static bool wait_delivered(racer_t *r, int n) {
  for (long spins = 0; atomic_load(&r->delivered) < n; spins++) {
    if (spins > 60L * 100000)
      return false;
    nanosleep(&(struct timespec){0, 10000}, NULL);
  }
  return true;
}

static void *race(void *arg) {
  racer_t *r = arg;
  cuv_submit_opts_t opts = {.stream = r->stream};
  for (int i = 0; i < RACE_OPS && !r->gave_up; i++) {
    slot_ref_t *ref = malloc(sizeof *ref);
    if (!ref)
      abort();
    *ref = (slot_ref_t){r, i};
    /* Alternately a bare value (done at once, often inline) and a small fill on the device. */
    cuv_op_t *op = i % 2 ? cuv_value(NULL, NULL) : cuv_fill32(cuvt_device(), 16, (unsigned)i);
    if (cuv_submit(r->q, op, slot_done, ref, &opts) != 0) {
      r->refused++;
      atomic_fetch_add(&r->delivered, 1); /* no callback will come for it */
      free(ref);
    }
    if (i % RACE_BURST == RACE_BURST - 1)
      r->gave_up = !wait_delivered(r, i + 1);
  }
  return NULL;
}

static void test_completions_racing_the_drain(void **state) {
  enum { ALL = RACERS * RACE_OPS };
  atomic_int notifies = 0;
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, count_notify, &notifies));
  int fd;
  assert_cuv_ok(cuv_queue_fd(q, &fd));
  int *slots = calloc(ALL, sizeof *slots);
  assert_non_null(slots);
  racer_t racers[RACERS];
  pthread_t threads[RACERS];
  for (int t = 0; t < RACERS; t++) {
    racers[t] = (racer_t){.q = q, .slots = slots + t * RACE_OPS};
    assert_cuv_ok(cuv_stream_create(&racers[t].stream, cuvt_device()));
  }
  for (int t = 0; t < RACERS; t++)
    assert_int_equal(pthread_create(&threads[t], NULL, race, &racers[t]), 0);
  /* Drains of all and of a few at a time, so both clear and keep the descriptor. */
  int delivered = 0, wakeups = 0, emptied = 0;
  while (delivered < ALL) {
    if (!readable(fd, WATCHDOG_MS))
      fail_msg("lost wake-up: unready for 30 s with %d of %d delivered, something due: %d",
               delivered, ALL, due(q));
    int ran = wakeups++ % 3 ? cuv_queue_drain(q) : cuv__queue_drain_max(q, 1 + wakeups % 4);
    assert_true(ran > 0);
    delivered += ran;
    if (!due(q))
      emptied++;
    else if (!readable(fd, 0))
      fail_msg("lost wake-up: something is due and the descriptor is unready (%d of %d delivered)",
               delivered, ALL);
  }
  for (int t = 0; t < RACERS; t++) {
    assert_int_equal(pthread_join(threads[t], NULL), 0);
    assert_int_equal(racers[t].refused, 0);
    assert_false(racers[t].gave_up);
  }
  for (int i = 0; i < ALL; i++)
    assert_int_equal(slots[i], 1); /* each exactly once, with status 0 */
  print_message("# %d callbacks in %d wake-ups (%d left the queue empty), %d notifies\n", ALL,
                wakeups, emptied, atomic_load(&notifies));
  assert_true(atomic_load(&notifies) > 0);
  assert_true(atomic_load(&notifies) <= wakeups); /* one per transition, each then drained */
  assert_false(readable(fd, 0));
  for (int t = 0; t < RACERS; t++) {
    assert_cuv_ok(cuv_stream_synchronize(racers[t].stream));
    cuv_stream_destroy(racers[t].stream);
  }
  free(slots);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* ---- arguments, closing, no descriptor left, destroy ---- */

static void test_bad_arguments(void **state) {
  int fd = -7;
  assert_int_equal(cuv_queue_fd(NULL, &fd), CUV_EINVAL);
  assert_int_equal(fd, -7); /* left alone on failure */
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_int_equal(cuv_queue_fd(q, NULL), CUV_EINVAL);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* Closed, a queue still delivers its work in flight: the descriptor goes on showing it. */
static void test_closed_queue_keeps_it(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int fd, later, calls = 0;
  assert_cuv_ok(cuv_queue_fd(q, &fd));
  assert_cuv_ok(cuv_submit(q, cuvt_sleep(5), count_done, &calls, NULL));
  cuv_queue_close(q);
  assert_int_equal(cuv_submit(q, cuv_value(NULL, NULL), count_done, &calls, NULL), CUV_ECLOSED);
  assert_cuv_ok(cuv_queue_fd(q, &later));
  assert_int_equal(later, fd);
  loop_until(q, fd, &calls, 1);
  assert_false(readable(fd, 0));
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* In a child process: with every descriptor number taken, cuv_queue_fd fails with the system's
 * code and the queue works on; once one is free it succeeds. Exit status 0, or which check failed
 * (no asserts in a child). */
static int no_descriptor_left(void) {
  struct rlimit lim = {64, 64};
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
    return 10;
  int last = -1;
  for (int fd; (fd = dup(0)) >= 0;)
    last = fd;
  if (errno != EMFILE || last < 0)
    return 11;
  cuv_queue_t *q;
  if (cuv_queue_create(&q, NULL, NULL) != 0)
    return 12;
  int fd = -1;
  if (cuv_queue_fd(q, &fd) != -EMFILE || fd != -1)
    return 13;
  if (cuv_queue_drain(q) != 0 || due(q))
    return 14;
  close(last);
  if (cuv_queue_fd(q, &fd) != 0 || fd != last)
    return 15;
  if (cuv_queue_destroy(q) != 0 || fcntl(fd, F_GETFD) != -1)
    return 16;
  return 0;
}

static void test_no_descriptor_left(void **state) {
  assert_int_equal(cuvt_child_status(no_descriptor_left), 0);
  assert_string_equal(cuv_err_name(-EMFILE), "UV_EMFILE"); /* the code the user sees is named */
}

/* How many descriptors this process has open now. */
static int open_descriptors(void) {
  int n = 0;
  for (int fd = 0; fd < 4096; fd++)
    n += fcntl(fd, F_GETFD) != -1;
  return n;
}

static void test_destroy_closes_it(void **state) {
  int before = open_descriptors();
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int fd;
  assert_cuv_ok(cuv_queue_fd(q, &fd));
  char link[64], target[64] = "";
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  assert_true(readlink(link, target, sizeof target - 1) > 0);
  assert_string_equal(target, "anon_inode:[eventfd]");
  assert_int_equal(open_descriptors(), before + 1);
  assert_cuv_ok(cuv_queue_destroy(q));
  assert_int_equal(open_descriptors(), before);
  /* A queue that never made one closes nothing of the process's (0, 1, 2 stay open). */
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  assert_cuv_ok(cuv_queue_destroy(q));
  assert_int_equal(open_descriptors(), before);
  for (int std = 0; std < 3; std++)
    assert_true(fcntl(std, F_GETFD) != -1);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_readiness_follows_the_queue),
      cmocka_unit_test(test_made_late_shows_waiting_work),
      cmocka_unit_test(test_drain_of_a_few_leaves_it_readable),
      cmocka_unit_test(test_look_out_of_budget_leaves_it_readable),
      cmocka_unit_test(test_threads_feed_a_poll_loop),
      cmocka_unit_test(test_completions_racing_the_drain),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_closed_queue_keeps_it),
      cmocka_unit_test(test_no_descriptor_left),
      cmocka_unit_test(test_destroy_closes_it),
  };
  return cuvt_run(tests);
}
