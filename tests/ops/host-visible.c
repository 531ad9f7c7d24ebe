/* Host callbacks see device-to-host results: a then or map callback over a download (or any
 * device-to-host copy enqueued before it in the submission) runs once the copy landed, so it
 * reads the downloaded data, never what the pinned block held before. The slow writer proves it:
 * a kernel busy for SLOW_MS writes a fresh random value, a download reads it back, and the
 * callback must see that value (without the wait it sees the block's earlier contents).
 *
 * The wait never happens on a thread that must not block: a submission that may wait runs on a
 * submitter thread (with submit_threads 0 there is none, and the submitting thread waits). */
#include <pthread.h>

#include "counted.h"
#include "uvt.h"

#define SLOW_MS 40

/* What a map or then callback saw, and on which thread. */
typedef struct seen {
  atomic_int calls;
  unsigned value[2];
  pthread_t thread;
} seen_t;

static bool engine_threads(void) {
  cuv_config_t config;
  assert_cuv_ok(cuv_config_get(&config));
  return config.submit_threads > 0;
}

/* A slow kernel writes `value` into flag, and the flag is downloaded behind it. */
static cuv_op_t *written_then_downloaded(unsigned value, cuv_buffer_t *flag) {
  return cuv_seq(cuvt_slow_write(SLOW_MS, value, flag), cuv_download(flag, 0, sizeof value));
}

static int record_map(cuv_output_t *value, void *arg) {
  seen_t *s = arg;
  memcpy(&s->value[0], value->data, sizeof s->value[0]);
  s->thread = pthread_self();
  atomic_fetch_add(&s->calls, 1);
  return 0;
}

/* Never 0, what a fresh block may hold. */
static unsigned fresh_value(void) { return cuvt_random_u32() | 1u; }

/* A blocking executor: the map over the download sees the slow kernel's value. */
static void test_map_sees_download_sync(void **state) {
  cuv_buffer_t *flag = cuvt_buffer(sizeof(unsigned));
  for (int round = 0; round < 3; round++) { /* pinned blocks are reused: stale data differs */
    unsigned value = fresh_value();
    seen_t seen = {0};
    cuv_output_t out;
    assert_cuv_ok(cuv_sync(cuv_map(written_then_downloaded(value, flag), record_map, &seen), &out));
    assert_int_equal(atomic_load(&seen.calls), 1);
    assert_int_equal(seen.value[0], value);
    assert_int_equal(*(unsigned *)out.data, value);
    cuv_output_release(&out);
  }
  cuv_buffer_unref(flag);
}

typedef struct done_rec {
  int calls, status;
  unsigned value;
} done_rec_t;

static void record_done(int status, cuv_output_t *output, void *arg) {
  done_rec_t *d = arg;
  d->calls++;
  d->status = status;
  if (status == 0 && output->data)
    memcpy(&d->value, output->data, sizeof d->value);
}

static void drain_all(cuv_queue_t *queue) {
  while (cuv_queue_pending(queue) > 0) {
    cuv_queue_wait(queue, -1);
    cuv_queue_drain(queue);
  }
}

/* cuv_submit: the map sees the data, and ran on a submitter thread, not the submitting one. */
static void test_map_sees_download_submit(void **state) {
  cuv_queue_t *queue;
  assert_cuv_ok(cuv_queue_create(&queue, NULL, NULL));
  enum { N = 8 };
  cuv_buffer_t *flags[N];
  seen_t seen[N] = {0};
  done_rec_t done[N] = {0};
  unsigned values[N];
  for (int i = 0; i < N; i++) {
    flags[i] = cuvt_buffer(sizeof(unsigned));
    values[i] = fresh_value();
    cuv_op_t *op = cuv_map(written_then_downloaded(values[i], flags[i]), record_map, &seen[i]);
    assert_cuv_ok(cuv_submit(queue, op, record_done, &done[i], NULL));
  }
  drain_all(queue);
  assert_cuv_ok(cuv_queue_destroy(queue));
  pthread_t self = pthread_self();
  for (int i = 0; i < N; i++) {
    assert_int_equal(done[i].calls, 1);
    assert_cuv_ok(done[i].status);
    assert_int_equal(atomic_load(&seen[i].calls), 1);
    assert_int_equal(seen[i].value[0], values[i]);
    assert_int_equal(done[i].value, values[i]);
    assert_int_equal(pthread_equal(seen[i].thread, self) != 0, !engine_threads());
    cuv_buffer_unref(flags[i]);
  }
}

/* then decides from downloaded data: it reads a count the GPU wrote and builds the next op from
 * it (fill that many words), as a data-dependent pipeline does. Through the libuv bridge, whose
 * loop thread must not wait: the then callback runs elsewhere (with engine threads). */
typedef struct count_then {
  cuv_buffer_t *out;
  seen_t seen;
} count_then_t;

static cuv_op_t *fill_count(cuv_output_t *input, void *arg) {
  count_then_t *t = arg;
  unsigned count;
  memcpy(&count, input->data, sizeof count);
  t->seen.value[0] = count;
  t->seen.thread = pthread_self();
  atomic_fetch_add(&t->seen.calls, 1);
  return cuv_seq(cuv_memset32(t->out, 0, count, count),
                 cuv_download(t->out, 0, 64 * sizeof(unsigned)));
}

