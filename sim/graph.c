/* Graphs and executable graphs as objects: a graph is the linear list of commands recorded by
 * stream capture (see capture.c); instantiation copies it, so an executable graph stays valid
 * after its graph is destroyed. The entry points on them are in graph_api.c. */

#include <stdlib.h>

#include "cmd.h"
#include "graph.h"
#include "handle.h"

struct sim_graph *sim_graph_new(struct sim_ctx *ctx, enum sim_obj_type type) {
  struct sim_graph *g = calloc(1, sizeof *g);
  if (g) {
    g->obj.type = type;
    g->obj.ctx = ctx;
  }
  return g;
}

/* Tells each node of an executable graph it was instantiated (delta +1) or destroyed (-1); on a
 * refusal, the nodes already told are told -1 again. */
static CUresult exec_instantiated(struct sim_graph *exec, int delta) {
  for (struct sim_cmd *c = exec->head; c; c = c->next) {
    CUresult r = c->ops->instantiated ? c->ops->instantiated(c, delta) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) {
      for (struct sim_cmd *u = exec->head; u != c; u = u->next)
        if (u->ops->instantiated)
          u->ops->instantiated(u, -delta);
      return r;
    }
  }
  return CUDA_SUCCESS;
}

void sim_graph_free(struct sim_graph *g) {
  if (g->obj.type == SIM_OBJ_GRAPH_EXEC)
    exec_instantiated(g, -1);
  sim_cmd_list_free(g->head);
  free(g);
}

/* Clones the commands of src into a new list; NULL (and *ok false) when out of memory. */
struct sim_cmd *sim_graph_clone_cmds(const struct sim_graph *src, bool *ok) {
  struct sim_cmd *head = NULL, **link = &head;
  *ok = true;
  for (const struct sim_cmd *c = src->head; c; c = c->next) {
    struct sim_cmd *copy = sim_cmd_clone(c);
    if (!copy) {
      sim_cmd_list_free(head);
      *ok = false;
      return NULL;
    }
    *link = copy;
    link = &copy->next;
  }
  return head;
}

CUresult sim_graph_exec_new(struct sim_ctx *ctx, const struct sim_graph *g,
                            struct sim_graph **out) {
  bool ok = false;
  struct sim_graph *exec = sim_graph_new(ctx, SIM_OBJ_GRAPH_EXEC);
  if (exec) {
    exec->head = sim_graph_clone_cmds(g, &ok);
    exec->count = g->count;
    for (exec->tail = exec->head; exec->tail && exec->tail->next;)
      exec->tail = exec->tail->next;
  }
  CUresult r = CUDA_SUCCESS;
  if (!exec || !ok)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  else if ((r = exec_instantiated(exec, +1)) != CUDA_SUCCESS)
    exec->obj.type = SIM_OBJ_GRAPH; /* not instantiated: free it as a plain graph */
  if (r != CUDA_SUCCESS && exec) {
    sim_graph_free(exec);
    exec = NULL;
  }
  *out = exec;
  return r;
}

void sim_graph_reset_ctx(struct sim_ctx *ctx) {
  static const enum sim_obj_type types[] = {SIM_OBJ_GRAPH, SIM_OBJ_GRAPH_EXEC};
  for (size_t t = 0; t < 2; t++) {
    size_t n;
    struct sim_obj **objs = sim_handle_take_all(ctx, types[t], &n);
    for (size_t i = 0; i < n; i++)
      sim_graph_free((struct sim_graph *)objs[i]);
    free(objs);
  }
}
