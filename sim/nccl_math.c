/* The simulator's NCCL arithmetic: element sizes and the reductions of every NCCL data type on
 * the host. Integers wrap as the GPU's do; the 16- and 8-bit floating types are widened to float
 * for each step and rounded back to nearest even (the FP8 types saturate to their largest finite
 * value, as NCCL's conversions do), so a reduction of values the type holds exactly, whose partial
 * results it holds exactly too, gives the same bits as a GPU's in any order. */

#include <math.h>
#include <string.h>

#include "nccl_math.h"

/* ncclDataType_t and ncclRedOp_t values (include/cuv/collective.h spells them). */
enum { T_I8, T_U8, T_I32, T_U32, T_I64, T_U64, T_F16, T_F32, T_F64, T_BF16, T_E4M3, T_E5M2, T_N };
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_N };

static const size_t type_sizes[T_N] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

size_t sim_nccl_type_size(int type) { return type >= 0 && type < T_N ? type_sizes[type] : 0; }

bool sim_nccl_op_valid(int op) { return op >= 0 && op < OP_N; }

/* ---- small floating formats ---- */

/* A format of 1 sign bit, `ebits` exponent bits (bias 2^(ebits-1) - 1) and `mbits` mantissa bits.
 * `ieee` formats keep their top exponent for infinities and NaNs; E4M3 has no infinity and spends
 * only its all-ones pattern on NaN. */
typedef struct small_format {
  int ebits, mbits;
  bool ieee;
  float max; /* largest finite value */
} small_format_t;

static const small_format_t F16 = {5, 10, true, 65504.0f};
static const small_format_t E4M3 = {4, 3, false, 448.0f};
static const small_format_t E5M2 = {5, 2, true, 57344.0f};

static float small_decode(unsigned bits, small_format_t f) {
  int bias = (1 << (f.ebits - 1)) - 1;
  unsigned mant = bits & ((1u << f.mbits) - 1);
  unsigned field = (bits >> f.mbits) & ((1u << f.ebits) - 1);
  float sign = (bits >> (f.ebits + f.mbits)) & 1u ? -1.0f : 1.0f;
  unsigned top = (1u << f.ebits) - 1;
  if (f.ieee && field == top)
    return mant ? NAN : sign * INFINITY;
  if (!f.ieee && field == top && mant == (1u << f.mbits) - 1)
    return NAN;
  if (field == 0)
    return sign * ldexpf((float)mant, 1 - bias - f.mbits);
  return sign * ldexpf((float)(mant | (1u << f.mbits)), (int)field - bias - f.mbits);
}

/* x rounded to nearest even at the format's precision. Past the largest finite value it becomes
 * that value (`saturate`, the FP8 conversions NCCL uses) or infinity (FP16). */
static unsigned small_encode(float x, small_format_t f, bool saturate) {
  unsigned sign = signbit(x) ? 1u << (f.ebits + f.mbits) : 0u;
  unsigned top = (1u << f.ebits) - 1, mant_mask = (1u << f.mbits) - 1;
  if (isnan(x)) /* a quiet NaN; E4M3's only NaN is all ones */
    return sign | top << f.mbits | (f.ieee ? 1u << (f.mbits - 1) : mant_mask);
  float a = fabsf(x);
  if (a == 0.0f)
    return sign;
  int bias = (1 << (f.ebits - 1)) - 1, e;
  frexpf(a, &e);            /* a = m * 2^e, m in [0.5, 1) */
  int field = e - 1 + bias; /* the exponent field, if a is normal in the format */
  int shift = (field > 0 ? e - 1 : 1 - bias) - f.mbits;
  float q = nearbyintf(ldexpf(a, -shift)); /* ties to even: the default rounding mode */
  if (ldexpf(q, shift) > f.max)
    return sign | (saturate ? small_encode(f.max, f, false) : top << f.mbits);
  unsigned units = (unsigned)q; /* the significand with its leading bit, in units of 2^shift */
  if (field <= 0)
    return sign | units; /* subnormal; a carry into 1 << mbits is the smallest normal */
  if (units >> (f.mbits + 1))
    return sign | (unsigned)(field + 1) << f.mbits; /* carried into the next binade */
  return sign | (unsigned)field << f.mbits | (units & mant_mask);
}

