/* tcp-infer: the model on the GPU (model.c) */
#ifndef TCP_INFER_MODEL_H
#define TCP_INFER_MODEL_H

#include "server.h"

/* model.c: the model on the GPU. */
/* The kernels (from the PTX file ptx, or NULL: the PTX embedded in the program) and the weights
 * of every ready model of g->srv->models (uploaded once). */
int model_init(gpu_t *g, const char *ptx);
void model_free(gpu_t *g);
/* A workspace's buffers for `rows` rows on g; model_workspace_free frees what was made. */
int model_workspace_init(gpu_t *g, workspace_t *ws, size_t rows);
void model_workspace_free(workspace_t *ws);
/* The GPU work of `rows` rows of input through model m on ws (on ws's device), as one op whose
 * output is the rows x m's outputs: `upload` (which fills ws->in with the rows x m->dims[0]
 * input floats), the layers, the download. m is one of ws->gpu->srv->models, ready. */
cuv_op_t *model_rows_op(workspace_t *ws, const model_t *m, cuv_op_t *upload, unsigned rows);
/* --graph: the op that replays ws's graph for `rows` rows (captured now on first use, on the
 * loop's capture stream of ws's device: a stream that other work shares may see an enqueue, or a
 * query of the reactor's, while it captures, which fails that call and invalidates the
 * capture): the upload of the first rows x MLP_IN floats of ws->host_in, the layers, the download
 * into ws->host_out, whose first rows x MLP_OUT floats are the outputs once the replay
 * completed. The graph covers the bucket of rows (the next power of two, at most ws->rows): the
 * rows beyond `rows` hold what an earlier request left there, and since the model is row-wise
 * they change no row of this one. Its output is unit. A capture that fails gives an op that
 * fails with its status. */
cuv_op_t *model_graph_op(loop_t *lp, workspace_t *ws, unsigned rows);
/* Registers the kernels' host twins with libcuv-sim (when linked); delay_us > 0 makes each
 * launch last at least that long on the simulator (a stand-in for a GPU's latency). */
void model_register_twins(unsigned delay_us);

#endif
