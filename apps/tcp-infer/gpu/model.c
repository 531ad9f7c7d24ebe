/* tcp-infer: the model on the GPU, knowing no request.
 *
 * The kernels and each model's weights (server_t.models: the seeded MLP, or a repository's) are
 * loaded and uploaded once at start-up and shared by every loop (cuv buffers, read by kernels on
 * any stream). Every model runs on the same mlp_dense kernel, whose sizes are its parameters,
 * not compiled in. A workspace (input, inner and output buffers, sized for the largest model)
 * holds the rows of one op in flight; model_rows_op is that op, for the seeded MLP:
 *   upload(in) ; dense(in -> hidden, ReLU) ; dense(hidden -> out) ; download(out)
 * and for a model of more layers, the inner ones alternate between hidden and hidden2.
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

/* A model's weights on one device, one buffer per layer's weight and bias. */
struct model_buffers {
  cuv_buffer_t *weight[MODEL_MAX_LAYERS], *bias[MODEL_MAX_LAYERS];
};

/* Where layer i of m writes: the output for the last, else the inner buffers in turn. */
static cuv_buffer_t *layer_dst(const workspace_t *ws, const model_t *m, unsigned i) {
  if (i + 1 == m->nlayers)
    return ws->out;
  return i % 2 ? ws->hidden2 : ws->hidden;
}

/* m's dense layers over ws's rows, ReLU after each but the last when m says so: for the seeded
 * MLP, in -> hidden (ReLU) -> out, as mlp_forward on the host. */
static cuv_op_t *layers(gpu_t *g, workspace_t *ws, const model_t *m, cuv_op_t *upload,
                        unsigned rows) {
  cuv_op_t *op = upload;
  if (g->cublas_ctx) /* only ever with the seeded MLP (options.c) */
    return cuv_seq(op, model_cublas_layers(g, ws, rows));
  const struct model_buffers *mb = &g->models[m->index];
  cuv_buffer_t *src = ws->in;
  for (unsigned i = 0; i < m->nlayers; i++) {
    cuv_buffer_t *dst = layer_dst(ws, m, i);
    op = cuv_seq(op, dense(g, rows, m->dims[i], m->dims[i + 1], src, mb->weight[i], mb->bias[i],
                           dst, m->relu && i + 1 < m->nlayers));
    src = dst;
  }
  return op;
}

