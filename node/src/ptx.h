/* The PTX of the package's kernel modules, embedded when the package was built: gen/ptx.c, which
 * scripts/build.js writes from nvcc's output, the PTX the tarball ships, or (a checkout without
 * nvcc) the listings of entry names that only the simulator runs. */
#ifndef CUV_NODE_PTX_H
#define CUV_NODE_PTX_H

#include <stddef.h>

typedef struct cuv_node_ptx {
  const char *name;   /* "saxpy", "mlp", "testing" (scripts/sources.js) */
  const char *origin; /* "nvcc", "shipped" or "listing" */
  const char *text;
} cuv_node_ptx_t;

extern const cuv_node_ptx_t cuv_node_ptx[];
extern const size_t cuv_node_ptx_count;

#endif
