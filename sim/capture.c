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

#include "capture.h"
#include "cmd.h"
#include "context.h"
#include "enter.h"
#include "graph.h"
#include "handle.h"
#include "stream.h"
#include "util.h"

/* Captures begun and not yet ended, of every context (they hold a reference while listed). */
static struct sim_capture *live_captures;

/* Takes c off the live list; true when it was there (the caller drops the list's reference). */
static bool live_unlink(struct sim_capture *c) {
  for (struct sim_capture **p = &live_captures; *p; p = &(*p)->live_next) {
    if (*p == c) {
      *p = c->live_next;
      c->live_next = NULL;
      return true;
    }
  }
  return false;
}

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

/* A forked stream only has to be joined back once it captured work of its own (a fork with no
 * work does not fail cuStreamEndCapture). */
CUresult sim_capture_join(struct sim_stream *s, struct sim_capture *c) {
  if (c->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  return members_add(c, s);
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

/* Ends capture c for all its streams and takes it off the live list; returns its graph (the
 * caller frees it or hands it out). */
static struct sim_graph *capture_end(struct sim_capture *c) {
  struct sim_graph *g = c->graph;
  c->graph = NULL;
  c->ended = true;
  c->refs++; /* keep c alive while its members detach */
  while (c->nmembers > 0)
    member_detach(c->members[c->nmembers - 1]);
  if (live_unlink(c))
    c->refs--; /* the list's reference; ours keeps c alive */
  sim_capture_unref(c);
  return g;
}

/* A forked stream may be destroyed during the capture (the real driver keeps the capture valid).
 * Losing the origin (destroyed, context reset) aborts the capture: nothing could end it. */
void sim_capture_leave(struct sim_stream *s) {
  struct sim_capture *c = s->cap;
  if (!c)
    return;
  if (c->origin != s) {
    member_detach(s);
    return;
  }
  c->invalidated = true;
  sim_graph_free(capture_end(c));
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

CUresult sim_capture_check_unsafe(void) {
  pthread_t self = pthread_self();
  CUresult r = CUDA_SUCCESS;
  for (struct sim_capture *c = live_captures; c; c = c->live_next) {
    bool own = pthread_equal(c->thread, self);
    if ((own && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
        (!own && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
      c->invalidated = true;
      r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  return r;
}

/* ---- Entry points ---------------------------------------------------------------------------- */

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
    c->live_next = live_captures;
    live_captures = c;
    c->refs++; /* the live list's */
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
  struct sim_graph *g = capture_end(c);
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
