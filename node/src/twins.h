/* Host twins of the package's kernels, for libcuv-sim: same names, same parameters, same
 * results. */
#ifndef CUV_NODE_TWINS_H
#define CUV_NODE_TWINS_H

#include <stddef.h>

#include <cuv/sim.h>

typedef int (*cuv_node_register_fn)(const char *name, cuv_sim_kernel_fn fn, size_t nparams,
                                    const size_t *param_sizes);

/* Registers every twin through `register_kernel` (libcuv-sim's cuv_sim_register_kernel). */
void cuv_node_twins_register(cuv_node_register_fn register_kernel);

#endif
