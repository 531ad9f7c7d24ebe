#ifndef CUVT_ARG_TYPES_H
#define CUVT_ARG_TYPES_H
/* Parameter types of the over-aligned-argument kernels, one definition for test_kernels.cu (nvcc),
 * their twins and the tests, so the C side lays them out as the CUDA side does. */

struct __attribute__((aligned(16))) cuvt_f4 {
  float x, y, z, w;
};

/* CUDA's double2, as the host sees it. */
struct __attribute__((aligned(16))) cuvt_d2 {
  double x, y;
};

struct __attribute__((aligned(32))) cuvt_a32 {
  float v[8];
};

/* 16 bytes aligned at 8: placed at 8, not 16, after a 4-byte parameter. */
struct cuvt_dq {
  double a;
  float b;
};

/* The names the .cu uses (C++ needs no `struct`), for C too: the typed launchers use them. */
typedef struct cuvt_f4 cuvt_f4;
typedef struct cuvt_d2 cuvt_d2;
typedef struct cuvt_a32 cuvt_a32;
typedef struct cuvt_dq cuvt_dq;

#endif
