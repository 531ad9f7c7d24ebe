/* What kinds.cu's k_scalars and k_vectors write for each value, for the twins (twins.c) and the
 * test (launch.c): integers widened to 64 bits, floats by their bits. */
#ifndef CUVT_KINDS_BITS_H
#define CUVT_KINDS_BITS_H

#include <stdint.h>
#include <string.h>

static inline unsigned long long widen(long long v) { return (unsigned long long)v; }

static inline unsigned long long float_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

static inline unsigned long long double_bits(double d) {
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  return bits;
}

#endif
