/* seed: the README examples of the seed (NVIDIA's cuda-async), written with cuv and the typed
 * launchers that cuv-launchers generated from seed.cu (seed_launchers.h):
 *   1. saxpy over a [4, 4] partition of a tensor of zeros, on a tensor of ones (cuv/tensor.h),
 *      on a stream of one's own (sync_on);
 *   2. the first typed launch, vecadd with a launch configuration for n elements (sync);
 *   3. an MLP whose inputs come from with_context helpers (h2d and zeros: a stream-ordered
 *      allocation on the executing stream's device, then filled) and whose layers are typed
 *      launches chained on one stream (gemm, relu, gemm), its output downloaded (d2h);
 *   4. the same forward pass captured into a CUDA graph, replayed per token after an update
 *      copies the token in;
 *   5. 3 and 4 again over tensors (cuv/tensor.h): operands from the h2d helper, dup, zeros and
 *      ones, the layers through the generated tensor launchers, y read back with to_host.
 * Each result is checked against the same arithmetic on the host. Exit status: 0 when all are
 * right, 77 without a CUDA driver (run it with CUV_DRIVER=sim), 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuv.h>
#include <cuv/tensor.h>

#include "seed.h"
#include "seed_launchers.h"

enum { ROWS = 8, IN = 32, HIDDEN = 64, OUT = 16, TOKENS = 4 };

static seed_module_t k; /* the kernels of seed.cu, loaded in one call */

/* A call that failed; while initialization has failed, also why (cuv_init_error). */
static int failed(const char *what, int rc) {
  const char *why = cuv_init_error();
  fprintf(stderr, "seed: %s: %s%s%s\n", what, cuv_strerror(rc), why ? ": " : "", why ? why : "");
  return 1;
}

static int check(const char *what, const float *got, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fabsf(got[i] - want[i]) > 1e-4f * (1.0f + fabsf(want[i]))) {
      printf("%s: element %zu is %g, want %g\n", what, i, got[i], want[i]);
      return 1;
    }
  printf("%s: %zu values right\n", what, n);
  return 0;
}