static void test_then_builds_from_downloaded_on_loop(void **state) {
  uvt_loop_t l;
  uvt_open(&l);
  cuv_buffer_t *flag = cuvt_buffer(sizeof(unsigned));
  count_then_t t = {.out = cuvt_buffer(64 * sizeof(unsigned))};
  assert_cuv_ok(cuv_sync(cuv_memset32(t.out, 0, 0, 64), NULL));
  unsigned count = 1 + cuvt_random_u32() % 63;
  uvt_call_t call = {.loop = &l};
  cuv_op_t *op = cuv_then(written_then_downloaded(count, flag), fill_count, &t);
  assert_cuv_ok(cuv_uv_submit(l.bridge, op, uvt_done, &call, NULL));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  uvt_assert_all_ok(&call, 1);
  assert_int_equal(atomic_load(&t.seen.calls), 1);
  assert_int_equal(t.seen.value[0], count);
  assert_int_equal(pthread_equal(t.seen.thread, l.thread) != 0, !engine_threads());
  unsigned got[64];
  memcpy(got, call.out.data, sizeof got);
  for (unsigned i = 0; i < 64; i++)
    assert_int_equal(got[i], i < count ? count : 0);
  uvt_release_outputs(&call, 1);
  uvt_close(&l);
  cuv_buffer_unref(flag);
  cuv_buffer_unref(t.out);
}

/* Every kind of device-to-host copy: into a host buffer and into the caller's own memory (a map
 * over a unit output reads the destination itself). */
typedef struct dest_map {
  const unsigned *dest;
  seen_t seen;
} dest_map_t;

static int record_dest(cuv_output_t *value, void *arg) {
  dest_map_t *d = arg;
  d->seen.value[0] = *d->dest;
  atomic_fetch_add(&d->seen.calls, 1);
  return 0;
}

static void run_dest_map(cuv_op_t *copy, cuv_buffer_t *flag, unsigned value, dest_map_t *d) {
  cuv_queue_t *queue;
  assert_cuv_ok(cuv_queue_create(&queue, NULL, NULL));
  done_rec_t done = {0};
  cuv_op_t *op = cuv_map(cuv_seq(cuvt_slow_write(SLOW_MS, value, flag), copy), record_dest, d);
  assert_cuv_ok(cuv_submit(queue, op, record_done, &done, NULL));
  drain_all(queue);
  assert_cuv_ok(cuv_queue_destroy(queue));
  assert_int_equal(done.calls, 1);
  assert_cuv_ok(done.status);
  assert_int_equal(atomic_load(&d->seen.calls), 1);
  assert_int_equal(d->seen.value[0], value);
}

static void test_map_sees_download_into_and_dtoh(void **state) {
  cuv_buffer_t *flag = cuvt_buffer(sizeof(unsigned));
  cuv_host_buffer_t *host;
  assert_cuv_ok(cuv_host_buffer_create(&host, cuvt_device(), sizeof(unsigned)));
  memset(cuv_host_buffer_data(host), 0, sizeof(unsigned));
  unsigned value = fresh_value();
  dest_map_t into = {.dest = cuv_host_buffer_data(host)};
  run_dest_map(cuv_download_into(host, 0, flag, 0, sizeof value), flag, value, &into);
  unsigned *pinned_or_not = calloc(1, sizeof *pinned_or_not);
  value = fresh_value();
  dest_map_t dtoh = {.dest = pinned_or_not};
  run_dest_map(cuv_memcpy_dtoh(pinned_or_not, flag, 0, sizeof value), flag, value, &dtoh);
  free(pinned_or_not);
  cuv_host_buffer_unref(host);
  cuv_buffer_unref(flag);
}

/* Downloads made on a fork's branches (other streams) and in a zip: the map over the tuple sees
 * every item's data. */
static int record_tuple(cuv_output_t *value, void *arg) {
  seen_t *s = arg;
  for (size_t i = 0; i < 2; i++)
    memcpy(&s->value[i], cuv_tuple_get(value, i)->data, sizeof s->value[i]);
  atomic_fetch_add(&s->calls, 1);
  return 0;
}

static void check_tuple_map(cuv_op_t *(*combine)(cuv_op_t *const *, size_t)) {
  cuv_buffer_t *a = cuvt_buffer(sizeof(unsigned)), *b = cuvt_buffer(sizeof(unsigned));
  unsigned va = fresh_value(), vb = fresh_value();
  cuv_op_t *items[2] = {written_then_downloaded(va, a), written_then_downloaded(vb, b)};
  seen_t seen = {0};
  cuv_queue_t *queue;
  assert_cuv_ok(cuv_queue_create(&queue, NULL, NULL));
  done_rec_t done = {0};
  assert_cuv_ok(cuv_submit(queue, cuv_map(combine(items, 2), record_tuple, &seen), record_done,
                           &done, NULL));
  drain_all(queue);
  assert_cuv_ok(cuv_queue_destroy(queue));
  assert_int_equal(done.calls, 1);
  assert_cuv_ok(done.status);
  assert_int_equal(atomic_load(&seen.calls), 1);
  assert_int_equal(seen.value[0], va);
  assert_int_equal(seen.value[1], vb);
  cuv_buffer_unref(a);
  cuv_buffer_unref(b);
}

