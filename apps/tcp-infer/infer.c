/* tcp-infer: request dispatch, how a complete POST /infer reaches the GPU.
 *
 * A request takes a workspace of its loop (pool.c) or waits for one in FIFO order, and runs as
 * one submission of model.c's op over its rows, the input staged from its body:
 *   htod(in, body, staged) ; dense ; dense ; download(out)
 * submitted with cuv_uv_submit: its callback runs on the loop thread with the downloaded outputs.
 * --baseline runs the same op with cuv_sync in a libuv thread-pool worker (uv_queue_work): what a
 * libuv program does without the bridge, one worker blocked per request in flight. --offload
 * submits from the thread pool instead of the loop thread (see offload_work). --coalesce hands
 * the request to batch.c, which runs the rows of several requests as one such op. --graph copies
 * the body into the workspace's pinned input and replays the workspace's graph of that op
 * (model_graph_op); the completion copies the outputs from its pinned output into the body's
 * buffer (bodies are 4x the outputs' size), which the response then sends.
 *
 * A workspace is reused only after the request's completion callback ran, that is, after cuv
 * proved the GPU work complete (infer_release). The dependency is one-way: this file calls
 * batch.c, model.c and pool.c; none of them calls back here. */
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "infer.h"
#include "model.h"
#include "pool.h"
#include "server.h"
#include "streams.h"

static cuv_op_t *infer_op(request_t *req) {
  size_t bytes = (size_t)req->batch * MLP_IN * sizeof(float);
  return model_rows_op(req->ws, cuv_memcpy_htod(req->ws->in, 0, req->body, bytes,
                                                   CUV_COPY_STAGE), req->batch);
}

/* cuv: the completion, on the loop thread. */
static void on_gpu_done(int status, cuv_output_t *out, void *arg) {
  request_t *req = arg;
  streams_done(req->lp, req->stream);
  req->gpu_status = status;
  if (status == 0)
    req->out = cuv_output_take(out);
  req->done(req);
}

/* --graph: the replay completed, so the workspace's pinned output holds the request's rows (and
 * the workspace is still the request's: its done callback runs infer_release). The output
 * borrows the body's buffer, freed with the request. */
static void on_graph_done(int status, cuv_output_t *out, void *arg) {
  (void)out; /* unit */
  request_t *req = arg;
  streams_done(req->lp, req->stream);
  req->gpu_status = status;
  if (status == 0) {
    memcpy(req->body, cuv_host_buffer_data(req->ws->host_out),
           (size_t)req->batch * MLP_OUT * sizeof(float));
    req->out = (cuv_output_t){.data = req->body};
  }
  req->done(req);
}

/* --graph: the body into the workspace's pinned input (no request of the workspace is in flight,
 * so nothing reads it now), then one graph launch. */
static int graph_submit(loop_t *lp, request_t *req, const cuv_submit_opts_t *opts) {
  memcpy(cuv_host_buffer_data(req->ws->host_in), req->body,
         (size_t)req->batch * MLP_IN * sizeof(float));
  return cuv_uv_submit(lp->bridge, model_graph_op(lp, req->ws, req->batch), on_graph_done,
                       req, opts);
}

/* --baseline: a thread-pool worker builds the op and blocks until the GPU is done. */
static void baseline_work(uv_work_t *work) {
  request_t *req = work->data;
  req->gpu_status = cuv_sync(infer_op(req), &req->out);
}

static void baseline_after(uv_work_t *work, int status) {
  request_t *req = work->data;
  if (status < 0 && req->gpu_status == 0)
    req->gpu_status = CUV_ECANCELED;
  req->done(req);
}

/* --offload: a thread-pool worker only builds and enqueues the op (cuv_uv_submit may be called
 * from any thread) and returns at once, so the loop thread pays no driver calls and no worker
 * waits for the GPU; the completion still arrives on the loop through the bridge. The work item
 * is allocated apart from the request: the completion may run (and free the request) before the
 * pool's after-callback does. */
typedef struct offload {
  uv_work_t work;
  request_t *req;
  cuv_submit_opts_t opts; /* the stream, chosen on the loop thread */
  int rc;
} offload_t;

static void offload_work(uv_work_t *work) {
  offload_t *o = work->data;
  request_t *req = o->req;
  cuv_op_t *op = infer_op(req); /* staged: the body is free again (conn.c frees
                                                 * it with the request, into its loop's cache) */
  o->rc = cuv_uv_submit(req->lp->bridge, op, on_gpu_done, req, &o->opts);
  /* accepted: req belongs to its completion now, do not touch it */
}

static void offload_after(uv_work_t *work, int status) {
  offload_t *o = work->data;
  request_t *req = o->req;
  int rc = status < 0 ? CUV_ECANCELED : o->rc;
  free(o);
  if (rc == 0)
    return;
  streams_done(req->lp, req->stream);
  req->lp->n.refused++;
  req->gpu_status = rc;
  req->done(req);
}

