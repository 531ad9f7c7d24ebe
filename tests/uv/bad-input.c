/* Bad input anywhere returns a clear error (tests/README.md, "Bad input", has the table): NULL
 * pointers, zero and huge sizes, offsets out of range, objects of two devices, kernels given the
 * wrong arguments, error ops through every executor, callbacks that return nonsense or close their
 * own bridge, queues destroyed with work pending, closing twice, unknown tickets. Every refused op
 * is consumed exactly once (counted releases), and a failed executor leaves its output cleared.
 *
 * An op handed to a second owner while its first (a combinator, a shared op) still holds it is
 * refused with CUV_ECONSUMED and stays with its first owner (test_op_used_twice); once an op was
 * executed its node is freed, and a use after that is a use after free no API can detect. Closing
 * a device, a stream or a module one time too many is the same (reference counted: one close per
 * open). */
#include <cuda.h>
#include <uv.h>

#include <cuv/uv.h>

#include "counted.h"
#include "test_kernels_launchers.h"

/* `expr` (an int status) is `code`; printed with both names when not. */
#define EXPECT(expr, code)                                                                        \
  do {                                                                                            \
    int got_ = (expr), want_ = (code);                                                            \
    if (got_ != want_)                                                                            \
      print_error("%s: %s, want %s\n", #expr, cuv_err_name(got_), cuv_err_name(want_));          \
    assert_int_equal(got_, want_);                                                                \
  } while (0)

/* An op built from bad input carries `code`, and executing it reports the same. */
#define EXPECT_OP(expr, code)                                                                     \
  do {                                                                                            \
    cuv_op_t *op_ = (expr);                                                                       \
    assert_non_null(op_);                                                                         \
    EXPECT(cuv_op_error(op_), (code));                                                            \
    EXPECT(cuv_sync(op_, NULL), (code));                                                          \
  } while (0)

/* A driver's refusal: `code` on the simulator, whose answers are fixed; on a GPU, whichever
 * CUresult its driver gives (CUV_ECUDA), as long as it refuses. */
#define EXPECT_DRIVER(expr, code)                                                                 \
  do {                                                                                            \
    int status_ = (expr);                                                                         \
    if (cuvt_is_sim())                                                                            \
      EXPECT(status_, (code));                                                                    \
    else                                                                                          \
      assert_true(CUV_IS_ECUDA(status_));                                                         \
  } while (0)

static atomic_int releases;

static cuv_op_t *counted(void) { return cuvt_counted_value(1, &releases); }

/* The op built by `expr` from one counted value fails with `code` and released the value once. */
#define EXPECT_CONSUMED(expr, code)                                                               \
  do {                                                                                            \
    atomic_store(&releases, 0);                                                                   \
    EXPECT_OP((expr), (code));                                                                    \
    assert_int_equal(atomic_load(&releases), 1);                                                  \
  } while (0)

static cuv_op_t *then_unit(cuv_output_t *in, void *arg) { return cuv_value(NULL, NULL); }
static int map_none(cuv_output_t *value, void *arg) { return 0; }
static cuv_op_t *context_unit(cuv_stream_t *stream, void *arg) { return cuv_value(NULL, NULL); }

/* ---- NULL pointers ---- */

static void test_null_arguments(void **state) {
  cuv_device_t *dev = cuvt_device();
  cuv_buffer_t *buf = cuvt_buffer(64);
  unsigned char host[64] = {0};
  cuv_stream_t *s;
  cuv_buffer_t *b;
  cuv_module_t *m;
  cuv_kernel_t *k;
  cuv_policy_t *p;
  size_t n;
  int v;

  EXPECT(cuv_device_count(NULL), CUV_EINVAL);
  EXPECT(cuv_device_open(NULL, 0), CUV_EINVAL);
  EXPECT(cuv_device_attribute(NULL, 1, &v), CUV_EINVAL);
  EXPECT(cuv_device_attribute(dev, 1, NULL), CUV_EINVAL);
  EXPECT(cuv_device_bind(NULL), CUV_EINVAL);
  EXPECT(cuv_device_ordinal(NULL), CUV_EINVAL);
  assert_null(cuv_device_name(NULL));
  assert_null(cuv_device_context(NULL));
  cuv_device_unref(NULL);

  EXPECT(cuv_stream_create(NULL, dev), CUV_EINVAL);
  EXPECT(cuv_stream_create(&s, NULL), CUV_EINVAL);
  EXPECT(cuv_stream_wrap(NULL, dev, NULL), CUV_EINVAL);
  EXPECT(cuv_stream_wrap(&s, NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_stream_synchronize(NULL), CUV_EINVAL);
  assert_null(cuv_stream_handle(NULL));
  assert_null(cuv_stream_device(NULL));
  assert_int_equal(cuv_stream_in_flight(NULL), 0);
  cuv_stream_destroy(NULL);

  EXPECT(cuv_buffer_create(NULL, dev, 64), CUV_EINVAL);
  EXPECT(cuv_buffer_create(&b, NULL, 64), CUV_EINVAL);
  EXPECT(cuv_buffer_set_hazard_mode(NULL, CUV_HAZARD_ORDER), CUV_EINVAL);
  assert_null(cuv_buffer_ref(NULL));
  assert_int_equal(cuv_buffer_ptr(NULL), 0);
  assert_int_equal(cuv_buffer_size(NULL), 0);
  assert_null(cuv_buffer_device(NULL));
  cuv_buffer_unref(NULL);

  EXPECT(cuv_module_load_data(NULL, dev, "x", 0), CUV_EINVAL);
  EXPECT(cuv_module_load_data(&m, NULL, "x", 0), CUV_EINVAL);
  EXPECT(cuv_module_load_data(&m, dev, NULL, 0), CUV_EINVAL);
  EXPECT(cuv_module_load_file(&m, dev, NULL), CUV_EINVAL);
  EXPECT(cuv_module_load_file(NULL, dev, cuvt_ptx_path()), CUV_EINVAL);
  EXPECT(cuv_kernel_get(&k, NULL, "saxpy"), CUV_EINVAL);
  EXPECT(cuv_kernel_param_count(NULL, &n), CUV_EINVAL);
  EXPECT(cuv_kernel_param_count(cuvt_kernel_ok("saxpy"), NULL), CUV_EINVAL);
  cuv_module_unref(NULL);
  cuv_kernel_unref(NULL);

  EXPECT_OP(cuv_alloc(NULL, 64), CUV_EINVAL);
  EXPECT_OP(cuv_free(NULL), CUV_EINVAL);
  EXPECT_OP(cuv_memcpy_htod(NULL, 0, host, 4, CUV_COPY_STAGE), CUV_EINVAL);
  EXPECT_OP(cuv_memcpy_htod(buf, 0, NULL, 4, CUV_COPY_STAGE), CUV_EINVAL);
  EXPECT_OP(cuv_memcpy_dtoh(NULL, buf, 0, 4), CUV_EINVAL);
  EXPECT_OP(cuv_memcpy_dtoh(host, NULL, 0, 4), CUV_EINVAL);
  EXPECT_OP(cuv_memcpy_dtod(NULL, 0, buf, 0, 4), CUV_EINVAL);
  EXPECT_OP(cuv_memcpy_dtod(buf, 0, NULL, 0, 4), CUV_EINVAL);
  EXPECT_OP(cuv_memset8(NULL, 0, 0, 4), CUV_EINVAL);
  EXPECT_OP(cuv_memset16(NULL, 0, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_memset32(NULL, 0, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_download(NULL, 0, 4), CUV_EINVAL);
  EXPECT_OP(cuv_fill8(NULL, 4, 0), CUV_EINVAL);
  EXPECT_OP(cuv_fill16(NULL, 4, 0), CUV_EINVAL);
  EXPECT_OP(cuv_fill32(NULL, 4, 0), CUV_EINVAL);
  EXPECT_OP(cuv_zeros(NULL, 4), CUV_EINVAL);
  EXPECT_OP(cuv_ones_f32(NULL, 4), CUV_EINVAL);
  EXPECT_OP(cuv_iota_u32(NULL, 4, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_iota_f32(NULL, 4, 0.0f, 1.0f), CUV_EINVAL);
  EXPECT_OP(cuv_dup(NULL), CUV_EINVAL);
  assert_null(cuv_output_buffer(NULL));
  EXPECT_OP(cuv_launch(NULL, CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0), CUV_EINVAL);
  EXPECT_OP(cuv_with_context(NULL, NULL, NULL), CUV_EINVAL);
  EXPECT_OP(cuv_shared_clone(NULL), CUV_EINVAL);
  EXPECT_OP(cuv_graph_launch(NULL), CUV_EINVAL);
  EXPECT_OP(cuv_then(NULL, then_unit, NULL), CUV_EINVAL);
  EXPECT_OP(cuv_map(NULL, map_none, NULL), CUV_EINVAL);
  EXPECT_OP(cuv_seq(NULL, NULL), CUV_EINVAL);
  EXPECT_OP(cuv_zip(NULL, 2), CUV_EINVAL);
  EXPECT_OP(cuv_fork(NULL, 2), CUV_EINVAL);
  cuv_shared_t *no_op = cuv_shared(NULL); /* never NULL: its clones carry the error */
  assert_non_null(no_op);
  EXPECT_OP(cuv_shared_clone(no_op), CUV_EINVAL);
  assert_int_equal(cuv_shared_runs(no_op), 0);
  cuv_shared_unref(no_op);
  EXPECT(cuv_op_error(NULL), CUV_EINVAL);
  EXPECT(cuv_op_device(NULL, &v), CUV_EINVAL);
  cuv_op_t *unit = cuv_value(NULL, NULL);
  EXPECT(cuv_op_device(unit, NULL), CUV_EINVAL);
  cuv_op_destroy(unit);
  cuv_op_destroy(NULL);
  cuv_shared_unref(NULL);
  assert_int_equal(cuv_shared_runs(NULL), 0);

  cuv_policy_ops_t ops = {NULL, NULL, NULL};
  EXPECT(cuv_policy_create(NULL, &ops, NULL), CUV_EINVAL);
  EXPECT(cuv_policy_create(&p, NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_policy_create(&p, &ops, NULL), CUV_EINVAL); /* no next_stream, no device */
  EXPECT(cuv_policy_round_robin(NULL, dev, 2), CUV_EINVAL);
  EXPECT(cuv_policy_round_robin(&p, NULL, 2), CUV_EINVAL);
  EXPECT(cuv_policy_least_loaded(&p, NULL, 2), CUV_EINVAL);
  EXPECT(cuv_policy_single(&p, NULL), CUV_EINVAL);
  EXPECT(cuv_policy_single(NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_policy_next_stream(NULL, NULL, &s), CUV_EINVAL);
  EXPECT(cuv_device_policy(NULL, &p), CUV_EINVAL);
  EXPECT(cuv_device_policy(dev, NULL), CUV_EINVAL);
  assert_null(cuv_policy_device(NULL));
  cuv_policy_destroy(NULL);

  EXPECT(cuv_queue_create(NULL, NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_queue_drain(NULL), CUV_EINVAL);
  uint64_t next = 7;
  EXPECT(cuv_queue_poll(NULL, 1, &next), CUV_EINVAL);
  assert_true(next == 7); /* left alone on failure */
  EXPECT(cuv_queue_wait(NULL, 0), CUV_EINVAL);
  int qfd = -1;
  EXPECT(cuv_queue_fd(NULL, &qfd), CUV_EINVAL);
  assert_int_equal(qfd, -1);
  EXPECT(cuv_queue_destroy(NULL), CUV_EINVAL);
  EXPECT(cuv_cancel(NULL, 1), CUV_EINVAL);
  assert_int_equal(cuv_queue_pending(NULL), 0);
  cuv_queue_close(NULL);

  EXPECT(cuv_graph_update(NULL, cuv_value(NULL, NULL)), CUV_EINVAL);
  assert_null(cuv_graph_stream(NULL));
  cuv_graph_unref(NULL);

  cuv_output_release(NULL);
  cuv_output_t taken = cuv_output_take(NULL);
  assert_null(taken.data);
  assert_null(cuv_tuple_get(NULL, 0));
  cuv_buffer_unref(buf);
}

/* ---- ops are consumed on every path ---- */

/* A combinator or executor given a bad argument still consumes the op it was handed (released
 * once, counted): there is nothing left for the caller to use a second time. */
static void test_op_consumed_on_every_path(void **state) {
  EXPECT_CONSUMED(cuv_then(counted(), NULL, NULL), CUV_EINVAL);
  EXPECT_CONSUMED(cuv_then_unchecked(counted(), NULL, NULL), CUV_EINVAL);
  EXPECT_CONSUMED(cuv_map(counted(), NULL, NULL), CUV_EINVAL);
  EXPECT_CONSUMED(cuv_seq(counted(), NULL), CUV_EINVAL);
  EXPECT_CONSUMED(cuv_seq(NULL, counted()), CUV_EINVAL);
  cuv_op_t *one_null[] = {counted(), NULL};
  atomic_store(&releases, 0);
  EXPECT_OP(cuv_zip(one_null, 2), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 1);
  cuv_op_t *two[] = {counted(), NULL};
  atomic_store(&releases, 0);
  EXPECT_OP(cuv_fork(two, 2), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 1);
  /* An error op inside a combinator makes the whole op carry its error; the rest is released. */
  cuv_op_t *with_error[] = {counted(), cuv_download(NULL, 0, 4), counted()};
  atomic_store(&releases, 0);
  EXPECT_OP(cuv_zip(with_error, 3), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 2);
  /* The argument that carries the op's arg is released too. */
  atomic_store(&releases, 0);
  cuvt_counted_t *arg = malloc(sizeof *arg);
  *arg = (cuvt_counted_t){1, &releases};
  EXPECT_OP(cuv_with_context(NULL, arg, cuvt_counted_release), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 1);
  /* Executors with a bad argument: the op is consumed, the output cleared. */
  cuv_output_t out = {(void *)1, NULL, NULL};
  atomic_store(&releases, 0);
  EXPECT(cuv_sync_on(NULL, counted(), &out), CUV_EINVAL);
  assert_null(out.data);
  out.data = (void *)1;
  EXPECT(cuv_sync_policy(NULL, counted(), &out), CUV_EINVAL);
  assert_null(out.data);
  out.data = (void *)1;
  EXPECT(cuv_enqueue_on(NULL, counted(), &out), CUV_EINVAL);
  assert_null(out.data);
  EXPECT(cuv_submit(NULL, counted(), NULL, NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_graph_update(NULL, counted()), CUV_EINVAL);
  EXPECT(cuv_graph_capture(NULL, counted(), NULL, &out), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 6);
  /* A launch refused for any reason consumes its op arguments (tests/ops/args-ops.c has more). */
  atomic_store(&releases, 0);
  cuv_arg_t op_arg[] = {CUV_ARG_OP_RW(counted())};
  EXPECT_OP(cuv_launch(NULL, CUV_DIM1(1), CUV_DIM1(1), 0, op_arg, 1), CUV_EINVAL);
  op_arg[0] = CUV_ARG_OP_RW(counted());
  EXPECT_OP(cuv_launch(cuvt_kernel_ok("add_one"), CUV_DIM1(0), CUV_DIM1(1), 0, op_arg, 1),
            CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 2);
}

static void count_stray(int status, cuv_output_t *output, void *arg) { ++*(int *)arg; }

/* An op used twice: handed to a second combinator or executor while the first still holds it, or
 * twice in one call. The second use is refused with CUV_ECONSUMED; the op stays with its first
 * owner, which still runs it; every value is released exactly once (counted). */
static void test_op_used_twice(void **state) {
  /* Twice in one call: the op is released once. */
  atomic_store(&releases, 0);
  cuv_op_t *a = counted();
  EXPECT_OP(cuv_seq(a, a), CUV_ECONSUMED);
  assert_int_equal(atomic_load(&releases), 1);
  atomic_store(&releases, 0);
  a = counted();
  cuv_op_t *list[] = {a, counted(), a};
  EXPECT_OP(cuv_zip(list, 3), CUV_ECONSUMED);
  assert_int_equal(atomic_load(&releases), 2);
  atomic_store(&releases, 0);
  a = counted();
  cuv_op_t *branches[] = {a, a};
  EXPECT_OP(cuv_fork(branches, 2), CUV_ECONSUMED);
  assert_int_equal(atomic_load(&releases), 1);

  /* Held by a first combinator: every second owner refuses it, the first still runs it. */
  atomic_store(&releases, 0);
  a = counted();
  cuv_op_t *first = cuv_seq(a, counted());
  EXPECT_OP(cuv_seq(a, counted()), CUV_ECONSUMED); /* the other op of that call: released */
  assert_int_equal(atomic_load(&releases), 1);
  EXPECT_OP(cuv_then(a, then_unit, NULL), CUV_ECONSUMED);
  EXPECT_OP(cuv_map(a, map_none, NULL), CUV_ECONSUMED);
  cuv_op_t *again[] = {a};
  EXPECT_OP(cuv_zip(again, 1), CUV_ECONSUMED);
  EXPECT_OP(cuv_fork(again, 1), CUV_ECONSUMED);
  cuv_output_t out = {(void *)1, NULL, NULL};
  EXPECT(cuv_sync(a, &out), CUV_ECONSUMED);
  assert_null(out.data);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int stray = 0;
  EXPECT(cuv_submit(q, a, count_stray, &stray, NULL), CUV_ECONSUMED);
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_int_equal(stray, 0);
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_shared_t *sh = cuv_shared(a);
  assert_non_null(sh);
  EXPECT(cuv_sync(cuv_shared_clone(sh), NULL), CUV_ECONSUMED);
  cuv_shared_unref(sh);
  cuv_op_destroy(a); /* not the caller's any more: nothing happens */
  assert_int_equal(atomic_load(&releases), 1);
  assert_cuv_ok(cuv_sync(first, NULL)); /* the first owner runs it, and releases both values */
  assert_int_equal(atomic_load(&releases), 3);

  /* Held by a shared op: a combinator refuses it; the shared op's clones still run it. */
  atomic_store(&releases, 0);
  a = counted();
  sh = cuv_shared(a);
  EXPECT_OP(cuv_seq(counted(), a), CUV_ECONSUMED);
  assert_int_equal(atomic_load(&releases), 1);
  assert_cuv_ok(cuv_sync(cuv_shared_clone(sh), NULL));
  cuv_shared_unref(sh);
  assert_int_equal(atomic_load(&releases), 2);
}

/* ---- sizes and offsets ---- */

static void test_zero_and_huge_sizes(void **state) {
  cuv_device_t *dev = cuvt_device();
  cuv_buffer_t *b = NULL;
  unsigned char host[64] = {0};
  EXPECT(cuv_buffer_create(&b, dev, 0), CUV_EINVAL);
  EXPECT_DRIVER(cuv_buffer_create(&b, dev, SIZE_MAX), CUV_ECUDA(CUDA_ERROR_OUT_OF_MEMORY));
  assert_null(b);
  EXPECT_OP(cuv_alloc(dev, 0), CUV_EINVAL);
  /* Built (only the device knows the size is too large), refused when executed. */
  EXPECT_DRIVER(cuv_sync(cuv_alloc(dev, SIZE_MAX), NULL), CUV_ECUDA(CUDA_ERROR_OUT_OF_MEMORY));

  cuv_buffer_t *buf = cuvt_buffer(64);
  /* Zero-byte copies and sets are valid no-ops (NULL host memory allowed then). */
  EXPECT(cuv_sync(cuv_memcpy_htod(buf, 0, NULL, 0, CUV_COPY_STAGE), NULL), 0);
  EXPECT(cuv_sync(cuv_memcpy_htod(buf, 64, host, 0, CUV_COPY_BORROW), NULL), 0);
  EXPECT(cuv_sync(cuv_memcpy_dtoh(NULL, buf, 0, 0), NULL), 0);
  EXPECT(cuv_sync(cuv_memcpy_dtod(buf, 0, buf, 0, 0), NULL), 0);
  EXPECT(cuv_sync(cuv_memset8(buf, 64, 0, 0), NULL), 0);
  EXPECT(cuv_sync(cuv_memset16(buf, 64, 0, 0), NULL), 0);
  EXPECT(cuv_sync(cuv_memset32(buf, 0, 0, 0), NULL), 0);
  EXPECT_OP(cuv_download(buf, 0, 0), CUV_EINVAL); /* an output of no bytes is refused */
  /* The buffer helpers: a new buffer of no elements, or more bytes than size_t holds. */
  EXPECT_OP(cuv_fill8(dev, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_fill16(dev, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_fill32(dev, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_zeros(dev, 0), CUV_EINVAL);
  EXPECT_OP(cuv_ones_f32(dev, 0), CUV_EINVAL);
  EXPECT_OP(cuv_iota_u32(dev, 0, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_iota_f32(dev, 0, 0.0f, 1.0f), CUV_EINVAL);
  EXPECT_OP(cuv_fill16(dev, SIZE_MAX / 2 + 1, 1), CUV_EINVAL);
  EXPECT_OP(cuv_fill32(dev, SIZE_MAX / 4 + 1, 1), CUV_EINVAL);
  EXPECT_OP(cuv_ones_f32(dev, SIZE_MAX / 4 + 1), CUV_EINVAL);
  EXPECT_OP(cuv_iota_u32(dev, SIZE_MAX / 4 + 1, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_iota_f32(dev, SIZE_MAX / 4 + 1, 0.0f, 1.0f), CUV_EINVAL);
  /* Built (only the device knows the size is too large), refused when executed. */
  EXPECT_DRIVER(cuv_sync(cuv_zeros(dev, SIZE_MAX), NULL), CUV_ECUDA(CUDA_ERROR_OUT_OF_MEMORY));
  /* Huge sizes: out of range, never an overflow. */
  EXPECT_OP(cuv_memcpy_htod(buf, 0, host, SIZE_MAX, CUV_COPY_STAGE), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_dtoh(host, buf, 0, SIZE_MAX), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_dtod(buf, 0, buf, 0, SIZE_MAX), CUV_ERANGE);
  EXPECT_OP(cuv_memset8(buf, 0, 0, SIZE_MAX), CUV_ERANGE);
  EXPECT_OP(cuv_memset32(buf, 0, 0, SIZE_MAX / 4), CUV_ERANGE);
  EXPECT_OP(cuv_memset32(buf, 0, 0, SIZE_MAX / 4 + 1), CUV_EINVAL); /* count * 4 overflows */
  EXPECT_OP(cuv_memset16(buf, 0, 0, SIZE_MAX / 2), CUV_ERANGE);
  EXPECT_OP(cuv_memset16(buf, 0, 0, SIZE_MAX / 2 + 1), CUV_EINVAL); /* count * 2 overflows */
  EXPECT_OP(cuv_download(buf, 0, SIZE_MAX), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_htod(buf, 0, host, 4, 7), CUV_EINVAL); /* no such flag */
  cuv_policy_t *p;
  EXPECT(cuv_policy_round_robin(&p, dev, 1025), CUV_EINVAL);
  EXPECT(cuv_policy_least_loaded(&p, dev, UINT32_MAX), CUV_EINVAL);
  cuv_buffer_unref(buf);
}

static void test_offsets_out_of_range(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(64);
  unsigned char host[64] = {0};
  EXPECT_OP(cuv_memcpy_htod(buf, 65, host, 0, CUV_COPY_STAGE), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_htod(buf, 61, host, 4, CUV_COPY_STAGE), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_htod(buf, SIZE_MAX, host, 2, CUV_COPY_STAGE), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_dtoh(host, buf, 1, 64), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_dtod(buf, 32, buf, 0, 33), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_dtod(buf, 0, buf, 33, 32), CUV_ERANGE);
  EXPECT_OP(cuv_memset8(buf, 64, 0, 1), CUV_ERANGE);
  EXPECT_OP(cuv_memset32(buf, 2, 0, 1), CUV_EINVAL); /* not 4-byte aligned */
  EXPECT_OP(cuv_memset32(buf, 64, 0, 1), CUV_ERANGE);
  EXPECT_OP(cuv_memset16(buf, 1, 0, 1), CUV_EINVAL); /* not 2-byte aligned */
  EXPECT_OP(cuv_memset16(buf, 62, 0, 2), CUV_ERANGE);
  EXPECT_OP(cuv_download(buf, SIZE_MAX - 1, 4), CUV_ERANGE);
  /* The end of a buffer is a valid place for nothing. */
  EXPECT(cuv_sync(cuv_memset8(buf, 64, 0, 0), NULL), 0);
  unsigned n = 1;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  args[1].offset = 65;
  EXPECT_OP(cuv_launch(cuvt_kernel_ok("add_one"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 2),
            CUV_ERANGE);
  cuv_arg_t ranges[][2] = {{CUV_ARG_VALUE(n), CUV_ARG_RW_RANGE(buf, 0, 65)},
                           {CUV_ARG_VALUE(n), CUV_ARG_RW_RANGE(buf, 60, 8)},
                           {CUV_ARG_VALUE(n), CUV_ARG_RW_RANGE(buf, 8, SIZE_MAX)}};
  for (size_t i = 0; i < 3; i++)
    EXPECT_OP(cuv_launch(cuvt_kernel_ok("add_one"), CUV_DIM1(1), CUV_DIM1(1), 0, ranges[i], 2),
              CUV_ERANGE);
  cuv_buffer_unref(buf);
}

/* ---- kernels ---- */

static void test_kernel_wrong_arguments(void **state) {
  cuv_kernel_t *add_one = cuvt_kernel_ok("add_one"); /* (unsigned n, float *x) */
  cuv_buffer_t *buf = cuvt_buffer(64);
  unsigned n = 16;
  double wide = 1.0;
  cuv_arg_t good[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  EXPECT(cuv_sync(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, good, 2), NULL), 0);

  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, NULL, 2), CUV_EINVAL);
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(0), CUV_DIM1(16), 0, good, 2), CUV_EINVAL);
  EXPECT_OP(cuv_launch(add_one, CUV_DIM3(1, 0, 1), CUV_DIM1(16), 0, good, 2), CUV_EINVAL);
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM3(16, 1, 0), 0, good, 2), CUV_EINVAL);
  cuv_arg_t bad_kind[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  bad_kind[1].kind = (enum cuv_arg_kind)9;
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, bad_kind, 2), CUV_EINVAL);
  cuv_arg_t null_scalar[] = {CUV_ARG_SCALAR(NULL, 4), CUV_ARG_RW(buf)};
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, null_scalar, 2), CUV_EINVAL);
  cuv_arg_t empty_scalar[] = {CUV_ARG_SCALAR(&n, 0), CUV_ARG_RW(buf)};
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, empty_scalar, 2), CUV_EINVAL);
  cuv_arg_t null_buffer[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(NULL)};
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, null_buffer, 2), CUV_EINVAL);
  cuv_arg_t unknown_flag[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  unknown_flag[1].flags = 1u << 7;
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, unknown_flag, 2), CUV_EINVAL);
  cuv_arg_t flagged_scalar[] = {CUV_ARG_MAY_ALIAS(CUV_ARG_VALUE(n)), CUV_ARG_RW(buf)};
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, flagged_scalar, 2), CUV_EINVAL);
  cuv_arg_t scalar_length[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  scalar_length[0].length = 4;
  EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, scalar_length, 2), CUV_EINVAL);

  /* Launch limits are the driver's: a block of 2048 threads fails when executed. */
  EXPECT_DRIVER(cuv_sync(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(2048), 0, good, 2), NULL),
                CUV_ECUDA(CUDA_ERROR_INVALID_VALUE));

  /* Count and sizes are checked where the driver reports them (CUDA 12.4+, the simulator);
   * elsewhere the launch goes to the driver as given. */
  size_t count;
  if (cuv_kernel_param_count(add_one, &count) != CUV_ENOTSUP) {
    assert_int_equal(count, 2);
    EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, good, 1), CUV_EARGS);
    cuv_arg_t three[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf), CUV_ARG_VALUE(n)};
    EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, three, 3), CUV_EARGS);
    cuv_arg_t wrong_size[] = {CUV_ARG_VALUE(wide), CUV_ARG_RW(buf)};
    EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, wrong_size, 2), CUV_EARGS);
    cuv_arg_t swapped[] = {CUV_ARG_RW(buf), CUV_ARG_VALUE(n)};
    EXPECT_OP(cuv_launch(add_one, CUV_DIM1(1), CUV_DIM1(16), 0, swapped, 2), CUV_EARGS);
  }

  cuv_kernel_t *k;
  cuv_module_t *mod;
  assert_cuv_ok(cuv_module_load_file(&mod, cuvt_device(), cuvt_ptx_path()));
  EXPECT(cuv_kernel_get(&k, mod, "no_such_kernel"), CUV_ENOTFOUND);
  char long_name[400];
  memset(long_name, 'k', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  EXPECT(cuv_kernel_get(&k, mod, long_name), CUV_EINVAL);
  EXPECT(cuv_kernel_get(NULL, mod, "saxpy"), CUV_EINVAL);
  cuv_module_unref(mod);
  EXPECT(cuv_module_load_file(&mod, cuvt_device(), "/nonexistent/kernels.ptx"), CUV_EIO);
  cuv_buffer_unref(buf);
}

