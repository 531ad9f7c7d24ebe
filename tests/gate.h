#ifndef CUVT_GATE_H
#define CUVT_GATE_H

/* A gate that holds GPU work in flight on purpose, not by timing (the pair tests/engine/stats.c and
 * tests/completion/concurrency.c use): a wait_flag kernel spins until a set_flag kernel on another
 * stream writes its flag, then writes 1 to its result word (2 if it gave up after its bound, which
 * a test asserts never happens). The flag and result are CUV_HAZARD_NONE: the two kernels talk
 * through them on purpose, and ordering the setter after the waiter would deadlock them into the
 * bound. Header-only, for the scenarios that need work held while they look at cuv's state. */

#include "counted.h"

/* A bound that keeps a broken run from hanging; never reached when the gate is opened. */
static const unsigned long long cuvt_gate_bound_ns = 20000000000ull; /* 20 s */

typedef struct cuvt_gate {
  cuv_buffer_t *flag, *result;
  cuv_stream_t *opener; /* the setter's stream: no policy of the test hands it out */
  unsigned value;
} cuvt_gate_t;

static inline void cuvt_gate_init(cuvt_gate_t *g) {
  g->flag = cuvt_buffer(sizeof(unsigned));
  g->result = cuvt_buffer(sizeof(unsigned));
  assert_cuv_ok(cuv_buffer_set_hazard_mode(g->flag, CUV_HAZARD_NONE));
  assert_cuv_ok(cuv_buffer_set_hazard_mode(g->result, CUV_HAZARD_NONE));
  assert_cuv_ok(cuv_sync(cuv_memset32(g->flag, 0, 0, 1), NULL));
  assert_cuv_ok(cuv_sync(cuv_memset32(g->result, 0, 0, 1), NULL));
  assert_cuv_ok(cuv_stream_create(&g->opener, cuvt_device()));
  g->value = cuvt_nonzero_u32();
}

/* The op that stays in flight until the gate opens. */
static inline cuv_op_t *cuvt_gate_wait(cuvt_gate_t *g) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(cuvt_gate_bound_ns), CUV_ARG_VALUE(g->value),
                      CUV_ARG_READ(g->flag), CUV_ARG_WRITE(g->result)};
  return cuv_launch(cuvt_kernel_ok("wait_flag"), CUV_DIM1(1), CUV_DIM1(1), 0, args, 4);
}

static inline void cuvt_gate_open(cuvt_gate_t *g) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(g->value), CUV_ARG_WRITE(g->flag)};
  assert_cuv_ok(cuv_sync_on(g->opener,
                            cuv_launch(cuvt_kernel_ok("set_flag"), CUV_DIM1(1), CUV_DIM1(1), 0,
                                       args, 2), NULL));
}

/* Once the gated work finished: the waiter saw the flag (1), it did not give up (2). */
static inline void cuvt_gate_close(cuvt_gate_t *g) {
  unsigned result = 0;
  cuvt_read(&result, g->result, 0, sizeof result);
  assert_int_equal(result, 1);
  cuv_buffer_unref(g->flag);
  cuv_buffer_unref(g->result);
  cuv_stream_destroy(g->opener);
}

#endif
