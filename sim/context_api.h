#ifndef CUV_SIM_CONTEXT_API_H
#define CUV_SIM_CONTEXT_API_H

/* The entry-point variant of context_api.c that cuGetProcAddress resolves for some versions (the
 * real driver's versioned symbol, whose prototype differs from cuda.h's). */

#include "sim.h"

/* cuCtxSynchronize at 13000: takes the context (NULL: the current one). */
SIM_HIDDEN CUresult CUDAAPI sim_cuCtxSynchronize_v2(CUcontext ctx);

#endif
