#ifndef CUV_LIB_COMPLETION_H
#define CUV_LIB_COMPLETION_H

/* completion.c: how a submission's end is learned (inline spin, reactor, host function, blocking
 * wait). */

/* Arms the submission's completion (spin, reactor or host callback); it is then delivered to
 * sub->queue exactly once. */
void cuv__arm(cuv__submission_t *sub, bool may_spin);
/* Delivers the submission to its queue if no other path did (the first caller wins). */
void cuv__complete(cuv__submission_t *sub, int status, enum cuv__path path);
/* The end a cuv__sub_gate waited for came (any thread): the submission is delivered if its
 * stream's end came too. */
void cuv__complete_gate_open(cuv__submission_t *sub);
/* Blocks until the submission's work is done (inline spin, then a blocking wait). */
int cuv__wait_sync(cuv__submission_t *sub);
/* Blocks until what is enqueued on `stream` so far is done (an event recorded now: the spin
 * budget, then a blocking wait); 0 or the stream's error. */
int cuv__wait_point(cuv__submission_t *sub, cuv_stream_t *stream);

#endif
