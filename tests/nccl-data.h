#ifndef CUVT_NCCL_DATA_H
#define CUVT_NCCL_DATA_H

/* Host data of every NCCL type for the collective scenarios (collectives*.c, collective-faults.c):
 * random values each type holds exactly, chosen so that every partial result of a reduction over
 * up to 8 ranks is exact too (no overflow, no rounding), so the GPU's result, in whatever order
 * NCCL reduces, equals the host's reference bit for bit. Only the average of floating types is
 * compared with a tolerance (NCCL multiplies by 1/n first: exact when n is a power of two).
 * Header-only (static inline). */

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common.h"

#define CT_MAX_RANKS 8

static inline bool ct_is_float(cuv_nccl_type_t t) { return t >= CUV_NCCL_FLOAT16; }

static inline bool ct_is_unsigned(cuv_nccl_type_t t) {
  return t == CUV_NCCL_UINT8 || t == CUV_NCCL_UINT32 || t == CUV_NCCL_UINT64;
}

/* An exactly representable value in a format of `ebits` exponent and `mbits` mantissa bits
 * (FP16, E4M3, E5M2): the bits, or the value back from them. */
static inline unsigned ct_small_encode(double v, int ebits, int mbits) {
  unsigned sign = v < 0 ? 1u << (ebits + mbits) : 0u;
  double a = fabs(v);
  if (a == 0)
    return sign;
  int bias = (1 << (ebits - 1)) - 1, e;
  frexp(a, &e);
  int field = e - 1 + bias;
  if (field <= 0) /* subnormal */
    return sign | (unsigned)ldexp(a, bias - 1 + mbits);
  unsigned mant = (unsigned)ldexp(a, mbits - (e - 1)) & ((1u << mbits) - 1);
  return sign | (unsigned)field << mbits | mant;
}

static inline double ct_small_decode(unsigned bits, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1;
  unsigned mant = bits & ((1u << mbits) - 1), field = (bits >> mbits) & ((1u << ebits) - 1);
  double sign = bits >> (ebits + mbits) & 1u ? -1.0 : 1.0;
  if (field == 0)
    return sign * ldexp(mant, 1 - bias - mbits);
  return sign * ldexp(mant | 1u << mbits, (int)field - bias - mbits);
}