/* ---- typed launchers (tests/kernels' generated by cuv-launchers) ---- */

static void test_typed_launchers(void **state) {
  test_kernels_module_t tk, cleared;
  cuv_buffer_t *buf = cuvt_buffer(64);
  assert_cuv_ok(test_kernels_module_load(&tk, cuvt_device()));
  EXPECT(cuv_sync(add_one_launch(&tk, cuv_for_num_elems(16), 16, buf), NULL), 0);

  EXPECT_OP(add_one_launch(NULL, cuv_for_num_elems(16), 16, buf), CUV_EINVAL);
  memset(&cleared, 0, sizeof cleared); /* a module never loaded, or destroyed */
  EXPECT_OP(add_one_launch(&cleared, cuv_for_num_elems(16), 16, buf), CUV_EINVAL);
  EXPECT_OP(add_one_launch(&tk, cuv_for_num_elems(16), 16, NULL), CUV_EINVAL);
  EXPECT_OP(add_one_launch_at(&tk, cuv_for_num_elems(16), 16, buf, 65), CUV_ERANGE);
  EXPECT_OP(add_one_launch_at(&tk, cuv_for_num_elems(16), 16, buf, SIZE_MAX), CUV_ERANGE);
  EXPECT_OP(add_one_launch(&tk, cuv_for_num_elems(0), 0, buf), CUV_EINVAL);
  EXPECT_OP(add_one_launch(&tk, cuv_for_num_elems_block(16, 0), 16, buf), CUV_EINVAL);
  EXPECT_OP(add_one_launch(&tk, cuv_for_num_elems_block(SIZE_MAX, 1), 16, buf), CUV_EINVAL);
  EXPECT_DRIVER(cuv_sync(add_one_launch(&tk, cuv_for_num_elems_block(16, 2048), 16, buf), NULL),
                CUV_ECUDA(CUDA_ERROR_INVALID_VALUE));

  /* The loaders: refused input leaves the struct cleared. */
  test_kernels_module_t m;
  EXPECT(test_kernels_module_load(NULL, cuvt_device()), CUV_EINVAL);
  EXPECT(test_kernels_module_load(&m, NULL), CUV_EINVAL);
  assert_null(m.add_one);
  EXPECT(test_kernels_module_load_file(&m, cuvt_device(), NULL), CUV_EINVAL);
  EXPECT(test_kernels_module_load_file(&m, cuvt_device(), "/nonexistent/kernels.ptx"), CUV_EIO);
  EXPECT(test_kernels_module_load_data(&m, cuvt_device(), NULL, 10), CUV_EINVAL);
  EXPECT(test_kernels_module_load_data(NULL, cuvt_device(), "x", 2), CUV_EINVAL);
  assert_null(m.saxpy);
  test_kernels_module_destroy(NULL);
  test_kernels_module_destroy(&tk);
  test_kernels_module_destroy(&tk); /* cleared by the first: nothing happens */
  assert_null(tk.add_one);
  cuv_buffer_unref(buf);
}

