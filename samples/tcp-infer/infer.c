/* tcp-infer: the model on the GPU.
 *
 * The weights are uploaded once at start-up and shared by every request (cuv buffers, read by
 * kernels on any stream). Each request in flight uses one workspace (input, hidden and output
 * buffers sized for the largest batch); a request that finds none free waits in FIFO order, which
 * bounds the device memory and the work in flight. A workspace is reused only after the request's
 * completion callback ran, that is, after cuv proved the GPU work complete.
 *
 * One request is one submission:
 *   htod(in, body, staged) ; dense(in -> hidden, ReLU) ; dense(hidden -> out) ; download(out)
 * submitted with cuv_uv_submit: its callback runs on the loop thread with the downloaded outputs.
 * --baseline runs the same op with cuv_sync in a libuv thread-pool worker (uv_queue_work): what a
 * libuv program does without the bridge, one worker blocked per request in flight. --offload
 * submits from the thread pool instead of the loop thread (see offload_work). --coalesce (batch.c)
 * runs the rows of several requests through one workspace as one such op (infer_rows_op). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void infer_register_twin(unsigned delay_us) {
  const size_t u = sizeof(unsigned), p = sizeof(cuv_deviceptr_t);
  const size_t dense[8] = {u, u, u, p, p, p, p, u}, bias_act[5] = {u, u, p, p, u};
  cuv_sim_register_kernel("mlp_dense", twin_dense, 8, dense);
  cuv_sim_register_kernel("mlp_bias_act", twin_bias_act, 5, bias_act);
  if (delay_us)
    cuv_sim_set_kernel_duration("mlp_dense", delay_us);
}
#else
void infer_register_twin(unsigned delay_us) {
  if (delay_us)
    fprintf(stderr, "tcp-infer: --sim-delay-us ignored (built without libcuv-sim)\n");
}
#endif

static cuv_dim3_t grid_for(unsigned threads) { return CUV_DIM1((threads + 127) / 128); }

/* One dense layer: y = act(x W^T + b). */
static cuv_op_t *dense(server_t *s, unsigned rows, unsigned in, unsigned out, cuv_buffer_t *x,
                       cuv_buffer_t *w, cuv_buffer_t *b, cuv_buffer_t *y, unsigned relu) {
  const cuv_arg_t args[] = {CUV_ARG_VALUE(rows), CUV_ARG_VALUE(in),  CUV_ARG_VALUE(out),
                            CUV_ARG_READ(x),     CUV_ARG_READ(w),    CUV_ARG_READ(b),
                            CUV_ARG_WRITE(y),    CUV_ARG_VALUE(relu)};
  return cuv_launch(s->dense, grid_for(rows * out), CUV_DIM1(128), 0, args, 8);
}

/* The whole GPU work of `rows` input rows, as one op. The input is staged (copied into pinned
 * memory) when the op is built, so the caller may reuse it right after. */
cuv_op_t *infer_rows_op(server_t *s, workspace_t *ws, cuv_op_t *upload, unsigned rows) {
  cuv_op_t *op = upload;
  if (s->cublas_ctx) {
    op = cuv_seq(op, infer_cublas_layers(s, ws, rows));
  } else {
    op = cuv_seq(op, dense(s, rows, MLP_IN, MLP_HIDDEN, ws->in, s->w1, s->b1, ws->hidden, 1));
    op = cuv_seq(op, dense(s, rows, MLP_HIDDEN, MLP_OUT, ws->hidden, s->w2, s->b2, ws->out, 0));
  }
  return cuv_seq(op, cuv_download(ws->out, 0, (size_t)rows * MLP_OUT * sizeof(float)));
}

static cuv_op_t *infer_op(server_t *s, request_t *req) {
  size_t bytes = (size_t)req->batch * MLP_IN * sizeof(float);
  return infer_rows_op(s, req->ws, cuv_memcpy_htod(req->ws->in, 0, req->body, bytes,
                                                   CUV_COPY_STAGE), req->batch);
}

/* cuv: the completion, on the loop thread. */
static void on_gpu_done(int status, cuv_output_t *out, void *arg) {
  request_t *req = arg;
  req->gpu_status = status;
  if (status == 0)
    req->out = cuv_output_take(out);
  request_gpu_done(req);
}

/* --baseline: a thread-pool worker builds the op and blocks until the GPU is done. */
static void baseline_work(uv_work_t *work) {
  request_t *req = work->data;
  req->gpu_status = cuv_sync(infer_op(req->lp->srv, req), &req->out);
}

