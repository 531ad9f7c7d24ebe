#ifndef CUV_LIB_LINES_H
#define CUV_LIB_LINES_H

/* Objects that every thread reads on every op (a device, a stream, a kernel, a buffer) and whose
 * counters the submitting thread writes per op. The counters get a cache line of their own, or
 * each write takes the line from the submitter threads that read the rest, and each of their
 * reads takes it back: on the GPU, with one Node loop and 64 launches in flight, the kernel's
 * reference count alone was 3.6% of the loop's time (bench/RESULTS.md, cuv-node). Such objects
 * are allocated aligned to the line (cuv__lines_zalloc), and freed with free(). */

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define CUV__LINE 64
/* Starts the member on a line of its own, shared only with the members after it. */
#define CUV__OWN_LINE alignas(CUV__LINE)

/* Size bytes, cleared, aligned to the line; NULL without memory. */
static inline void *cuv__lines_zalloc(size_t size) {
  void *p = NULL;
  if (posix_memalign(&p, CUV__LINE, size) != 0)
    return NULL;
  memset(p, 0, size);
  return p;
}

#endif
