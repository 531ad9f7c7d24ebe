/* tcp-infer: request bodies (bodies.c) */
#ifndef TCP_INFER_BODIES_H
#define TCP_INFER_BODIES_H

#include "server.h"

/* bodies.c: request bodies from the loop's free lists (loop thread). */
char *body_alloc(loop_t *lp, size_t bytes);
void body_free(loop_t *lp, char *body, size_t cap);
void bodies_free(loop_t *lp); /* shutdown: frees the lists */

#endif
