/* A kernel and its module outlive the launches that use them. The caller releases its kernel and
 * unloads its module right after submitting slow launches; cuv must hold both until the work is
 * proven complete, so the driver's cuModuleUnload comes only after the last launch ran. The
 * simulator counts unloads that found a launch of the module still queued or running
 * (cuv_sim_unloads_with_pending_launches): it must stay where it was, and exactly one unload must
 * have happened by the end (the hold is released, not leaked). On the GPU the results are checked
 * (a module unloaded under a launch may fault or run garbage there). */
#include <time.h>

#include "counted.h"
#include "gate.h"

#define SLOW_MS 80u

/* sleep_then_write from the caller's own module. */
static cuv_op_t *slow_write(cuv_kernel_t *k, unsigned ms, unsigned value, cuv_buffer_t *buf) {
  unsigned long long ns = (unsigned long long)ms * 1000000ull;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_WRITE(buf)};
  return cuv_launch(k, CUV_DIM1(1), CUV_DIM1(1), 0, args, 3);
}

static void load(cuv_module_t **mod, cuv_kernel_t **k) {
  assert_cuv_ok(cuv_module_load_file(mod, cuvt_device(), cuvt_ptx_path()));
  assert_cuv_ok(cuv_kernel_get(k, *mod, "sleep_then_write"));
}

/* Counters of the simulator (0 on the GPU, where nothing is counted). */
static unsigned long unloads_pending(void) {
  return cuvt_is_sim() ? cuv_sim_unloads_with_pending_launches() : 0;
}

static unsigned long unload_calls(void) {
  return cuvt_is_sim() ? cuv_sim_calls("cuModuleUnload") : 0;
}

static void wait_calls(cuv_queue_t *q, const cuvt_seen_t *seen) {
  while (seen->calls == 0) {
    int rc = cuv_queue_wait(q, 10000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    cuv_queue_drain(q);
  }
}

/* One slow launch and a download through cuv_submit; kernel and module dropped at once. */
static void test_release_after_submit(void **state) {
  cuv_module_t *mod;
  cuv_kernel_t *k;
  load(&mod, &k);
  cuv_buffer_t *buf = cuvt_buffer(sizeof(unsigned));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  unsigned long pending_before = unloads_pending(), calls_before = unload_calls();
  unsigned value = cuvt_nonzero_u32();
  cuvt_seen_t seen = {0};

  cuv_op_t *op = cuv_seq(slow_write(k, SLOW_MS, value, buf),
                         cuv_download(buf, 0, sizeof(unsigned)));
  assert_cuv_ok(cuv_submit(q, op, cuvt_record_seen, &seen, NULL));
  cuv_kernel_unref(k);
  cuv_module_unref(mod);
  wait_calls(q, &seen);

  assert_int_equal(seen.calls, 1);
  assert_cuv_ok(seen.status);
  assert_int_equal(seen.got, value);
  assert_int_equal(unloads_pending(), pending_before);
  if (cuvt_is_sim())
    assert_int_equal(unload_calls() - calls_before, 1); /* unloaded once the work retired */
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_buffer_unref(buf);
}

/* Several launches of one kernel in one chain (the submission holds the kernel once for all of
 * them: lib/launch.c hold_kernel), each writing its own fresh value; the caller drops kernel and
 * module after building the chain, before submitting it, so the ops' references and then the
 * submission's are all that keep them. */
static void test_release_chain_of_launches(void **state) {
  enum { LAUNCHES = 3 };
  cuv_module_t *mod;
  cuv_kernel_t *k;
  load(&mod, &k);
  cuv_buffer_t *buf = cuvt_buffer(LAUNCHES * sizeof(unsigned));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  unsigned long pending_before = unloads_pending(), calls_before = unload_calls();
  unsigned values[LAUNCHES];
  cuv_op_t *op = NULL;
  for (size_t i = 0; i < LAUNCHES; i++) {
    values[i] = cuvt_nonzero_u32();
    unsigned long long ns = (unsigned long long)SLOW_MS / LAUNCHES * 1000000ull;
    cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(values[i]),
                        CUV_ARG_WRITE_AT(buf, i * sizeof(unsigned))};
    cuv_op_t *launch = cuv_launch(k, CUV_DIM1(1), CUV_DIM1(1), 0, args, 3);
    op = op ? cuv_seq(op, launch) : launch;
  }
  op = cuv_seq(op, cuv_download(buf, 0, LAUNCHES * sizeof(unsigned)));
  cuv_kernel_unref(k); /* the ops hold it now */
  cuv_module_unref(mod);
  cuvt_seen_t seen = {0};
  unsigned got[LAUNCHES] = {0};

  assert_cuv_ok(cuv_submit(q, op, cuvt_record_seen, &seen, NULL));
  wait_calls(q, &seen);
  assert_int_equal(seen.calls, 1);
  assert_cuv_ok(seen.status);
  /* cuvt_record_seen keeps the first word; all are read below */
  assert_int_equal(seen.got, values[0]);
  cuvt_read(got, buf, 0, sizeof got);
  for (size_t i = 0; i < LAUNCHES; i++)
    assert_int_equal(got[i], values[i]);
  assert_int_equal(unloads_pending(), pending_before);
  if (cuvt_is_sim())
    assert_int_equal(unload_calls() - calls_before, 1);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_buffer_unref(buf);
}

