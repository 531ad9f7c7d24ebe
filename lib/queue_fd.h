#ifndef CUV_LIB_QUEUE_FD_H
#define CUV_LIB_QUEUE_FD_H

/* A queue's readiness descriptor (lib/queue_fd.c), for cuv_queue_fd: an eventfd made readable
 * and unreadable to mirror one boolean, whether a drain would deliver something. lib/queue.c
 * holds one per queue and calls these under the queue's lock. */

#include <stdbool.h>

typedef struct cuv__queue_fd {
  int fd;     /* -1 until the first cuv_queue_fd */
  bool ready; /* what the descriptor shows now: it changes only through the calls below */
} cuv__queue_fd_t;

#define CUV__QUEUE_FD_NONE ((cuv__queue_fd_t){-1, false})

/* Makes the eventfd unless there is one, showing `deliverable`; 0, or the failure's negative
 * errno (libuv's code for it: CUV_ENOMEM, UV_EMFILE...), leaving *r without a descriptor. */
int cuv__queue_fd_open(cuv__queue_fd_t *r, bool deliverable);
/* Makes the descriptor show `deliverable`: a system call only when that changes what it shows,
 * none while there is no descriptor. */
void cuv__queue_fd_mirror(cuv__queue_fd_t *r, bool deliverable);
/* Closes the descriptor, if any. */
void cuv__queue_fd_close(cuv__queue_fd_t *r);

#endif
