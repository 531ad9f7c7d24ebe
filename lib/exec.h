#ifndef CUV_LIB_EXEC_H
#define CUV_LIB_EXEC_H

/* Schedules op and opens its submission in *ex; on failure op is consumed and nothing is open. */
int cuv__exec_begin(cuv_op_t *op, cuv_policy_t *policy, cuv_stream_t *stream, cuv__exec_t *ex);
/* completion.c: arms the submission's completion (spin, reactor or host callback); it is then
 * delivered to sub->queue exactly once. */
void cuv__arm(cuv__submission_t *sub, bool may_spin);
/* Delivers the submission to its queue if no other path did (the first caller wins). */
void cuv__complete(cuv__submission_t *sub, int status, enum cuv__path path);
/* completion.c: blocks until the submission's work is done (inline spin, then a blocking wait). */
int cuv__wait_sync(cuv__submission_t *sub);

#endif
