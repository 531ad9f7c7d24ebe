/* tcp-infer: Prometheus histograms that one thread observes into and any thread reads (GET
 * /metrics sums the loops', and a worker process's arrive in its reports). A histogram counts
 * observations per bucket (not cumulated: each in the first bucket whose bound holds it, the last
 * bucket being +Inf), their number and their sum, in whole units of its kind. */
#ifndef TCP_INFER_HISTOGRAM_H
#define TCP_INFER_HISTOGRAM_H

#include <stdint.h>
#include <stdio.h>

#define HIST_BUCKETS 18 /* bounds of every kind, and +Inf */

typedef enum {
  HIST_LATENCY, /* microseconds: 100 us to 10 s, in steps of 1, 2.5, 5; rendered in seconds */
  HIST_ROWS,    /* rows: 1, 2, 4 ... 65536 */
} hist_kind_t;

typedef struct histogram {
  _Atomic uint64_t buckets[HIST_BUCKETS];
  _Atomic uint64_t count, sum;
} histogram_t;

/* A histogram's values, summed over several (plain numbers, for rendering). */
typedef struct hist_sum {
  uint64_t buckets[HIST_BUCKETS];
  uint64_t count, sum;
} hist_sum_t;

/* One observation (the observing thread only). */
void histogram_observe(histogram_t *h, hist_kind_t kind, uint64_t v);
/* Adds h's values to *s (any thread). */
void histogram_add(hist_sum_t *s, const histogram_t *h);
/* Its HELP and TYPE lines and samples: name_bucket{labels,le="..."} cumulated, name_sum,
 * name_count. labels: "" or `a="b",c="d"`. */
void histogram_render(FILE *f, const char *name, const char *help, const char *labels,
                      hist_kind_t kind, const hist_sum_t *s);

#endif
