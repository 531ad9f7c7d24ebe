#ifndef CUV_SIM_SUBMIT_H
#define CUV_SIM_SUBMIT_H

/* Submission (submit.c): a command goes to its stream's FIFO or into the stream's capture. */

#include "sim.h"

/* Enqueues cmd on s, or appends it to s's capture graph (lock held). On failure cmd is freed. */
SIM_HIDDEN CUresult sim_stream_submit(struct sim_stream *s, struct sim_cmd *cmd);
/* Resolves h and submits cmd to it: the common tail of every enqueueing entry point. Takes and
 * releases the lock; frees cmd on failure. */
SIM_HIDDEN CUresult sim_submit(CUstream h, struct sim_cmd *cmd);

#endif