static void baseline_after(uv_work_t *work, int status) {
  request_t *req = work->data;
  if (status < 0 && req->gpu_status == 0)
    req->gpu_status = CUV_ECANCELED;
  request_gpu_done(req);
}

/* --offload: a thread-pool worker only builds and enqueues the op (cuv_uv_submit may be called
 * from any thread) and returns at once, so the loop thread pays no driver calls and no worker
 * waits for the GPU; the completion still arrives on the loop through the bridge. The work item
 * is allocated apart from the request: the completion may run (and free the request) before the
 * pool's after-callback does. */
typedef struct offload {
  uv_work_t work;
  request_t *req;
  int rc;
} offload_t;

static void offload_work(uv_work_t *work) {
  offload_t *o = work->data;
  request_t *req = o->req;
  cuv_op_t *op = infer_op(req->lp->srv, req);
  free(req->body); /* staged */
  req->body = NULL;
  o->rc = cuv_uv_submit(req->lp->bridge, op, on_gpu_done, req, NULL);
  /* accepted: req belongs to its completion now, do not touch it */
}

static void offload_after(uv_work_t *work, int status) {
  offload_t *o = work->data;
  request_t *req = o->req;
  int rc = status < 0 ? CUV_ECANCELED : o->rc;
  free(o);
  if (rc == 0)
    return;
  req->lp->n.refused++;
  req->gpu_status = rc;
  request_gpu_done(req);
}

static void run(loop_t *lp, request_t *req) {
  server_t *s = lp->srv;
  req->state = REQ_RUNNING;
  lp->n.gpu_submitted++;
  if (s->baseline) {
    req->work.data = req;
    int rc = uv_queue_work(&lp->loop, &req->work, baseline_work, baseline_after);
    if (rc == 0)
      return;
    req->gpu_status = CUV_EINVAL;
  } else if (s->offload) {
    offload_t *o = malloc(sizeof *o);
    if (o) {
      *o = (offload_t){.req = req};
      o->work.data = o;
      if (uv_queue_work(&lp->loop, &o->work, offload_work, offload_after) == 0)
        return;
      free(o);
    }
    req->gpu_status = CUV_ENOMEM;
  } else {
    cuv_op_t *op = infer_op(s, req);
    free(req->body); /* staged: cuv holds its own copy */
    req->body = NULL;
    int rc = cuv_uv_submit(lp->bridge, op, on_gpu_done, req, NULL);
    if (rc == 0)
      return;
    req->gpu_status = rc;
  }
  lp->n.refused++;
  request_gpu_done(req); /* refused: answered with the error */
}

void infer_wait(loop_t *lp, request_t *req) {
  req->state = REQ_WAITING;
  req->next_wait = NULL;
  if (lp->wait_tail)
    lp->wait_tail->next_wait = req;
  else
    lp->wait_head = req;
  lp->wait_tail = req;
  lp->n.waiting++;
}

void infer_start(loop_t *lp, request_t *req) {
  if (lp->batcher) {
    batch_add(lp, req); /* --coalesce: it joins the loop's next batch */
    return;
  }
  workspace_t *ws = lp->free_ws;
  if (!ws) {
    infer_wait(lp, req);
    return;
  }
  lp->free_ws = ws->next;
  lp->n.free_workspaces--;
  req->ws = ws;
  run(lp, req);
}

void infer_forget(loop_t *lp, request_t *req) {
  if (lp->batcher && batch_forget(lp, req))
    return; /* it was in the pending batch */
  request_t **p = &lp->wait_head, *prev = NULL;
  while (*p && *p != req) {
    prev = *p;
    p = &(*p)->next_wait;
  }
  if (!*p)
    return;
  *p = req->next_wait;
  if (lp->wait_tail == req)
    lp->wait_tail = prev;
  lp->n.waiting--;
}

void infer_release(loop_t *lp, request_t *req) {
  workspace_t *ws = req->ws;
  if (!ws)
    return;
  req->ws = NULL;
  request_t *next = lp->wait_head;
  if (next && !lp->stopping) {
    lp->wait_head = next->next_wait;
    if (!lp->wait_head)
      lp->wait_tail = NULL;
    lp->n.waiting--;
    next->ws = ws;
    run(lp, next);
    return;
  }
  ws->next = lp->free_ws;
  lp->free_ws = ws;
  lp->n.free_workspaces++;
}

static int load_kernel(server_t *s, const char *ptx) {
  cuv_module_t *mod;
  int rc = cuv_module_load_file(&mod, s->dev, ptx);
  if (rc != 0) {
    fprintf(stderr, "tcp-infer: cannot load %s\n", ptx);
    return rc;
  }
  rc = cuv_kernel_get(&s->dense, mod, "mlp_dense");
  if (rc == 0 && cuv_kernel_get(&s->bias_act, mod, "mlp_bias_act") != 0)
    s->bias_act = NULL; /* an older PTX: no --cublas */
  cuv_module_unload(mod); /* the kernels keep it */
  return rc;
}

