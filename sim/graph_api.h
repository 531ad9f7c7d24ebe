#ifndef CUV_SIM_GRAPH_API_H
#define CUV_SIM_GRAPH_API_H

/* The entry-point variant of graph_api.c that cuGetProcAddress resolves (the real driver's
 * versioned symbol, whose prototype differs from cuda.h's). */

#include "sim.h"

/* cuGraphInstantiate at every version: the legacy five-argument cuGraphInstantiate_v2. */
SIM_HIDDEN CUresult CUDAAPI sim_cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                      CUgraphNode *phErrorNode, char *logBuffer,
                                                      size_t bufferSize);

#endif
