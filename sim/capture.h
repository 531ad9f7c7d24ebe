#ifndef CUV_SIM_CAPTURE_H
#define CUV_SIM_CAPTURE_H

/* Stream capture (capture.c; struct sim_capture is in sim.h). */

#include "sim.h"

/* Appends cmd (unbound) to s's capture graph (lock held; s->cap set). Frees cmd on failure. */
SIM_HIDDEN CUresult sim_capture_append(struct sim_stream *s, struct sim_cmd *cmd);
/* Marks s's capture invalidated (lock held; no-op when s is not capturing). */
SIM_HIDDEN void sim_capture_invalidate(struct sim_stream *s);
/* Makes s join capture c (fork through an event; lock held). */
SIM_HIDDEN CUresult sim_capture_join(struct sim_stream *s, struct sim_capture *c);
/* Detaches s from its capture (stream destroyed or context reset; lock held). */
SIM_HIDDEN void sim_capture_leave(struct sim_stream *s);
SIM_HIDDEN void sim_capture_unref(struct sim_capture *c);
/* Does ctx have a live capture that forbids context-wide synchronization? (lock held) */
SIM_HIDDEN bool sim_capture_block_ctx_sync(struct sim_ctx *ctx);
/* A "potentially unsafe" call (allocation, synchronous free, query or synchronize of work outside
 * the capture) made while capturing: prohibited on a thread with its own non-relaxed capture, and
 * on every thread while some thread has a CU_STREAM_CAPTURE_MODE_GLOBAL capture. Then the
 * captures that prohibit it are invalidated and CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED returned
 * (lock held). */
SIM_HIDDEN CUresult sim_capture_check_unsafe(void);

#endif
