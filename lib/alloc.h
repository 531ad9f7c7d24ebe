#ifndef CUV_LIB_ALLOC_H
#define CUV_LIB_ALLOC_H

/* Zeroed allocation of the small objects made and freed per op or per submission (op nodes,
 * submissions, buffer accesses). glibc's calloc (up to 2.40) bypasses the per-thread cache and
 * goes to the arena every time (about 200 instructions under callgrind against about 20), so
 * these take malloc and clear what they got. calloc stays right for large or rare allocations,
 * where it can skip clearing fresh pages.
 * GCC folds malloc + memset(0) back into calloc; the empty asm hides the pointer's origin from
 * it so the two stay apart. */

#include <stdlib.h>
#include <string.h>

static inline void *cuv__zalloc(size_t size) {
  void *p = malloc(size);
  __asm__("" : "+r"(p));
  if (p)
    memset(p, 0, size);
  return p;
}

#endif
