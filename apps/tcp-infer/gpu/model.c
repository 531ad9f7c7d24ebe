/* tcp-infer: the model on the GPU, knowing no request.
 *
 * The kernels and the weights are loaded and uploaded once at start-up and shared by every loop
 * (cuv buffers, read by kernels on any stream). A workspace (input, hidden and output buffers)
 * holds the rows of one op in flight; model_rows_op is that op:
 *   upload(in) ; dense(in -> hidden, ReLU) ; dense(hidden -> out) ; download(out)
 * (with --cublas the layers are cublas.c's). Who runs the op, and when a workspace may be reused,
 * is the caller's: infer.c for one request, batch.c for a batch of them.
 *
 * --graph: the same op, from the workspace's pinned input to its pinned output, is captured once
 * per workspace and bucket of rows into a CUDA graph (cuv_graph_capture, which holds the buffers
 * it touched for the graph's lifetime) and replayed per request with one cuv_graph_launch: one
 * driver call (cuGraphLaunch) instead of four, and one op to build instead of seven. An op cannot
 * be reused instead: every executor consumes its op (cuv.h, "Ownership"), and cuv_shared runs its
 * work once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_launchers.h"
#include "cublas.h"
#include "model.h"
#include "server.h"

#ifdef TCP_INFER_WITH_SIM
#include <cuv/sim.h>

/* The kernel's host twin for libcuv-sim: mlp_dense of mlp.c, the host reference itself. */
#define DEV(p) ((float *)(uintptr_t)(*(cuv_deviceptr_t *)(p)))
static int twin_dense(const cuv_sim_launch_t *launch, void **params) {
  (void)launch;
  mlp_dense(*(unsigned *)params[0], *(unsigned *)params[1], *(unsigned *)params[2],
            DEV(params[3]), DEV(params[4]), DEV(params[5]), DEV(params[6]),
            *(unsigned *)params[7]);
  return 0;
}

/* The --cublas path's epilogue (cuBLAS itself never runs on the simulator). */
static int twin_bias_act(const cuv_sim_launch_t *launch, void **params) {
  (void)launch;
  unsigned rows = *(unsigned *)params[0], n = *(unsigned *)params[1];
  float *y = DEV(params[2]);
  const float *b = DEV(params[3]);
  for (size_t i = 0; i < (size_t)rows * n; i++) {
    float v = y[i] + b[i % n];
    y[i] = *(unsigned *)params[4] && v < 0.0f ? 0.0f : v;
  }
  return 0;
}

void model_register_twins(unsigned delay_us) {
  const size_t u = sizeof(unsigned), p = sizeof(cuv_deviceptr_t);
  const size_t dense[8] = {u, u, u, p, p, p, p, u}, bias_act[5] = {u, u, p, p, u};
  cuv_sim_register_kernel("mlp_dense", twin_dense, 8, dense);
  cuv_sim_register_kernel("mlp_bias_act", twin_bias_act, 5, bias_act);
  if (delay_us)
    cuv_sim_set_kernel_duration("mlp_dense", delay_us);
}
#else
void model_register_twins(unsigned delay_us) {
  if (delay_us)
    fprintf(stderr, "tcp-infer: --sim-delay-us ignored (built without libcuv-sim)\n");
}
#endif

/* One dense layer: y = act(x W^T + b), one thread per output element. */
static cuv_op_t *dense(gpu_t *g, unsigned rows, unsigned in, unsigned out, cuv_buffer_t *x,
                       cuv_buffer_t *w, cuv_buffer_t *b, cuv_buffer_t *y, unsigned relu) {
  return mlp_dense_launch(g->kernels, cuv_for_num_elems_block((size_t)rows * out, 128), rows, in,
                          out, x, w, b, y, relu);
}

static cuv_op_t *layers(gpu_t *g, workspace_t *ws, cuv_op_t *upload, unsigned rows) {
  cuv_op_t *op = upload;
  if (g->cublas_ctx)
    return cuv_seq(op, model_cublas_layers(g, ws, rows));
  op = cuv_seq(op, dense(g, rows, MLP_IN, MLP_HIDDEN, ws->in, g->w1, g->b1, ws->hidden, 1));
  return cuv_seq(op, dense(g, rows, MLP_HIDDEN, MLP_OUT, ws->hidden, g->w2, g->b2, ws->out, 0));
}

cuv_op_t *model_rows_op(workspace_t *ws, cuv_op_t *upload, unsigned rows) {
  return cuv_seq(layers(ws->gpu, ws, upload, rows),
                 cuv_download(ws->out, 0, (size_t)rows * MLP_OUT * sizeof(float)));
}

cuv_op_t *model_graph_op(loop_t *lp, workspace_t *ws, unsigned rows) {
  gpu_t *g = ws->gpu;
  unsigned k = 0;
  while ((1u << k) < rows)
    k++;
  if (k >= GRAPH_BUCKETS || rows == 0 || rows > ws->rows)
    return cuv_fail(CUV_EINVAL);
  if (!ws->graphs[k]) {
    unsigned n = (1u << k) < ws->rows ? 1u << k : ws->rows;
    cuv_op_t *op = cuv_upload(ws->in, 0, ws->host_in, 0, (size_t)n * MLP_IN * sizeof(float));
    op = cuv_seq(layers(g, ws, op, n), cuv_download_into(ws->host_out, 0, ws->out, 0,
                                                          (size_t)n * MLP_OUT * sizeof(float)));
    int rc = cuv_graph_capture(&ws->graphs[k], op, lp->capture[g->index], NULL);
    if (rc != 0)
      return cuv_fail(rc); /* captured again by the next request of this bucket */
    lp->n.graphs++;
  }
  return cuv_graph_launch(ws->graphs[k]);
}

