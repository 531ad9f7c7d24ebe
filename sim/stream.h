#ifndef CUV_SIM_STREAM_H
#define CUV_SIM_STREAM_H

/* Streams (stream.c): a FIFO of commands and its worker thread each; resolving a stream handle. */

#include "sim.h"

/* Resolves a stream handle (NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD mean the current
 * context's NULL stream) with the lock held. */
SIM_HIDDEN CUresult sim_stream_get(CUstream h, struct sim_stream **out);
/* sim_stream_get + the sticky fault check: the stream may take new work. */
SIM_HIDDEN CUresult sim_stream_get_live(CUstream h, struct sim_stream **out);
/* Pushes an already bound command to the FIFO (lock held). */
SIM_HIDDEN void sim_stream_push(struct sim_stream *s, struct sim_cmd *cmd);
SIM_HIDDEN void sim_stream_ref(struct sim_stream *s);
SIM_HIDDEN void sim_stream_unref(struct sim_stream *s);
/* Has s finished the work up to `target` as far as a synchronize call must wait (lock held)?
 * After a sticky fault, queued commands are dropped (host functions and flag writes aside), so it
 * is enough that the worker is not in the middle of one: no kernel, copy or memset touches memory
 * after the call returns. */
SIM_HIDDEN bool sim_stream_settled(struct sim_stream *s, uint64_t target);
/* Creates a stream of ctx with its worker (lock held). */
SIM_HIDDEN CUresult sim_stream_create(struct sim_ctx *ctx, unsigned flags, bool is_null,
                                      struct sim_stream **out);
/* Waits until all work submitted so far to every stream of ctx completed, or (after a fault)
 * until no command is in progress (lock held). Returns the fault or CUDA_SUCCESS. */
SIM_HIDDEN CUresult sim_stream_drain_ctx(struct sim_ctx *ctx);

#endif
