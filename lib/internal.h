#ifndef CUV_LIB_INTERNAL_H
#define CUV_LIB_INTERNAL_H

/* What every file of lib/ shares: the public API, the driver table, the internal objects. */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuv.h>

#include "alloc.h"
#include "driver.h"

#define CUV__UNUSED(x) (void)(x)
#define CUV__COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- config.c: environment variables, read once at driver init ---- */
enum cuv__host_sync { CUV__HOST_SYNC_OFF, CUV__HOST_SYNC_SPIN, CUV__HOST_SYNC_BLOCK };
typedef struct cuv__config {
  unsigned spin_budget_us;        /* CUDA_ASYNC_SPIN_BUDGET_US, default 20, 0 = no inline spin */
  enum cuv__host_sync host_sync;  /* CUDA_ASYNC_HOST_SYNC=spin|block forces host callbacks */
  unsigned reactor_slots;         /* CUV_REACTOR_SLOTS, default 4096 */
  bool strict_hazards;            /* CUV_STRICT_HAZARDS=1: conflicts fail with CUV_ECONFLICT */
} cuv__config_t;
extern cuv__config_t cuv__config;
void cuv__config_load(void);

/* ---- time.c ---- */
uint64_t cuv__now_ns(void);

#include "device.h"
#include "stream.h"
#include "stats.h"
#include "submission.h"
#include "op.h"
#include "buffer.h"
#include "module.h"
#include "exec.h"

#endif
