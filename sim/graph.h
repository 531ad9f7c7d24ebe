#ifndef CUV_SIM_GRAPH_H
#define CUV_SIM_GRAPH_H

/* Graphs and executable graphs as objects (graph.c; struct sim_graph is in sim.h). */

#include "sim.h"

SIM_HIDDEN struct sim_graph *sim_graph_new(struct sim_ctx *ctx, enum sim_obj_type type);
SIM_HIDDEN void sim_graph_free(struct sim_graph *g);
/* Clones the commands of g into a new list; NULL (and *ok false) when out of memory (lock
 * held). */
SIM_HIDDEN struct sim_cmd *sim_graph_clone_cmds(const struct sim_graph *g, bool *ok);
/* The executable graph of g for ctx, its nodes told they were instantiated (lock held); NULL and
 * the error when out of memory or a node refused. Not yet a handle. */
SIM_HIDDEN CUresult sim_graph_exec_new(struct sim_ctx *ctx, const struct sim_graph *g,
                                       struct sim_graph **out);
/* Destroys every graph and executable graph of ctx (reset; lock held). */
SIM_HIDDEN void sim_graph_reset_ctx(struct sim_ctx *ctx);

#endif
