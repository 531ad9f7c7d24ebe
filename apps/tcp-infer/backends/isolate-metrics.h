/* tcp-infer: --isolate, the front's metrics (isolate-metrics.c) */
#ifndef TCP_INFER_ISOLATE_METRICS_H
#define TCP_INFER_ISOLATE_METRICS_H

#include <stdio.h>

#include "server.h"

/* GET /stats (any thread): the worker metrics, summed over the loops. */
void isolate_metrics(const server_t *s, FILE *f);
/* Any thread: whether every loop's active worker is ready (KServe's readiness). */
bool isolate_ready(const server_t *s);
/* Any thread: the workers' reports, summed over the loops (the live workers' latest and the
 * ended ones' last; report.h), into *words; false without --isolate. */
bool isolate_report(const server_t *s, union report_words *words);

#endif
