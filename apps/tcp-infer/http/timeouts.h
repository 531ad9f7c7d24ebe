/* tcp-infer: a loop's connection timeouts (timeouts.c) */
#ifndef TCP_INFER_TIMEOUTS_H
#define TCP_INFER_TIMEOUTS_H

#include "server.h"

/* timeouts.c (loop thread): the sweep over the connections' timeouts, started with the loop. */
void timeouts_start(loop_t *lp);
void timeouts_stop(loop_t *lp);

#endif
