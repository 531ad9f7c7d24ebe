/* Stream capture: between cuStreamBeginCapture and cuStreamEndCapture, work enqueued on the
 * stream is appended to a graph instead of running. Other streams join the capture by waiting on
 * an event recorded in it (fork) and must be joined back (the origin, or another capturing
 * stream, waits on an event recorded after their last captured work) before the capture ends.
 *
 * The simulator's graphs are linear: commands are kept in the order the calls were made, across
 * all the streams of the capture. That order is one valid execution order of the real graph's
 * DAG (every cross-stream edge is an event wait issued after the record), so replays compute the
 * same results, only with less concurrency. */

#include <stdlib.h>

#include "sim.h"

static CUresult members_add(struct sim_capture *c, struct sim_stream *s) {
  if (c->nmembers == c->capacity) {
    size_t cap = c->capacity ? c->capacity * 2 : 4;
    struct sim_stream **m = realloc(c->members, cap * sizeof *m);
    if (!m)
      return CUDA_ERROR_OUT_OF_MEMORY;
    c->members = m;
    c->capacity = cap;
  }
  c->members[c->nmembers++] = s;
  sim_stream_ref(s);
  c->refs++;
  s->cap = c;
  s->cap_ops = 0;
  s->cap_joined = 0;
  return CUDA_SUCCESS;
}

void sim_capture_unref(struct sim_capture *c) {
  if (--c->refs > 0)
    return;
  if (c->graph)
    sim_graph_free(c->graph);
  free(c->members);
  free(c);
}

CUresult sim_capture_append(struct sim_stream *s, struct sim_cmd *cmd) {
  struct sim_capture *c = s->cap;
  if (c->invalidated) {
    sim_cmd_free(cmd);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  cmd->next = NULL;
  if (c->graph->tail)
    c->graph->tail->next = cmd;
  else
    c->graph->head = cmd;
  c->graph->tail = cmd;
  c->graph->count++;
  s->cap_ops++;
  return CUDA_SUCCESS;
}

void sim_capture_invalidate(struct sim_stream *s) {
  if (s->cap)
    s->cap->invalidated = true;
}

CUresult sim_capture_join(struct sim_stream *s, struct sim_capture *c) {
  if (c->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  CUresult r = members_add(c, s);
  if (r == CUDA_SUCCESS)
    s->cap_ops = 1; /* the fork itself must be joined back */
  return r;
}

/* Removes s from its capture. The capture object may be freed here; s survives (the caller
 * holds a reference). */
static void member_detach(struct sim_stream *s) {
  struct sim_capture *c = s->cap;
  for (size_t i = 0; i < c->nmembers; i++) {
    if (c->members[i] == s) {
      c->members[i] = c->members[--c->nmembers];
      break;
    }
  }
  if (c->origin == s)
    c->origin = NULL;
  s->cap = NULL;
  sim_stream_unref(s);
  sim_capture_unref(c);
}

/* A stream leaving before the end (destroyed, reset) breaks the capture sequence. */
void sim_capture_leave(struct sim_stream *s) {
  if (!s->cap)
    return;
  s->cap->invalidated = true;
  member_detach(s);
}

bool sim_capture_block_ctx_sync(struct sim_ctx *ctx) {
  bool found = false;
  for (struct sim_stream *s = ctx->streams; s; s = s->next) {
    if (s->cap) {
      s->cap->invalidated = true;
      found = true;
    }
  }
  return found;
}

/* ---- Entry points ----------------------------------------------------------------------------- */

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode) {
  SIM_ENTER(cuStreamBeginCapture);
  if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(hStream, &s);
  if (r == CUDA_SUCCESS && s->is_null)
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
  else if (r == CUDA_SUCCESS && s->cap)
    r = CUDA_ERROR_ILLEGAL_STATE;
  struct sim_capture *c = NULL;
  if (r == CUDA_SUCCESS) {
    c = calloc(1, sizeof *c);
    if (c)
      c->graph = sim_graph_new(s->obj.ctx, SIM_OBJ_GRAPH);
    if (!c || !c->graph || members_add(c, s) != CUDA_SUCCESS) {
      if (c && c->graph)
        sim_graph_free(c->graph);
      if (c)
        free(c->members);
      free(c);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (r == CUDA_SUCCESS) {
    c->mode = mode;
    c->thread = pthread_self();
    c->origin = s;
  }
  sim_unlock();
  return r;
}

/* Ends the capture for every stream in it and hands out the graph when it is valid. */
static CUresult capture_finish(struct sim_capture *c, CUresult r, CUgraph *phGraph) {
  if (r == CUDA_SUCCESS && c->invalidated)
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; /* an earlier error decides */
  for (size_t i = 0; i < c->nmembers; i++) {
    struct sim_stream *m = c->members[i];
    if (m != c->origin && m->cap_joined < m->cap_ops && r == CUDA_SUCCESS)
      r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  }
  struct sim_graph *g = c->graph;
  c->graph = NULL;
  c->ended = true;
  c->refs++; /* keep c alive while its members detach */
  while (c->nmembers > 0)
    member_detach(c->members[c->nmembers - 1]);
  sim_capture_unref(c);
  if (r == CUDA_SUCCESS && !sim_handle_add(&g->obj))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r != CUDA_SUCCESS) {
    sim_graph_free(g);
    g = NULL;
  }
  *phGraph = (CUgraph)g;
  return r;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  SIM_ENTER(cuStreamEndCapture);
  if (!phGraph)
    return CUDA_ERROR_INVALID_VALUE;
  *phGraph = NULL;
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get(hStream, &s);
  struct sim_capture *c = r == CUDA_SUCCESS ? s->cap : NULL;
  if (r == CUDA_SUCCESS && !c) {
    r = CUDA_ERROR_ILLEGAL_STATE; /* not capturing */
  } else if (r == CUDA_SUCCESS && c->origin != s) {
    c->invalidated = true;
    r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  } else if (r == CUDA_SUCCESS && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
             !pthread_equal(c->thread, pthread_self())) {
    r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  } else if (r == CUDA_SUCCESS) {
    r = capture_finish(c, sim_ctx_fault(s->obj.ctx), phGraph);
  }
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
  SIM_ENTER(cuStreamIsCapturing);
  if (!captureStatus)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(hStream, &s);
  if (r == CUDA_SUCCESS)
    *captureStatus = !s->cap                ? CU_STREAM_CAPTURE_STATUS_NONE
                     : s->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                           : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  sim_unlock();
  return r;
}
