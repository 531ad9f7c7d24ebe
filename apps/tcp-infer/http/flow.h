/* tcp-infer: flow control of a loop's connections (flow.c) */
#ifndef TCP_INFER_FLOW_H
#define TCP_INFER_FLOW_H

#include <stdbool.h>
#include <stddef.h>

#include "server.h"

/* Why a connection stopped reading (cuv_infer_read_pauses_total{reason}). */
typedef enum { FLOW_OK = -1, FLOW_QUEUE, FLOW_UNSENT, FLOW_SERVER } flow_reason_t;
#define FLOW_REASONS 3

/* Bytes a connection of the loop came to hold (a request's body or answer, serialized responses,
 * input kept while its parsing is paused), against the loop's share of --max-buffered. */
void flow_hold(loop_t *lp, size_t bytes);
/* ... and let go of; true when that brought the loop under its low-water mark while its cap had
 * paused connections (conn.c then resumes them). */
bool flow_release(loop_t *lp, size_t bytes);
/* Whether a connection with `queued` requests and `unsent` bytes of responses must stop reading,
 * and why; FLOW_OK when it may go on. */
flow_reason_t flow_over(loop_t *lp, unsigned queued, size_t unsent);
/* Whether a paused connection may read again: under its low-water marks (half its limits), and
 * the loop under three quarters of its share or the connection holding nothing at all. */
bool flow_under(loop_t *lp, unsigned queued, size_t unsent);

#endif
