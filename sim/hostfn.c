/* cuLaunchHostFunc: a stream command that hands its function to the driver callback thread
 * (callback.c) and waits until it returned. */

#include "callback.h"
#include "cmd.h"
#include "enter.h"
#include "submit.h"

struct hostfn_cmd {
  struct sim_cmd base;
  CUhostFn fn;
  void *data;
};

static void hostfn_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct hostfn_cmd *c = (struct hostfn_cmd *)cmd;
  sim_callback_run(s->obj.ctx, c->fn, c->data);
}

static const struct sim_cmd_ops hostfn_ops = {
    .run = hostfn_run, .app_code = true, .after_fault = true};

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData) {
  SIM_ENTER(cuLaunchHostFunc);
  if (!fn)
    return CUDA_ERROR_INVALID_VALUE;
  struct hostfn_cmd *c = sim_cmd_new(&hostfn_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->fn = fn;
  c->data = userData;
  return sim_submit(hStream, &c->base);
}
