/* tcp-infer: --isolate, the worker process (worker.c) */
#ifndef TCP_INFER_WORKER_H
#define TCP_INFER_WORKER_H

#include "server.h"

/* worker.c (the worker process, --worker): serves frames on fd 3 with the loaded model; returns
 * the process's exit status. */
int worker_main(server_t *s);
/* The host twins of the debug kernels (mlp_fault, mlp_hang) for libcuv-sim, registered before the
 * model's module is loaded: it loads every kernel of mlp.cu. */
void worker_register_twins(void);

#endif
