/* tcp-infer: a loop's streams (streams.c) */
#ifndef TCP_INFER_STREAMS_H
#define TCP_INFER_STREAMS_H

#include "server.h"

/* streams.c: a loop's streams (loop thread). */
int streams_init(loop_t *lp); /* streams_free frees what was made */
void streams_free(loop_t *lp);
/* The stream for the next submission through ws (counted on it until streams_done) and its
 * index in *idx; NULL and -1 when the loop has none, or ws is on another device than the loop's
 * (stolen work: that device's default policy picks). */
cuv_stream_t *streams_take(loop_t *lp, const workspace_t *ws, int *idx);
/* The submission on stream idx completed, or was refused (idx -1: nothing to do). */
void streams_done(loop_t *lp, int idx);

#endif