cuv_op_t *model_rows_op(workspace_t *ws, const model_t *m, cuv_op_t *upload, unsigned rows) {
  return cuv_seq(layers(ws->gpu, ws, m, upload, rows),
                 cuv_download(ws->out, 0, (size_t)rows * m->dims[m->nlayers] * sizeof(float)));
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
    op = layers(g, ws, &g->srv->models[0], op, n); /* the seeded MLP: --graph serves no other */
    op = cuv_seq(op, cuv_download_into(ws->host_out, 0, ws->out, 0,
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

/* One model's weights, uploaded once (one blocking cuv_sync at start-up). */
static int upload_model(gpu_t *g, const model_t *m, struct model_buffers *mb) {
  cuv_op_t *copies[2 * MODEL_MAX_LAYERS];
  unsigned n = 2 * m->nlayers;
  int rc = 0;
  for (unsigned i = 0; i < n; i++) {
    unsigned layer = i / 2, out = m->dims[layer + 1];
    size_t bytes = (i % 2 ? out : (size_t)out * m->dims[layer]) * sizeof(float);
    cuv_buffer_t **buf = i % 2 ? &mb->bias[layer] : &mb->weight[layer];
    const float *host = i % 2 ? m->bias[layer] : m->weight[layer];
    if (rc == 0)
      rc = cuv_buffer_create(buf, g->dev, bytes);
    copies[i] = rc == 0 ? cuv_memcpy_htod(*buf, 0, host, bytes, CUV_COPY_STAGE) : NULL;
  }
  if (rc == 0)
    rc = cuv_sync(cuv_zip(copies, n), NULL);
  else
    for (unsigned i = 0; i < n; i++)
      cuv_op_destroy(copies[i]);
  /* Read-only from now on, by every request on every stream: nothing to order, so no tracking
   * (tracking would cost each submission a walk over every other request in flight). */
  for (unsigned i = 0; rc == 0 && i < m->nlayers; i++)
    if ((rc = cuv_buffer_set_hazard_mode(mb->weight[i], CUV_HAZARD_NONE)) == 0)
      rc = cuv_buffer_set_hazard_mode(mb->bias[i], CUV_HAZARD_NONE);
  return rc;
}

/* Every ready model's weights; the seeded MLP's are also --cublas's (g->w1 ...). */
static int upload_weights(gpu_t *g) {
  const server_t *s = g->srv;
  if (!(g->models = calloc(s->nmodels ? s->nmodels : 1, sizeof *g->models)))
    return CUV_ENOMEM;
  int rc = 0;
  for (unsigned i = 0; rc == 0 && i < s->nmodels; i++)
    if (s->models[i].ready)
      rc = upload_model(g, &s->models[i], &g->models[i]);
  if (rc == 0 && !s->repository) {
    g->w1 = g->models[0].weight[0];
    g->b1 = g->models[0].bias[0];
    g->w2 = g->models[0].weight[1];
    g->b2 = g->models[0].bias[1];
  }
  return rc;
}

int model_init(gpu_t *g, const char *ptx) {
  int rc = load_kernels(g, ptx);
  if (rc == 0)
    rc = upload_weights(g);
  return rc;
}

void model_free(gpu_t *g) {
  model_cublas_close(g);
  for (unsigned i = 0; g->models && i < g->srv->nmodels; i++)
    for (unsigned k = 0; k < MODEL_MAX_LAYERS; k++) {
      if (g->models[i].weight[k])
        cuv_buffer_unref(g->models[i].weight[k]);
      if (g->models[i].bias[k])
        cuv_buffer_unref(g->models[i].bias[k]);
    }
  free(g->models);
  g->models = NULL;
  g->w1 = g->b1 = g->w2 = g->b2 = NULL; /* the seeded model's, unreferenced above */
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

/* Sized for the largest model (server_t.bounds): its inputs, inner widths and outputs. */
int model_workspace_init(gpu_t *g, workspace_t *ws, size_t rows) {
  const repo_bounds_t *b = &g->srv->bounds;
  int rc;
  ws->gpu = g;
  ws->rows = (unsigned)rows;
  if ((rc = buffer(&ws->in, g->dev, rows * b->in * sizeof(float))) != 0 ||
      (rc = buffer(&ws->out, g->dev, rows * b->out * sizeof(float))) != 0)
    return rc; /* model_workspace_free frees what was made */
  if (b->hidden && (rc = buffer(&ws->hidden, g->dev, rows * b->hidden * sizeof(float))) != 0)
    return rc;
  if (b->two_hidden && (rc = buffer(&ws->hidden2, g->dev, rows * b->hidden * sizeof(float))) != 0)
    return rc;
  if (g->srv->staged_input &&
      (rc = host_buffer(&ws->host_in, g->dev, rows * b->in * sizeof(float))) != 0)
    return rc;
  if (g->srv->staged_output &&
      (rc = host_buffer(&ws->host_out, g->dev, rows * b->out * sizeof(float))) != 0)
    return rc;
  return 0;
}

void model_workspace_free(workspace_t *ws) {
  for (size_t k = 0; k < GRAPH_BUCKETS; k++)
    cuv_graph_unref(ws->graphs[k]); /* replays in flight hold theirs */
  cuv_buffer_t *bufs[] = {ws->in, ws->hidden, ws->hidden2, ws->out};
  for (size_t j = 0; j < 4; j++)
    if (bufs[j])
      cuv_buffer_unref(bufs[j]);
  cuv_host_buffer_t *host[] = {ws->host_in, ws->host_out};
  for (size_t j = 0; j < 2; j++)
    if (host[j])
      cuv_host_buffer_unref(host[j]);
}
