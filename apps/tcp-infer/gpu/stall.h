/* tcp-infer: which stream the next GPU work goes to, so that a stream whose work stopped
 * progressing (a kernel that hangs, or spins far longer than the work's) holds only what is
 * already behind it. Pure: streams.c keeps the state and the clock, the tests feed it their own. */
#ifndef TCP_INFER_STALL_H
#define TCP_INFER_STALL_H

#include <stdbool.h>
#include <stdint.h>

/* What the choice looks at for one stream: the work in flight on it, and when it last showed
 * progress (a completion, or the moment its first work of a busy spell went on it). */
typedef struct lane {
  unsigned in_flight;
  uint64_t progress_ns;
} lane_t;

/* Whether the stream's work stopped progressing: work in flight and no progress for stall_ns. */
bool lane_stalled(const lane_t *lane, uint64_t now_ns, uint64_t stall_ns);

/* The stream for the next work: the least loaded of those not stalled, ties going to the first
 * from `start` on (so that streams take turns); -1 when every one is stalled. *stalled (unless
 * NULL): whether any one is. */
int lane_choose(const lane_t *lanes, unsigned n, unsigned start, uint64_t now_ns,
                uint64_t stall_ns, bool *stalled);

#endif
