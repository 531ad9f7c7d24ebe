/* The package's copy of cuv's apps/tcp-infer/mlp.h, the same below (README.md here). */
/* The tcp-infer model: a two-layer MLP (in 64 -> hidden 128, ReLU -> out 16), float32, whose
 * weights are made deterministically from a seed. Shared by the server (uploads them once), the
 * load client and the probe (compute the expected outputs on the host), and the simulator's
 * kernel twin (the same dense loop as the host reference). */
#ifndef TCP_INFER_MLP_H
#define TCP_INFER_MLP_H

#include <stddef.h>
#include <stdint.h>

#define MLP_IN 64
#define MLP_HIDDEN 128
#define MLP_OUT 16
#define MLP_DEFAULT_SEED 42u
#define MLP_DEFAULT_MAX_BATCH 256u

typedef struct mlp_weights {
  float w1[MLP_HIDDEN * MLP_IN]; /* row-major [hidden][in] */
  float b1[MLP_HIDDEN];
  float w2[MLP_OUT * MLP_HIDDEN]; /* row-major [out][hidden] */
  float b2[MLP_OUT];
} mlp_weights_t;

/* Fills w from `seed` (splitmix64); uniform in +-1/sqrt(fan-in). Same seed, same weights. */
void mlp_weights_init(mlp_weights_t *w, uint64_t seed);

/* y[r][o] = act(b[o] + sum_i x[r][i] * w[o][i]) for r < rows; act is ReLU when relu != 0.
 * The kernel mlp_dense (mlp.cu) computes the same, one thread per output element. */
void mlp_dense(unsigned rows, unsigned in_dim, unsigned out_dim, const float *x, const float *w,
               const float *b, float *y, unsigned relu);

/* The whole model on the host: out[rows][MLP_OUT] from in[rows][MLP_IN]. */
void mlp_forward(const mlp_weights_t *w, unsigned rows, const float *in, float *out);

/* |got - want| <= 1e-4 * (1 + |want|) for n values (the GPU may fuse multiply-adds). */
int mlp_close_enough(const float *got, const float *want, size_t n);

/* Random inputs in [-1, 1) from a caller-held state (any seed). */
void mlp_random_inputs(float *x, size_t n, uint64_t *state);

#endif
