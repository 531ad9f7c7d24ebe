/* tcp-infer --isolate: what a worker process reports to the front (a FRAME_ROWS_STATS frame,
 * frames.h) a few times a second, so that GET /metrics shows the GPU work the workers did: its
 * cuv_stats() and its loop's model executions. The front keeps each live worker's latest report
 * and the last ones of the workers that ended, and publishes their sum (isolate.c). */
#ifndef TCP_INFER_REPORT_H
#define TCP_INFER_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include <cuv.h>

#include "frames.h"
#include "histogram.h"

typedef struct worker_report {
  cuv_stats_t cuv;
  uint64_t execs;                        /* model executions: requests, or batches */
  uint64_t batch_rows[HIST_BUCKETS + 2]; /* their rows: a histogram's buckets, count, sum */
  uint64_t batches, batched_requests, batched_rows; /* --coalesce's batches */
  uint64_t replies; /* reply frames written before this report: the front compares them with
                     * those it read, to tell whether the report counts all the work it saw */
  uint64_t stalled_picks, streams_added; /* streams.c's */
  uint64_t graphs;                       /* --graph: its graphs captured and alive (a gauge) */
} worker_report_t;

#define REPORT_WORDS (FRAME_STATS_BYTES / sizeof(uint64_t))
_Static_assert(sizeof(worker_report_t) <= FRAME_STATS_BYTES, "a report fits its frame");
_Static_assert(sizeof(worker_report_t) % sizeof(uint64_t) == 0, "a report is 64-bit words");

/* A report as the words that travel and are summed. */
typedef union report_words {
  worker_report_t r;
  uint64_t w[REPORT_WORDS];
} report_words_t;

/* The words that are gauges (a live worker's value now, not summed over ended ones). */
static inline int report_word_is_gauge(size_t word) {
  return word == offsetof(worker_report_t, cuv.in_flight) / sizeof(uint64_t) ||
         word == offsetof(worker_report_t, cuv.reactor_waiting) / sizeof(uint64_t) ||
         word == offsetof(worker_report_t, graphs) / sizeof(uint64_t);
}

#endif
