/* tcp-infer: --cublas (cublas.c) */
#ifndef TCP_INFER_CUBLAS_H
#define TCP_INFER_CUBLAS_H

#include "server.h"

/* cublas.c: --cublas. Loads libcublas at run time (never linked) and, when it loads, runs the
 * layers as cublasSgemm inside cuv_with_context; returns 0, or non-zero when it is unavailable
 * (the server then silently keeps its own kernel). */
int model_cublas_open(gpu_t *g);
void model_cublas_close(gpu_t *g);
/* The two layers for `rows` rows of ws->in into ws->out, as one op. */
cuv_op_t *model_cublas_layers(gpu_t *g, workspace_t *ws, unsigned rows);

#endif
