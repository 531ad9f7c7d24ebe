/* The seed sample's host side of its kernels: the twins for the simulator (twins.c) and the
 * host reference of the MLP (seed.c), the same arithmetic as seed.cu. */
#ifndef SEED_H
#define SEED_H

void seed_register_twins(void);
/* c[m][n] = a[m][k] b[k][n], row-major. */
void seed_gemm(unsigned m, unsigned n, unsigned k, const float *a, const float *b, float *c);
/* x = max(x, 0) */
void seed_relu(unsigned n, float *x);

#endif
