/* CUDA graphs: an op captured once (a stream capture in the mode the options name, relaxed by
 * default), instantiated and uploaded, then replayed through an op. The capture's submission
 * never runs anything; it is kept by the graph as the holder of what the captured work touches,
 * and retired with the graph. The buffers the capture touched are not tracked by it (hazard.c):
 * each replay holds them instead. Ops that allocate or free refuse to be captured
 * (buffer_ops.c). */
#include "internal.h"
#include "hazard.h"

struct cuv_graph_s {
  atomic_int refs;
  cuv_stream_t *stream;
  CUgraphExec exec;
  cuv__submission_t *capture;
  cuv__uses_t *uses;  /* the captured buffer accesses, held again by each replay */
};

static cuv_graph_t *graph_ref(cuv_graph_t *g) {
  atomic_fetch_add(&g->refs, 1);
  return g;
}

static void graph_unref(void *arg) {
  cuv_graph_t *g = arg;
  if (atomic_fetch_sub(&g->refs, 1) != 1)
    return;
  if (cuv__bind(g->stream->dev) == 0)
    cuv__drv.cuGraphExecDestroy(g->exec);
  cuv__hazard_uses_free(g->uses);
  /* cuv_graph_update's copies hold the stream until reaped, which only a later enqueue or a
   * synchronize on it does: retire the finished ones now, or they and the stream never go. */
  cuv__stream_reap(g->stream);
  cuv__stream_unref(g->stream);
  /* Last: the capture holds the device, which may be all that keeps the stream's default policy
   * (a capture on no stream in a process that opened no device). */
  cuv__sub_retire(g->capture);
  free(g);
}

/* The driver's mode for a cuv_capture_mode_t (their values differ: relaxed is cuv's 0). */
static CUstreamCaptureMode driver_mode(cuv_capture_mode_t mode) {
  switch (mode) {
  case CUV_CAPTURE_THREAD_LOCAL: return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  case CUV_CAPTURE_GLOBAL: return CU_STREAM_CAPTURE_MODE_GLOBAL;
  case CUV_CAPTURE_RELAXED: break;
  }
  return CU_STREAM_CAPTURE_MODE_RELAXED;
}

/* Begins capture, executes op into *output, ends capture: always, whatever failed. */
static int capture_op(cuv_op_t *op, cuv__exec_t *ex, cuv_capture_mode_t mode, CUgraph *graph,
                      cuv_output_t *output, cuv__uses_t **uses) {
  int rc = cuv__hazard_capture_begin(ex->sub, uses);
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuStreamBeginCapture(ex->stream->cu, driver_mode(mode)));
  if (rc < 0) {
    cuv__hazard_capture_end();
    cuv_op_destroy(op);
    return rc;
  }
  cuv__exec_lock();
  rc = cuv__op_execute(op, ex, output);
  cuv__exec_unlock();
  cuv__hazard_capture_end();
  int end = cuv__cu(cuv__drv.cuStreamEndCapture(ex->stream->cu, graph));
  if (rc == 0 && end < 0)
    rc = end;
  if (rc < 0 && *graph) {
    cuv__drv.cuGraphDestroy(*graph); /* the partial graph */
    *graph = NULL;
  }
  return rc;
}

static int instantiate(cuv_graph_t *g, CUgraph graph) {
  int rc = cuv__cu(cuv__drv.cuGraphInstantiate(&g->exec, graph, 0));
  cuv__drv.cuGraphDestroy(graph); /* the executable graph does not need it */
  if (rc == 0 && (rc = cuv__cu(cuv__drv.cuGraphUpload(g->exec, g->stream->cu))) < 0)
    cuv__drv.cuGraphExecDestroy(g->exec);
  return rc;
}

static bool known_mode(cuv_capture_mode_t mode) {
  return mode == CUV_CAPTURE_RELAXED || mode == CUV_CAPTURE_THREAD_LOCAL ||
         mode == CUV_CAPTURE_GLOBAL;
}

