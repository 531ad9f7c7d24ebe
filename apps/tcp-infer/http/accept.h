/* tcp-infer: accepting a loop's connections (accept.c) */
#ifndef TCP_INFER_ACCEPT_H
#define TCP_INFER_ACCEPT_H

#include "server.h"

/* The loop's listening socket (lp->listen_fd, bound) listens and its connections are accepted
 * on the loop from now on; 0 or a libuv error. */
int accept_start(loop_t *lp);
/* Shutdown: no more connections; the reserve descriptor closed. */
void accept_stop(loop_t *lp);

#endif
