/* tcp-infer: the backends that run each request by itself (backend.h): cuv, offload and
 * baseline. A complete POST /infer takes a workspace of its loop (pool.c) or waits for one in
 * FIFO order, and runs as one submission of model.c's op over its rows, the input staged from its
 * body:
 *   htod(in, body, staged) ; dense ; dense ; download(out)
 * The backends differ only in how that op goes out, chosen once per loop (direct_t.send):
 * cuv submits it with cuv_uv_submit, its callback on the loop thread with the downloaded outputs;
 * with --graph it copies the body into the workspace's pinned input and replays the workspace's
 * graph of that op (model_graph_op), and the completion copies the outputs from its pinned output
 * into the body's buffer (bodies are 4x the outputs' size), which the response then sends.
 * offload submits from the thread pool instead of the loop thread (see offload_work). baseline
 * runs the same op with cuv_sync in a libuv thread-pool worker (uv_queue_work): what a libuv
 * program does without the bridge, one worker blocked per request in flight; its work item is
 * the request's backend state (request_t.priv).
 *
 * A workspace is reused only after the request's completion callback ran, that is, after cuv
 * proved the GPU work complete (the backend's release). This file calls model.c, pool.c and
 * streams.c; the answer goes up only through the request's own callback (request_t.done). */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "infer.h"
#include "model.h"
#include "pool.h"
#include "server.h"
#include "streams.h"

/* These backends' state of a request (request_t.priv): the workspace it runs on, the stream its
 * submission went to (-1: none of the loop's), and baseline's thread-pool work item. */
typedef struct direct_req {
  workspace_t *ws;
  int stream;
  uv_work_t work;
} direct_req_t;

static direct_req_t *dreq(const request_t *req) { return req->priv; }

/* The request's model; one from --isolate's front carries none: the seeded MLP, the only model
 * --isolate serves (options.c). */
static const model_t *model_of(const request_t *req) {
  return req->model ? req->model : &req->lp->srv->models[0];
}

static cuv_op_t *infer_op(request_t *req) {
  const model_t *m = model_of(req);
  size_t bytes = (size_t)req->batch * m->dims[0] * sizeof(float);
  return model_rows_op(dreq(req)->ws, m,
                       cuv_memcpy_htod(dreq(req)->ws->in, 0, req->body, bytes, CUV_COPY_STAGE),
                       req->batch);
}

/* cuv: the completion, on the loop thread. */
static void on_gpu_done(int status, cuv_output_t *out, void *arg) {
  request_t *req = arg;
  streams_done(req->lp, dreq(req)->stream);
  req->gpu_status = status;
  if (status == 0)
    req->out = cuv_output_take(out);
  req->done(req);
}

/* --graph: the replay completed, so the workspace's pinned output holds the request's rows (and
 * the workspace is still the request's: its done callback runs direct_release). The output
 * borrows the body's buffer, freed with the request. */
static void on_graph_done(int status, cuv_output_t *out, void *arg) {
  (void)out; /* unit */
  request_t *req = arg;
  streams_done(req->lp, dreq(req)->stream);
  req->gpu_status = status;
  if (status == 0) {
    memcpy(req->body, cuv_host_buffer_data(dreq(req)->ws->host_out),
           (size_t)req->batch * MLP_OUT * sizeof(float));
    req->out = (cuv_output_t){.data = req->body};
  }
  req->done(req);
}

/* --graph: the body into the workspace's pinned input (no request of the workspace is in flight,
 * so nothing reads it now), then one graph launch. */
static int graph_submit(loop_t *lp, request_t *req, const cuv_submit_opts_t *opts) {
  memcpy(cuv_host_buffer_data(dreq(req)->ws->host_in), req->body,
         (size_t)req->batch * MLP_IN * sizeof(float));
  return cuv_uv_submit(lp->bridge, model_graph_op(lp, dreq(req)->ws, req->batch), on_graph_done,
                       req, opts);
}

/* baseline: a thread-pool worker builds the op and blocks until the GPU is done. */
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
  streams_done(req->lp, dreq(req)->stream);
  req->lp->n.refused++;
  req->rejected = true;
  req->gpu_status = rc;
  req->done(req);
}

/* The submission's options: the loop's least loaded stream, the sampled request's trace. */
static cuv_submit_opts_t submit_opts(loop_t *lp, request_t *req) {
  return (cuv_submit_opts_t){.stream = streams_take(lp, dreq(req)->ws, &dreq(req)->stream),
                             .trace = req->stage ? &req->stage->cuv : NULL};
}

/* --stage-sample: the backends that submit one request at a time through the bridge (cuv and
 * its --graph). */
static void sample_stages(loop_t *lp, request_t *req) {
  if (req->stage || !(req->stage = stages_sample(lp)))
    return;
  req->stage->in = req->t_begin;
  req->stage->began = req->t_start;
}

/* How each backend hands a request's GPU work on: 0 when accepted (its completion comes later,
 * on the loop thread), else the error. */
static int send_cuv(loop_t *lp, request_t *req) {
  sample_stages(lp, req);
  cuv_submit_opts_t opts = submit_opts(lp, req);
  return cuv_uv_submit(lp->bridge, infer_op(req), /* staged: cuv's own copy */
                       on_gpu_done, req, &opts);
}

static int send_graph(loop_t *lp, request_t *req) {
  sample_stages(lp, req);
  cuv_submit_opts_t opts = submit_opts(lp, req);
  return graph_submit(lp, req, &opts);
}