static void random_floats(float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

/* ---- helpers, as the seed writes them with with_context ---- */

/* What a new buffer holds: n floats copied from host, or n words of `bits`. */
typedef struct contents {
  size_t n;
  const float *host;
  uint32_t bits;
} contents_t;

static void unref(void *buf) { cuv_buffer_unref(buf); }

/* then: the allocated buffer, filled on the same stream, is the output. */
static cuv_op_t *fill(cuv_output_t *allocated, void *arg) {
  const contents_t *c = arg;
  cuv_buffer_t *buf = cuv_output_take(allocated).data;
  cuv_op_t *op = c->host ? cuv_memcpy_htod(buf, 0, c->host, c->n * 4, CUV_COPY_STAGE)
                         : cuv_memset32(buf, 0, c->bits, c->n);
  return cuv_seq(op, cuv_value(buf, unref));
}

/* with_context: the executing stream is known, so is its device: allocate there, in order. */
static cuv_op_t *make(cuv_stream_t *stream, void *arg) {
  const contents_t *c = arg;
  return cuv_then(cuv_alloc(cuv_stream_device(stream), c->n * sizeof(float)), fill, arg);
}

/* An op whose output is a new buffer (c must live until the op ran: the examples sync). */
static cuv_op_t *new_buffer(const contents_t *c) { return cuv_with_context(make, (void *)c, NULL); }

/* Runs op on stream (or the default policy) and returns its output buffer, or NULL. */
static cuv_buffer_t *sync_buffer(cuv_stream_t *stream, cuv_op_t *op) {
  cuv_output_t out = {0};
  int rc = stream ? cuv_sync_on(stream, op, &out) : cuv_sync(op, &out);
  return rc == 0 ? cuv_output_take(&out).data : NULL;
}

/* ---- 1. saxpy: z = 2 x + z on zeros and ones, over a [4, 4] partition of z ---- */

/* Runs op (which outputs a tensor) on stream and returns the tensor, or NULL. */
static cuv_tensor_t *sync_tensor(cuv_stream_t *stream, cuv_op_t *op) {
  cuv_output_t out = {0};
  if (cuv_sync_on(stream, op, &out) != 0)
    return NULL;
  cuv_tensor_t *t = cuv_tensor_ref(cuv_output_tensor(&out));
  cuv_output_release(&out);
  return t;
}

/* saxpy((&mut z).partition([4, 4]), a, &x): z is written in place, x only read, one block per
 * tile; the generated launcher over tensors checks both are of floats. */
static cuv_op_t *saxpy_partition(const cuv_partition_t *z, float a, const cuv_tensor_t *x) {
  unsigned ld = (unsigned)cuv_tensor_stride(x, 0);
  return saxpy_tile_launch_tensors(&k, cuv_partition_launch_config(z), ld, a, CUV_IN(x),
                                   CUV_IN(z->tensor));
}

static int example_saxpy(cuv_device_t *dev) {
  enum { N = 16 * 16 };
  const size_t shape[] = {16, 16}, tile[] = {4, 4};
  float z[N], want[N];
  cuv_stream_t *stream;
  int rc = cuv_stream_create(&stream, dev);
  if (rc != 0)
    return failed("cuv_stream_create", rc);
  cuv_tensor_t *tz = sync_tensor(stream, cuv_tensor_zeros(dev, CUV_DTYPE_F32, shape, 2));
  cuv_tensor_t *tx = sync_tensor(stream, cuv_tensor_ones(dev, CUV_DTYPE_F32, shape, 2));
  cuv_partition_t part = {0};
  rc = tz && tx ? cuv_tensor_partition(&part, tz, tile, 2) : CUV_ENOMEM;
  if (rc == 0)
    rc = cuv_sync_on(stream, saxpy_partition(&part, 2.0f, tx), NULL);
  if (rc == 0) /* z already has the result */
    rc = cuv_sync_on(stream, cuv_tensor_to_host_into(z, sizeof z, tz), NULL);
  cuv_partition_release(&part);
  cuv_tensor_unref(tz);
  cuv_tensor_unref(tx);
  cuv_stream_destroy(stream);
  if (rc != 0)
    return failed("saxpy", rc);
  for (size_t i = 0; i < N; i++)
    want[i] = 2.0f * 1.0f + 0.0f;
  return check("saxpy over a partition of zeros, on ones", z, want, N);
}

/* ---- 2. the first typed launch: c = a + b, 1024 elements ---- */

static int example_vecadd(void) {
  enum { N = 1024 };
  float a[N], b[N], c[N], want[N];
  random_floats(a, N);
  random_floats(b, N);
  contents_t ca = {N, a, 0}, cb = {N, b, 0}, cc = {N, NULL, 0};
  cuv_buffer_t *da = sync_buffer(NULL, new_buffer(&ca)), *db = sync_buffer(NULL, new_buffer(&cb));
  cuv_buffer_t *dc = sync_buffer(NULL, new_buffer(&cc));
  cuv_op_t *op = vecadd_launch(&k, cuv_for_num_elems(N), da, db, dc, N); /* nothing runs yet */
  int rc = cuv_sync(cuv_seq(op, cuv_memcpy_dtoh(c, dc, 0, sizeof c)), NULL);
  cuv_buffer_t *bufs[] = {da, db, dc};
  for (size_t i = 0; i < 3; i++)
    cuv_buffer_unref(bufs[i]);
  if (rc != 0)
    return failed("vecadd", rc);
  for (size_t i = 0; i < N; i++)
    want[i] = a[i] + b[i];
  return check("vecadd", c, want, N);
}

/* ---- 3. the MLP: y = relu(x w1) w2 ---- */

typedef struct mlp {
  cuv_buffer_t *x, *w1, *w2, *h, *y;
} mlp_t;

/* The forward pass as one op on one stream; the host reads y afterwards. */
static cuv_op_t *forward(const mlp_t *m) {
  cuv_op_t *op =
      gemm_launch(&k, cuv_for_num_elems(ROWS * HIDDEN), ROWS, HIDDEN, IN, m->x, m->w1, m->h);
  op = cuv_seq(op, relu_launch(&k, cuv_for_num_elems(ROWS * HIDDEN), ROWS * HIDDEN, m->h));
  return cuv_seq(
      op, gemm_launch(&k, cuv_for_num_elems(ROWS * OUT), ROWS, OUT, HIDDEN, m->h, m->w2, m->y));
}

static void host_forward(const float *x, const float *w1, const float *w2, float *y) {
  float h[ROWS * HIDDEN];
  seed_gemm(ROWS, HIDDEN, IN, x, w1, h);
  seed_relu(ROWS * HIDDEN, h);
  seed_gemm(ROWS, OUT, HIDDEN, h, w2, y);
}

/* h2d of x, w1, w2 and zeros for h and y, all at once: a zip of five buffers. */
static int mlp_upload(mlp_t *m, const float *x, const float *w1, const float *w2) {
  contents_t c[] = {{ROWS * IN, x, 0},
                    {IN * HIDDEN, w1, 0},
                    {HIDDEN * OUT, w2, 0},
                    {ROWS * HIDDEN, NULL, 0},
                    {ROWS * OUT, NULL, 0}};
  cuv_op_t *ops[5];
  for (size_t i = 0; i < 5; i++)
    ops[i] = new_buffer(&c[i]);
  cuv_output_t out;
  int rc = cuv_sync(cuv_zip(ops, 5), &out);
  if (rc != 0)
    return rc;
  cuv_buffer_t **fields[] = {&m->x, &m->w1, &m->w2, &m->h, &m->y};
  for (size_t i = 0; i < 5; i++)
    *fields[i] = cuv_output_take(cuv_tuple_get(&out, i)).data;
  cuv_output_release(&out);
  return 0;
}

static void mlp_free(mlp_t *m) {
  cuv_buffer_t *bufs[] = {m->x, m->w1, m->w2, m->h, m->y};
  for (size_t i = 0; i < 5; i++)
    cuv_buffer_unref(bufs[i]);
}

static int example_mlp(mlp_t *m, float *x, const float *w1, const float *w2) {
  float y[ROWS * OUT], want[ROWS * OUT];
  int rc = mlp_upload(m, x, w1, w2);
  cuv_output_t out;
  if (rc == 0) /* d2h: cuv_download's host copy, valid once the op completed */
    rc = cuv_sync(cuv_seq(forward(m), cuv_download(m->y, 0, sizeof y)), &out);
  if (rc != 0)
    return failed("mlp", rc);
  memcpy(y, out.data, sizeof y);
  cuv_output_release(&out);
  host_forward(x, w1, w2, want);
  return check("mlp forward", y, want, ROWS * OUT);
}

/* ---- 4. graphs: capture the forward pass once, replay it per token ---- */

static int example_graph(cuv_device_t *dev, const mlp_t *m, const float *w1, const float *w2) {
  cuv_stream_t *stream = NULL;
  cuv_graph_t *graph = NULL;
  int rc = cuv_stream_create(&stream, dev), bad = 0;
  if (rc == 0)
    rc = cuv_graph_capture(&graph, forward(m), stream, NULL); /* nothing runs yet */
  for (int t = 0; rc == 0 && t < TOKENS; t++) {
    float token[ROWS * IN], y[ROWS * OUT], want[ROWS * OUT];
    random_floats(token, ROWS * IN);
    rc = cuv_graph_update(graph, cuv_memcpy_htod(m->x, 0, token, sizeof token, CUV_COPY_STAGE));
    if (rc == 0)
      rc = cuv_sync_on(cuv_graph_stream(graph),
                       cuv_seq(cuv_graph_launch(graph), cuv_memcpy_dtoh(y, m->y, 0, sizeof y)),
                       NULL);
    host_forward(token, w1, w2, want);
    bad |= rc == 0 && check("graph replay", y, want, ROWS * OUT);
  }
  if (graph)
    cuv_graph_unref(graph);
  cuv_stream_destroy(stream);
  return rc != 0 ? failed("graph", rc) : bad;
}

/* ---- 5. the MLP and its graph over tensors ---- */

/* The MLP's operands as tensors: x, w1, w2 from the with_context h2d helper (w1 then dup'd), h
 * from zeros and y from ones (every element overwritten by the second gemm). */
typedef struct mlp_tensors {
  cuv_tensor_t *x, *w1, *w2, *h, *y;
} mlp_tensors_t;

/* h2d of rows x cols floats through new_buffer, as a tensor over that buffer; NULL on failure. */
static cuv_tensor_t *h2d_tensor(cuv_stream_t *stream, const float *host, size_t rows, size_t cols) {
  contents_t c = {rows * cols, host, 0};
  cuv_buffer_t *buf = sync_buffer(stream, new_buffer(&c));
  const size_t shape[] = {rows, cols};
  cuv_tensor_t *t = NULL;
  if (buf && cuv_tensor_create(&t, buf, 0, CUV_DTYPE_F32, shape, 2) != 0)
    t = NULL;
  if (buf)
    cuv_buffer_unref(buf); /* the tensor holds it */
  return t;
}

static int mlp_tensors_upload(mlp_tensors_t *m, cuv_stream_t *stream, const float *x,
                              const float *w1, const float *w2) {
  cuv_device_t *dev = cuv_stream_device(stream);
  const size_t hidden[] = {ROWS, HIDDEN}, out[] = {ROWS, OUT};
  cuv_tensor_t *w1_up = h2d_tensor(stream, w1, IN, HIDDEN);
  m->x = h2d_tensor(stream, x, ROWS, IN);
  m->w1 = w1_up ? sync_tensor(stream, cuv_tensor_dup(w1_up)) : NULL;
  m->w2 = h2d_tensor(stream, w2, HIDDEN, OUT);
  m->h = sync_tensor(stream, cuv_tensor_zeros(dev, CUV_DTYPE_F32, hidden, 2));
  m->y = sync_tensor(stream, cuv_tensor_ones(dev, CUV_DTYPE_F32, out, 2));
  cuv_tensor_unref(w1_up);
  return m->x && m->w1 && m->w2 && m->h && m->y ? 0 : CUV_ENOMEM;
}

static void mlp_tensors_free(mlp_tensors_t *m) {
  cuv_tensor_t *ts[] = {m->x, m->w1, m->w2, m->h, m->y};
  for (size_t i = 0; i < 5; i++)
    cuv_tensor_unref(ts[i]);
}

/* forward() over tensors: the generated launchers check every operand is of floats. */
static cuv_op_t *forward_tensors(const mlp_tensors_t *m) {
  cuv_op_t *op = gemm_launch_tensors(&k, cuv_for_num_elems(ROWS * HIDDEN), ROWS, HIDDEN, IN,
                                     CUV_IN(m->x), CUV_IN(m->w1), CUV_IN(m->h));
  op = cuv_seq(
      op, relu_launch_tensors(&k, cuv_for_num_elems(ROWS * HIDDEN), ROWS * HIDDEN, CUV_IN(m->h)));
  return cuv_seq(op, gemm_launch_tensors(&k, cuv_for_num_elems(ROWS * OUT), ROWS, OUT, HIDDEN,
                                         CUV_IN(m->h), CUV_IN(m->w2), CUV_IN(m->y)));
}

/* The forward pass, then y to the host (cuv_tensor_to_host: pinned memory, valid once done). */
static int mlp_tensors_forward(cuv_stream_t *stream, const mlp_tensors_t *m, const float *x,
                               const float *w1, const float *w2) {
  float y[ROWS * OUT], want[ROWS * OUT];
  cuv_output_t out;
  int rc = cuv_sync_on(stream, cuv_seq(forward_tensors(m), cuv_tensor_to_host(m->y)), &out);
  if (rc != 0)
    return failed("mlp over tensors", rc);
  memcpy(y, out.data, sizeof y);
  cuv_output_release(&out);
  host_forward(x, w1, w2, want);
  return check("mlp forward over tensors", y, want, ROWS * OUT);
}

/* The forward pass over tensors captured once, replayed per fresh random token after an update
 * copies it into x's bytes. */
static int mlp_tensors_graph(cuv_stream_t *stream, const mlp_tensors_t *m, const float *w1,
                             const float *w2) {
  cuv_graph_t *graph = NULL;
  int rc = cuv_graph_capture(&graph, forward_tensors(m), stream, NULL), bad = 0;
  for (int t = 0; rc == 0 && t < TOKENS; t++) {
    float token[ROWS * IN], y[ROWS * OUT], want[ROWS * OUT];
    random_floats(token, ROWS * IN);
    rc = cuv_graph_update(graph, cuv_memcpy_htod(cuv_tensor_buffer(m->x), cuv_tensor_offset(m->x),
                                                 token, sizeof token, CUV_COPY_STAGE));
    if (rc == 0)
      rc = cuv_sync_on(cuv_graph_stream(graph),
                       cuv_seq(cuv_graph_launch(graph), cuv_tensor_to_host_into(y, sizeof y, m->y)),
                       NULL);
    host_forward(token, w1, w2, want);
    bad |= rc == 0 && check("graph replay over tensors", y, want, ROWS * OUT);
  }
  if (graph)
    cuv_graph_unref(graph);
  return rc != 0 ? failed("graph over tensors", rc) : bad;
}

static int example_mlp_tensors(cuv_device_t *dev, const float *x, const float *w1,
                               const float *w2) {
  cuv_stream_t *stream = NULL;
  mlp_tensors_t m = {0};
  int rc = cuv_stream_create(&stream, dev), bad = 0;
  if (rc == 0)
    rc = mlp_tensors_upload(&m, stream, x, w1, w2);
  if (rc == 0)
    bad = mlp_tensors_forward(stream, &m, x, w1, w2) | mlp_tensors_graph(stream, &m, w1, w2);
  mlp_tensors_free(&m);
  cuv_stream_destroy(stream);
  return rc != 0 ? failed("mlp tensors", rc) : bad;
}

int main(void) {
  seed_register_twins();
  int rc = cuv_init();
  if (rc == CUV_ENODRIVER) {
    const char *why = cuv_init_error();
    fprintf(stderr, "seed: no CUDA driver: %s; CUV_DRIVER=sim runs it on the CPU simulator\n",
            why ? why : cuv_strerror(rc));
    return 77;
  }
  cuv_device_t *dev = NULL;
  if (rc != 0 || (rc = cuv_device_open(&dev, 0)) != 0 || (rc = seed_module_load(&k, dev)) != 0)
    return failed("setting up", rc);
  srand((unsigned)time(NULL));
  static float x[ROWS * IN], w1[IN * HIDDEN], w2[HIDDEN * OUT];
  random_floats(x, ROWS * IN);
  random_floats(w1, IN * HIDDEN);
  random_floats(w2, HIDDEN * OUT);
  mlp_t m = {0};
  int bad = example_saxpy(dev) | example_vecadd() | example_mlp(&m, x, w1, w2);
  if (m.y)
    bad |= example_graph(dev, &m, w1, w2);
  random_floats(x, ROWS * IN); /* fresh data for the same network over tensors */
  random_floats(w1, IN * HIDDEN);
  random_floats(w2, HIDDEN * OUT);
  bad |= example_mlp_tensors(dev, x, w1, w2);
  mlp_free(&m);
  seed_module_destroy(&k);
  cuv_device_unref(dev);
  return bad ? 1 : 0;
}
