#ifndef CUV_LIB_REACTOR_H
#define CUV_LIB_REACTOR_H

/* The flag-write reactor (reactor.c): pinned, device-mapped slots; one process-wide thread. */

/* Takes a free slot and enqueues the write of its new generation behind the work on the
 * submission's stream. CUV_EBUSY when the pool is exhausted; a driver error when the write could
 * not be enqueued (the slot is back in the pool then). */
int cuv__reactor_arm(cuv__submission_t *sub);
/* Whether the armed slot's write has landed (a plain load). */
bool cuv__reactor_landed(const cuv__submission_t *sub);
/* Gives an armed slot back without registering it (the inline spin saw it land). */
void cuv__reactor_disarm(cuv__submission_t *sub);
/* Hands the armed slot to the reactor thread, which completes the submission. */
void cuv__reactor_register(cuv__submission_t *sub);
/* One scan on the calling thread (cuv_poll), unless the thread is scanning at this moment: the
 * number of submissions it completed. */
unsigned cuv__reactor_poll(void);
/* After a reset of context `old` (recover.c): new flags in the current context if the old ones
 * lived there (that memory went with the context). CUV_EBUSY while anything is armed. On failure
 * the reactor has no flags: arming fails (work falls back to host functions) until a later
 * rebuild allocates them. */
int cuv__reactor_rebuild(CUcontext old);
/* Whether anything is armed while the flags live in `ctx`: resetting ctx would free them under
 * the writes and the scans still to come (recover.c refuses then). */
bool cuv__reactor_flags_busy(CUcontext ctx);
/* Host-callback work the reactor probes for faults (a dead context never runs host functions). */
void cuv__reactor_watch(cuv__submission_t *sub);
void cuv__reactor_unwatch(cuv__submission_t *sub);

#endif
