/* tcp-infer: request bodies (bodies.c) */
#ifndef TCP_INFER_BODIES_H
#define TCP_INFER_BODIES_H

#include "server.h"

/* bodies.c: request bodies from the loop's free lists (loop thread). */
char *body_alloc(loop_t *lp, size_t bytes);
void body_free(loop_t *lp, char *body, size_t cap);
void bodies_free(loop_t *lp); /* shutdown: frees the lists */
/* A chunked body made room for `need` bytes: a block of *cap doubled until it holds them (at
 * most max, when need fits), its first len bytes copied, the old one freed, *cap updated; NULL
 * without memory (body kept). */
char *body_grow(loop_t *lp, char *body, size_t len, size_t *cap, size_t need, size_t max);

#endif
