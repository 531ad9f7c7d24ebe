/* tcp-infer: the choice of a stream that routes around stalled ones (stall.h). */
#include "stall.h"

bool lane_stalled(const lane_t *lane, uint64_t now_ns, uint64_t stall_ns) {
  return lane->in_flight && now_ns > lane->progress_ns && now_ns - lane->progress_ns > stall_ns;
}

int lane_choose(const lane_t *lanes, unsigned n, unsigned start, uint64_t now_ns,
                uint64_t stall_ns) {
  int best = -1;
  for (unsigned k = 0; k < n; k++) {
    unsigned i = (start + k) % n;
    if (lane_stalled(&lanes[i], now_ns, stall_ns))
      continue;
    if (best < 0 || lanes[i].in_flight < lanes[best].in_flight)
      best = (int)i;
  }
  return best;
}
