/* tcp-infer: flow control of a loop's connections (loop thread): what a connection may hold
 * before the server stops reading it, and what the loop may hold over all of them.
 *
 * A client that pipelines requests and never reads its answers would otherwise make the server
 * hold every answer it asked for. conn.c asks here after each request's message (while parsing,
 * so that one read of 64 KiB cannot bring 1 600 requests at once) and after each read: over a
 * limit, it pauses the parser, keeps the bytes not parsed yet and stops reading the socket; it
 * asks again whenever the connection's answers leave, and reads on once it is under the
 * low-water marks. The limits:
 *   --max-conn-requests  requests queued on one connection (answered or not, not yet written)
 *   --max-conn-unsent    bytes of serialized responses not yet taken by its socket
 *   --max-buffered       bytes held over the whole server: request bodies, answers, responses
 *                        not yet sent and input kept; each loop holds its share (the cap over
 *                        --loops), so no loop waits for another.
 * Over the server's cap, a connection that holds anything stops after its current request, and
 * one that holds nothing may still read one: a client that reads its answers is served (one
 * request at a time while the cap is reached) however many others do not. So the loop holds at
 * most its share plus, per connection, one read kept (64 KiB) and one request's body and answer
 * (README: Limits). */
#include "flow.h"

static size_t loop_share(const loop_t *lp) {
  const server_t *s = lp->srv;
  return s->max_buffered / (s->nloops ? s->nloops : 1);
}

void flow_hold(loop_t *lp, size_t bytes) { lp->n.buffered_bytes += bytes; }

bool flow_release(loop_t *lp, size_t bytes) {
  lp->n.buffered_bytes -= bytes;
  if (!lp->cap_paused || lp->n.buffered_bytes > loop_share(lp) / 4 * 3)
    return false;
  lp->cap_paused = false;
  return true;
}

flow_reason_t flow_over(loop_t *lp, unsigned queued, size_t unsent) {
  const server_t *s = lp->srv;
  if (queued >= s->max_conn_requests)
    return FLOW_QUEUE;
  if (unsent > s->max_conn_unsent)
    return FLOW_UNSENT;
  if ((queued || unsent) && lp->n.buffered_bytes > loop_share(lp)) {
    lp->cap_paused = true;
    return FLOW_SERVER;
  }
  return FLOW_OK;
}

bool flow_under(loop_t *lp, unsigned queued, size_t unsent) {
  const server_t *s = lp->srv;
  if (queued > s->max_conn_requests / 2 || unsent > s->max_conn_unsent / 2)
    return false;
  if (!queued && !unsent)
    return true;
  if (lp->n.buffered_bytes <= loop_share(lp) / 4 * 3)
    return true;
  lp->cap_paused = true; /* it waits for the loop's low-water mark */
  return false;
}
