/* The package's copy of cuv's apps/tcp-infer/mlp.c, the same below (README.md here). */
/* The tcp-infer model on the host (see mlp.h). */
#include <math.h>

#include "mlp.h"

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1), exactly representable (24 random bits). */
static float uniform(uint64_t *state) {
  return (float)(splitmix64(state) >> 40) / (float)(1u << 23) - 1.0f;
}

static void fill(float *x, size_t n, float scale, uint64_t *state) {
  for (size_t i = 0; i < n; i++)
    x[i] = uniform(state) * scale;
}

void mlp_weights_init(mlp_weights_t *w, uint64_t seed) {
  uint64_t state = seed;
  float s1 = 1.0f / sqrtf((float)MLP_IN), s2 = 1.0f / sqrtf((float)MLP_HIDDEN);
  fill(w->w1, MLP_HIDDEN * MLP_IN, s1, &state);
  fill(w->b1, MLP_HIDDEN, s1, &state);
  fill(w->w2, MLP_OUT * MLP_HIDDEN, s2, &state);
  fill(w->b2, MLP_OUT, s2, &state);
}

void mlp_dense(unsigned rows, unsigned in_dim, unsigned out_dim, const float *x, const float *w,
               const float *b, float *y, unsigned relu) {
  for (unsigned r = 0; r < rows; r++)
    for (unsigned o = 0; o < out_dim; o++) {
      const float *xr = x + (size_t)r * in_dim, *wo = w + (size_t)o * in_dim;
      float acc = b[o];
      for (unsigned i = 0; i < in_dim; i++)
        acc += xr[i] * wo[i];
      y[(size_t)r * out_dim + o] = relu && acc < 0.0f ? 0.0f : acc;
    }
}

void mlp_forward(const mlp_weights_t *w, unsigned rows, const float *in, float *out) {
  float hidden[MLP_HIDDEN];
  for (unsigned r = 0; r < rows; r++) { /* row by row: no allocation, any batch */
    mlp_dense(1, MLP_IN, MLP_HIDDEN, in + (size_t)r * MLP_IN, w->w1, w->b1, hidden, 1);
    mlp_dense(1, MLP_HIDDEN, MLP_OUT, hidden, w->w2, w->b2, out + (size_t)r * MLP_OUT, 0);
  }
}

int mlp_close_enough(const float *got, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!(fabsf(got[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i]))))
      return 0;
  return 1;
}

void mlp_random_inputs(float *x, size_t n, uint64_t *state) { fill(x, n, 1.0f, state); }