/* Every kernel of mlp.cu, from the PTX file or the PTX embedded in the program. */
static int load_kernels(gpu_t *g, const char *ptx) {
  if (!(g->kernels = calloc(1, sizeof *g->kernels)))
    return CUV_ENOMEM;
  int rc =
      ptx ? mlp_module_load_file(g->kernels, g->dev, ptx) : mlp_module_load(g->kernels, g->dev);
  if (rc != 0)
    fprintf(stderr, "tcp-infer: cannot load the kernels of %s: %s\n", ptx ? ptx : "mlp.cu",
            cuv_strerror(rc));
  g->bias_act = g->kernels->mlp_bias_act;
  return rc;
}

/* The weights, made from the seed and uploaded once (one blocking cuv_sync at start-up). */
static int upload_weights(gpu_t *g, uint64_t seed) {
  mlp_weights_t *w = malloc(sizeof *w);
  if (!w)
    return CUV_ENOMEM;
  mlp_weights_init(w, seed);
  struct {
    cuv_buffer_t **buf;
    const float *host;
    size_t bytes;
  } parts[] = {{&g->w1, w->w1, sizeof w->w1},
               {&g->b1, w->b1, sizeof w->b1},
               {&g->w2, w->w2, sizeof w->w2},
               {&g->b2, w->b2, sizeof w->b2}};
  cuv_op_t *copies[4];
  int rc = 0;
  for (size_t i = 0; i < 4; i++) {
    if (rc == 0)
      rc = cuv_buffer_create(parts[i].buf, g->dev, parts[i].bytes);
    copies[i] = rc == 0 ? cuv_memcpy_htod(*parts[i].buf, 0, parts[i].host, parts[i].bytes,
                                          CUV_COPY_STAGE)
                        : NULL;
  }
  if (rc == 0)
    rc = cuv_sync(cuv_zip(copies, 4), NULL);
  else
    for (size_t i = 0; i < 4; i++)
      cuv_op_destroy(copies[i]);
  /* Read-only from now on, by every request on every stream: nothing to order, so no tracking
   * (tracking would cost each submission a walk over every other request in flight). */
  for (size_t i = 0; rc == 0 && i < 4; i++)
    rc = cuv_buffer_set_hazard_mode(*parts[i].buf, CUV_HAZARD_NONE);
  free(w);
  return rc;
}

int model_init(gpu_t *g, const char *ptx, uint64_t seed) {
  int rc = load_kernels(g, ptx);
  if (rc == 0)
    rc = upload_weights(g, seed);
  return rc;
}

void model_free(gpu_t *g) {
  model_cublas_close(g);
  cuv_buffer_t *weights[] = {g->w1, g->b1, g->w2, g->b2};
  for (size_t i = 0; i < 4; i++)
    if (weights[i])
      cuv_buffer_unref(weights[i]);
  mlp_module_destroy(g->kernels);
  free(g->kernels);
  g->kernels = NULL;
  g->bias_act = NULL;
}

/* The workspaces take no hazard tracking: one op uses one at a time, and its owner reuses it only
 * after cuv proved that op's GPU work complete (its completion callback ran). */
static int buffer(cuv_buffer_t **buf, cuv_device_t *dev, size_t bytes) {
  int rc = cuv_buffer_create(buf, dev, bytes);
  if (rc == 0)
    rc = cuv_buffer_set_hazard_mode(*buf, CUV_HAZARD_NONE);
  return rc;
}

/* Pinned host memory, zeroed: the rows of a graph's bucket beyond a request's are computed too,
 * and are never uninitialized memory. */
static int host_buffer(cuv_host_buffer_t **buf, cuv_device_t *dev, size_t bytes) {
  int rc = cuv_host_buffer_create(buf, dev, bytes);
  if (rc == 0)
    memset(cuv_host_buffer_data(*buf), 0, bytes);
  return rc;
}

int model_workspace_init(gpu_t *g, workspace_t *ws, size_t rows) {
  int rc;
  ws->gpu = g;
  ws->rows = (unsigned)rows;
  if ((rc = buffer(&ws->in, g->dev, rows * MLP_IN * sizeof(float))) != 0 ||
      (rc = buffer(&ws->hidden, g->dev, rows * MLP_HIDDEN * sizeof(float))) != 0 ||
      (rc = buffer(&ws->out, g->dev, rows * MLP_OUT * sizeof(float))) != 0)
    return rc; /* model_workspace_free frees what was made */
  if ((g->srv->coalesce || g->srv->graph) &&
      (rc = host_buffer(&ws->host_in, g->dev, rows * MLP_IN * sizeof(float))) != 0)
    return rc;
  if (g->srv->graph &&
      (rc = host_buffer(&ws->host_out, g->dev, rows * MLP_OUT * sizeof(float))) != 0)
    return rc;
  return 0;
}

void model_workspace_free(workspace_t *ws) {
  for (size_t k = 0; k < GRAPH_BUCKETS; k++)
    cuv_graph_unref(ws->graphs[k]); /* replays in flight hold theirs */
  cuv_buffer_t *bufs[] = {ws->in, ws->hidden, ws->out};
  for (size_t j = 0; j < 3; j++)
    if (bufs[j])
      cuv_buffer_unref(bufs[j]);
  cuv_host_buffer_t *host[] = {ws->host_in, ws->host_out};
  for (size_t j = 0; j < 2; j++)
    if (host[j])
      cuv_host_buffer_unref(host[j]);
}
