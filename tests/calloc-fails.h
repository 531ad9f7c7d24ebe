#ifndef CUVT_CALLOC_FAILS_H
#define CUVT_CALLOC_FAILS_H

/* A calloc that fails while calloc_fails is set, for a test linked with -Wl,--wrap=calloc (and
 * with cuv's static archive, whose calls it then reaches). Include it in one file of the test. */

#include <stdbool.h>
#include <stddef.h>

static bool calloc_fails;
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size) {
  return calloc_fails ? NULL : __real_calloc(n, size);
}

#endif
