/* A kernel and its module outlive the launches that use them. The caller releases its kernel and
 * unloads its module right after submitting slow launches; cuv must hold both until the work is
 * proven complete, so the driver's cuModuleUnload comes only after the last launch ran. The
 * simulator counts unloads that found a launch of the module still queued or running
 * (cuv_sim_unloads_with_pending_launches): it must stay where it was, and exactly one unload must
 * have happened by the end (the hold is released, not leaked). On the GPU the results are checked
 * (a module unloaded under a launch may fault or run garbage there). */
#include "counted.h"

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
  assert_cuv_ok(cuv_submit(op, q, cuvt_record_seen, &seen, NULL));
  cuv_kernel_release(k);
  cuv_module_unload(mod);
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
                        {CUV_ARG_KIND_WRITE, buf, i * sizeof(unsigned), NULL, 0}};
    cuv_op_t *launch = cuv_launch(k, CUV_DIM1(1), CUV_DIM1(1), 0, args, 3);
    op = op ? cuv_seq(op, launch) : launch;
  }
  op = cuv_seq(op, cuv_download(buf, 0, LAUNCHES * sizeof(unsigned)));
  cuv_kernel_release(k); /* the ops hold it now */
  cuv_module_unload(mod);
  cuvt_seen_t seen = {0};
  unsigned got[LAUNCHES] = {0};

  assert_cuv_ok(cuv_submit(op, q, cuvt_record_seen, &seen, NULL));
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

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_release_after_submit),
      cmocka_unit_test(test_release_chain_of_launches),
  };
  return cuvt_run(tests);
}
