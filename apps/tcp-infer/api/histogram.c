/* tcp-infer: the histograms of GET /metrics (histogram.h). */
#include "histogram.h"

static const uint64_t latency_us[HIST_BUCKETS - 1] = {
    100,    250,    500,     1000,    2500,    5000,    10000,   25000,
    50000,  100000, 250000,  500000,  1000000, 2500000, 5000000, 10000000,
    20000000};

/* The rows' bounds, powers of two: a table, not made again at each observation (two per
 * request, about 130 instructions each, bench/tcp-infer-callgrind.sh). */
static const uint64_t rows_le[HIST_BUCKETS - 1] = {
    1u << 0, 1u << 1, 1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7, 1u << 8,
    1u << 9, 1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15, 1u << 16};

static const uint64_t *bounds(hist_kind_t kind) {
  return kind == HIST_LATENCY ? latency_us : rows_le;
}

void histogram_observe(histogram_t *h, hist_kind_t kind, uint64_t v) {
  const uint64_t *b = bounds(kind);
  unsigned i = 0;
  while (i < HIST_BUCKETS - 1 && v > b[i])
    i++;
  h->buckets[i]++;
  h->count++;
  h->sum += v;
}

void histogram_add(hist_sum_t *s, const histogram_t *h) {
  for (unsigned i = 0; i < HIST_BUCKETS; i++)
    s->buckets[i] += h->buckets[i];
  s->sum += h->sum;
  s->count += h->count;
}

void histogram_render(FILE *f, const char *name, const char *help, const char *labels,
                      hist_kind_t kind, const hist_sum_t *s) {
  const uint64_t *b = bounds(kind);
  double scale = kind == HIST_LATENCY ? 1e-6 : 1.0;
  const char *sep = labels[0] ? "," : "";
  fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  uint64_t cumulated = 0;
  for (unsigned i = 0; i < HIST_BUCKETS; i++) {
    cumulated += s->buckets[i];
    if (i < HIST_BUCKETS - 1)
      fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, (double)b[i] * scale,
              (unsigned long long)cumulated);
    else
      fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
              (unsigned long long)cumulated);
  }
  const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
  if (kind == HIST_LATENCY)
    fprintf(f, "%s_sum%s%s%s %.6f\n", name, open, labels, close, (double)s->sum * scale);
  else
    fprintf(f, "%s_sum%s%s%s %llu\n", name, open, labels, close, (unsigned long long)s->sum);
  fprintf(f, "%s_count%s%s%s %llu\n", name, open, labels, close, (unsigned long long)cumulated);
}
