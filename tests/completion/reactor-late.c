/* Late writes against the reactor's other ways of finishing a submission on a stream's timeline
 * word (lib/reactor.c): the inline spin on the submitting thread, the probe's "idle twice" rule
 * and the probe's handling of a faulted stream. tests/completion/generations.c covers words reused
 * by other streams; here:
 *
 * - the inline spin on a word whose previous number's write is still to land (the spin must wait
 *   for its own number, not any change of the word);
 * - a submission completed by the probe without its write landing: only after two looks that
 *   found its stream idle, counted through the simulator's cuStreamQuery calls;
 * - a stream that faulted keeps its word out of the pool (its write may still land), so a stream
 *   created after it on a healthy device cannot take the word.
 *
 * Every case runs on one stream of its own, so each arm raises the same word, and a 1 s inline
 * spin budget (CUV_SPIN_BUDGET_US, read once per process) lets a spinning submission wait for its
 * own number on the submitting thread. The simulator delays writes (cuv_sim_set_write_delay_us)
 * and counts late writes that landed while a later write to the same word was queued
 * (cuv_sim_stale_writes). On the GPU only the first case runs (results checked); the others need
 * the simulator's delay, call counts and fault. The fault case is last: device 1 stays faulted.
 * Every callback is counted. */
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

#include "counted.h"

/* The delay outlasts the probe's looks (about 2 ms apart) and the
 * drain and re-submit that follow, by far: a submission completed by the probe has its write
 * still to land when the next one arms the word. Bounds of the scenario, not assertions. */
#define WRITE_DELAY_US 30000u
/* The spinning submission's kernel outlasts the delay, so the previous write lands while it
 * spins; the writer before it is short. */
#define SPIN_KERNEL_MS 60u
#define FIRST_KERNEL_MS 2u
#define WANT_PROVEN 2
#define MAX_ROUNDS 20
#define GPU_ROUNDS 4

static cuv_op_t *slow_write_then_read(unsigned ms, cuv_buffer_t *buf, unsigned value) {
  return cuv_seq(cuvt_slow_write(ms, value, buf), cuv_download(buf, 0, sizeof(unsigned)));
}