static float bf16_decode(uint16_t bits) {
  uint32_t u = (uint32_t)bits << 16;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static uint16_t bf16_encode(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if (isnan(x))
    return (uint16_t)(u >> 16 | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); /* nearest, ties to even */
  return (uint16_t)(u >> 16);
}

/* ---- element-wise ---- */

static float float_op(float a, float b, int op) {
  switch (op) {
  case OP_PROD: return a * b;
  case OP_MAX: return fmaxf(a, b);
  case OP_MIN: return fminf(a, b);
  default: return a + b; /* sum, and the average's sum */
  }
}

static double double_op(double a, double b, int op) {
  switch (op) {
  case OP_PROD: return a * b;
  case OP_MAX: return fmax(a, b);
  case OP_MIN: return fmin(a, b);
  default: return a + b;
  }
}

/* Integers of one width: sums and products wrap (done unsigned), comparisons as the type's. */
#define INT_ACCUMULATE(T, U)                                                                      \
  do {                                                                                            \
    T *d = acc;                                                                                   \
    const T *s = x;                                                                               \
    for (size_t i = 0; i < n; i++) {                                                              \
      if (op == OP_PROD)                                                                          \
        d[i] = (T)((U)d[i] * (U)s[i]);                                                            \
      else if (op == OP_MAX)                                                                      \
        d[i] = s[i] > d[i] ? s[i] : d[i];                                                         \
      else if (op == OP_MIN)                                                                      \
        d[i] = s[i] < d[i] ? s[i] : d[i];                                                         \
      else                                                                                        \
        d[i] = (T)((U)d[i] + (U)s[i]);                                                            \
    }                                                                                             \
  } while (0)

static void small_accumulate(void *acc, const void *x, size_t n, int op, small_format_t f,
                             bool saturate) {
  if (f.mbits == 10) { /* FP16 */
    uint16_t *d = acc;
    const uint16_t *s = x;
    for (size_t i = 0; i < n; i++)
      d[i] = (uint16_t)small_encode(float_op(small_decode(d[i], f), small_decode(s[i], f), op),
                                    f, saturate);
    return;
  }
  uint8_t *d = acc;
  const uint8_t *s = x;
  for (size_t i = 0; i < n; i++)
    d[i] = (uint8_t)small_encode(float_op(small_decode(d[i], f), small_decode(s[i], f), op), f,
                                 saturate);
}

void sim_nccl_accumulate(void *acc, const void *x, size_t n, int type, int op) {
  switch (type) {
  case T_I8: INT_ACCUMULATE(int8_t, uint8_t); break;
  case T_U8: INT_ACCUMULATE(uint8_t, uint8_t); break;
  case T_I32: INT_ACCUMULATE(int32_t, uint32_t); break;
  case T_U32: INT_ACCUMULATE(uint32_t, uint32_t); break;
  case T_I64: INT_ACCUMULATE(int64_t, uint64_t); break;
  case T_U64: INT_ACCUMULATE(uint64_t, uint64_t); break;
  case T_F16: small_accumulate(acc, x, n, op, F16, false); break;
  case T_E4M3: small_accumulate(acc, x, n, op, E4M3, true); break;
  case T_E5M2: small_accumulate(acc, x, n, op, E5M2, true); break;
  case T_F32: {
    float *d = acc;
    const float *s = x;
    for (size_t i = 0; i < n; i++)
      d[i] = float_op(d[i], s[i], op);
    break;
  }
  case T_F64: {
    double *d = acc;
    const double *s = x;
    for (size_t i = 0; i < n; i++)
      d[i] = double_op(d[i], s[i], op);
    break;
  }
  case T_BF16: {
    uint16_t *d = acc;
    const uint16_t *s = x;
    for (size_t i = 0; i < n; i++)
      d[i] = bf16_encode(float_op(bf16_decode(d[i]), bf16_decode(s[i]), op));
    break;
  }
  default: break;
  }
}

#define INT_DIVIDE(T)                                                                             \
  do {                                                                                            \
    T *d = acc;                                                                                   \
    for (size_t i = 0; i < n; i++)                                                                \
      d[i] = (T)(d[i] / (T)nranks);                                                               \
  } while (0)

static void small_divide(void *acc, size_t n, int nranks, small_format_t f, bool saturate) {
  size_t size = f.mbits == 10 ? 2 : 1;
  for (size_t i = 0; i < n; i++) {
    unsigned bits = 0;
    memcpy(&bits, (char *)acc + i * size, size);
    bits = small_encode(small_decode(bits, f) / (float)nranks, f, saturate);
    memcpy((char *)acc + i * size, &bits, size);
  }
}

void sim_nccl_divide(void *acc, size_t n, int type, int nranks) {
  switch (type) {
  case T_I8: INT_DIVIDE(int8_t); break;
  case T_U8: INT_DIVIDE(uint8_t); break;
  case T_I32: INT_DIVIDE(int32_t); break;
  case T_U32: INT_DIVIDE(uint32_t); break;
  case T_I64: INT_DIVIDE(int64_t); break;
  case T_U64: INT_DIVIDE(uint64_t); break;
  case T_F16: small_divide(acc, n, nranks, F16, false); break;
  case T_E4M3: small_divide(acc, n, nranks, E4M3, true); break;
  case T_E5M2: small_divide(acc, n, nranks, E5M2, true); break;
  case T_F32: {
    float *d = acc;
    for (size_t i = 0; i < n; i++)
      d[i] /= (float)nranks;
    break;
  }
  case T_F64: {
    double *d = acc;
    for (size_t i = 0; i < n; i++)
      d[i] /= (double)nranks;
    break;
  }
  case T_BF16: {
    uint16_t *d = acc;
    for (size_t i = 0; i < n; i++)
      d[i] = bf16_encode(bf16_decode(d[i]) / (float)nranks);
    break;
  }
  default: break;
  }
}
