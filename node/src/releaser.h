/* The releaser: one thread of the process that drops the device-buffer references the JavaScript
 * threads let go of (a DeviceBuffer disposed or collected). The last reference frees the memory
 * with cuMemFree, which waits until the device ran all the work queued on it (the simulator
 * does, and the driver may): on a JavaScript thread, a collection while a long kernel ran held
 * every Promise, timer and I/O callback of that thread until the kernel ended
 * (test/inflight.test.js, whose refused call then rejected only after the gate's timeout).
 * Nothing waits for this thread.
 *
 * One thread for the process, not one per environment: a DeviceBuffer may be finalized after its
 * environment's state is gone (handles.h). It starts at the first reference handed over and ends
 * with the process; a reference it still holds then goes with the process, as its memory does.
 * Without memory for the hand-off or without the thread, the caller drops the reference itself,
 * as before. */
#ifndef CUV_NODE_RELEASER_H
#define CUV_NODE_RELEASER_H

#include <stdint.h>

#include <cuv.h>

/* Drops buf's reference (NULL: nothing) on the releaser thread. Any thread. */
void cuv_node_release_buffer(cuv_buffer_t *buf);
/* References handed over and not yet dropped (tests read it: cuv.stats().releasing). */
uint64_t cuv_node_releasing(void);

#endif
