/* tcp-infer: a loop's counters (GET /metrics renders them, metrics.c). */
#ifndef TCP_INFER_COUNTERS_H
#define TCP_INFER_COUNTERS_H

#include <stdint.h>

#include "histogram.h"

/* Why an inference request failed, Triton's reason label of nv_inference_request_failure:
 * refused before it ran (a queue full, shutting down, the submission refused), its client gone
 * before it ran, its GPU work failed or its worker was lost, and anything else (a KServe request
 * refused by the protocol's rules). */
typedef enum { FAIL_REJECTED, FAIL_CANCELED, FAIL_BACKEND, FAIL_OTHER, FAIL_REASONS } fail_reason_t;

/* Each loop's own counters: written by its thread, summed by GET /stats on any loop. */
typedef struct counters {
  _Atomic uint64_t connections_total;
  _Atomic uint64_t requests_total;
  _Atomic uint64_t responses_by_status[6]; /* 1xx .. 5xx at [1..5] */
  _Atomic uint64_t infer_rows_total;
  _Atomic uint64_t gpu_submitted, gpu_completed, gpu_failed;
  _Atomic uint64_t responses_dropped; /* the connection went away before its response was written */
  _Atomic uint64_t truncated;         /* connections closed in the middle of a request */
  _Atomic uint64_t parse_errors;
  _Atomic uint64_t refused;           /* the submission was refused (503) */
  /* --coalesce: batches submitted, the requests and rows in them, batches by log2(rows) */
  _Atomic uint64_t batches, batched_requests, batched_rows, batches_by_log2[17];
  _Atomic uint64_t batch_triggers[4]; /* by what made them leave (batch.c) */
  _Atomic unsigned batch_pending; /* gauge: requests in the pending batch */
  _Atomic unsigned open_conns, free_workspaces, waiting; /* gauges */
  _Atomic unsigned graphs; /* gauge, --graph: graphs captured and alive */
  /* GET /metrics, Triton's model metrics: inferences answered from GPU work that gave outputs
   * (success) or not, their rows; model executions (a request, or a batch) and their rows; the
   * inferences' durations summed in microseconds (metrics.c says what each covers) */
  _Atomic uint64_t infer_success, infer_failure[FAIL_REASONS], infer_rows_done, execs;
  _Atomic uint64_t request_us, queue_us, input_us, infer_us, output_us;
  /* streams.c: submissions that found a stream stalled (and went to another), streams added */
  _Atomic uint64_t stalled_picks, streams_added;
  /* conn.c, timeouts.c: connections refused (over --max-connections), accepts that failed (out of
   * descriptors), requests timed out in their head or body, idle connections closed */
  _Atomic uint64_t connections_refused, accept_errors, timeouts_head, timeouts_body, timeouts_idle;
  /* flow.c, conn.c: bytes the loop's connections hold (gauge), connections not read now for
   * want of room (gauge), and the times one stopped, by reason (queue, unsent, server) */
  _Atomic uint64_t buffered_bytes;
  _Atomic unsigned paused_conns;
  _Atomic uint64_t read_pauses[3];
  _Atomic uint64_t queue_rejected; /* route.c: inferences answered 503 over --max-queue-size */
  _Atomic uint64_t queue_timeouts; /* pool.c: answered 503, their timeout passed while queued */
  _Atomic uint64_t connections_refused_fds; /* accept.c: closed at once, out of descriptors */
  histogram_t latency, exec_rows;
} counters_t;

/* A model execution of `rows` rows started: a request, or a batch (loop thread). Inline: the
 * layers that run the model (infer.c, batch.c) count it without calling up into metrics.c. */
static inline void counters_exec(counters_t *n, unsigned rows) {
  n->execs++;
  histogram_observe(&n->exec_rows, HIST_ROWS, rows);
}

#endif
