/* The graph entry points: instantiation, upload, launch, destruction. A launch clones every
 * command of the executable graph and enqueues the clones contiguously on the stream (one unit:
 * nothing else can interleave), binding each as if its call were made now. */

#include "capture.h"
#include "cmd.h"
#include "context.h"
#include "enter.h"
#include "graph.h"
#include "graph_api.h"
#include "handle.h"
#include "stream.h"
#include "submit.h"
#include "util.h"

#define SIM_INSTANTIATE_FLAGS                                                                    \
  (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |         \
   CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

/* The driver answers CUDA_ERROR_INVALID_VALUE for a NULL graph (what a failed capture leaves). */
static CUresult graph_bad_handle(const void *h) {
  return h ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

/* Makes the executable graph of hGraph for the current context. */
static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph) {
  struct sim_ctx *ctx;
  sim_lock();
  struct sim_graph *g = (struct sim_graph *)sim_handle_get(hGraph, SIM_OBJ_GRAPH);
  CUresult r = g ? sim_ctx_require(&ctx) : graph_bad_handle(hGraph);
  if (r == CUDA_SUCCESS)
    r = sim_ctx_fault(ctx);
  struct sim_graph *exec = NULL;
  if (r == CUDA_SUCCESS)
    r = sim_graph_exec_new(ctx, g, &exec);
  if (r == CUDA_SUCCESS && !sim_handle_add(&exec->obj)) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
    sim_graph_free(exec);
  }
  if (r == CUDA_SUCCESS)
    *phGraphExec = (CUgraphExec)exec;
  sim_unlock();
  return r;
}

/* cuda.h maps the name cuGraphInstantiate to this function; the driver resolves it under the
 * name cuGraphInstantiateWithFlags (see proc.c). */
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags) {
  SIM_ENTER(cuGraphInstantiateWithFlags);
  if (!phGraphExec || (flags & ~(unsigned long long)SIM_INSTANTIATE_FLAGS) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return instantiate(phGraphExec, hGraph);
}

/* What cuGetProcAddress("cuGraphInstantiate") gives at every version: cuGraphInstantiate_v2. On
 * failure the log gets an empty string (the simulator has no diagnostics to give). */
CUresult CUDAAPI sim_cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUgraphNode *phErrorNode, char *logBuffer,
                                           size_t bufferSize) {
  SIM_ENTER(cuGraphInstantiate);
  if (!phGraphExec)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = instantiate(phGraphExec, hGraph);
  if (phErrorNode)
    *phErrorNode = NULL;
  if (r != CUDA_SUCCESS && logBuffer && bufferSize > 0)
    logBuffer[0] = '\0';
  return r;
}

/* Nothing to upload: validates its arguments only. */
CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  SIM_ENTER(cuGraphUpload);
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_handle_get(hGraphExec, SIM_OBJ_GRAPH_EXEC) ? sim_stream_get_live(hStream, &s)
                                                               : CUDA_ERROR_INVALID_HANDLE;
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  SIM_ENTER(cuGraphLaunch);
  struct sim_stream *s;
  sim_lock();
  struct sim_graph *exec = (struct sim_graph *)sim_handle_get(hGraphExec, SIM_OBJ_GRAPH_EXEC);
  CUresult r = exec ? sim_stream_get_live(hStream, &s) : graph_bad_handle(hGraphExec);
  if (r == CUDA_SUCCESS && s->cap) { /* launching a graph into a capture: refused, as the driver */
    sim_capture_invalidate(s);
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  for (struct sim_cmd *c = r == CUDA_SUCCESS ? exec->head : NULL; c; c = c->next)
    if (c->ops->launch_check && (r = c->ops->launch_check(c)) != CUDA_SUCCESS)
      break;
  bool ok = true;
  struct sim_cmd *cmds = r == CUDA_SUCCESS ? sim_graph_clone_cmds(exec, &ok) : NULL;
  if (!ok)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  while (r == CUDA_SUCCESS && cmds) {
    struct sim_cmd *next = cmds->next;
    r = sim_stream_submit(s, cmds);
    cmds = next;
  }
  sim_cmd_list_free(cmds);
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  SIM_ENTER(cuGraphDestroy);
  sim_lock();
  struct sim_graph *g = (struct sim_graph *)sim_handle_get(hGraph, SIM_OBJ_GRAPH);
  CUresult r = g ? sim_ctx_fault(g->obj.ctx) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) {
    sim_handle_remove(&g->obj);
    sim_graph_free(g);
  }
  sim_unlock();
  return r;
}

/* Launches in flight own their clones, so destroying the executable graph does not affect them. */
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  SIM_ENTER(cuGraphExecDestroy);
  sim_lock();
  struct sim_graph *exec = (struct sim_graph *)sim_handle_get(hGraphExec, SIM_OBJ_GRAPH_EXEC);
  CUresult r = exec ? sim_ctx_fault(exec->obj.ctx) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) {
    sim_handle_remove(&exec->obj);
    sim_graph_free(exec);
  }
  sim_unlock();
  return r;
}
