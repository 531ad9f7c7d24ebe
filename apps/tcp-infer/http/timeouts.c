/* tcp-infer: a loop's connection timeouts, as a server on a network needs them (loop thread).
 * A request whose head (request line and headers) takes longer than --header-timeout-ms from its
 * first byte, or whose body takes longer than --body-timeout-ms after its head, is answered 408
 * and its connection closed (slowloris: a peer that trickles bytes holds a connection for that
 * long at most); a keep-alive connection with nothing in progress and nothing owed is closed
 * after --idle-timeout-ms without a read or a write. A connection waiting for its answers is not
 * judged here: its GPU work has limits of its own (--isolate-timeout).
 *
 * One timer per loop sweeps its connections a few times per shortest timeout, rather than one
 * timer per connection restarted at every read: the check is a comparison of times kept by
 * conn.c, and the sweep costs nothing per request. */
#include "conn.h"
#include "timeouts.h"
#include "server.h"

#define SWEEPS_PER_TIMEOUT 4
#define SWEEP_MIN_MS 50

static uint64_t limit_of(const server_t *s, conn_stage_t stage) {
  switch (stage) {
  case CONN_HEAD: return s->header_timeout_ms;
  case CONN_BODY: return s->body_timeout_ms;
  case CONN_IDLE: return s->idle_timeout_ms;
  default: return 0;
  }
}

static void count(loop_t *lp, conn_stage_t stage) {
  if (stage == CONN_HEAD)
    lp->n.timeouts_head++;
  else if (stage == CONN_BODY)
    lp->n.timeouts_body++;
  else
    lp->n.timeouts_idle++;
}

static void on_sweep(uv_timer_t *timer) {
  loop_t *lp = timer->data;
  uint64_t now = uv_now(&lp->loop);
  for (conn_t *c = conn_first(lp), *next; c; c = next) {
    next = conn_next(c); /* an expired connection stays listed until its handles closed */
    uint64_t since = 0;
    conn_stage_t stage = conn_stage(c, &since);
    uint64_t limit = limit_of(lp->srv, stage);
    if (!limit || now < since || now - since <= limit)
      continue;
    count(lp, stage);
    conn_expire(c);
  }
}

void timeouts_start(loop_t *lp) {
  const server_t *s = lp->srv;
  unsigned shortest = 0;
  const unsigned limits[] = {s->header_timeout_ms, s->body_timeout_ms, s->idle_timeout_ms};
  for (int i = 0; i < 3; i++)
    if (limits[i] && (!shortest || limits[i] < shortest))
      shortest = limits[i];
  uv_timer_init(&lp->loop, &lp->limits);
  lp->limits.data = lp;
  if (!shortest)
    return;
  uint64_t period = shortest / SWEEPS_PER_TIMEOUT;
  if (period < SWEEP_MIN_MS)
    period = SWEEP_MIN_MS;
  uv_timer_start(&lp->limits, on_sweep, period, period);
}

void timeouts_stop(loop_t *lp) {
  if (lp->limits.loop && !uv_is_closing((uv_handle_t *)&lp->limits))
    uv_close((uv_handle_t *)&lp->limits, NULL);
}
