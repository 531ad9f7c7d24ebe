/* Learning that GPU work finished. The blocking executors record an event behind the work, spin
 * on it for the configured budget (a raw synchronize's latency without its sleep), then block. */
#include "internal.h"
#include "exec.h"

/* Spins on the event for up to budget_us; CUDA_ERROR_NOT_READY when the budget ran out. */
static CUresult spin_event(CUevent event, unsigned budget_us) {
  uint64_t deadline = cuv__now_ns() + (uint64_t)budget_us * 1000u;
  CUresult r;
  do
    r = cuv__drv.cuEventQuery(event);
  while (r == CUDA_ERROR_NOT_READY && cuv__now_ns() < deadline);
  return r;
}

int cuv__wait_sync(cuv__submission_t *sub) {
  int rc = cuv__sub_record(sub);
  if (rc < 0) /* no event (a fault, or none to be had): the whole stream is the proof */
    return cuv__status_is_fault(rc) ? rc : cuv__cu(cuv__drv.cuStreamSynchronize(sub->stream->cu));
  CUresult r = CUDA_ERROR_NOT_READY;
  if (cuv__config.spin_budget_us)
    r = spin_event(sub->done_event, cuv__config.spin_budget_us);
  if (r == CUDA_ERROR_NOT_READY)
    r = cuv__drv.cuEventSynchronize(sub->done_event);
  return cuv__cu(r);
}
