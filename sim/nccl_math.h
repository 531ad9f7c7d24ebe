#ifndef CUV_SIM_NCCL_MATH_H
#define CUV_SIM_NCCL_MATH_H

/* NCCL's data types and reductions on the host (nccl_math.c), for the simulator's NCCL. */

#include "sim.h"

/* Bytes per element; 0 for an unknown type. */
SIM_HIDDEN size_t sim_nccl_type_size(int type);
SIM_HIDDEN bool sim_nccl_op_valid(int op);
/* acc[i] = acc[i] op x[i] for n elements (CUV_NCCL_AVG accumulates the sum). */
SIM_HIDDEN void sim_nccl_accumulate(void *acc, const void *x, size_t n, int type, int op);
/* The average's last step: acc[i] /= nranks. */
SIM_HIDDEN void sim_nccl_divide(void *acc, size_t n, int type, int nranks);

#endif
