#ifndef CUV_LIB_NCCL_H
#define CUV_LIB_NCCL_H

/* nccl.c: the NCCL library, opened with dlopen at its first use, as lib/driver.c opens the driver.
 * Every NCCL call in lib/ goes through cuv__nccl: `cuv__nccl.ncclGroupStart()`, between
 * cuv__nccl_enter and cuv__nccl_leave. */

#include "nccl_funcs.h"

extern cuv__nccl_funcs_t cuv__nccl;

/* Loads NCCL once (the driver first): 0, CUV_ENONCCL with cuv_nccl_error's sentence, or the
 * driver's initialization error. Thread-safe; after the first call it costs one atomic load. */
int cuv__nccl_load(void);

/* NCCL makes the device's primary context current on the calling thread (through the CUDA
 * runtime's cudaSetDevice), which is the context cuv uses too, but maybe of another device: every
 * NCCL call is bracketed by these two, which give the thread its context back. */
CUcontext cuv__nccl_enter(void);
void cuv__nccl_leave(CUcontext saved);

/* A NCCL call's result as a cuv status: 0 or CUV_ENCCL(result). */
static inline int cuv__nccl_status(cuv__nccl_result_t result) {
  return result == CUV__NCCL_SUCCESS ? 0 : CUV_ENCCL(result);
}

#endif
