#ifndef CUV_LIB_CROSS_H
#define CUV_LIB_CROSS_H

/* cross.c: parts of an op tree that run on other streams than the executing one (fork branches,
 * ops of another device), forked from it and joined back. Each returns with the executing
 * stream's context current. */

/* A stream of device `ordinal` (not the executing stream's) for a part of the tree: from the
 * executor's policy when it serves that device, else from the device's default policy. The
 * submission holds the device until it retires. CUV_EDEVICE when the submission was not made
 * for that device (an op a then or with_context callback returned). */
int cuv__cross_stream(cuv__exec_t *ex, int ordinal, cuv_stream_t **stream);
/* The fork point: `stream` (counted in flight for the submission) waits for what the executing
 * stream enqueued so far. Nothing for the executing stream itself. */
int cuv__cross_fork(cuv__exec_t *ex, cuv_stream_t *stream);
/* Executes and consumes op on `stream`, with its device's context current. */
int cuv__cross_run(cuv__exec_t *ex, cuv_stream_t *stream, cuv_op_t *op, cuv_output_t *out);
/* The join: the executing stream waits for `stream`, also after a failure on it (what it
 * enqueued must finish before the submission's holds go). */
int cuv__cross_join(cuv__exec_t *ex, cuv_stream_t *stream);
/* Executes and consumes op where it belongs: on the executing stream, or, for an op of another
 * device, on a stream of that device forked from it and joined back. */
int cuv__run(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out);

#endif