static void test_map_over_fork_and_zip(void **state) {
  check_tuple_map(cuv_fork);
  check_tuple_map(cuv_zip);
}

/* A shared download consumed by a clone in a second submission on another stream: the clone's
 * map sees the producer's data. */
static void test_map_over_shared_clone(void **state) {
  cuv_buffer_t *flag = cuvt_buffer(sizeof(unsigned));
  unsigned value = fresh_value();
  cuv_shared_t *sh = cuv_shared(written_then_downloaded(value, flag));
  cuv_stream_t *s1, *s2;
  assert_cuv_ok(cuv_stream_create(&s1, cuvt_device()));
  assert_cuv_ok(cuv_stream_create(&s2, cuvt_device()));
  cuv_queue_t *queue;
  assert_cuv_ok(cuv_queue_create(&queue, NULL, NULL));
  done_rec_t first = {0}, second = {0};
  seen_t seen = {0};
  cuv_submit_opts_t on1 = {.stream = s1}, on2 = {.stream = s2};
  assert_cuv_ok(cuv_submit(queue, cuv_shared_clone(sh), record_done, &first, &on1));
  assert_cuv_ok(cuv_submit(queue, cuv_map(cuv_shared_clone(sh), record_map, &seen), record_done,
                           &second, &on2));
  drain_all(queue);
  assert_cuv_ok(cuv_queue_destroy(queue));
  assert_int_equal(first.calls + second.calls, 2);
  assert_cuv_ok(first.status);
  assert_cuv_ok(second.status);
  assert_int_equal(atomic_load(&seen.calls), 1);
  assert_int_equal(seen.value[0], value);
  assert_int_equal(cuv_shared_runs(sh), 1);
  cuv_shared_unref(sh);
  cuv_stream_destroy(s1);
  cuv_stream_destroy(s2);
  cuv_buffer_unref(flag);
}

/* Inside a graph capture nothing runs until the graph is launched: the map runs at capture time
 * without waiting (and without breaking the capture). */
static int count_calls(cuv_output_t *value, void *arg) {
  atomic_fetch_add((atomic_int *)arg, 1);
  return 0;
}

static void test_capture_does_not_wait(void **state) {
  cuv_buffer_t *flag = cuvt_buffer(sizeof(unsigned));
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  atomic_int calls = 0;
  cuv_graph_t *graph = NULL;
  cuv_output_t out;
  unsigned value = fresh_value();
  cuv_op_t *op = cuv_map(written_then_downloaded(value, flag), count_calls, &calls);
  assert_cuv_ok(cuv_graph_capture(&graph, op, stream, &out));
  assert_int_equal(atomic_load(&calls), 1);
  assert_cuv_ok(cuv_sync_on(stream, cuv_graph_launch(graph), NULL));
  assert_int_equal(*(unsigned *)out.data, value); /* the replay wrote and downloaded it */
  assert_int_equal(atomic_load(&calls), 1);
  cuv_output_release(&out);
  cuv_graph_unref(graph);
  cuv_stream_destroy(stream);
  cuv_buffer_unref(flag);
}

/* A map over work that copies nothing to the host does not make the submission wait, so an idle
 * engine still lets the submitting thread make its calls (the latency path). */
static void test_no_download_no_hand_off(void **state) {
  cuv_config_t config;
  assert_cuv_ok(cuv_config_get(&config));
  if (config.submit_threads == 0 || config.submit_inline != CUV_SUBMIT_INLINE_IDLE)
    return;
  cuv_buffer_t *buf = cuvt_buffer(sizeof(unsigned));
  cuv_queue_t *queue;
  assert_cuv_ok(cuv_queue_create(&queue, NULL, NULL));
  atomic_int calls = 0;
  done_rec_t done = {0};
  cuv_stats_t before, after;
  cuv_stats(&before);
  assert_cuv_ok(cuv_submit(queue, cuv_map(cuv_memset32(buf, 0, 5, 1), count_calls, &calls),
                           record_done, &done, NULL));
  drain_all(queue);
  cuv_stats(&after);
  assert_cuv_ok(cuv_queue_destroy(queue));
  assert_int_equal(done.calls, 1);
  assert_int_equal(atomic_load(&calls), 1);
  assert_int_equal(after.engine_inline, before.engine_inline + 1);
  cuv_buffer_unref(buf);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_map_sees_download_sync),
      cmocka_unit_test(test_map_sees_download_submit),
      cmocka_unit_test(test_then_builds_from_downloaded_on_loop),
      cmocka_unit_test(test_map_sees_download_into_and_dtoh),
      cmocka_unit_test(test_map_over_fork_and_zip),
      cmocka_unit_test(test_map_over_shared_clone),
      cmocka_unit_test(test_capture_does_not_wait),
      cmocka_unit_test(test_no_download_no_hand_off),
  };
  return cuvt_run(tests);
}
