/* tcp-infer: a loop's streams (loop thread). The app picks the stream of each submission itself
 * (cuv_submit_opts_t's stream) rather than leaving it to a policy: a policy cannot tell that a
 * stream's work stopped progressing, and round-robin kept queueing every n-th request behind a
 * kernel that hung until the loop's workspaces were all taken by them. Here a submission goes to
 * the least loaded stream whose work progresses (stall.c); a stream whose work in flight showed
 * no progress for --stream-stall-ms is routed around; when every stream is stalled a new one is
 * made (up to STREAMS_MAX), else the least loaded takes it. What went behind a hung kernel before
 * its stream was found stalled waits for it (with --isolate, the watchdog's kill, then a replay
 * on the next worker).
 *
 * Each submission counts on its stream from the moment it is handed on (streams_take) to its
 * completion, or its refusal (streams_done), both on the loop thread. */
#include <stdlib.h>

#include "server.h"
#include "streams.h"
#include "stall.h"

#define STREAMS_MAX 16

struct streams {
  cuv_stream_t *s[STREAMS_MAX];
  lane_t lanes[STREAMS_MAX];
  unsigned n, next;
  uint64_t stall_ns;
};

int streams_init(loop_t *lp) {
  struct streams *st = calloc(1, sizeof *st);
  if (!st)
    return CUV_ENOMEM;
  lp->streams = st;
  unsigned ms = lp->srv->stream_stall_ms;
  st->stall_ns = ms ? (uint64_t)ms * 1000000u : UINT64_MAX; /* 0: never avoided */
  for (unsigned i = 0; i < lp->srv->nstreams && i < STREAMS_MAX; i++) {
    int rc = cuv_stream_create(&st->s[i], lp->gpu->dev);
    if (rc != 0)
      return rc; /* streams_free frees what was made */
    st->n++;
  }
  return 0;
}

void streams_free(loop_t *lp) {
  struct streams *st = lp->streams;
  if (!st)
    return;
  for (unsigned i = 0; i < st->n; i++)
    cuv_stream_destroy(st->s[i]); /* work in flight keeps what it needs */
  free(st);
  lp->streams = NULL;
}

/* Every stream is stalled: one more, when allowed and possible; its index or -1. */
static int grow(struct streams *st, loop_t *lp) {
  if (st->n == STREAMS_MAX || cuv_stream_create(&st->s[st->n], lp->gpu->dev) != 0)
    return -1;
  st->lanes[st->n] = (lane_t){0};
  lp->n.streams_added++;
  return (int)st->n++;
}

cuv_stream_t *streams_take(loop_t *lp, const workspace_t *ws, int *idx) {
  struct streams *st = lp->streams;
  *idx = -1;
  if (!st || !st->n || (ws && ws->gpu != lp->gpu))
    return NULL; /* the default policy's choice (of the workspace's device) */
  uint64_t now = uv_hrtime();
  bool stalled; /* counted: the submissions that went around a stalled stream */
  int i = lane_choose(st->lanes, st->n, st->next, now, st->stall_ns, &stalled);
  if (i < 0 && (i = grow(st, lp)) < 0)
    i = lane_choose(st->lanes, st->n, st->next, now, UINT64_MAX, NULL); /* the least loaded */
  if (stalled)
    lp->n.stalled_picks++;
  st->next = ((unsigned)i + 1) % st->n;
  if (st->lanes[i].in_flight++ == 0)
    st->lanes[i].progress_ns = now; /* a busy spell starts: its clock too */
  *idx = i;
  return st->s[i];
}

void streams_done(loop_t *lp, int idx) {
  struct streams *st = lp->streams;
  if (!st || idx < 0 || (unsigned)idx >= st->n || !st->lanes[idx].in_flight)
    return;
  st->lanes[idx].in_flight--;
  st->lanes[idx].progress_ns = uv_hrtime();
}

