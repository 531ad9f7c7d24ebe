/* cuLaunchHostFunc and cuLaunchHostFunc_v2: a stream command that hands its function to the
 * driver callback thread (callback.c) and waits until it returned. _v2's sync mode says how that
 * thread waits for the next host function afterwards: blocked (CU_HOST_TASK_BLOCKING, as
 * cuLaunchHostFunc's) or spinning (CU_HOST_TASK_SPINWAIT); any other mode is invalid. */

#include <stdatomic.h>

#include "callback.h"
#include "driver_funcs.h"
#include "cmd.h"
#include "enter.h"
#include "submit.h"

struct hostfn_cmd {
  struct sim_cmd base;
  CUhostFn fn;
  void *data;
  int mode; /* _v2's sync mode; -1: cuLaunchHostFunc's */
};

/* The host functions of cuLaunchHostFunc_v2 that ran, by sync mode (cuv_sim_host_funcs): counted
 * before they run, so that whatever the function lets its program see comes after the count. */
static atomic_ulong ran_with[2];

static void hostfn_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct hostfn_cmd *c = (struct hostfn_cmd *)cmd;
  if (c->mode >= 0)
    atomic_fetch_add(&ran_with[c->mode], 1);
  sim_callback_run(s->obj.ctx, c->fn, c->data, c->mode == (int)CUV__HOST_TASK_SPINWAIT);
}

static const struct sim_cmd_ops hostfn_ops = {
    .run = hostfn_run, .app_code = true, .after_fault = true};

static CUresult launch(CUstream hStream, CUhostFn fn, void *userData, int mode) {
  if (!fn)
    return CUDA_ERROR_INVALID_VALUE;
  struct hostfn_cmd *c = sim_cmd_new(&hostfn_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->fn = fn;
  c->data = userData;
  c->mode = mode;
  return sim_submit(hStream, &c->base);
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData) {
  SIM_ENTER(cuLaunchHostFunc);
  return launch(hStream, fn, userData, -1);
}

CUresult CUDAAPI cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData,
                                     unsigned int syncMode) {
  SIM_ENTER(cuLaunchHostFunc_v2);
  if (syncMode != CUV__HOST_TASK_BLOCKING && syncMode != CUV__HOST_TASK_SPINWAIT)
    return CUDA_ERROR_INVALID_VALUE;
  return launch(hStream, fn, userData, (int)syncMode);
}

CUV_SIM_EXTERN unsigned long cuv_sim_host_funcs(unsigned sync_mode) {
  return sync_mode < 2 ? atomic_load(&ran_with[sync_mode]) : 0;
}
