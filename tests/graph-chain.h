#ifndef CUVT_GRAPH_CHAIN_H
#define CUVT_GRAPH_CHAIN_H

/* The multi-kernel chain the graph scenarios capture (graphs.c, graphs-uv.c):
 *   x = in; x *= SCALE; x += 1; y = yin; y = ALPHA * x + y
 * over buffers made beforehand, with its host reference and new random inputs copied in through
 * cuv_graph_update. Header-only (static inline); asserts, so call it on the test thread. */

#include "counted.h"

#define N 3000 /* not a multiple of the block size */
#define SCALE 3.0f
#define ALPHA 2.0f
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* saxpy(n, a, x, y): y = a * x + y. */
static inline cuv_op_t *saxpy_op(cuv_buffer_t *x, cuv_buffer_t *y, unsigned n, float a) {
  cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(a), CUV_ARG_READ(x), CUV_ARG_RW(y)};
  return cuv_launch(cuvt_kernel("saxpy"), CUVT_GRID(n), CUVT_BLOCK, 0, args, 4);
}

/* The buffers of the captured chain: inputs in and yin, scratch x, output y. */
typedef struct chain {
  cuv_buffer_t *in, *yin, *x, *y;
} chain_t;

static inline void chain_create(chain_t *c) {
  c->in = cuvt_buffer(N * sizeof(float));
  c->yin = cuvt_buffer(N * sizeof(float));
  c->x = cuvt_buffer(N * sizeof(float));
  c->y = cuvt_buffer(N * sizeof(float));
}

static inline void chain_destroy(chain_t *c) {
  cuv_buffer_unref(c->in);
  cuv_buffer_unref(c->yin);
  cuv_buffer_unref(c->x);
  cuv_buffer_unref(c->y);
}

static inline cuv_op_t *chain_op(const chain_t *c) {
  cuv_op_t *ops[] = {cuvt_copy_f32(c->x, c->in, N), cuvt_scale(c->x, N, SCALE),
                     cuvt_add_one(c->x, N), cuvt_copy_f32(c->y, c->yin, N),
                     saxpy_op(c->x, c->y, N, ALPHA)};
  return cuv_zip(ops, COUNT_OF(ops));
}

static inline void chain_reference(float *want, const float *in, const float *yin) {
  for (size_t i = 0; i < N; i++)
    want[i] = ALPHA * (in[i] * SCALE + 1.0f) + yin[i];
}

/* New random inputs, copied in on the graph's stream; want[N] gets the expected output. */
static inline void new_inputs(cuv_graph_t *g, const chain_t *c, float *want) {
  float *in = malloc(N * sizeof *in), *yin = malloc(N * sizeof *yin);
  assert_non_null(in);
  assert_non_null(yin);
  cuvt_random_ints(in, N);
  cuvt_random_ints(yin, N);
  chain_reference(want, in, yin);
  /* Staged: the host arrays may be reused (here: freed) as soon as the ops are built. */
  assert_cuv_ok(cuv_graph_update(g, cuv_memcpy_htod(c->in, 0, in, N * sizeof *in, CUV_COPY_STAGE)));
  assert_cuv_ok(cuv_graph_update(g, cuv_memcpy_htod(c->yin, 0, yin, N * sizeof *yin, 0)));
  free(in);
  free(yin);
}

#endif
