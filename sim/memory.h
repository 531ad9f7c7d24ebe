#ifndef CUV_SIM_MEMORY_H
#define CUV_SIM_MEMORY_H

/* Memory (memory.c): allocations, copies, memsets. */

#include "sim.h"

/* Is [addr, addr+n) inside one live allocation (device or host) of the simulator? (lock held) */
SIM_HIDDEN bool sim_mem_valid(uintptr_t addr, size_t n);
/* Is [addr, addr+n) inside one live device allocation (not pinned host memory) of ctx? (lock
 * held) */
SIM_HIDDEN bool sim_mem_valid_device(const struct sim_ctx *ctx, uintptr_t addr, size_t n);
/* Frees every allocation of ctx (reset; lock held, no worker of ctx running). */
SIM_HIDDEN void sim_mem_reset_ctx(struct sim_ctx *ctx);

#endif
