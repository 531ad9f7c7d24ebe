#ifndef CUV_LIB_HAZARD_H
#define CUV_LIB_HAZARD_H

/* hazard.c: the buffer accesses in flight, and the orders between streams they call for. */

/* Holds a reference on buf in the submission and records the access; an access that conflicts
 * with one in flight on another stream is ordered after it (an event wait), or refused with
 * CUV_ECONFLICT in strict mode. Call before enqueuing the access. */
int cuv__hold_buffer(cuv__exec_t *ex, cuv_buffer_t *buf, enum cuv_arg_kind access);
/* The same for a buffer the executing stream reaches on another device (a peer copy's): its
 * access is recorded on that stream, and ordering against the buffer's own device's streams
 * uses events across contexts. Also for a buffer of the stream's own device. */
int cuv__hold_buffer_peer(cuv__exec_t *ex, cuv_buffer_t *buf, enum cuv_arg_kind access);
/* cuv__hold_buffer for a caller that keeps a reference to buf until the submission retires (an
 * op node that retires with it, op.h): a buffer that tracks nothing then needs no hold at all, so
 * its count is never touched by the submitter thread executing the op. */
int cuv__hold_buffer_kept(cuv__exec_t *ex, cuv_buffer_t *buf, enum cuv_arg_kind access);
/* For graph.c: while `capture` executes into a stream capture on this thread, its buffer
 * accesses are noted in *uses (each buffer once, with the strongest access) instead of being
 * ordered and tracked; each replay holds them again with cuv__hazard_replay. */
typedef struct cuv__uses cuv__uses_t;
int cuv__hazard_capture_begin(cuv__submission_t *capture, cuv__uses_t **uses);
void cuv__hazard_capture_end(void);
/* Whether `sub` is the capture this thread is executing (its work runs only when launched). */
bool cuv__hazard_capturing(const cuv__submission_t *sub);
int cuv__hazard_replay(cuv__exec_t *ex, const cuv__uses_t *uses);
void cuv__hazard_uses_free(cuv__uses_t *uses);
/* The noted buffers: how many, and the i-th with its access (for the engine's conflicts). */
size_t cuv__hazard_uses_count(const cuv__uses_t *uses);
const cuv_buffer_t *cuv__hazard_uses_get(const cuv__uses_t *uses, size_t i, bool *write);

#endif
