/* tcp-infer --isolate: the worker metrics of GET /stats (any loop's thread), every one with the
 * cuv_ prefix: counters summed over the loops, gauges per loop (loop="N"). */
#include <stddef.h>
#include <string.h>

#include "isolate-metrics.h"
#include "isolate.h"

static void family(FILE *f, const char *name, const char *type, const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void total(FILE *f, const server_t *s, const char *name, const char *help,
                  size_t offset) {
  uint64_t sum = 0;
  for (unsigned i = 0; i < s->nloops; i++)
    if (loop_iso(&s->loops[i]))
      sum += *(_Atomic uint64_t *)((char *)loop_iso(&s->loops[i]) + offset);
  family(f, name, "counter", help);
  fprintf(f, "%s %llu\n", name, (unsigned long long)sum);
}

static double pid_of(const isolate_t *iso) { return iso->pid; }
static double ready_of(const isolate_t *iso) { return iso->ready; }
static double spare_pid_of(const isolate_t *iso) { return iso->spare_pid; }
static double spare_ready_of(const isolate_t *iso) { return iso->spare_ready; }
static double queued_of(const isolate_t *iso) { return iso->queued_gauge; }
static double behind_of(const isolate_t *iso) { return iso->reports_behind; }
static double last_exit_of(const isolate_t *iso) { return (double)iso->last_exit_unix_us / 1e6; }
static double recovery_of(const isolate_t *iso) { return (double)iso->last_recovery_us / 1e6; }

/* One gauge per loop: seconds to the microsecond, the rest (pids, flags, counts) as integers. */
static void per_loop(FILE *f, const server_t *s, const char *name, const char *help,
                     double (*value)(const isolate_t *)) {
  int decimals = strstr(name, "_seconds") ? 6 : 0;
  family(f, name, "gauge", help);
  for (unsigned i = 0; i < s->nloops; i++)
    if (loop_iso(&s->loops[i]))
      fprintf(f, "%s{loop=\"%u\"} %.*f\n", name, i, decimals, value(loop_iso(&s->loops[i])));
}

static void gauges(FILE *f, const server_t *s) {
  per_loop(f, s, "cuv_infer_worker_pid", "The loop's active worker process (0: none running).",
           pid_of);
  per_loop(f, s, "cuv_infer_worker_ready", "1 when the loop's active worker takes requests.",
           ready_of);
  per_loop(f, s, "cuv_infer_worker_spare_pid",
           "The loop's spare worker process (0: none; --isolate-spares).", spare_pid_of);
  per_loop(f, s, "cuv_infer_worker_spare_ready",
           "1 when the loop's spare is ready to take over at once.", spare_ready_of);
  per_loop(f, s, "cuv_infer_worker_queued", "Requests waiting for a ready worker.", queued_of);
  per_loop(f, s, "cuv_infer_worker_reports_behind",
           "Live workers whose latest report misses replies already read (the merged cuv_* and "
           "execution metrics lag behind them).", behind_of);
  per_loop(f, s, "cuv_infer_worker_last_exit_timestamp_seconds",
           "When the loop's active worker last failed (its fault report, or its end); 0: never.",
           last_exit_of);
  per_loop(f, s, "cuv_infer_worker_last_recovery_seconds",
           "From the loop's last worker failure to a ready successor taking requests.",
           recovery_of);
}

/* The counters, summed over the loops. */
static const struct counter {
  const char *name, *help;
  size_t offset;
} counters[] = {
    {"cuv_infer_worker_restarts_total",
     "Active workers replaced after one failed (by the spare, or by a new process).",
     offsetof(isolate_t, restarts)},
    {"cuv_infer_worker_promotions_total",
     "Replacements done by promoting a ready spare (no process start waited for).",
     offsetof(isolate_t, promotions)},
    {"cuv_infer_worker_fault_exits_total", "Workers that exited after a sticky device fault.",
     offsetof(isolate_t, fault_exits)},
    {"cuv_infer_worker_crashes_total",
     "Workers that ended otherwise (a signal such as kill -9, another exit status).",
     offsetof(isolate_t, crashes)},
    {"cuv_infer_worker_hangs_total",
     "Workers killed by the watchdog: a request unanswered for --isolate-timeout.",
     offsetof(isolate_t, hangs)},
    {"cuv_infer_worker_lost_requests_total",
     "Requests answered 503 because their worker ended before answering (past their deadline).",
     offsetof(isolate_t, lost)},
    {"cuv_infer_worker_start_timeouts_total",
     "Workers killed for not being ready --isolate-start-timeout after their start.",
     offsetof(isolate_t, start_timeouts)},
    {"cuv_infer_worker_replays_total",
     "Requests run again on another worker: theirs ended or faulted before answering.",
     offsetof(isolate_t, replays)},
    {"cuv_infer_worker_moved_total",
     "Requests moved to another worker after --hang-suspect-ms without an answer (a hang?), "
     "or off a stalled worker (--stall-suspect-ms).",
     offsetof(isolate_t, moved)},
    {"cuv_infer_worker_stalls_total",
     "Times a worker with requests outstanding answered none for --stall-suspect-ms: they "
     "moved to another worker.",
     offsetof(isolate_t, stalls)},
    {"cuv_infer_worker_late_replies_total",
     "Replies to requests moved off their worker that it sent after all (dropped: the worker "
     "they moved to answers them).",
     offsetof(isolate_t, late_replies)},
    {"cuv_infer_worker_expired_total",
     "Requests answered 503 because no worker was ready for them before --isolate-deadline-ms.",
     offsetof(isolate_t, expired)},
    {"cuv_infer_worker_refused_total",
     "Requests answered 503 because the queue for a worker was full.",
     offsetof(isolate_t, refused)},
};

void isolate_metrics(const server_t *s, FILE *f) {
  if (!s || !f || !s->isolate || !s->loops)
    return;
  for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
    total(f, s, counters[i].name, counters[i].help, counters[i].offset);
  gauges(f, s);
}

bool isolate_ready(const server_t *s) {
  if (!s || !s->loops)
    return false;
  for (unsigned i = 0; i < s->nloops; i++)
    if (!loop_iso(&s->loops[i]) || !loop_iso(&s->loops[i])->ready)
      return false;
  return true;
}

bool isolate_report(const server_t *s, report_words_t *words) {
  if (!s || !words || !s->isolate || !s->loops)
    return false;
  *words = (report_words_t){0};
  for (unsigned i = 0; i < s->nloops; i++)
    for (size_t k = 0; loop_iso(&s->loops[i]) && k < REPORT_WORDS; k++)
      words->w[k] += loop_iso(&s->loops[i])->reports[k];
  return true;
}
