#ifndef CUV_SIM_CALLBACK_H
#define CUV_SIM_CALLBACK_H

/* The driver callback thread (callback.c), on which every host function runs. */

#include "sim.h"

/* Runs fn(data) on the driver callback thread and returns when it returned, also after a sticky
 * fault (as the GPU runs host functions queued before one); not during a reset (lock NOT held).
 * spin: afterwards the thread spin-waits for the next host function (CU_HOST_TASK_SPINWAIT), for
 * at most SIM_HOST_SPIN_NS, rather than block at once (CU_HOST_TASK_BLOCKING, cuLaunchHostFunc). */
SIM_HIDDEN void sim_callback_run(struct sim_ctx *ctx, CUhostFn fn, void *data, bool spin);
/* Drops queued, not yet started host functions of ctx (reset; lock held). */
SIM_HIDDEN void sim_callback_reset_ctx(struct sim_ctx *ctx);

#endif