static inline double ct_get(cuv_nccl_type_t t, const void *base, size_t i) {
  const unsigned char *p = (const unsigned char *)base + i * cuv_nccl_type_size(t);
  switch (t) {
  case CUV_NCCL_INT8: return *(const int8_t *)p;
  case CUV_NCCL_UINT8: return *p;
  case CUV_NCCL_INT32: return *(const int32_t *)p;
  case CUV_NCCL_UINT32: return *(const uint32_t *)p;
  case CUV_NCCL_INT64: return (double)*(const int64_t *)p;
  case CUV_NCCL_UINT64: return (double)*(const uint64_t *)p;
  case CUV_NCCL_FLOAT16: return ct_small_decode(*(const uint16_t *)p, 5, 10);
  case CUV_NCCL_FLOAT32: return *(const float *)p;
  case CUV_NCCL_FLOAT64: return *(const double *)p;
  case CUV_NCCL_BFLOAT16: {
    uint32_t u = (uint32_t) * (const uint16_t *)p << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  case CUV_NCCL_FLOAT8E4M3: return ct_small_decode(*p, 4, 3);
  default: return ct_small_decode(*p, 5, 2);
  }
}

static inline void ct_set(cuv_nccl_type_t t, void *base, size_t i, double v) {
  unsigned char *p = (unsigned char *)base + i * cuv_nccl_type_size(t);
  switch (t) {
  case CUV_NCCL_INT8: *(int8_t *)p = (int8_t)v; break;
  case CUV_NCCL_UINT8: *p = (uint8_t)v; break;
  case CUV_NCCL_INT32: *(int32_t *)p = (int32_t)v; break;
  case CUV_NCCL_UINT32: *(uint32_t *)p = (uint32_t)v; break;
  case CUV_NCCL_INT64: *(int64_t *)p = (int64_t)v; break;
  case CUV_NCCL_UINT64: *(uint64_t *)p = (uint64_t)v; break;
  case CUV_NCCL_FLOAT16: *(uint16_t *)p = (uint16_t)ct_small_encode(v, 5, 10); break;
  case CUV_NCCL_FLOAT32: *(float *)p = (float)v; break;
  case CUV_NCCL_FLOAT64: *(double *)p = v; break;
  case CUV_NCCL_BFLOAT16: {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    *(uint16_t *)p = (uint16_t)(u >> 16);
    break;
  }
  case CUV_NCCL_FLOAT8E4M3: *p = (uint8_t)ct_small_encode(v, 4, 3); break;
  default: *p = (uint8_t)ct_small_encode(v, 5, 2); break;
  }
}

/* The largest magnitude of a value for sums (and min, max, average) over up to 8 ranks. */
static inline int ct_sum_bound(cuv_nccl_type_t t) {
  switch (t) {
  case CUV_NCCL_INT8: return 15;
  case CUV_NCCL_UINT8: return 31;
  case CUV_NCCL_FLOAT16: return 100;
  case CUV_NCCL_BFLOAT16: return 8;
  case CUV_NCCL_FLOAT8E4M3: return 2;
  case CUV_NCCL_FLOAT8E5M2: return 1;
  default: return 1000;
  }
}

/* Rank `rank`'s value of one element. Products: +-1 everywhere but at `prod_rank`, +-2 there. */
static inline double ct_random(cuv_nccl_type_t t, cuv_nccl_redop_t op, int rank, int prod_rank) {
  uint32_t r = cuvt_random_u32();
  if (op == CUV_NCCL_PROD) {
    double v = rank == prod_rank ? 2.0 : 1.0;
    return ct_is_unsigned(t) || r % 2 ? v : -v;
  }
  int bound = ct_sum_bound(t);
  if (ct_is_unsigned(t))
    return (double)(r % (unsigned)(bound + 1));
  return (double)((int)(r % (unsigned)(2 * bound + 1)) - bound);
}

static inline double ct_combine(cuv_nccl_redop_t op, double a, double b) {
  switch (op) {
  case CUV_NCCL_PROD: return a * b;
  case CUV_NCCL_MAX: return a > b ? a : b;
  case CUV_NCCL_MIN: return a < b ? a : b;
  default: return a + b;
  }
}

/* The reference of one element over n ranks' values. */
static inline double ct_reference(cuv_nccl_type_t t, cuv_nccl_redop_t op, const double *v, int n) {
  double acc = v[0];
  for (int r = 1; r < n; r++)
    acc = ct_combine(op, acc, v[r]);
  if (op != CUV_NCCL_AVG)
    return acc;
  if (ct_is_float(t))
    return acc / n;
  return ct_is_unsigned(t) ? (double)((uint64_t)acc / (uint64_t)n)
                           : (double)((int64_t)acc / (int64_t)n); /* NCCL: sum, then x / n */
}

/* How far a result may be from the reference: only a floating average, by the type's precision. */
static inline bool ct_close(cuv_nccl_type_t t, cuv_nccl_redop_t op, double got, double want) {
  if (op != CUV_NCCL_AVG || !ct_is_float(t))
    return got == want;
  double rel = t == CUV_NCCL_FLOAT16 ? 1e-3 : t == CUV_NCCL_BFLOAT16 ? 8e-3
             : t == CUV_NCCL_FLOAT8E4M3 ? 0.07 : t == CUV_NCCL_FLOAT8E5M2 ? 0.13
             : t == CUV_NCCL_FLOAT32 ? 1e-6 : 1e-12;
  return fabs(got - want) <= rel * (1.0 + fabs(want));
}

#endif
