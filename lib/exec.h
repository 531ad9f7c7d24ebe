#ifndef CUV_LIB_EXEC_H
#define CUV_LIB_EXEC_H

/* Schedules op and opens its submission in *ex; on failure op is consumed and nothing is open. */
int cuv__exec_begin(cuv_op_t *op, cuv_policy_t *policy, cuv_stream_t *stream, cuv__exec_t *ex);
/* completion.c: blocks until the submission's work is done (inline spin, then a blocking wait). */
int cuv__wait_sync(cuv__submission_t *sub);

#endif