/* ---- distinct objects of one kind in one submission ---- */

/* A then over gated work: its callback runs once the ops before it were enqueued (their holds
 * taken, the ops' own references dropped), while the gate keeps that work pending. It returns
 * the download of the buffer the work wrote. */
typedef struct walked {
  atomic_int calls;
  cuv_buffer_t *buf;
  size_t bytes;
} walked_t;

static cuv_op_t *note_walked(cuv_output_t *input, void *arg) {
  walked_t *w = arg;
  atomic_fetch_add(&w->calls, 1);
  return cuv_download(w->buf, 0, w->bytes);
}

static void wait_walked(walked_t *w) {
  struct timespec pause = {0, 1000000L};
  for (int waited = 0; atomic_load(&w->calls) == 0; waited++) {
    if (waited > 20000) /* a watchdog, not a timing assertion */
      fail_msg("the submission's callback never ran");
    nanosleep(&pause, NULL);
  }
}

/* One write of `value` at word `at` of buf by kernel k (sleep_then_write, no sleep). */
static cuv_op_t *write_at(cuv_kernel_t *k, unsigned value, cuv_buffer_t *buf, size_t at) {
  unsigned long long ns = 0;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value),
                      CUV_ARG_WRITE_AT(buf, at * sizeof(unsigned))};
  return cuv_launch(k, CUV_DIM1(1), CUV_DIM1(1), 0, args, 3);
}

/* Two modules (the same file loaded twice), a kernel of each launched in one submission behind a
 * gate; the caller drops both kernels and modules before submitting. The submission holds each
 * kernel (lib/launch.c hold_kernel: one hold per kernel, not per release function), so neither
 * module is unloaded while the gate keeps its launch pending, both launches write their values,
 * and both modules are unloaded once the work retired. */
static void test_two_modules_in_one_submission(void **state) {
  cuv_module_t *mods[2];
  cuv_kernel_t *ks[2];
  load(&mods[0], &ks[0]);
  load(&mods[1], &ks[1]);
  assert_ptr_not_equal(mods[0], mods[1]);
  cuv_buffer_t *buf = cuvt_buffer(2 * sizeof(unsigned));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  unsigned values[2] = {cuvt_nonzero_u32(), cuvt_nonzero_u32()};
  cuv_op_t *op = cuvt_gate_wait(&g);
  for (size_t i = 0; i < 2; i++)
    op = cuv_seq(op, write_at(ks[i], values[i], buf, i));
  walked_t walked = {0, buf, 2 * sizeof(unsigned)};
  op = cuv_then(op, note_walked, &walked);
  unsigned long pending_before = unloads_pending(), calls_before = unload_calls();
  for (size_t i = 0; i < 2; i++) {
    cuv_kernel_unref(ks[i]); /* the ops hold them now */
    cuv_module_unref(mods[i]);
  }
  cuvt_seen_t seen = {0};

  assert_cuv_ok(cuv_submit(q, op, cuvt_record_seen, &seen, NULL));
  wait_walked(&walked);
  unsigned long calls_gated = unload_calls(), pending_gated = unloads_pending();
  int seen_gated = seen.calls;
  cuvt_gate_open(&g); /* before any assert: a failed one must not leave the gate closed */
  assert_int_equal(calls_gated, calls_before); /* both held while the gate was closed */
  assert_int_equal(pending_gated, pending_before);
  assert_int_equal(seen_gated, 0);
  wait_calls(q, &seen);
  assert_int_equal(seen.calls, 1);
  assert_cuv_ok(seen.status);
  assert_int_equal(seen.got, values[0]);
  unsigned got[2] = {0};
  cuvt_read(got, buf, 0, sizeof got);
  assert_int_equal(got[0], values[0]);
  assert_int_equal(got[1], values[1]);
  assert_int_equal(unloads_pending(), pending_before);
  if (cuvt_is_sim())
    assert_int_equal(unload_calls() - calls_before, 2); /* each unloaded once, at retirement */
  assert_int_equal(atomic_load(&walked.calls), 1);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuvt_gate_close(&g);
  cuv_buffer_unref(buf);
}

