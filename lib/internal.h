#ifndef CUV_LIB_INTERNAL_H
#define CUV_LIB_INTERNAL_H

/* What every file of lib/ shares: the public API, the driver table, the internal objects. */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuv.h>

#include "lines.h"
#include "pool.h"
#include "driver.h"

#define CUV__UNUSED(x) (void)(x)
#define CUV__COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

#include "config.h"

#include "clock.h"

#include "device.h"
#include "stream.h"
#include "stats.h"
#include "submission.h"
#include "engine.h"
#include "op.h"
#include "buffer.h"
#include "module.h"
#include "exec.h"

#endif
