/* tcp-infer's tests: a parser of the Prometheus text exposition format, version 0.0.4, strict
 * enough to refuse what a Prometheus server would (and a little more), so that the tests can say
 * GET /metrics parses:
 *  - lines end in \n, the last one too; `# HELP name text` and `# TYPE name type` at most once per
 *    name, TYPE before the name's first sample, type one of counter, gauge, histogram, summary,
 *    untyped; other # lines are comments;
 *  - samples `name{label="value",...} value [timestamp]`: names and label names of the allowed
 *    characters, label values with their three escapes, no label twice, values as Go's
 *    ParseFloat reads them (NaN, +Inf, -Inf too), no series twice;
 *  - a family's samples in one group; a counter's values not negative;
 *  - a histogram's series (per label set without le): _bucket samples with le increasing to
 *    +Inf, counts not decreasing, _count equal to the +Inf bucket, a _sum.
 * The samples are kept for the tests to read. */
#ifndef TCP_INFER_TESTS_PROM_H
#define TCP_INFER_TESTS_PROM_H

#include <stddef.h>

typedef struct prom_sample {
  char name[128];
  char labels[256]; /* as written between the braces, "" without */
  double value;
} prom_sample_t;

typedef struct prom {
  prom_sample_t *samples;
  size_t n;
  char error[200]; /* why prom_parse refused the text: the line and the rule */
} prom_t;

/* 0, or -1 with p->error. Free p either way. */
int prom_parse(prom_t *p, const char *text, size_t len);
void prom_free(prom_t *p);
/* The sample of that name and labels ("" for none); NULL when there is none. */
const prom_sample_t *prom_find(const prom_t *p, const char *name, const char *labels);

#endif
