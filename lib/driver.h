#ifndef CUV_LIB_DRIVER_H
#define CUV_LIB_DRIVER_H

/* The one table of CUDA driver entry points, filled by cuv__driver_load (lib/driver.c). Every
 * driver call in lib/ goes through cuv__drv: `cuv__drv.cuStreamQuery(s)`. */

#include "driver_funcs.h"

typedef struct cuv__driver {
#define CUV__DRIVER_MEMBER(name) __typeof__(name) *name;
  CUV__DRIVER_FUNCS(CUV__DRIVER_MEMBER)
#undef CUV__DRIVER_MEMBER
  __typeof__(cuLaunchHostFunc_v2) *cuLaunchHostFunc_v2; /* NULL where the driver lacks it */
  void *handle;
  int is_sim;
  int version;
  char name[256];
} cuv__driver_t;

extern cuv__driver_t cuv__drv;

/* Initializes the process with the environment's configuration unless it is initialized already
 * (cuv_init): loads the driver it names and calls cuInit, once, thread-safe. 0 or CUV_E*. */
int cuv__driver_init(void);
/* Loads a driver library from `path` ("sim" for libcuv-sim) into `table`; for tests. */
int cuv__driver_load(cuv__driver_t *table, const char *path);
void cuv__driver_unload(cuv__driver_t *table);

/* A driver call's result as a cuv status: 0 or CUV_ECUDA(result). */
static inline int cuv__cu(CUresult result) {
  return result == CUDA_SUCCESS ? 0 : -10000 - (int)result;
}

#endif
