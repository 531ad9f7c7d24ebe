/* The Node addon's feeder (node/src/feeder.c), driven from C so that the TSan pass runs it: a
 * thread that makes the bridge's submissions for the loop thread once enough are in flight.
 * Jobs submitted in a burst from the loop thread, some handed over and some (cancellable ones,
 * `own`) submitted by the loop thread itself, must reach cuv in the order they were made: each is
 * a `then` whose callback (which cuv runs when it enqueues the job, in submission order for jobs
 * whose touches are unknown) notes its number. Error ops are refused by cuv_submit: at once when
 * the loop thread submitted them, through the refusal handle when the feeder did. Every job ends
 * exactly once, on the loop thread. */
#include <time.h>

#include "uvt.h"

#include "feeder.h"

#define JOBS 3000

typedef struct job {
  cuv_node_feed_t feed;
  int id, ends;
  int status;
  bool refused_here, refused_later, handed_over, on_loop;
} job_t;

typedef struct run {
  uvt_loop_t l;
  cuv_node_feeder_t feeder;
  job_t jobs[JOBS];
  atomic_int order[JOBS]; /* the ids in the order cuv enqueued them */
  atomic_int enqueued;
  int ended;
  bool feeder_closed;
} run_t;

static run_t *R;

static bool is_error_job(int id) { return id % 97 == 5; }
static bool is_own_job(int id) { return id % 13 == 7; }

static cuv_op_t *note_enqueued(cuv_output_t *in, void *arg) {
  (void)in;
  int id = (int)(intptr_t)arg;
  atomic_store(&R->order[atomic_fetch_add(&R->enqueued, 1)], id);
  return cuv_value(NULL, NULL);
}

static void end_job(job_t *job, int status) {
  uv_thread_t self = uv_thread_self();
  job->on_loop = uv_thread_equal(&self, &R->l.thread);
  job->status = status;
  job->ends++;
  R->ended++;
  if (job->handed_over)
    cuv_node_feeder_finished(&R->feeder);
}

static void on_done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  end_job(arg, status);
}

static void on_refused(cuv_node_feed_t *feed, void *arg) {
  (void)arg;
  job_t *job = feed->arg;
  job->refused_later = true;
  end_job(job, feed->status);
}

/* Job `id` through the feeder: cuv_node_feeder_submit's result (1: handed over). */
static int submit_job(int id) {
  job_t *job = &R->jobs[id];
  job->id = id;
  cuv_op_t *op = is_error_job(id)
                     ? cuv_fail(CUV_EINVAL)
                     : cuv_then(cuv_value(NULL, NULL), note_enqueued, (void *)(intptr_t)id);
  job->feed = (cuv_node_feed_t){.op = op, .done = on_done, .arg = job};
  cuv_submit_opts_t opts = {0};
  int rc = cuv_node_feeder_submit(&R->feeder, &job->feed, is_own_job(id), &opts);
  if (rc == 1) {
    job->handed_over = true;
  } else if (rc < 0) {
    job->refused_here = true;
    job->status = rc;
    job->ends++;
    R->ended++;
  }
  return rc;
}

static void submit_all(void) {
  for (int id = 0; id < JOBS; id++)
    submit_job(id);
}

static void on_feeder_closed(void *arg) { ((run_t *)arg)->feeder_closed = true; }

/* A loop, its bridge and a feeder. */
static void open_run(void) {
  R = calloc(1, sizeof *R);
  assert_non_null(R);
  uvt_open(&R->l);
  cuv_node_feeder_open(&R->feeder, &R->l.loop, R->l.bridge, on_refused, R);
}

/* Every job submitted in one burst from the loop thread. */
static void open_and_submit_all(void) {
  open_run();
  submit_all();
}

/* The feeder's test hook (feeder.h): once armed, the thread's next look that finds nothing holds
 * it until the loop has stopped it, so the loop hands a job over in that window. */
static atomic_int hold_after_empty_look, held;

