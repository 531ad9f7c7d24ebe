#ifndef CUVT_LITTLE_H
#define CUVT_LITTLE_H

/* A one-element all-reduce (uint32 sum, zeroed buffers) on every local rank of a communicator,
 * for the fault scenarios (collective-faults.c, comm-shrink.c), which count how such ops end
 * rather than what they compute. Header-only (static inline). */

#include "common.h"

#define LITTLE_MAX 8

typedef struct little {
  cuv_buffer_t *buf[LITTLE_MAX];
  unsigned n;
} little_t;

static inline void little_init(little_t *l, cuv_comm_t *comm) {
  l->n = cuv_comm_local_count(comm);
  assert_true(l->n <= LITTLE_MAX);
  uint32_t zero = 0;
  for (unsigned i = 0; i < l->n; i++) {
    assert_cuv_ok(cuv_buffer_create(&l->buf[i], cuv_comm_device(comm, i), 4));
    assert_cuv_ok(cuv_sync(cuv_memcpy_htod(l->buf[i], 0, &zero, 4, 0), NULL));
  }
}

static inline cuv_op_t *little_op(little_t *l, cuv_comm_t *comm) {
  return cuv_comm_all_reduce(comm, NULL, l->buf, 1, CUV_NCCL_UINT32, CUV_NCCL_SUM);
}

static inline void little_free(little_t *l) {
  for (unsigned i = 0; i < l->n; i++)
    cuv_buffer_unref(l->buf[i]);
}

#endif
