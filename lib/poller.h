#ifndef CUV_LIB_POLLER_H
#define CUV_LIB_POLLER_H

/* poller.c: the cuv-nccl thread, for what no stream word can tell: NCCL's communicators report
 * their progress and their errors only when asked (ncclCommGetAsyncError). The thread calls one
 * function, which does a pass over what it watches and says when to call it again. */

/* One pass; returns the microseconds until the next (0: nothing is watched, park until woken).
 * `ending`: the process exits; only what is being closed matters, and 0 says it is all gone. */
typedef unsigned (*cuv__poll_fn)(bool ending);

/* Makes sure the thread runs `poll` and wakes it for a pass now: something new is watched.
 * CUV_ETHREAD when the thread cannot start. Always the same function (lib/comm.c's). */
int cuv__poller_wake(cuv__poll_fn poll);

#endif