/* Two untracked buffers (CUV_HAZARD_NONE: held without an access record, lib/hazard.c
 * hold_untracked) written in one submission behind a gate, whose last references the caller drops
 * after submitting: neither is freed while the gate keeps the writes pending (the simulator
 * counts cuMemFree), both get their values (a download in the same submission shows them), and
 * both are freed once the work retired. */
static void test_two_untracked_buffers_in_one_submission(void **state) {
  cuv_module_t *mod;
  cuv_kernel_t *k;
  load(&mod, &k);
  cuv_buffer_t *bufs[2] = {cuvt_buffer(sizeof(unsigned)), cuvt_buffer(sizeof(unsigned))};
  cuv_buffer_t *out = cuvt_buffer(2 * sizeof(unsigned));
  cuv_queue_t *q = NULL;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  unsigned values[2] = {cuvt_nonzero_u32(), cuvt_nonzero_u32()};
  cuv_op_t *op = cuvt_gate_wait(&g);
  for (size_t i = 0; i < 2; i++) {
    assert_cuv_ok(cuv_buffer_set_hazard_mode(bufs[i], CUV_HAZARD_NONE));
    op = cuv_seq(op, write_at(k, values[i], bufs[i], 0));
    op = cuv_seq(op, cuv_memcpy_dtod(out, i * sizeof(unsigned), bufs[i], 0, sizeof(unsigned)));
  }
  walked_t walked = {0, out, 2 * sizeof(unsigned)};
  op = cuv_then(op, note_walked, &walked);
  unsigned long frees = cuvt_is_sim() ? cuv_sim_calls("cuMemFree") : 0;
  cuvt_seen_t seen = {0};

  assert_cuv_ok(cuv_submit(q, op, cuvt_record_seen, &seen, NULL));
  cuv_buffer_unref(bufs[0]); /* the caller's last references */
  cuv_buffer_unref(bufs[1]);
  wait_walked(&walked);
  unsigned long frees_gated = cuvt_is_sim() ? cuv_sim_calls("cuMemFree") : 0;
  cuvt_gate_open(&g); /* before any assert: a failed one must not leave the gate closed */
  assert_int_equal(frees_gated, frees); /* held while the gate was closed */
  wait_calls(q, &seen);
  assert_int_equal(seen.calls, 1);
  assert_cuv_ok(seen.status);
  unsigned got[2] = {0};
  cuvt_read(got, out, 0, sizeof got);
  assert_int_equal(got[0], values[0]);
  assert_int_equal(got[1], values[1]);
  if (cuvt_is_sim())
    assert_int_equal(cuv_sim_calls("cuMemFree") - frees, 2); /* freed at retirement */
  assert_cuv_ok(cuv_queue_destroy(q));
  cuvt_gate_close(&g);
  cuv_buffer_unref(out);
  cuv_kernel_unref(k);
  cuv_module_unref(mod);
}

/* Fills a fresh buffer with a random value through op_of(buf, value) and checks every word. */
static void check_fills(cuv_op_t *(*op_of)(cuv_buffer_t *, unsigned, void *), void *arg) {
  cuv_buffer_t *buf = cuvt_buffer(64 * sizeof(unsigned));
  unsigned value = cuvt_nonzero_u32(), got[64];
  assert_cuv_ok(cuv_sync(op_of(buf, value, arg), NULL));
  cuvt_read(got, buf, 0, sizeof got);
  for (int i = 0; i < 64; i++)
    assert_int_equal(got[i], value);
  cuv_buffer_unref(buf);
}

