#ifndef CUV_LIB_CLOCK_H
#define CUV_LIB_CLOCK_H

/* The monotonic clock lib/ measures spins, back-offs and ages with, at the ground: it calls
 * nothing of cuv's. (Named clock.h: a lib/time.h would shadow the system's <time.h> here.) */

#include <stdint.h>
#include <time.h>

static inline uint64_t cuv__now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#endif
