#ifndef CUV_SIM_STREAM_API_H
#define CUV_SIM_STREAM_API_H

/* What the stream entry points' file (stream_api.c) gives the others. */

#include "sim.h"

/* Returns once the copy just queued on h (and everything before it) has run, as the real driver
 * does for a copy into pageable host memory; nothing while h is capturing (lock not held). */
SIM_HIDDEN CUresult sim_stream_wait_copy(CUstream h);
/* Tells every worker of ctx to stop and waits until all exited (reset; lock held). */
SIM_HIDDEN void sim_stream_stop_all(struct sim_ctx *ctx);

#endif
