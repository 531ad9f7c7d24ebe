#ifndef CUV_LIB_EXEC_H
#define CUV_LIB_EXEC_H

/* Schedules op and opens its submission in *ex, with `extra` bytes of the caller's in its block
 * (cuv__sub_extra); on failure op is consumed and nothing is open. */
int cuv__exec_begin(cuv_op_t *op, cuv_policy_t *policy, cuv_stream_t *stream, size_t extra,
                    cuv__exec_t *ex);
/* Enqueues the tree; the output lands in ex->sub->output, the status in ex->sub->status. */
void cuv__exec_run(cuv_op_t *op, cuv__exec_t *ex);
/* As cuv__exec_run, in its turn among the engine's jobs (on this thread, or on a submitter
 * thread while this one waits). */
void cuv__exec_run_blocking(cuv_op_t *op, cuv__exec_t *ex);

#endif
