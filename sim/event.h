#ifndef CUV_SIM_EVENT_H
#define CUV_SIM_EVENT_H

/* Events (event.c; struct sim_event and struct sim_token are in sim.h). */

#include "sim.h"

SIM_HIDDEN void sim_token_unref(struct sim_token *t);
SIM_HIDDEN void sim_event_unref(struct sim_event *e);
/* Destroys every event of ctx (reset; lock held). */
SIM_HIDDEN void sim_event_reset_ctx(struct sim_ctx *ctx);

#endif
