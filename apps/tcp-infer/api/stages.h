/* tcp-infer: the stage timeline (--stage-sample N). One request in N, of those whose GPU work
 * goes through cuv one request per submission (the cuv modes, graphs or not), carries the times of
 * its stages from its message's arrival to its response's write, cuv's own among them
 * (cuv_trace_t). Each loop keeps its samples; the server prints each stage's median and p99 at
 * exit. Off (0) by default: nothing is read or kept then. */
#ifndef TCP_INFER_STAGES_H
#define TCP_INFER_STAGES_H

#include <stdint.h>

#include <cuv.h>

typedef struct loop loop_t;
typedef struct server server_t;
typedef struct stage_log stage_log_t; /* a loop's samples (stages.c) */

typedef struct stage_times {
  uint64_t in;       /* uv_hrtime: the request's message was in (request_t.t_begin) */
  uint64_t began;    /* its GPU work began: the op's building (t_start) */
  uint64_t returned; /* cuv_uv_submit returned */
  uint64_t written;  /* its response was handed to the connection's writes */
  cuv_trace_t cuv;   /* what cuv filled in (cuv_submit_opts_t.trace) */
} stage_times_t;

/* A new record when this request is sampled (every N-th of the loop's), else NULL. */
stage_times_t *stages_sample(loop_t *lp);
/* The response was written: the record joins the loop's samples and is freed. */
void stages_written(loop_t *lp, stage_times_t *st);
/* A request that never got to its write (refused, failed, its connection gone). */
void stages_discard(stage_times_t *st);
/* Prints every stage's median and p99 over all loops' samples (nothing when none). */
void stages_report(const server_t *s);
void stages_loop_free(loop_t *lp);

#endif
