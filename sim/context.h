#ifndef CUV_SIM_CONTEXT_H
#define CUV_SIM_CONTEXT_H

/* The contexts' state (context.c): the devices, their primary contexts, the calling thread's
 * current context, and the sticky fault. */

#include "sim.h"

SIM_HIDDEN bool sim_initialized(void);
/* The number of devices fixed by cuInit (0 before). */
SIM_HIDDEN int sim_device_count(void);
/* 0 <= dev < the device count. */
SIM_HIDDEN bool sim_device_valid(int dev);
/* Fixes the device count to `count` unless an earlier call fixed it (lock held): cuInit's result,
 * CUDA_ERROR_NO_DEVICE for 0 devices, CUDA_ERROR_INVALID_VALUE for a negative count (the
 * environment gave none). The simulator is initialized once it returned CUDA_SUCCESS. */
SIM_HIDDEN CUresult sim_ctx_init_devices(int count);
/* The context of device `dev` (0 <= dev < the device count); no lock needed. */
SIM_HIDDEN struct sim_ctx *sim_ctx_of_device(int dev);
/* The context behind a CUcontext handle, initialized or not; NULL for anything else. */
SIM_HIDDEN struct sim_ctx *sim_ctx_from_handle(CUcontext h);

/* The calling thread's current context (NULL when none). */
SIM_HIDDEN struct sim_ctx *sim_ctx_current(void);
/* Makes ctx (NULL: none) the calling thread's current context. */
SIM_HIDDEN void sim_ctx_set_current(struct sim_ctx *ctx);
/* Makes device's primary context current on the calling thread, as the CUDA runtime's
 * cudaSetDevice does inside NCCL (sim/nccl.c). */
SIM_HIDDEN void sim_ctx_make_current(int device);
/* Current context usable for new work, or the error to return (lock held). */
SIM_HIDDEN CUresult sim_ctx_require(struct sim_ctx **out);
/* The SIM_CHECK_CTX / SIM_CHECK_SYNC checks on the calling thread's current context (lock not
 * held). */
SIM_HIDDEN CUresult sim_ctx_entry_check(bool settle);

/* The sticky fault of ctx, CUDA_SUCCESS when none (no lock needed). */
SIM_HIDDEN CUresult sim_ctx_fault(const struct sim_ctx *ctx);
/* Makes ctx's sticky fault (lock held); the first fault wins. `by` is the stream whose command
 * faulted (NULL when none). */
SIM_HIDDEN void sim_ctx_set_fault(struct sim_ctx *ctx, CUresult result,
                                  const struct sim_stream *by);
/* Is no worker of ctx in the middle of a command (host functions aside)? (lock held) */
SIM_HIDDEN bool sim_ctx_idle(const struct sim_ctx *ctx);
/* Returns ctx's sticky fault, first waiting (lock held) until no command of ctx is in progress
 * when there is one: what a synchronize call does before it reports the fault. */
SIM_HIDDEN CUresult sim_ctx_settle(struct sim_ctx *ctx);

#endif