CUV_EXTERN int cuv_graph_capture_opts(cuv_graph_t **out_graph, cuv_op_t *op, cuv_stream_t *stream,
                                      cuv_output_t *out, const cuv_graph_opts_t *opts) {
  if (out)
    *out = (cuv_output_t){0};
  cuv_capture_mode_t mode = opts ? opts->capture_mode : CUV_CAPTURE_RELAXED;
  cuv_graph_t *g = out_graph && known_mode(mode) ? calloc(1, sizeof *g) : NULL;
  if (!g) {
    cuv_op_destroy(op);
    return out_graph && known_mode(mode) ? CUV_ENOMEM : CUV_EINVAL;
  }
  cuv__exec_t ex;
  int rc = cuv__exec_begin(op, NULL, stream, 0, &ex);
  if (rc < 0) {
    free(g);
    return rc;
  }
  CUgraph graph = NULL;
  cuv_output_t output = {0}; /* stays cleared when the capture cannot even begin */
  cuv__uses_t *uses = NULL;
  /* The capture runs on this thread, outside the engines, which order work of several devices
   * (engine.c): an op of another device than the stream's refuses to be captured (cross.c,
   * peer.c), a collective's parts run on their communicator's streams (collective.c). */
  rc = cuv__bind(ex.stream->dev);
  if (rc < 0)
    cuv__op_drop(op);
  else
    rc = capture_op(op, &ex, mode, &graph, &output, &uses);
  g->stream = cuv__stream_ref(ex.stream);
  if (rc == 0)
    rc = instantiate(g, graph);
  if (rc < 0) {
    cuv_output_release(&output);
    cuv__hazard_uses_free(uses);
    cuv__stream_unref(g->stream);
    cuv__sub_finish(ex.sub, rc); /* nothing ran, unless the context died meanwhile */
    free(g);
    return rc;
  }
  atomic_init(&g->refs, 1);
  g->capture = ex.sub;
  g->uses = uses;
  if (out)
    *out = output;
  else
    cuv_output_release(&output);
  *out_graph = g;
  return 0;
}

CUV_EXTERN int cuv_graph_capture(cuv_graph_t **out_graph, cuv_op_t *op, cuv_stream_t *stream,
                                 cuv_output_t *out) {
  return cuv_graph_capture_opts(out_graph, op, stream, out, NULL);
}

typedef struct launch_graph_op {
  struct cuv_op_s op;
  cuv_graph_t *graph;
} launch_graph_op_t;

static void launch_graph_drop(cuv_op_t *op) { graph_unref(((launch_graph_op_t *)op)->graph); }

static int launch_graph_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  cuv_graph_t *g = ((launch_graph_op_t *)op)->graph;
  int rc = g->stream->dev == ex->stream->dev ? 0 : CUV_EDEVICE;
  /* The submission takes over the op's reference: the graph lives until the replay is proven. */
  if (rc == 0 && (rc = cuv__sub_hold(ex->sub, graph_unref, g)) == 0) {
    rc = cuv__hazard_replay(ex, g->uses); /* ordered after conflicting work, and tracked */
    return rc < 0 ? rc : cuv__cu(cuv__drv.cuGraphLaunch(g->exec, ex->stream->cu));
  }
  graph_unref(g);
  return rc;
}

static void launch_graph_touches(const cuv_op_t *op, cuv__touches_t *t) {
  const cuv__uses_t *uses = ((const launch_graph_op_t *)op)->graph->uses;
  for (size_t i = 0; i < cuv__hazard_uses_count(uses); i++) {
    bool write;
    const cuv_buffer_t *buf = cuv__hazard_uses_get(uses, i, &write);
    cuv__touch(t, buf, write);
  }
}

static const cuv__op_vt_t launch_graph_vt = {"graph_launch", launch_graph_execute,
                                             launch_graph_drop, launch_graph_touches};

CUV_EXTERN cuv_op_t *cuv_graph_launch(cuv_graph_t *g) {
  if (!g)
    return cuv__op_fail(CUV_EINVAL);
  launch_graph_op_t *l = (launch_graph_op_t *)cuv__op_new(&launch_graph_vt, sizeof *l);
  if (!l)
    return cuv__op_fail(CUV_ENOMEM);
  l->graph = graph_ref(g);
  cuv__op_set_device(&l->op, g->stream->dev->ordinal);
  return &l->op;
}

CUV_EXTERN int cuv_graph_update(cuv_graph_t *g, cuv_op_t *op) {
  if (!g) {
    cuv_op_destroy(op);
    return CUV_EINVAL;
  }
  cuv_output_t out;
  int rc = cuv_enqueue_on(g->stream, op, &out);
  cuv_output_release(&out); /* unit for graph-safe ops */
  return rc;
}

CUV_EXTERN cuv_stream_t *cuv_graph_stream(const cuv_graph_t *g) { return g ? g->stream : NULL; }

CUV_EXTERN cuv_graph_t *cuv_graph_ref(cuv_graph_t *g) { return g ? graph_ref(g) : NULL; }

CUV_EXTERN void cuv_graph_unref(cuv_graph_t *g) {
  if (g)
    graph_unref(g);
}
