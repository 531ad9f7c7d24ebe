/* The structs that tests/launchers/kinds.cu's kernels take by value, declared once for the .cu
 * and for C (the generated header includes this file: cuv-launchers --include). */
#ifndef CUVT_KINDS_H
#define CUVT_KINDS_H

#include <stdint.h>

/* 8 bytes, aligned to 4, with tail padding. */
typedef struct kinds_pair {
  float a;
  int8_t b;
} kinds_pair_t;

/* Over-aligned: 32 bytes, aligned to 32 on both sides. */
typedef struct __attribute__((aligned(32))) kinds_big {
  double a;
  int b;
} kinds_big_t;

#endif