/* ---- error ops and bad callbacks through every executor ---- */

static int calls;
static void count_done(int status, cuv_output_t *output, void *arg) {
  calls++;
  *(int *)arg = status;
}

/* An op carrying an error: every executor returns that error (cuv_submit and the bridge refuse it:
 * no callback), and no output is left behind. */
static void test_error_op_through_every_executor(void **state) {
  const int code = CUV_ERANGE;
  cuv_buffer_t *buf = cuvt_buffer(16);
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  cuv_policy_t *policy;
  assert_cuv_ok(cuv_policy_single(&policy, stream));
#define ERROR_OP() cuv_memset8(buf, 17, 0, 1)
  cuv_output_t out = {(void *)1, NULL, NULL};
  EXPECT(cuv_sync(ERROR_OP(), &out), code);
  assert_null(out.data);
  EXPECT(cuv_sync_on(stream, ERROR_OP(), &out), code);
  EXPECT(cuv_sync_policy(policy, ERROR_OP(), &out), code);
  EXPECT(cuv_enqueue_on(stream, ERROR_OP(), &out), code);
  assert_null(out.data);
  cuv_graph_t *g = NULL;
  EXPECT(cuv_graph_capture(&g, ERROR_OP(), stream, &out), code);
  assert_null(g);
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int status = 1;
  calls = 0;
  EXPECT(cuv_submit(q, ERROR_OP(), count_done, &status, NULL), code);
  assert_int_equal(cuv_queue_pending(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  assert_int_equal(calls, 0);
  /* Combinators over an error op keep the first error. */
  EXPECT_OP(cuv_then(ERROR_OP(), then_unit, NULL), code);
  EXPECT_OP(cuv_map(ERROR_OP(), map_none, NULL), code);
  EXPECT_OP(cuv_seq(counted(), ERROR_OP()), code);
  cuv_op_t *both[] = {ERROR_OP(), cuv_download(NULL, 0, 1)};
  EXPECT_OP(cuv_fork(both, 2), code);
  cuv_shared_t *sh = cuv_shared(ERROR_OP());
  assert_non_null(sh);
  EXPECT(cuv_sync(cuv_shared_clone(sh), NULL), code);
  EXPECT(cuv_sync(cuv_shared_clone(sh), NULL), code);
  assert_int_equal(cuv_shared_runs(sh), 0);
  cuv_shared_unref(sh);
#undef ERROR_OP
  cuv_policy_destroy(policy);
  cuv_stream_destroy(stream);
  cuv_buffer_unref(buf);
}

static cuv_op_t *then_null(cuv_output_t *in, void *arg) { return NULL; }
static int map_fails(cuv_output_t *value, void *arg) { return CUV_EBUSY; }
static cuv_op_t *context_null(cuv_stream_t *stream, void *arg) { return NULL; }
static cuv_op_t *then_sync(cuv_output_t *in, void *arg) {
  *(int *)arg = cuv_sync(cuv_value(NULL, NULL), NULL);
  return cuv_value(NULL, NULL);
}

static int next_none(void *state, const cuv_op_t *op, cuv_stream_t **stream) {
  *stream = NULL;
  return 0;
}
static int next_fails(void *state, const cuv_op_t *op, cuv_stream_t **stream) { return CUV_EBUSY; }
static cuv_device_t *policy_device(void *state) { return cuvt_device(); }

/* Callbacks that return nothing, fail, or execute inside the execution lock. */
static void test_bad_callbacks(void **state) {
  EXPECT(cuv_sync(cuv_with_context(context_unit, NULL, NULL), NULL), 0);
  EXPECT(cuv_sync(cuv_then(counted(), then_null, NULL), NULL), CUV_EINVAL);
  EXPECT(cuv_sync(cuv_map(counted(), map_fails, NULL), NULL), CUV_EBUSY);
  EXPECT(cuv_sync(cuv_with_context(context_null, NULL, NULL), NULL), CUV_EINVAL);
  int inner = 0;
  assert_cuv_ok(cuv_sync(cuv_then(counted(), then_sync, &inner), NULL));
  EXPECT(inner, CUV_EREENTRANT);
  cuv_policy_t *none, *fails;
  cuv_policy_ops_t ops_none = {next_none, policy_device, NULL};
  cuv_policy_ops_t ops_fails = {next_fails, policy_device, NULL};
  assert_cuv_ok(cuv_policy_create(&none, &ops_none, NULL));
  assert_cuv_ok(cuv_policy_create(&fails, &ops_fails, NULL));
  atomic_store(&releases, 0);
  EXPECT(cuv_sync_policy(none, counted(), NULL), CUV_EINVAL);
  EXPECT(cuv_sync_policy(fails, counted(), NULL), CUV_EBUSY);
  assert_int_equal(atomic_load(&releases), 2);
  cuv_stream_t *s;
  EXPECT(cuv_policy_next_stream(none, NULL, &s), CUV_EINVAL);
  assert_null(s);
  cuv_policy_destroy(none);
  cuv_policy_destroy(fails);
}

/* ---- custom ops and adopted memory ---- */

static int custom_unit(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) { return 0; }

static int custom_retain_null(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  *(int *)arg = cuv_custom_retain(ctx, arg, NULL);
  return 0;
}

static void *counted_arg(void) {
  cuvt_counted_t *arg = malloc(sizeof *arg);
  assert_non_null(arg);
  *arg = (cuvt_counted_t){1, &releases};
  return arg;
}

/* cuv_custom with accesses[0] = a: an error op with code, its arg dropped once. */
static void expect_custom_refused(cuv_access_t a, int code) {
  EXPECT_CONSUMED(cuv_custom(custom_unit, counted_arg(), cuvt_counted_release, &a, 1), code);
}

/* Bad input to a custom op is an error op that ran drop(arg) once; the context's getters answer
 * NULL for a NULL context; cuv_buffer_adopt refuses what cannot be memory. */
static void test_custom_input(void **state) {
  cuv_buffer_t *buf = cuvt_buffer(64);
  cuv_access_t rw = CUV_ACCESS_RW(buf);
  EXPECT_CONSUMED(cuv_custom(NULL, counted_arg(), cuvt_counted_release, &rw, 1), CUV_EINVAL);
  EXPECT_OP(cuv_custom(NULL, NULL, NULL, NULL, 0), CUV_EINVAL);
  EXPECT_CONSUMED(cuv_custom(custom_unit, counted_arg(), cuvt_counted_release, NULL, 1),
                  CUV_EINVAL);
  expect_custom_refused((cuv_access_t){NULL, CUV_ARG_KIND_READ, 0, 0}, CUV_EINVAL);
  expect_custom_refused((cuv_access_t){buf, CUV_ARG_KIND_SCALAR, 0, 0}, CUV_EINVAL);
  expect_custom_refused((cuv_access_t){buf, (enum cuv_arg_kind)7, 0, 0}, CUV_EINVAL);
  expect_custom_refused(CUV_ACCESS_READ_RANGE(buf, 65, 0), CUV_ERANGE);
  expect_custom_refused(CUV_ACCESS_WRITE_RANGE(buf, 60, 8), CUV_ERANGE);
  expect_custom_refused(CUV_ACCESS_RW_RANGE(buf, 1, SIZE_MAX), CUV_ERANGE);
  /* The edges are valid: nothing at the end, the whole buffer. */
  cuv_access_t edges[] = {CUV_ACCESS_READ_RANGE(buf, 64, 0), CUV_ACCESS_RW_RANGE(buf, 0, 64)};
  assert_cuv_ok(cuv_sync(cuv_custom(custom_unit, NULL, NULL, edges, 2), NULL));
  int retained = 0;
  assert_cuv_ok(cuv_sync(cuv_custom(custom_retain_null, &retained, NULL, NULL, 0), NULL));
  EXPECT(retained, CUV_EINVAL);
  EXPECT(cuv_custom_retain(NULL, buf, free), CUV_EINVAL);
  assert_null(cuv_custom_stream(NULL));
  assert_null(cuv_custom_cu_stream(NULL));
  assert_null(cuv_custom_device(NULL));
  cuv_buffer_t *b = NULL;
  cuv_deviceptr_t ptr = cuv_buffer_ptr(buf);
  EXPECT(cuv_buffer_adopt(NULL, cuvt_device(), ptr, 64, NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_buffer_adopt(&b, NULL, ptr, 64, NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_buffer_adopt(&b, cuvt_device(), 0, 64, NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_buffer_adopt(&b, cuvt_device(), ptr, 0, NULL, NULL), CUV_EINVAL);
  EXPECT(cuv_buffer_adopt(&b, cuvt_device(), UINT64_MAX - 3, 64, NULL, NULL), CUV_EINVAL);
  assert_null(b);
  cuv_buffer_unref(buf);
}

/* ---- two devices ---- */

/* A then callback returning an op of device 1 in a tree that names only device 0. */
static cuv_op_t *then_other_device(cuv_output_t *in, void *arg) {
  return cuv_memset8(arg, 0, 0, 4);
}

/* Objects of different devices used together: CUV_EDEVICE where the op is built (a copy or a
 * launch over buffers of two devices) or where it is executed (on another device's stream or
 * policy, or returned by a callback for a device the tree does not name); trees and peer copies
 * over two devices are valid, their ranges checked. The simulator runs with two devices here; a
 * machine with one GPU skips. */
static void test_mismatched_devices(void **state) {
  int count = 0;
  assert_cuv_ok(cuv_device_count(&count));
  if (count < 2) {
    print_message("# one device: objects of two devices cannot be mixed here\n");
    skip();
  }
  cuv_device_t *d0 = cuvt_device(), *d1;
  assert_cuv_ok(cuv_device_open(&d1, 1));
  cuv_buffer_t *b0 = cuvt_buffer(64), *b1;
  assert_cuv_ok(cuv_buffer_create(&b1, d1, 64));
  cuv_stream_t *s0, *s1;
  assert_cuv_ok(cuv_stream_create(&s0, d0));
  assert_cuv_ok(cuv_stream_create(&s1, d1));
  cuv_policy_t *p1;
  assert_cuv_ok(cuv_policy_round_robin(&p1, d1, 2));
  cuv_module_t *m1;
  cuv_kernel_t *add_one1;
  assert_cuv_ok(cuv_module_load_file(&m1, d1, cuvt_ptx_path()));
  assert_cuv_ok(cuv_kernel_get(&add_one1, m1, "add_one"));
  cuv_module_unref(m1);

  EXPECT_OP(cuv_memcpy_dtod(b0, 0, b1, 0, 4), CUV_EDEVICE);
  assert_cuv_ok(cuv_sync(cuv_seq(cuv_memset8(b0, 0, 0, 4), cuv_memset8(b1, 0, 0, 4)), NULL));
  cuv_op_t *pair[] = {cuv_download(b0, 0, 4), cuv_download(b1, 0, 4)};
  assert_cuv_ok(cuv_sync(cuv_zip(pair, 2), NULL));
  EXPECT(cuv_sync(cuv_then(cuv_memset8(b0, 0, 0, 4), then_other_device, b1), NULL), CUV_EDEVICE);
  cuv_graph_t *g;
  EXPECT(cuv_graph_capture(&g, cuv_memcpy_peer(b1, 0, b0, 0, 4), s1, NULL), CUV_ENOTSUP);
  /* Peer copies: NULL buffers, ranges as every copy's; one device is a plain copy. */
  EXPECT_OP(cuv_memcpy_peer(NULL, 0, b0, 0, 4), CUV_EINVAL);
  EXPECT_OP(cuv_memcpy_peer(b1, 0, NULL, 0, 4), CUV_EINVAL);
  EXPECT_OP(cuv_memcpy_peer(b1, 61, b0, 0, 4), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_peer(b1, 0, b0, 65, 0), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_peer(b1, 0, b0, 8, SIZE_MAX), CUV_ERANGE);
  EXPECT_OP(cuv_memcpy_peer(b1, SIZE_MAX, b0, 0, 1), CUV_ERANGE);
  assert_cuv_ok(cuv_sync(cuv_memcpy_peer(b1, 64, b0, 64, 0), NULL));
  assert_cuv_ok(cuv_sync(cuv_memcpy_peer(b0, 0, b0, 32, 32), NULL));
  EXPECT(cuv_sync_on(s0, cuv_memcpy_peer(b1, 0, b0, 0, 4), NULL), CUV_EDEVICE);
  /* Policies over devices: the set itself, and an op of a device outside it. */
  cuv_policy_t *set;
  cuv_device_t *both[] = {d0, d1}, *twice[] = {d1, d1}, *gap[] = {d0, NULL};
  EXPECT(cuv_policy_round_robin_devices(NULL, both, 2, 0), CUV_EINVAL);
  EXPECT(cuv_policy_round_robin_devices(&set, NULL, 2, 0), CUV_EINVAL);
  EXPECT(cuv_policy_round_robin_devices(&set, both, 0, 0), CUV_EINVAL);
  EXPECT(cuv_policy_least_loaded_devices(&set, both, 65, 0), CUV_EINVAL);
  EXPECT(cuv_policy_least_loaded_devices(&set, twice, 2, 0), CUV_EINVAL);
  EXPECT(cuv_policy_least_loaded_devices(&set, gap, 2, 0), CUV_EINVAL);
  EXPECT(cuv_policy_round_robin_devices(&set, both, 2, 1025), CUV_EINVAL);
  assert_cuv_ok(cuv_policy_least_loaded_devices(&set, &d1, 1, 1));
  EXPECT(cuv_sync_policy(set, cuv_memset8(b0, 0, 0, 4), NULL), CUV_EDEVICE);
  cuv_op_t *of_d0 = cuv_memset8(b0, 0, 0, 4);
  cuv_stream_t *picked;
  EXPECT(cuv_policy_next_stream(set, of_d0, &picked), CUV_EDEVICE);
  cuv_op_destroy(of_d0);
  cuv_policy_destroy(set);
  unsigned n = 1;
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(b0)};
  EXPECT_OP(cuv_launch(add_one1, CUV_DIM1(1), CUV_DIM1(1), 0, args, 2), CUV_EDEVICE);
  cuv_arg_t op_args[] = {CUV_ARG_VALUE(n), CUV_ARG_OP_RW(cuv_zeros(d0, 64))};
  EXPECT_OP(cuv_launch(add_one1, CUV_DIM1(1), CUV_DIM1(1), 0, op_args, 2), CUV_EDEVICE);
  EXPECT(cuv_sync_on(s0, cuv_memset8(b1, 0, 0, 4), NULL), CUV_EDEVICE);
  EXPECT(cuv_sync_on(s0, cuv_alloc(d1, 64), NULL), CUV_EDEVICE);
  EXPECT(cuv_sync_on(s0, cuv_zeros(d1, 64), NULL), CUV_EDEVICE);
  EXPECT(cuv_sync_on(s0, cuv_iota_f32(d1, 16, 0.0f, 1.0f), NULL), CUV_EDEVICE);
  EXPECT(cuv_sync_on(s0, cuv_dup(b1), NULL), CUV_EDEVICE);
  EXPECT(cuv_sync_policy(p1, cuv_memset8(b0, 0, 0, 4), NULL), CUV_EDEVICE);
  EXPECT(cuv_enqueue_on(s1, cuv_free(cuv_buffer_ref(b0)), NULL), CUV_EDEVICE);
  cuv_access_t two[] = {CUV_ACCESS_READ(b0), CUV_ACCESS_WRITE(b1)};
  EXPECT_OP(cuv_custom(custom_unit, NULL, NULL, two, 2), CUV_EDEVICE);
  EXPECT(cuv_sync_on(s0, cuv_custom(custom_unit, NULL, NULL, two + 1, 1), NULL), CUV_EDEVICE);
  /* Each works on its own device. */
  assert_cuv_ok(cuv_sync_on(s1, cuv_memset8(b1, 0, 0, 4), NULL));
  cuv_arg_t args1[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(b1)};
  assert_cuv_ok(
      cuv_sync_policy(p1, cuv_launch(add_one1, CUV_DIM1(1), CUV_DIM1(1), 0, args1, 2), NULL));
  cuv_kernel_unref(add_one1);
  cuv_policy_destroy(p1);
  cuv_stream_destroy(s0);
  cuv_stream_destroy(s1);
  cuv_buffer_unref(b0);
  cuv_buffer_unref(b1);
  cuv_device_unref(d1);
  cuv_device_t *none;
  EXPECT(cuv_device_open(&none, count), CUV_ENODEV);
  EXPECT(cuv_device_open(&none, -1), CUV_ENODEV);
}

/* ---- queues: destroy with work pending, closed, tickets ---- */

static void test_queue_misuse(void **state) {
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  int status = 1;
  calls = 0;
  cuv_ticket_t ticket = 0;
  cuv_submit_opts_t opts = {.ticket = &ticket};
  cuv_buffer_t *flag = cuvt_buffer(4);
  assert_cuv_ok(cuv_submit(q, cuvt_slow_write(50, 1, flag), count_done, &status, &opts));
  EXPECT(cuv_queue_destroy(q), CUV_EBUSY); /* work pending: the queue stays usable */
  EXPECT(cuv_cancel(q, 0), CUV_ENOENT);
  EXPECT(cuv_cancel(q, ticket + 1), CUV_ENOENT);
  EXPECT(cuv_cancel(q, UINT64_MAX), CUV_ENOENT);
  cuv_queue_close(q);
  cuv_queue_close(q); /* closing twice is harmless */
  atomic_store(&releases, 0);
  EXPECT(cuv_submit(q, counted(), count_done, &status, NULL), CUV_ECLOSED);
  assert_int_equal(atomic_load(&releases), 1); /* refused, consumed */
  EXPECT(cuv_queue_destroy(q), CUV_EBUSY);   /* closed, but its work still pending */
  while (cuv_queue_pending(q) > 0) {
    cuv_queue_wait(q, -1);
    cuv_queue_drain(q);
  }
  assert_int_equal(calls, 1);
  assert_cuv_ok(status);
  EXPECT(cuv_cancel(q, ticket), CUV_ENOENT); /* its callback ran */
  EXPECT(cuv_queue_wait(q, 0), CUV_EBUSY);   /* nothing finished: times out at once */
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
  cuv_buffer_unref(flag);

  /* A cancelled ticket cancelled again before the drain: still one callback, CUV_ECANCELED. */
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  calls = 0;
  assert_cuv_ok(cuv_submit(q, counted(), count_done, &status, &opts));
  assert_cuv_ok(cuv_cancel(q, ticket));
  int again = cuv_cancel(q, ticket);
  assert_true(again == 0 || again == CUV_ENOENT);
  while (cuv_queue_pending(q) > 0) {
    cuv_queue_wait(q, -1);
    cuv_queue_drain(q);
  }
  assert_int_equal(calls, 1);
  EXPECT(status, CUV_ECANCELED);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* ---- the bridge: closed from its own callback, closed twice, used after close ---- */

typedef struct bridge_case {
  uv_loop_t loop;
  cuv_uv_t *bridge;
  int calls, close_rc, second_close_rc, submit_rc, refused_releases, close_cbs;
  int statuses[3];
} bridge_case_t;

static void on_bridge_closed(cuv_uv_t *bridge, void *arg) { ((bridge_case_t *)arg)->close_cbs++; }

static void closing_done(int status, cuv_output_t *output, void *arg) {
  bridge_case_t *c = arg;
  c->statuses[c->calls++] = status;
  if (c->calls != 1)
    return;
  c->close_rc = cuv_uv_close(c->bridge, on_bridge_closed, c);
  c->second_close_rc = cuv_uv_close(c->bridge, on_bridge_closed, c);
  atomic_store(&releases, 0);
  c->submit_rc = cuv_uv_submit(c->bridge, counted(), closing_done, c, NULL);
  c->refused_releases = atomic_load(&releases);
}

static void test_bridge_misuse(void **state) {
  bridge_case_t c = {0};
  assert_int_equal(uv_loop_init(&c.loop), 0);
  EXPECT(cuv_uv_open(NULL, &c.loop), CUV_EINVAL);
  EXPECT(cuv_uv_open(&c.bridge, NULL), CUV_EINVAL);
  assert_cuv_ok(cuv_uv_open(&c.bridge, &c.loop));
  atomic_store(&releases, 0);
  EXPECT(cuv_uv_submit(NULL, counted(), closing_done, &c, NULL), CUV_EINVAL);
  EXPECT(cuv_uv_submit(c.bridge, counted(), NULL, &c, NULL), CUV_EINVAL);
  assert_int_equal(atomic_load(&releases), 2);
  EXPECT(cuv_uv_close(NULL, NULL, NULL), CUV_EINVAL);
  assert_int_equal(cuv_uv_pending(NULL), 0);
  assert_null(cuv_uv_loop(NULL));

  /* An error op is refused, with no callback. */
  cuv_buffer_t *flag = cuvt_buffer(4);
  EXPECT(cuv_uv_submit(c.bridge, cuv_memset8(flag, 8, 0, 1), closing_done, &c, NULL), CUV_ERANGE);
  /* Three submissions, one failing when executed; the first callback closes the bridge: the
   * others still run with their own results, a second close and a later submission are refused,
   * close_cb runs once, at the end. */
  assert_cuv_ok(cuv_uv_submit(c.bridge, counted(), closing_done, &c, NULL));
  assert_cuv_ok(cuv_uv_submit(c.bridge, cuvt_slow_write(30, 1, flag), closing_done, &c, NULL));
  assert_cuv_ok(cuv_uv_submit(c.bridge, cuv_then(cuv_value(NULL, NULL), then_null, NULL),
                              closing_done, &c, NULL));
  assert_int_equal(uv_run(&c.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c.calls, 3);
  int failed = 0;
  for (int i = 0; i < 3; i++) {
    assert_true(c.statuses[i] == 0 || c.statuses[i] == CUV_EINVAL);
    failed += c.statuses[i] == CUV_EINVAL;
  }
  assert_int_equal(failed, 1);
  EXPECT(c.close_rc, 0);
  EXPECT(c.second_close_rc, CUV_ECLOSED);
  EXPECT(c.submit_rc, CUV_ECLOSED);
  assert_int_equal(c.refused_releases, 1); /* the refused op was consumed at once */
  assert_int_equal(c.close_cbs, 1);
  assert_int_equal(uv_loop_close(&c.loop), 0);
  cuv_buffer_unref(flag);
}

/* ---- collectives ---- */

static void test_communicator_bad_input(void **state) {
  cuv_device_t *dev = cuvt_device(), *dup[2] = {dev, dev}, *with_null[2] = {dev, NULL};
  cuv_nccl_id_t id;
  int version;
  EXPECT(cuv_nccl_version(NULL), CUV_EINVAL);
  EXPECT(cuv_nccl_version(&version), 0);
  EXPECT(cuv_nccl_unique_id(NULL), CUV_EINVAL);
  EXPECT(cuv_nccl_unique_id(&id), 0);
  EXPECT_OP(cuv_comm_init_all(NULL, 1), CUV_EINVAL);
  EXPECT_OP(cuv_comm_init_all(&dev, 0), CUV_EINVAL);
  EXPECT_OP(cuv_comm_init_all(dup, 2), CUV_EINVAL);
  EXPECT_OP(cuv_comm_init_all(with_null, 2), CUV_EINVAL);
  EXPECT_OP(cuv_comm_init_rank(NULL, &id, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_comm_init_rank(dev, NULL, 0, 1), CUV_EINVAL);
  EXPECT_OP(cuv_comm_init_rank(dev, &id, 1, 1), CUV_EINVAL);
  EXPECT_OP(cuv_comm_init_rank(dev, &id, -1, 2), CUV_EINVAL);
  EXPECT_OP(cuv_comm_init_rank(dev, &id, 0, 0), CUV_EINVAL);
  assert_int_equal(cuv_comm_local_count(NULL), 0);
  assert_int_equal(cuv_comm_size(NULL), 0);
  EXPECT(cuv_comm_rank(NULL, 0), CUV_EINVAL);
  assert_null(cuv_comm_device(NULL, 0));
  assert_null(cuv_comm_stream(NULL, 0));
  assert_null(cuv_comm_handle(NULL, 0));
  EXPECT(cuv_comm_status(NULL), CUV_EINVAL);
  EXPECT(cuv_comm_abort(NULL), CUV_EINVAL);
  EXPECT(cuv_comm_set_timeout(NULL, 1), CUV_EINVAL);
  assert_null(cuv_comm_ref(NULL));
  cuv_comm_unref(NULL);
  assert_int_equal(cuv_nccl_type_size((cuv_nccl_type_t)12), 0);
  assert_int_equal(cuv_nccl_type_size((cuv_nccl_type_t)-1), 0);
  /* a graph cannot replay a creation */
  cuv_stream_t *stream;
  cuv_graph_t *graph = NULL;
  assert_cuv_ok(cuv_stream_create(&stream, dev));
  EXPECT(cuv_graph_capture(&graph, cuv_comm_init_all(&dev, 1), stream, NULL), CUV_ENOTSUP);
  assert_null(graph);
  cuv_stream_destroy(stream);
}

/* Every device (two at most): a buffer of 64 bytes and one of 4 on each. */
typedef struct comm_fixture {
  int n;
  cuv_device_t *devs[2];
  cuv_comm_t *comm;
  cuv_buffer_t *good[2], *small[2], *swapped[2], *none[2];
} comm_fixture_t;

static void comm_fixture_init(comm_fixture_t *f) {
  int count = 0;
  memset(f, 0, sizeof *f);
  assert_cuv_ok(cuv_device_count(&count));
  f->n = count < 2 ? count : 2;
  for (int i = 0; i < f->n; i++) {
    assert_cuv_ok(cuv_device_open(&f->devs[i], i));
    assert_cuv_ok(cuv_buffer_create(&f->good[i], f->devs[i], 64));
    assert_cuv_ok(cuv_buffer_create(&f->small[i], f->devs[i], 4));
  }
  for (int i = 0; i < f->n; i++)
    f->swapped[i] = f->good[f->n - 1 - i];
  cuv_output_t out;
  assert_cuv_ok(cuv_sync(cuv_comm_init_all(f->devs, (size_t)f->n), &out));
  f->comm = cuv_output_take(&out).data;
}

static void comm_fixture_free(comm_fixture_t *f) {
  cuv_comm_unref(f->comm);
  for (int i = 0; i < f->n; i++) {
    cuv_buffer_unref(f->good[i]);
    cuv_buffer_unref(f->small[i]);
    cuv_device_unref(f->devs[i]);
  }
}

static void test_collective_bad_input(void **state) {
  comm_fixture_t f;
  comm_fixture_init(&f);
  cuv_comm_t *c = f.comm;
  const cuv_nccl_type_t F32 = CUV_NCCL_FLOAT32;
  EXPECT_OP(cuv_comm_all_reduce(NULL, f.good, f.good, 4, F32, CUV_NCCL_SUM), CUV_EINVAL);
  EXPECT_OP(cuv_comm_all_reduce(c, f.good, NULL, 4, F32, CUV_NCCL_SUM), CUV_EINVAL);
  EXPECT_OP(cuv_comm_all_reduce(c, f.none, f.good, 4, F32, CUV_NCCL_SUM), CUV_EINVAL);
  EXPECT_OP(cuv_comm_all_reduce(c, f.good, f.none, 4, F32, CUV_NCCL_SUM), CUV_EINVAL);
  EXPECT_OP(cuv_comm_all_reduce(c, f.good, f.good, 4, (cuv_nccl_type_t)12, CUV_NCCL_SUM),
            CUV_EINVAL);
  EXPECT_OP(cuv_comm_all_reduce(c, f.good, f.good, 4, F32, (cuv_nccl_redop_t)5), CUV_EINVAL);
  EXPECT_OP(cuv_comm_all_reduce(c, f.good, f.small, 4, F32, CUV_NCCL_SUM), CUV_ERANGE);
  EXPECT_OP(cuv_comm_all_reduce(c, f.small, f.good, 4, F32, CUV_NCCL_SUM), CUV_ERANGE);
  EXPECT_OP(cuv_comm_all_reduce(c, NULL, f.good, SIZE_MAX / 2, F32, CUV_NCCL_SUM), CUV_ERANGE);
  EXPECT_OP(cuv_comm_reduce(c, f.good, f.good, 4, F32, CUV_NCCL_SUM, f.n), CUV_EINVAL);
  EXPECT_OP(cuv_comm_broadcast(c, f.good, f.good, 4, F32, -1), CUV_EINVAL);
  EXPECT_OP(cuv_comm_broadcast(c, f.none, f.good, 4, F32, 0), CUV_EINVAL); /* the root's send */
  EXPECT_OP(cuv_comm_all_gather(c, f.good, f.good, 16, F32), f.n > 1 ? CUV_ERANGE : 0);
  EXPECT_OP(cuv_comm_reduce_scatter(c, f.good, f.small, 1, F32, CUV_NCCL_SUM), 0);
  EXPECT_OP(cuv_comm_reduce_scatter(c, f.small, f.small, 1, F32, CUV_NCCL_SUM),
            f.n > 1 ? CUV_ERANGE : 0);
  if (f.n > 1) /* a buffer on another rank's device */
    EXPECT_OP(cuv_comm_all_reduce(c, f.good, f.swapped, 4, F32, CUV_NCCL_SUM), CUV_EDEVICE);
  cuv_nccl_p2p_t t = {CUV_NCCL_SEND, 0, 0, f.good[0], 4};
  EXPECT_OP(cuv_comm_send_recv(c, NULL, 1, F32), CUV_EINVAL);
  EXPECT_OP(cuv_comm_send_recv(c, &t, 0, F32), CUV_EINVAL);
  EXPECT_OP(cuv_comm_send_recv(NULL, &t, 1, F32), CUV_EINVAL);
  /* Counts no array can hold: the op's size would wrap (refused before any transfer is read). */
  EXPECT_OP(cuv_comm_send_recv(c, &t, SIZE_MAX, F32), CUV_EINVAL);
  EXPECT_OP(cuv_comm_send_recv(c, &t, (size_t)1 << 62, F32), CUV_EINVAL);
  cuv_nccl_p2p_t bad[] = {{2, 0, 0, f.good[0], 4},
                          {CUV_NCCL_SEND, (unsigned)f.n, 0, f.good[0], 4},
                          {CUV_NCCL_RECV, 0, f.n, f.good[0], 4},
                          {CUV_NCCL_RECV, 0, -1, f.good[0], 4},
                          {CUV_NCCL_SEND, 0, 0, NULL, 4}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    EXPECT_OP(cuv_comm_send_recv(c, &bad[i], 1, F32), CUV_EINVAL);
  cuv_nccl_p2p_t big = {CUV_NCCL_SEND, 0, 0, f.good[0], 17};
  EXPECT_OP(cuv_comm_send_recv(c, &big, 1, F32), CUV_ERANGE);
  /* aborted: every later op fails at once with CUV_ECANCELED */
  EXPECT(cuv_comm_abort(c), 0);
  EXPECT(cuv_comm_status(c), CUV_ECANCELED);
  EXPECT_OP(cuv_comm_all_reduce(c, f.good, f.good, 4, F32, CUV_NCCL_SUM), CUV_ECANCELED);
  comm_fixture_free(&f);
}

/* ---- error codes ---- */

static void test_error_text(void **state) {
  const int odd[] = {1, 12345, -99, -10000 + 1, INT32_MIN, INT32_MIN + 1, CUV_ECUDA(99999)};
  for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
    assert_non_null(cuv_strerror(odd[i]));
    assert_non_null(cuv_err_name(odd[i]));
  }
  /* -4500: below libuv's codes, above cuv's own (include/cuv/errors.h); -99 is UV_EADDRNOTAVAIL. */
  assert_string_equal(cuv_err_name(-4500), "CUV_EUNKNOWN");
  assert_string_equal(cuv_strerror(-4500), "unknown error");
  assert_string_equal(cuv_err_name(-99), "UV_EADDRNOTAVAIL");
  assert_int_equal(cuv_cuda_result(CUV_EINVAL), 0);
  assert_int_equal(cuv_cuda_result(CUV_ECUDA(CUDA_ERROR_OUT_OF_MEMORY)), CUDA_ERROR_OUT_OF_MEMORY);
  assert_string_equal(cuv_err_name(CUV_ECUDA(CUDA_ERROR_OUT_OF_MEMORY)),
                      "CUDA_ERROR_OUT_OF_MEMORY");
  /* NCCL's results: kept, named as nccl.h names them; an unknown one still has a name */
  assert_int_equal(cuv_nccl_result(CUV_ENCCL(6)), 6);
  assert_int_equal(cuv_nccl_result(CUV_EINVAL), 0);
  assert_int_equal(cuv_nccl_result(CUV_ECUDA(6)), 0);
  assert_string_equal(cuv_err_name(CUV_ENCCL(6)), "ncclRemoteError");
  assert_string_equal(cuv_err_name(CUV_ENCCL(77)), "ncclUnknownResult");
  assert_non_null(cuv_strerror(CUV_ENCCL(77)));
  assert_string_equal(cuv_err_name(CUV_ENONCCL), "CUV_ENONCCL");
}

int main(void) {
  cuv_sim_set_device_count(2); /* the simulator only: a GPU machine has what it has */
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_op_consumed_on_every_path),
      cmocka_unit_test(test_op_used_twice),
      cmocka_unit_test(test_zero_and_huge_sizes),
      cmocka_unit_test(test_offsets_out_of_range),
      cmocka_unit_test(test_kernel_wrong_arguments),
      cmocka_unit_test(test_typed_launchers),
      cmocka_unit_test(test_error_op_through_every_executor),
      cmocka_unit_test(test_bad_callbacks),
      cmocka_unit_test(test_custom_input),
      cmocka_unit_test(test_mismatched_devices),
      cmocka_unit_test(test_queue_misuse),
      cmocka_unit_test(test_bridge_misuse),
      cmocka_unit_test(test_communicator_bad_input),
      cmocka_unit_test(test_collective_bad_input),
      cmocka_unit_test(test_error_text),
  };
  return cuvt_run(tests);
}