static cuv_op_t *fill_with(cuv_buffer_t *buf, unsigned value, void *kernel) {
  cuv_arg_t args[] = {CUV_ARG_VALUE((unsigned){64}), CUV_ARG_VALUE(value), CUV_ARG_WRITE(buf)};
  return cuv_launch(kernel, CUV_DIM1(1), CUV_DIM1(64), 0, args, 3);
}

/* X_ref of every reference-counted object returns it with one more reference: after the
 * original reference is dropped the object still works, and only the last unref ends it (on the
 * simulator: the module is unloaded then, not before). NULL in, NULL out. */
static void test_ref_keeps_each_object(void **state) {
  cuv_module_t *mod;
  assert_cuv_ok(cuv_module_load_file(&mod, cuvt_device(), cuvt_ptx_path()));
  cuv_kernel_t *k;
  assert_cuv_ok(cuv_kernel_get(&k, mod, "fill_u32"));
  unsigned long calls_before = unload_calls();
  assert_ptr_equal(cuv_module_ref(mod), mod);
  cuv_module_unref(mod);
  assert_ptr_equal(cuv_kernel_ref(k), k);
  cuv_kernel_unref(k);
  check_fills(fill_with, k);
  cuv_module_unref(mod); /* the kernel still holds it */
  check_fills(fill_with, k);
  assert_int_equal(unload_calls(), calls_before);
  cuv_kernel_unref(k);
  if (cuvt_is_sim())
    assert_int_equal(unload_calls() - calls_before, 1);

  cuv_device_t *dev = cuv_device_ref(cuvt_device());
  assert_ptr_equal(dev, cuvt_device());
  cuv_device_unref(dev);
  assert_null(cuv_device_ref(NULL));
  assert_null(cuv_module_ref(NULL));
  assert_null(cuv_kernel_ref(NULL));
  assert_null(cuv_graph_ref(NULL));
  assert_null(cuv_shared_ref(NULL));
}

/* A graph and a shared op survive their original reference through X_ref. */
static void test_ref_keeps_graph_and_shared(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(64 * sizeof(unsigned));
  unsigned value = cuvt_nonzero_u32(), got[64];
  cuv_graph_t *g;
  assert_cuv_ok(cuv_graph_capture(&g, cuvt_fill_u32(buf, 64, value), NULL, NULL));
  assert_ptr_equal(cuv_graph_ref(g), g);
  cuv_graph_unref(g);
  assert_cuv_ok(cuv_sync_on(cuv_graph_stream(g), cuv_graph_launch(g), NULL));
  cuvt_read(got, buf, 0, sizeof got);
  for (int i = 0; i < 64; i++)
    assert_int_equal(got[i], value);
  cuv_graph_unref(g);

  cuv_shared_t *sh = cuv_shared(cuvt_fill_u32(buf, 64, value + 1));
  assert_ptr_equal(cuv_shared_ref(sh), sh);
  cuv_shared_unref(sh);
  assert_cuv_ok(cuv_sync(cuv_shared_clone(sh), NULL));
  cuvt_read(got, buf, 0, sizeof got);
  for (int i = 0; i < 64; i++)
    assert_int_equal(got[i], value + 1);
  assert_int_equal(cuv_shared_runs(sh), 1);
  cuv_shared_unref(sh);
  cuv_shared_t *failed = cuv_shared(NULL); /* a static handle: ref and unref do nothing */
  assert_ptr_equal(cuv_shared_ref(failed), failed);
  cuv_shared_unref(failed);
  cuv_buffer_unref(buf);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_release_after_submit),
      cmocka_unit_test(test_release_chain_of_launches),
      cmocka_unit_test(test_two_modules_in_one_submission),
      cmocka_unit_test(test_two_untracked_buffers_in_one_submission),
      cmocka_unit_test(test_ref_keeps_each_object),
      cmocka_unit_test(test_ref_keeps_graph_and_shared),
  };
  return cuvt_run(tests);
}