void cuv_node_feeder_test_looked(cuv_node_feeder_t *f) {
  if (!atomic_exchange(&hold_after_empty_look, 0))
    return;
  atomic_store(&held, 1);
  struct timespec pause = {0, 100000L};
  while (!atomic_load(&f->stop))
    nanosleep(&pause, NULL);
}

static void test_feeder_keeps_order_and_ends_every_job(void **state) {
  (void)state;
  open_and_submit_all();
  while (R->ended < JOBS)
    assert_true(uv_run(&R->l.loop, UV_RUN_ONCE) >= 0);
  int handed = 0, refused_later = 0;
  for (int id = 0; id < JOBS; id++) {
    job_t *job = &R->jobs[id];
    assert_int_equal(job->ends, 1);
    handed += job->handed_over;
    refused_later += job->refused_later;
    if (is_error_job(id)) {
      assert_int_equal(job->status, CUV_EINVAL);
      assert_true(job->refused_here != job->refused_later);
      assert_true(job->refused_later == job->handed_over);
    } else {
      assert_cuv_ok(job->status);
    }
    if (is_own_job(id))
      assert_false(job->handed_over);
    if (!job->refused_here)
      assert_true(job->on_loop);
  }
  print_message("# %d of %d jobs handed to the feeder (%llu submitted by it), %d refused after\n",
                handed, JOBS, (unsigned long long)cuv_node_feeder_fed(&R->feeder),
                refused_later);
  assert_true(handed > 0);
  assert_int_equal(cuv_node_feeder_fed(&R->feeder), (uint64_t)handed);
  int previous = -1, enqueued = atomic_load(&R->enqueued);
  assert_int_equal(enqueued, JOBS - (JOBS + 91) / 97);
  for (int i = 0; i < enqueued; i++) {
    int id = atomic_load(&R->order[i]);
    assert_true(id > previous);
    previous = id;
  }
  cuv_node_feeder_close(&R->feeder, on_feeder_closed, R);
  uvt_close(&R->l);
  assert_true(R->feeder_closed);
  free(R);
}

/* Closing with jobs the feeder still holds: they are submitted first, so the bridge's close
 * delivers each. */
static void test_close_submits_what_the_feeder_holds(void **state) {
  (void)state;
  open_and_submit_all();
  cuv_node_feeder_close(&R->feeder, on_feeder_closed, R);
  uvt_close(&R->l);
  assert_true(R->feeder_closed);
  assert_int_equal(R->ended, JOBS);
  for (int id = 0; id < JOBS; id++)
    assert_int_equal(R->jobs[id].ends, 1);
  free(R);
}

/* A job handed over after the thread's last look found nothing, and then the close: the stop
 * the thread reads after that look must not end it with the job unsubmitted. */
static void test_close_submits_a_job_handed_over_after_an_empty_look(void **state) {
  (void)state;
  open_run();
  atomic_store(&hold_after_empty_look, 1);
  int n = 0;
  while (submit_job(n++) != 1) /* the loop's own, until CUV_NODE_FEED_FROM are in flight */
    assert_true(n <= CUV_NODE_FEED_FROM);
  assert_true(cuvt_wait_flag(&held)); /* the thread looked, found nothing, waits for the stop */
  assert_true(is_error_job(n) && !is_error_job(n + 1)); /* one refused by cuv, one accepted */
  for (int more = n + 2; n < more;)
    assert_int_equal(submit_job(n++), 1);
  cuv_node_feeder_close(&R->feeder, on_feeder_closed, R);
  uvt_close(&R->l);
  assert_true(R->feeder_closed);
  assert_int_equal(R->ended, n);
  for (int id = 0; id < n; id++)
    assert_int_equal(R->jobs[id].ends, 1);
  free(R);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_feeder_keeps_order_and_ends_every_job),
      cmocka_unit_test(test_close_submits_what_the_feeder_holds),
      cmocka_unit_test(test_close_submits_a_job_handed_over_after_an_empty_look),
  };
  return cuvt_run(tests);
}