static int send_offload(loop_t *lp, request_t *req) {
  offload_t *o = malloc(sizeof *o);
  if (!o)
    return CUV_ENOMEM;
  *o = (offload_t){.req = req, .opts = submit_opts(lp, req)};
  o->work.data = o;
  if (uv_queue_work(&lp->loop, &o->work, offload_work, offload_after) == 0)
    return 0;
  free(o);
  return CUV_ENOMEM;
}

static int send_baseline(loop_t *lp, request_t *req) {
  uv_work_t *work = &dreq(req)->work;
  work->data = req;
  return uv_queue_work(&lp->loop, work, baseline_work, baseline_after) ? CUV_EINVAL : 0;
}

/* A loop's state in these backends: how its requests go out. */
typedef struct direct {
  int (*send)(loop_t *lp, request_t *req);
} direct_t;

static void run(loop_t *lp, request_t *req) {
  req->state = REQ_RUNNING;
  req->gpu = dreq(req)->ws->gpu;
  if (req->gpu != lp->gpu)
    req->gpu->stolen++; /* --balance steal: another device's workspace (pool.c) */
  req->t_start = uv_hrtime();
  lp->n.gpu_submitted++;
  counters_exec(&lp->n, req->batch);
  dreq(req)->stream = -1;
  int rc = ((direct_t *)lp->backend_state)->send(lp, req);
  if (rc == 0) {
    req->t_submitted = uv_hrtime();
    if (req->stage)
      req->stage->returned = req->t_submitted;
    return;
  }
  stages_discard(req->stage);
  req->stage = NULL;
  streams_done(lp, dreq(req)->stream);
  req->gpu_status = rc;
  lp->n.refused++;
  req->rejected = true;
  req->done(req); /* refused: answered with the error */
}

void infer_refuse(loop_t *lp, request_t *req, int status) {
  if (!lp || !req)
    return;
  lp->n.gpu_submitted++;
  req->gpu_status = status;
  req->done(req);
}

static void direct_submit(loop_t *lp, request_t *req) {
  if (!route_runs_model(req->route)) {
    infer_refuse(lp, req, CUV_ENOTSUP); /* POST /debug/ runs only in --isolate's workers */
    return;
  }
  workspace_t *ws = pool_take(lp);
  if (!ws) {
    pool_wait(lp, req);
    return;
  }
  dreq(req)->ws = ws;
  run(lp, req);
}

static void direct_forget(loop_t *lp, request_t *req) { pool_forget(lp, req); }

/* The request's workspace goes back, or straight to the next waiting request. */
static void direct_release(loop_t *lp, request_t *req) {
  workspace_t *ws = dreq(req)->ws;
  if (!ws)
    return;
  dreq(req)->ws = NULL;
  request_t *next = lp->stopping ? NULL : pool_next_waiting(lp);
  if (!next) {
    pool_put(lp, ws);
    return;
  }
  dreq(next)->ws = ws;
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

int infer_loop_init(loop_t *lp, bool bridge) {
  if (!lp)
    return CUV_EINVAL;
  int rc = captures_init(lp);
  if (rc == 0 && bridge) /* without it (baseline): cuv_sync on the default policy's streams */
    rc = streams_init(lp);
  if (rc == 0)
    rc = pool_init(lp);
  if (rc == 0 && bridge)
    rc = cuv_uv_open(&lp->bridge, &lp->loop); /* on the loop's own thread */
  return rc;
}

void infer_loop_free(loop_t *lp) {
  if (!lp)
    return;
  pool_free(lp);
  for (unsigned i = 0; i < MAX_DEVICES; i++) {
    if (lp->capture[i])
      cuv_stream_destroy(lp->capture[i]); /* the graphs hold it while they live */
    lp->capture[i] = NULL;
  }
  streams_free(lp);
}

static int direct_init(loop_t *lp, int (*send)(loop_t *lp, request_t *req), bool bridge) {
  direct_t *d = malloc(sizeof *d);
  if (!d)
    return CUV_ENOMEM;
  d->send = send;
  lp->backend_state = d;
  return infer_loop_init(lp, bridge);
}

static int bridge_init(loop_t *lp) {
  return direct_init(lp, lp->srv->graph ? send_graph : send_cuv, true);
}

static int offload_init(loop_t *lp) { return direct_init(lp, send_offload, true); }

static int baseline_init(loop_t *lp) { return direct_init(lp, send_baseline, false); }

static void direct_close(loop_t *lp) {
  infer_loop_free(lp);
  free(lp->backend_state);
  lp->backend_state = NULL;
}

const backend_t backend_cuv = {.name = "cuv",
                               .req_size = sizeof(direct_req_t),
                               .init = bridge_init,
                               .submit = direct_submit,
                               .forget = direct_forget,
                               .release = direct_release,
                               .close = direct_close};
const backend_t backend_offload = {.name = "offload",
                                   .req_size = sizeof(direct_req_t),
                                   .init = offload_init,
                                   .submit = direct_submit,
                                   .forget = direct_forget,
                                   .release = direct_release,
                                   .close = direct_close};
const backend_t backend_baseline = {.name = "baseline",
                                    .req_size = sizeof(direct_req_t),
                                    .init = baseline_init,
                                    .submit = direct_submit,
                                    .forget = direct_forget,
                                    .release = direct_release,
                                    .close = direct_close};