/* Hands the request's GPU work on as the mode says; 0 when accepted (its completion comes later,
 * on the loop thread), else the error. */
static int submit(loop_t *lp, request_t *req) {
  server_t *s = lp->srv;
  if (s->baseline) {
    req->work.data = req;
    return uv_queue_work(&lp->loop, &req->work, baseline_work, baseline_after) ? CUV_EINVAL : 0;
  }
  cuv_submit_opts_t opts = {.stream = streams_take(lp, req->ws, &req->stream),
                            .trace = req->stage ? &req->stage->cuv : NULL};
  if (s->offload) {
    offload_t *o = malloc(sizeof *o);
    if (!o)
      return CUV_ENOMEM;
    *o = (offload_t){.req = req, .opts = opts};
    o->work.data = o;
    if (uv_queue_work(&lp->loop, &o->work, offload_work, offload_after) == 0)
      return 0;
    free(o);
    return CUV_ENOMEM;
  }
  return s->graph ? graph_submit(lp, req, &opts)
                  : cuv_uv_submit(lp->bridge, infer_op(req), /* staged: cuv's own copy */
                                  on_gpu_done, req, &opts);
}

/* --stage-sample: the modes that submit one request at a time through the bridge. */
static void sample_stages(loop_t *lp, request_t *req) {
  server_t *s = lp->srv;
  if (s->baseline || s->offload || req->stage || !(req->stage = stages_sample(lp)))
    return;
  req->stage->in = req->t_begin;
  req->stage->began = req->t_start;
}

static void run(loop_t *lp, request_t *req) {
  req->state = REQ_RUNNING;
  req->gpu = req->ws->gpu;
  if (req->gpu != lp->gpu)
    req->gpu->stolen++; /* --balance steal: another device's workspace (pool.c) */
  req->t_start = uv_hrtime();
  lp->n.gpu_submitted++;
  counters_exec(&lp->n, req->batch);
  req->stream = -1;
  sample_stages(lp, req);
  int rc = submit(lp, req);
  if (rc == 0) {
    req->t_submitted = uv_hrtime();
    if (req->stage)
      req->stage->returned = req->t_submitted;
    return;
  }
  stages_discard(req->stage);
  req->stage = NULL;
  streams_done(lp, req->stream);
  req->gpu_status = rc;
  lp->n.refused++;
  req->done(req); /* refused: answered with the error */
}

void infer_start(loop_t *lp, request_t *req) {
  if (lp->batcher) {
    batch_add(lp, req); /* --coalesce: it joins the loop's next batch */
    return;
  }
  workspace_t *ws = pool_take(lp);
  if (!ws) {
    pool_wait(lp, req);
    return;
  }
  req->ws = ws;
  run(lp, req);
}

void infer_forget(loop_t *lp, request_t *req) {
  if (lp->batcher && batch_forget(lp, req))
    return; /* it was in the pending batch */
  pool_forget(lp, req);
}

void infer_release(loop_t *lp, request_t *req) {
  workspace_t *ws = req->ws;
  if (!ws)
    return;
  req->ws = NULL;
  request_t *next = lp->stopping ? NULL : pool_next_waiting(lp);
  if (!next) {
    pool_put(lp, ws);
    return;
  }
  next->ws = ws;
  run(lp, next);
}

/* --graph: a capture stream on each device whose workspaces the loop has (pool.c). */
static int captures_init(loop_t *lp) {
  server_t *s = lp->srv;
  unsigned n = s->balance == BALANCE_STEAL ? s->ndevices : 1;
  int rc = 0;
  for (unsigned k = 0; s->graph && rc == 0 && k < n; k++) {
    gpu_t *g = &s->gpus[(lp->gpu->index + k) % s->ndevices];
    rc = cuv_stream_create(&lp->capture[g->index], g->dev);
  }
  return rc;
}

int infer_loop_init(loop_t *lp) {
  int rc = captures_init(lp);
  if (rc == 0 && !lp->srv->baseline) /* --baseline: cuv_sync on the default policy's streams */
    rc = streams_init(lp);
  if (rc == 0)
    rc = pool_init(lp);
  if (rc == 0 && lp->srv->coalesce)
    rc = batch_loop_init(lp);
  return rc;
}

void infer_loop_free(loop_t *lp) {
  batch_loop_free(lp);
  pool_free(lp);
  for (unsigned i = 0; i < MAX_DEVICES; i++) {
    if (lp->capture[i])
      cuv_stream_destroy(lp->capture[i]); /* the graphs hold it while they live */
    lp->capture[i] = NULL;
  }
  streams_free(lp);
}
