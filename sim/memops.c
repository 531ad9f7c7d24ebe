/* Stream memory operations: cuStreamWriteValue32 stores a value (atomic release store) when the
 * stream reaches it; cuStreamWaitValue32 holds the stream until a condition on a 32-bit word
 * holds, polling with acquire loads and short sleeps. A wait is released by a sticky fault or a
 * context reset; a write does not land after a sticky fault (commands are dropped). */

#include "sim.h"

/* Polling interval: starts short for low latency, backs off to bound CPU use. */
#define SIM_POLL_MIN_NS 1000u
#define SIM_POLL_MAX_NS 50000u

struct write_cmd {
  struct sim_cmd base;
  uint32_t *addr;
  uint32_t value;
};

static void write_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct write_cmd *c = (struct write_cmd *)cmd;
  __atomic_store_n(c->addr, c->value, __ATOMIC_RELEASE);
}

static const struct sim_cmd_ops write_ops = {.run = write_run};

struct waitval_cmd {
  struct sim_cmd base;
  const uint32_t *addr;
  uint32_t value;
  unsigned op; /* CU_STREAM_WAIT_VALUE_GEQ, _EQ, _AND or _NOR */
};

static bool wait_satisfied(uint32_t v, uint32_t value, unsigned op) {
  switch (op) {
  case CU_STREAM_WAIT_VALUE_GEQ: return (int32_t)(v - value) >= 0; /* cyclic >= */
  case CU_STREAM_WAIT_VALUE_EQ: return v == value;
  case CU_STREAM_WAIT_VALUE_AND: return (v & value) != 0;
  default: return ~(v | value) != 0; /* CU_STREAM_WAIT_VALUE_NOR */
  }
}

static void waitval_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct waitval_cmd *c = (struct waitval_cmd *)cmd;
  uint64_t ns = SIM_POLL_MIN_NS;
  while (!wait_satisfied(__atomic_load_n(c->addr, __ATOMIC_ACQUIRE), c->value, c->op)) {
    if (atomic_load(&s->stop) || sim_ctx_fault(s->obj.ctx))
      return;
    sim_sleep_ns(ns);
    ns = ns * 2 < SIM_POLL_MAX_NS ? ns * 2 : SIM_POLL_MAX_NS;
  }
}

static const struct sim_cmd_ops waitval_ops = {.run = waitval_run};

/* Checks the address (4-byte aligned, inside a live allocation) and submits cmd. */
static CUresult submit_memop(CUstream h, struct sim_cmd *cmd, CUdeviceptr addr) {
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(h, &s);
  if (r == CUDA_SUCCESS && (addr % 4 != 0 || !sim_mem_valid((uintptr_t)addr, 4)))
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS)
    r = sim_stream_submit(s, cmd);
  else
    sim_cmd_free(cmd);
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                      unsigned int flags) {
  SIM_ENTER(cuStreamWriteValue32);
  if ((flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct write_cmd *c = sim_cmd_new(&write_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->addr = (uint32_t *)(uintptr_t)addr;
  c->value = value;
  return submit_memop(stream, &c->base, addr);
}

CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                     unsigned int flags) {
  SIM_ENTER(cuStreamWaitValue32);
  unsigned op = flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
  if (op > CU_STREAM_WAIT_VALUE_NOR)
    return CUDA_ERROR_INVALID_VALUE;
  struct waitval_cmd *c = sim_cmd_new(&waitval_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->addr = (const uint32_t *)(uintptr_t)addr;
  c->value = value;
  c->op = op;
  return submit_memop(stream, &c->base, addr);
}
