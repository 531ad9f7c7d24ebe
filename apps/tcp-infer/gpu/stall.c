/* tcp-infer: the choice of a stream that routes around stalled ones (stall.h). */
#include "stall.h"

bool lane_stalled(const lane_t *lane, uint64_t now_ns, uint64_t stall_ns) {
  return lane->in_flight && now_ns > lane->progress_ns && now_ns - lane->progress_ns > stall_ns;
}

/* One pass from `start`, without a division per lane: a submission's choice ran over every
 * lane twice (the choice, then whether any was stalled), about 250 instructions per request at
 * 16 streams (bench/tcp-infer-callgrind.sh). */
int lane_choose(const lane_t *lanes, unsigned n, unsigned start, uint64_t now_ns,
                uint64_t stall_ns, bool *stalled) {
  int best = -1;
  bool any = false;
  for (unsigned k = 0, i = n ? start % n : 0; k < n; k++, i = i + 1 < n ? i + 1 : 0) {
    if (lane_stalled(&lanes[i], now_ns, stall_ns)) {
      any = true;
      continue;
    }
    if (best < 0 || lanes[i].in_flight < lanes[best].in_flight)
      best = (int)i;
  }
  if (stalled)
    *stalled = any;
  return best;
}
