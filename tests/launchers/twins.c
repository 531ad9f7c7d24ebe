/* Host twins of kinds.cu for libcuv-sim: same names, parameter sizes and results. Parameters are
 * read with memcpy (the simulator's parameter storage need not honour a struct's alignment), and
 * a device pointer is a host address. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <cuv.h>
#include <cuv/sim.h>

#include "kinds.h"
#include "bits.h"
#include "twins.h"

#define ARG(i, type, var)                                                                         \
  type var;                                                                                       \
  memcpy(&var, params[i], sizeof var)
#define DEV(i, type, var)                                                                         \
  cuv_deviceptr_t var##_addr_;                                                                    \
  memcpy(&var##_addr_, params[i], sizeof var##_addr_);                                            \
  type *var = (type *)(uintptr_t)var##_addr_
#define THREADS(l) ((size_t)(l)->grid[0] * (l)->block[0])

static int k_scalars(const cuv_sim_launch_t *l, void **params) {
  ARG(0, int8_t, a);
  ARG(1, unsigned char, b);
  ARG(2, short, c);
  ARG(3, unsigned short, d);
  ARG(4, int, e);
  ARG(5, unsigned, f);
  ARG(6, long, g);
  ARG(7, unsigned long long, h);
  ARG(8, size_t, i);
  ARG(9, float, j);
  ARG(10, double, k);
  ARG(11, bool, b11);
  DEV(12, unsigned long long, out);
  unsigned long long v[] = {widen(a), b,           widen(c),       d, widen(e), f, widen(g), h,
                            i,        float_bits(j), double_bits(k), b11 ? 1 : 0};
  memcpy(out, v, sizeof v);
  return 0;
}

static int k_vectors(const cuv_sim_launch_t *l, void **params) {
  ARG(0, cuv_double2_t, d2);
  ARG(1, cuv_float4_t, f4);
  ARG(2, cuv_uchar3_t, c3);
  ARG(3, cuv_short2_t, s2);
  ARG(4, cuv_longlong4_32a_t, l4);
  ARG(5, cuv_half_t, h);
  DEV(6, unsigned long long, out);
  unsigned long long v[] = {double_bits(d2.x), double_bits(d2.y), float_bits(f4.x),
                            float_bits(f4.y),  float_bits(f4.z),  float_bits(f4.w),
                            c3.x,              c3.y,              c3.z,
                            widen(s2.x),       widen(s2.y),       widen(l4.x),
                            widen(l4.y),       widen(l4.z),       widen(l4.w),
                            h.bits};
  memcpy(out, v, sizeof v);
  return 0;
}

static int k_structs(const cuv_sim_launch_t *l, void **params) {
  ARG(0, unsigned, n);
  ARG(1, kinds_pair_t, p);
  ARG(2, kinds_big_t, g);
  DEV(3, const kinds_big_t, in);
  DEV(4, kinds_big_t, outs);
  for (size_t i = 0; i < n && i < THREADS(l); i++) {
    outs[i].a = in[i].a * p.a + g.a;
    outs[i].b = in[i].b + p.b + g.b;
  }
  return 0;
}

static int k_many(const cuv_sim_launch_t *l, void **params) {
  ARG(0, unsigned, n);
  DEV(19, float, y);
  for (size_t i = 0; i < n && i < THREADS(l); i++) {
    float sum = 0.0f;
    for (int k = 0; k < 9; k++) {
      ARG(1 + k, float, a);
      DEV(10 + k, const float, x);
      sum += a * x[i];
    }
    y[i] = sum;
  }
  return 0;
}

static int k_odd(const cuv_sim_launch_t *l, void **params) {
  ARG(0, unsigned, n);
  ARG(1, float, s);
  DEV(2, const float, x);
  DEV(3, float, y);
  for (size_t i = 0; i < n && i < THREADS(l); i++)
    y[i] = s * x[i] + y[i];
  return 0;
}

static int k_xor(const cuv_sim_launch_t *l, void **params) {
  ARG(0, size_t, n);
  DEV(1, const unsigned, in);
  ARG(2, unsigned, key);
  DEV(3, unsigned, out);
  for (size_t i = 0; i < n && i < THREADS(l); i++)
    out[i] = in[i] ^ key;
  return 0;
}

void cuvt_register_kinds_twins(void) {
  const size_t p = sizeof(cuv_deviceptr_t);
  static size_t many[20];
  many[0] = sizeof(unsigned);
  for (int k = 1; k < 20; k++)
    many[k] = k < 10 ? sizeof(float) : p;
  const size_t scalars[] = {1, 1, 2, 2, 4, 4, sizeof(long), 8, sizeof(size_t), 4, 8, 1, p};
  const size_t vectors[] = {sizeof(cuv_double2_t),       sizeof(cuv_float4_t),
                            sizeof(cuv_uchar3_t),        sizeof(cuv_short2_t),
                            sizeof(cuv_longlong4_32a_t), sizeof(cuv_half_t),
                            p};
  const size_t structs[] = {4, sizeof(kinds_pair_t), sizeof(kinds_big_t), p, p};
  const size_t odd[] = {4, 4, p, p}, xor_[] = {sizeof(size_t), p, 4, p};
  cuv_sim_register_kernel("k_scalars", k_scalars, 13, scalars);
  cuv_sim_register_kernel("k_vectors", k_vectors, 7, vectors);
  cuv_sim_register_kernel("k_structs", k_structs, 5, structs);
  cuv_sim_register_kernel("k_many", k_many, 20, many);
  cuv_sim_register_kernel("k_odd", k_odd, 4, odd);
  cuv_sim_register_kernel("k_xor", k_xor, 4, xor_);
}
