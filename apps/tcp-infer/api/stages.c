/* tcp-infer: the stage timeline (stages.h). A loop's samples are whole microseconds per stage,
 * kept until exit in arrays that grow by doubling; the report sorts them. */
#include <stdio.h>
#include <stdlib.h>

#include "server.h"
#include "stages.h"

/* The stages, in order, each the time between two of a request's instants. */
enum { IN_TO_BEGAN, BUILD, CALL, TO_THREAD, DRIVER, GPU, TO_CALLBACK, TO_WRITTEN, TOTAL, STAGES };

static const char *const stage_names[STAGES] = {
    "message in -> its GPU work began (waiting for a workspace)",
    "the op's building, until cuv_uv_submit",
    "cuv_uv_submit's call, until it returned",
    "cuv_submit -> a thread began the driver calls",
    "the driver calls (enqueueing)",
    "the GPU, until cuv saw it finish",
    "seen finished -> the callback on the loop",
    "the callback -> the response handed to the writes",
    "total: message in -> response handed to the writes",
};

struct stage_log {
  unsigned seen; /* requests offered for sampling */
  size_t n, cap;
  uint32_t *us[STAGES];
};

static uint32_t us_between(uint64_t from, uint64_t to) {
  return to > from ? (uint32_t)((to - from) / 1000) : 0;
}

stage_times_t *stages_sample(loop_t *lp) {
  unsigned every = lp->srv->stage_sample;
  if (!every)
    return NULL;
  if (!lp->stages && !(lp->stages = calloc(1, sizeof *lp->stages)))
    return NULL;
  if (lp->stages->seen++ % every != 0)
    return NULL;
  return calloc(1, sizeof(stage_times_t));
}

static bool grow(stage_log_t *log) {
  size_t cap = log->cap ? log->cap * 2 : 256;
  for (int s = 0; s < STAGES; s++) {
    uint32_t *grown = realloc(log->us[s], cap * sizeof *grown);
    if (!grown)
      return false;
    log->us[s] = grown;
  }
  log->cap = cap;
  return true;
}

void stages_written(loop_t *lp, stage_times_t *st) {
  if (!st)
    return;
  st->written = uv_hrtime();
  stage_log_t *log = lp->stages;
  if (log && (log->n < log->cap || grow(log))) {
    const cuv_trace_t *c = &st->cuv;
    uint64_t at[] = {st->in, st->began, c->submitted_ns, st->returned};
    size_t i = log->n++;
    log->us[IN_TO_BEGAN][i] = us_between(at[0], at[1]);
    log->us[BUILD][i] = us_between(at[1], at[2]);
    log->us[CALL][i] = us_between(at[2], at[3]);
    log->us[TO_THREAD][i] = us_between(c->submitted_ns, c->started_ns);
    log->us[DRIVER][i] = us_between(c->started_ns, c->enqueued_ns);
    log->us[GPU][i] = us_between(c->enqueued_ns, c->completed_ns);
    log->us[TO_CALLBACK][i] = us_between(c->completed_ns, c->called_ns);
    log->us[TO_WRITTEN][i] = us_between(c->called_ns, st->written);
    log->us[TOTAL][i] = us_between(st->in, st->written);
  }
  free(st);
}

void stages_discard(stage_times_t *st) { free(st); }

static int by_value(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* One stage's samples over every loop, sorted; NULL when none or without memory. */
static uint32_t *gather(const server_t *s, int stage, size_t *n) {
  size_t total = 0;
  for (unsigned i = 0; i < s->nloops; i++)
    total += s->loops[i].stages ? s->loops[i].stages->n : 0;
  uint32_t *all = total ? malloc(total * sizeof *all) : NULL;
  *n = 0;
  for (unsigned i = 0; all && i < s->nloops; i++)
    for (size_t k = 0; s->loops[i].stages && k < s->loops[i].stages->n; k++)
      all[(*n)++] = s->loops[i].stages->us[stage][k];
  if (all)
    qsort(all, *n, sizeof *all, by_value);
  return all;
}

void stages_report(const server_t *s) {
  for (int stage = 0; stage < STAGES; stage++) {
    size_t n;
    uint32_t *all = gather(s, stage, &n);
    if (!all)
      return;
    if (stage == 0)
      printf("tcp-infer: stage timeline of %zu sampled requests (1 in %u), us: median p99\n", n,
             s->stage_sample);
    printf("  %8u %8u  %s\n", all[n / 2], all[n - 1 - n / 100], stage_names[stage]);
    free(all);
  }
}

void stages_loop_free(loop_t *lp) {
  if (!lp->stages)
    return;
  for (int s = 0; s < STAGES; s++)
    free(lp->stages->us[s]);
  free(lp->stages);
  lp->stages = NULL;
}
