/* Stream memory operations: cuStreamWriteValue32 and cuStreamWriteValue64 store a value (atomic
 * release store of 4 or 8 bytes) when the stream reaches it; cuStreamWaitValue32 holds the stream
 * until a condition on a 32-bit word holds, polling with acquire loads and short sleeps. A wait is
 * released by a sticky fault or a context reset. A write queued before a sticky fault on another
 * stream than the faulting one, behind a kernel that was running when it hit, still lands (as on
 * the GPU: sim/stream.c, tests/engine/conformance.c test_fault_runs_queued_host_work); nothing can
 * be queued after one.
 *
 * Delayed visibility (cuv_sim_set_write_delay_us, CUV_SIM_WRITE_DELAY_US): the stream passes the
 * write at once, so cuStreamQuery and events behind it report the work done, and the store itself
 * lands the delay later, from the cuv-sim-late thread, in the order the writes were passed (a late
 * write never overtakes a later one). That is the late write cuv's reactor guards against with
 * numbering that only rises (lib/reactor.c): its probe completes the work of a stream that went
 * idle, the stream's word goes to another stream, and the old write lands on it. A late write that
 * lands while a later write to the same word is queued on a stream, or waiting to land, is counted
 * (cuv_sim_stale_writes). A late write whose memory was freed meanwhile is dropped. With the delay
 * CUV_SIM_WRITE_HOLD the writes wait, however long, until the delay is set to another value. */

#include <stdlib.h>

#include "cmd.h"
#include "context.h"
#include "enter.h"
#include "memory.h"
#include "stream.h"
#include "submit.h"
#include "util.h"

/* Polling interval: starts short for low latency, backs off to bound CPU use. */
#define SIM_POLL_MIN_NS 1000u
#define SIM_POLL_MAX_NS 50000u

struct write_cmd {
  struct sim_cmd base;
  void *addr;
  uint64_t value;
  bool wide;           /* 8 bytes (cuStreamWriteValue64), else 4 */
  uint64_t seq;        /* order of enqueueing, set by bind */
  bool queued;         /* in the queued list (bound, not yet released) */
  struct write_cmd *q_prev, *q_next;
};

/* ---- Delayed visibility ---- */

struct late_write {
  void *addr;
  uint64_t value;
  bool wide;
  uint64_t seq;
  uint64_t due_ns;
  struct late_write *next;
};

static pthread_once_t delay_once = PTHREAD_ONCE_INIT;
static atomic_uint write_delay_us;
static atomic_ulong stale_writes;
/* Lock held for all of these. */
static uint64_t write_seq;
static struct write_cmd *queued_writes; /* bound writes not yet executed or dropped */
static struct late_write *late_head, *late_tail;
static pthread_cond_t late_wake = PTHREAD_COND_INITIALIZER;
static bool late_started;

static void delay_from_env(void) {
  const char *v = getenv("CUV_SIM_WRITE_DELAY_US");
  if (v && *v)
    atomic_store(&write_delay_us, (unsigned)strtoul(v, NULL, 10));
}

static unsigned write_delay(void) {
  pthread_once(&delay_once, delay_from_env);
  return atomic_load(&write_delay_us);
}

CUV_SIM_EXTERN void cuv_sim_set_write_delay_us(unsigned usec) {
  pthread_once(&delay_once, delay_from_env); /* the environment never overrides a setting */
  atomic_store(&write_delay_us, usec);
}

CUV_SIM_EXTERN unsigned long cuv_sim_stale_writes(void) { return atomic_load(&stale_writes); }

/* Is a write to addr later than seq still to land: queued on a stream, or waiting here? */
static bool later_write_pending(const struct late_write *w) {
  for (const struct write_cmd *c = queued_writes; c; c = c->q_next)
    if (c->addr == w->addr && c->seq > w->seq)
      return true;
  for (const struct late_write *l = w->next; l; l = l->next)
    if (l->addr == w->addr)
      return true;
  return false;
}

static void store_value(void *addr, uint64_t value, bool wide) {
  if (wide)
    __atomic_store_n((uint64_t *)addr, value, __ATOMIC_RELEASE);
  else
    __atomic_store_n((uint32_t *)addr, (uint32_t)value, __ATOMIC_RELEASE);
}

/* The due time of a write passed while writes were held (CUV_SIM_WRITE_HOLD). */
#define HELD UINT64_MAX