static void wait_calls(cuv_queue_t *q, const cuvt_seen_t *seen) {
  for (int spins = 0; seen->calls == 0; spins++) {
    int rc = cuv_queue_wait(q, 1000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    cuv_queue_drain(q);
    if (spins > 120) /* a watchdog, not a timing assertion: two minutes without the callback */
      fail_msg("a callback did not arrive");
  }
}

/* The stream each case submits to (its word is the one under test). */
static cuv_stream_t *on;

/* Submits op on `on` and waits for its callback, which must come once, succeed and carry want. */
static void submit_and_check(cuv_queue_t *q, cuv_op_t *op, unsigned flags, unsigned want) {
  cuvt_seen_t seen = {0};
  cuv_submit_opts_t opts = {.stream = on, .flags = flags};
  assert_cuv_ok(cuv_submit(q, op, cuvt_record_seen, &seen, &opts));
  wait_calls(q, &seen);
  assert_int_equal(cuv_queue_drain(q), 0); /* no second call */
  assert_int_equal(seen.calls, 1);
  assert_cuv_ok(seen.status);
  if (seen.got != want)
    print_error("completed before its work: got %u, want %u\n", seen.got, want);
  assert_int_equal(seen.got, want);
}

/* Each round: a submission that does not spin, which the probe completes (stream idle twice)
 * while its write is still to land; then, on the same stream, a submission that spins on the
 * submitting thread while that old write lands. The old write holds the old number: a spin taking
 * any change of the word as its own would complete the second submission during its kernel, and
 * its callback would get a download that has not happened. A round is proven when the old write
 * landed while the new one was queued (cuv_sim_stale_writes) and the spin, not the reactor,
 * completed the second submission: the spin was running all the while. */
static void test_spin_waits_for_its_number(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(sizeof(unsigned));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  if (cuvt_is_sim())
    cuv_sim_set_write_delay_us(WRITE_DELAY_US);
  int proven = 0, rounds = 0;
  while (cuvt_is_sim() ? proven < WANT_PROVEN : rounds < GPU_ROUNDS) {
    if (rounds++ == MAX_ROUNDS)
      fail_msg("%d of %d rounds saw a late write land while the next submission spun", proven,
               WANT_PROVEN);
    unsigned first = cuvt_nonzero_u32(), second = cuvt_nonzero_u32();
    submit_and_check(q, slow_write_then_read(FIRST_KERNEL_MS, buf, first), CUV_SUBMIT_NO_SPIN,
                     first);
    unsigned long stale = cuvt_is_sim() ? cuv_sim_stale_writes() : 0;
    cuv_stats_t before = cuvt_stats();
    submit_and_check(q, slow_write_then_read(SPIN_KERNEL_MS, buf, second), 0, second);
    cuv_stats_t after = cuvt_stats();
    if (cuvt_is_sim() && cuv_sim_stale_writes() > stale &&
        after.completed_spin - before.completed_spin == 1)
      proven++;
  }
  print_message("# %d rounds, %d with a late write landing under the spin\n", rounds, proven);
  if (cuvt_is_sim())
    cuv_sim_set_write_delay_us(0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_buffer_unref(buf);
}

/* Waits until every delayed write has landed: a spinning submission completes through the spin
 * only when its own write landed, and late writes land in the order they were passed. */
static void flush_late_writes(cuv_queue_t *q, cuv_buffer_t *buf) {
  for (int tries = 0;; tries++) {
    if (tries == 5)
      fail_msg("no barrier completed through the spin");
    cuv_stats_t before = cuvt_stats();
    unsigned value = cuvt_nonzero_u32();
    submit_and_check(q, cuv_seq(cuv_memset32(buf, 0, value, 1), cuv_download(buf, 0, 4)), 0,
                     value);
    if (cuvt_stats().completed_spin - before.completed_spin == 1)
      return;
  }
}

/* The probe completes a submission whose write has not landed only when its stream was idle on
 * two looks in a row with its word unmoved: an idle stream has passed the write, but the write
 * may still be on its way, and the second look (a probe period later) gives it time to land. Here
 * every write is held until all rounds are done (CUV_SIM_WRITE_HOLD: with writes 100 ms late, a
 * probe starved on a loaded machine once saw one land first), and the work is a memset and its
 * download, done long before the first look: each round costs exactly the looks of the probe,
 * and nothing else queries a stream meanwhile (no spin, no host-function work). A round proves
 * itself completed without its write when that write, released, lands while a later round's is
 * still held (cuv_sim_stale_writes). */
#define IDLE_ROUNDS 6

static void test_probe_looks_twice(void **state) {
  if (!cuvt_is_sim()) {
    print_message("# needs the simulator's write delay and call counts\n");
    skip();
  }
  cuv_buffer_t *buf = cuvt_buffer(sizeof(unsigned));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuv_sim_set_write_delay_us(CUV_SIM_WRITE_HOLD);
  unsigned long stale = cuv_sim_stale_writes();
  for (int r = 0; r < IDLE_ROUNDS; r++) {
    unsigned value = cuvt_nonzero_u32();
    unsigned long queries = cuv_sim_calls("cuStreamQuery");
    submit_and_check(q, cuv_seq(cuv_memset32(buf, 0, value, 1), cuv_download(buf, 0, 4)),
                     CUV_SUBMIT_NO_SPIN, value);
    unsigned long looks = cuv_sim_calls("cuStreamQuery") - queries;
    if (looks < 2)
      print_error("round %d: completed after %lu look(s) at its stream\n", r, looks);
    assert_true(looks >= 2);
  }
  /* Released to a delay, not to none: the rounds' held writes land now, in order, and the
   * flush's barrier write lands after them (a write with no delay would overtake them). */
  cuv_sim_set_write_delay_us(1);
  flush_late_writes(q, buf);
  cuv_sim_set_write_delay_us(0);
  unsigned long landed_late = cuv_sim_stale_writes() - stale;
  print_message("# %lu writes landed after the word was armed again\n", landed_late);
  assert_true(landed_late >= 1); /* else no round was completed by the probe */
  cuv_sim_set_write_delay_us(0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_buffer_unref(buf);
}

/* A stream faults (device 1) while its submission waits on its word: the probe completes it with
 * the fault and keeps the word out of the pool, because the write queued behind the kernel that
 * was running when the fault hit still lands (as on the GPU: tests/errors/fault.c). The stream is
 * then destroyed, and the next submission, on a new stream of the healthy device 0, takes a word of
 * its own: the faulted work's late write lands on no one's word. Put back in the pool, the word
 * would be the new stream's (the pool hands out the word given back last), and the late write would
 * land while the new stream's write is queued (cuv_sim_stale_writes). */
#define FAULTED_KERNEL_MS 100u
#define NEXT_KERNEL_MS 300u

static void test_faulted_word_stays_out(void **state) {
  int count = 0;
  assert_cuv_ok(cuv_device_count(&count));
  if (!cuvt_is_sim() || count < 2) {
    print_message("# needs the simulator's fault and two devices\n");
    skip();
  }
  cuv_buffer_t *buf = cuvt_buffer(sizeof(unsigned));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  /* No earlier delayed write may land during this test. */
  cuv_sim_set_write_delay_us(WRITE_DELAY_US);
  flush_late_writes(q, buf);
  /* Short, but not 0: the simulator counts stale landings only of writes it delayed. */
  cuv_sim_set_write_delay_us(1000);

  cuv_device_t *d1;
  assert_cuv_ok(cuv_device_open(&d1, 1));
  cuv_module_t *m1;
  cuv_kernel_t *sleep1;
  assert_cuv_ok(cuv_module_load_file(&m1, d1, cuvt_ptx_path()));
  assert_cuv_ok(cuv_kernel_get(&sleep1, m1, "sleep_then_write"));
  cuv_module_unref(m1);
  cuv_stream_t *s1;
  assert_cuv_ok(cuv_stream_create(&s1, d1));

  unsigned long stale = cuv_sim_stale_writes();
  cuv_stats_t before = cuvt_stats();
  unsigned long long ns = FAULTED_KERNEL_MS * 1000000ull;
  unsigned no_value = 0;
  cuv_deviceptr_t no_flag = 0;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(no_value), CUV_ARG_VALUE(no_flag)};
  cuvt_seen_t faulted = {0};
  cuv_submit_opts_t on_s1 = {.stream = s1, .flags = CUV_SUBMIT_NO_SPIN};
  assert_cuv_ok(cuv_submit(q, cuv_launch(sleep1, CUV_DIM1(1), CUV_DIM1(1), 0, args, 3),
                           cuvt_record_seen, &faulted, &on_s1));
  struct timespec started = {0, 20 * 1000000L};
  nanosleep(&started, NULL); /* the kernel is running when the fault hits (set-up) */
  assert_cuv_ok(cuv_device_bind(d1));
  cuv_sim_fault(CUDA_ERROR_ILLEGAL_ADDRESS); /* the current context: device 1's */
  wait_calls(q, &faulted);
  assert_int_equal(faulted.calls, 1);
  if (!cuv_status_is_fault(faulted.status))
    print_error("the faulted submission completed with %s\n", cuv_err_name(faulted.status));
  assert_true(cuv_status_is_fault(faulted.status));

  /* Still inside the faulted kernel: its write is yet to land when the next stream arms. */
  cuv_stream_destroy(s1);
  cuv_stream_t *s0;
  assert_cuv_ok(cuv_stream_create(&s0, cuvt_device()));
  cuv_stream_t *was = on;
  on = s0;
  unsigned value = cuvt_nonzero_u32();
  submit_and_check(q, slow_write_then_read(NEXT_KERNEL_MS, buf, value), CUV_SUBMIT_NO_SPIN,
                   value);
  on = was;
  cuv_stream_destroy(s0);
  cuv_stats_t after = cuvt_stats();
  print_message("# fallbacks %llu, host function %llu, reactor %llu, late writes on its word %lu\n",
                (unsigned long long)(after.fallbacks - before.fallbacks),
                (unsigned long long)(after.completed_hostfn - before.completed_hostfn),
                (unsigned long long)(after.completed_reactor - before.completed_reactor),
                cuv_sim_stale_writes() - stale);
  assert_int_equal(after.fallbacks - before.fallbacks, 0);
  assert_int_equal(after.completed_hostfn - before.completed_hostfn, 0);
  assert_int_equal(cuv_sim_stale_writes() - stale, 0);
  cuv_sim_set_write_delay_us(0);

  assert_int_equal(cuv_queue_drain(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_kernel_unref(sleep1);
  cuv_device_unref(d1);
  cuv_buffer_unref(buf);
}

int main(void) {
  /* Before cuv starts (it reads it once) and before any thread exists. */
  setenv("CUV_SPIN_BUDGET_US", "1000000", 1);
  cuv_sim_set_device_count(2); /* the simulator only: a GPU machine has what it has */
  cuvt_init();
  if (cuv_stream_create(&on, cuvt_device()) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spin_waits_for_its_number),
      cmocka_unit_test(test_probe_looks_twice),
      cmocka_unit_test(test_faulted_word_stays_out), /* last: device 1 stays faulted */
  };
  return cuvt_run(tests);
}
