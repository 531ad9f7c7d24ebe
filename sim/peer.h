#ifndef CUV_SIM_PEER_H
#define CUV_SIM_PEER_H

/* Peer access between contexts (peer.c). */

#include "sim.h"

/* Forgets every peer access from and to ctx (reset; lock held). */
SIM_HIDDEN void sim_peer_reset_ctx(struct sim_ctx *ctx);

#endif
