#ifndef CUV_SIM_MODULE_H
#define CUV_SIM_MODULE_H

/* Modules and kernels (module.c). */

#include "sim.h"

/* Unloads every module of ctx (reset; lock held). */
SIM_HIDDEN void sim_module_reset_ctx(struct sim_ctx *ctx);

#endif
