/* Submission: a command made by an entry point goes to its stream's FIFO, or into the graph of
 * the capture the stream is part of. */

#include "capture.h"
#include "cmd.h"
#include "stream.h"
#include "submit.h"
#include "util.h"

CUresult sim_stream_submit(struct sim_stream *s, struct sim_cmd *cmd) {
  if (s->cap)
    return sim_capture_append(s, cmd);
  if (cmd->ops->bind)
    cmd->ops->bind(cmd);
  sim_stream_push(s, cmd);
  return CUDA_SUCCESS;
}

CUresult sim_submit(CUstream h, struct sim_cmd *cmd) {
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(h, &s);
  if (r == CUDA_SUCCESS)
    r = sim_stream_submit(s, cmd);
  else
    sim_cmd_free(cmd);
  sim_unlock();
  return r;
}