/* Lands each late write when it is due, in order; lives until the process exits. */
static void *late_main(void *arg) {
  pthread_setname_np(pthread_self(), "cuv-sim-late");
  sim_lock();
  for (;;) {
    while (!late_head)
      sim_wait_on(&late_wake);
    uint64_t now = sim_now_ns(), due = late_head->due_ns;
    if (due == HELD && write_delay() != CUV_SIM_WRITE_HOLD)
      due = now; /* released: the held writes land now, in order */
    if (now < due) {
      uint64_t left = due - now;
      sim_unlock();
      sim_sleep_ns(left < 1000000 ? left : 1000000);
      sim_lock();
      continue;
    }
    struct late_write *w = late_head;
    if (sim_mem_valid((uintptr_t)w->addr, w->wide ? 8 : 4)) {
      if (later_write_pending(w))
        atomic_fetch_add(&stale_writes, 1);
      store_value(w->addr, w->value, w->wide);
    }
    late_head = w->next;
    if (!late_head)
      late_tail = NULL;
    free(w);
  }
  return NULL;
}

/* Hands the write to the late thread; false when it cannot (then it lands now). Lock held. */
static bool write_later(const struct write_cmd *c, unsigned delay_us) {
  if (!late_started)
    late_started = sim_thread_start(late_main, NULL);
  struct late_write *w = late_started ? malloc(sizeof *w) : NULL;
  if (!w)
    return false;
  uint64_t due = delay_us == CUV_SIM_WRITE_HOLD ? HELD : sim_now_ns() + delay_us * 1000ull;
  *w = (struct late_write){c->addr, c->value, c->wide, c->seq, due, NULL};
  if (late_tail)
    late_tail->next = w;
  else
    late_head = w;
  late_tail = w;
  pthread_cond_signal(&late_wake);
  return true;
}

static void write_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct write_cmd *c = (struct write_cmd *)cmd;
  unsigned delay = write_delay();
  if (delay) {
    sim_lock();
    bool later = write_later(c, delay);
    sim_unlock();
    if (later)
      return;
  }
  store_value(c->addr, c->value, c->wide);
}

/* Enqueued for real (at the call, or a graph launch's copy): listed until executed or dropped. */
static void write_bind(struct sim_cmd *cmd) {
  struct write_cmd *c = (struct write_cmd *)cmd;
  c->seq = ++write_seq;
  c->queued = true;
  c->q_prev = NULL;
  c->q_next = queued_writes;
  if (queued_writes)
    queued_writes->q_prev = c;
  queued_writes = c;
}

static void write_release(struct sim_cmd *cmd) {
  struct write_cmd *c = (struct write_cmd *)cmd;
  if (!c->queued)
    return;
  if (c->q_prev)
    c->q_prev->q_next = c->q_next;
  else
    queued_writes = c->q_next;
  if (c->q_next)
    c->q_next->q_prev = c->q_prev;
  c->queued = false;
}

static const struct sim_cmd_ops write_ops = {
    .run = write_run, .bind = write_bind, .release = write_release, .after_fault = true};

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

/* Checks the address (aligned to its size, 4 or 8, inside a live allocation) and submits cmd. */
static CUresult submit_memop(CUstream h, struct sim_cmd *cmd, CUdeviceptr addr, unsigned size) {
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(h, &s);
  if (r == CUDA_SUCCESS && (addr % size != 0 || !sim_mem_valid((uintptr_t)addr, size)))
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS)
    r = sim_stream_submit(s, cmd);
  else
    sim_cmd_free(cmd);
  sim_unlock();
  return r;
}

/* A write of 4 or 8 bytes (wide), enqueued on the stream. */
static CUresult submit_write(CUstream stream, CUdeviceptr addr, uint64_t value, bool wide,
                             unsigned int flags) {
  if ((flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct write_cmd *c = sim_cmd_new(&write_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->addr = (void *)(uintptr_t)addr;
  c->value = value;
  c->wide = wide;
  return submit_memop(stream, &c->base, addr, wide ? 8 : 4);
}

CUresult CUDAAPI cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                      unsigned int flags) {
  SIM_ENTER(cuStreamWriteValue32);
  return submit_write(stream, addr, value, false, flags);
}

CUresult CUDAAPI cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                      unsigned int flags) {
  SIM_ENTER(cuStreamWriteValue64);
  return submit_write(stream, addr, value, true, flags);
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
  return submit_memop(stream, &c->base, addr, 4);
}