/* The weights, made from the seed and uploaded once (one blocking cuv_sync at start-up). */
static int upload_weights(server_t *s, uint64_t seed) {
  mlp_weights_t *w = malloc(sizeof *w);
  if (!w)
    return CUV_ENOMEM;
  mlp_weights_init(w, seed);
  struct {
    cuv_buffer_t **buf;
    const float *host;
    size_t bytes;
  } parts[] = {{&s->w1, w->w1, sizeof w->w1},
               {&s->b1, w->b1, sizeof w->b1},
               {&s->w2, w->w2, sizeof w->w2},
               {&s->b2, w->b2, sizeof w->b2}};
  cuv_op_t *copies[4];
  int rc = 0;
  for (size_t i = 0; i < 4; i++) {
    if (rc == 0)
      rc = cuv_buffer_create(parts[i].buf, s->dev, parts[i].bytes);
    copies[i] = rc == 0 ? cuv_memcpy_htod(*parts[i].buf, 0, parts[i].host, parts[i].bytes,
                                          CUV_COPY_STAGE)
                        : NULL;
  }
  if (rc == 0)
    rc = cuv_sync(cuv_zip(copies, 4), NULL);
  else
    for (size_t i = 0; i < 4; i++)
      cuv_op_free(copies[i]);
  /* Read-only from now on, by every request on every stream: nothing to order, so no tracking
   * (tracking would cost each submission a walk over every other request in flight). */
  for (size_t i = 0; rc == 0 && i < 4; i++)
    rc = cuv_buffer_set_hazard_mode(*parts[i].buf, CUV_HAZARD_NONE);
  free(w);
  return rc;
}

int infer_init(server_t *s, const char *ptx, uint64_t seed) {
  int rc = load_kernel(s, ptx);
  if (rc == 0)
    rc = upload_weights(s, seed);
  return rc;
}

/* The workspaces take no hazard tracking: one request uses one at a time, and it is reused only
 * after cuv proved that request's GPU work complete (its completion callback ran). */
static int buffer(cuv_buffer_t **buf, cuv_device_t *dev, size_t bytes) {
  int rc = cuv_buffer_create(buf, dev, bytes);
  if (rc == 0)
    rc = cuv_buffer_set_hazard_mode(*buf, CUV_HAZARD_NONE);
  return rc;
}

int infer_loop_init(loop_t *lp) {
  server_t *s = lp->srv;
  unsigned n = s->workspaces_per_loop;
  lp->workspaces = calloc(n, sizeof *lp->workspaces);
  if (!lp->workspaces)
    return CUV_ENOMEM;
  size_t rows = s->coalesce ? s->coalesce : s->max_batch; /* --coalesce: one per batch */
  for (unsigned i = 0; i < n; i++) {
    workspace_t *ws = &lp->workspaces[i];
    int rc;
    if ((rc = buffer(&ws->in, s->dev, rows * MLP_IN * sizeof(float))) != 0 ||
        (rc = buffer(&ws->hidden, s->dev, rows * MLP_HIDDEN * sizeof(float))) != 0 ||
        (rc = buffer(&ws->out, s->dev, rows * MLP_OUT * sizeof(float))) != 0)
      return rc;
    ws->next = lp->free_ws;
    lp->free_ws = ws;
    lp->n.free_workspaces++;
  }
  return s->coalesce ? batch_loop_init(lp) : 0;
}

void infer_loop_free(loop_t *lp) {
  batch_loop_free(lp);
  for (unsigned i = 0; lp->workspaces && i < lp->srv->workspaces_per_loop; i++) {
    workspace_t *ws = &lp->workspaces[i];
    cuv_buffer_t *bufs[] = {ws->in, ws->hidden, ws->out};
    for (size_t j = 0; j < 3; j++)
      if (bufs[j])
        cuv_buffer_unref(bufs[j]);
  }
  free(lp->workspaces);
  lp->workspaces = NULL;
}

void infer_free(server_t *s) {
  infer_cublas_close(s);
  cuv_buffer_t *weights[] = {s->w1, s->b1, s->w2, s->b2};
  for (size_t i = 0; i < 4; i++)
    if (weights[i])
      cuv_buffer_unref(weights[i]);
  if (s->dense)
    cuv_kernel_release(s->dense);
  if (s->bias_act)
    cuv_kernel_release(s->bias_act);
}
