#ifndef CUV_SIM_HANDLE_H
#define CUV_SIM_HANDLE_H

/* The registry of live handles (handle.c): every object handed to the application as a handle
 * is registered, so that a stale or foreign handle is refused rather than dereferenced. */

#include "sim.h"

/* All with the lock held. */
SIM_HIDDEN bool sim_handle_add(struct sim_obj *obj);
SIM_HIDDEN void sim_handle_remove(struct sim_obj *obj);
/* The object behind handle h if it is live and of type t, else NULL. */
SIM_HIDDEN struct sim_obj *sim_handle_get(const void *h, enum sim_obj_type t);
/* Unregisters every live object of ctx of type t and returns them in a malloc'd array (*count
 * entries; NULL when none). */
SIM_HIDDEN struct sim_obj **sim_handle_take_all(struct sim_ctx *ctx, enum sim_obj_type t,
                                                size_t *count);

#endif
