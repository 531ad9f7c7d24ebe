/* tcp-infer: GET /metrics (and its alias GET /stats), in the Prometheus text exposition format
 * (version 0.0.4): cuv_stats() as cuv_* metrics, Triton's model metrics (nv_inference_*, with the
 * model's labels), histograms of the inference latency and of the rows per model execution, and
 * the server's own counters as cuv_infer_*. With --isolate, the workers' reports (report.h) are
 * added in: their cuv_stats() and their model executions, which the front does not see.
 *
 * Triton's durations, per inference, in microseconds, as this server can tell them apart:
 *   request         from its whole message (a KServe body before its JSON is read) to its response
 *   queue           waiting for a workspace, a batch or a worker process (from the message to the
 *                   start of its GPU work)
 *   compute_input   its input made ready on the host: KServe's JSON read, the op built and
 *                   enqueued (the submission's own time on the loop thread)
 *   compute_infer   from the submission to the completion proven by cuv (the GPU's work, the
 *                   upload and the download included; --isolate: the worker's whole round trip)
 *   compute_output  from the completion to its response made (KServe: its JSON written) */
#include <stdio.h>
#include <stdlib.h>

#include "report.h"
#include "batch.h"
#include "isolate-metrics.h"
#include "metrics.h"
#include "nvml.h"
#include "server.h"

#define MODEL_LABELS "model=\"mlp\",version=\"1\""

static void metric(FILE *f, const char *name, const char *type, const char *help, uint64_t v) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name,
          (unsigned long long)v);
}

/* A family with one label: the HELP and TYPE lines once, then one sample per label value. */
static void family(FILE *f, const char *name, const char *type, const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(FILE *f, const char *name, const char *label, const char *value, uint64_t v) {
  fprintf(f, "%s{%s=\"%s\"} %llu\n", name, label, value, (unsigned long long)v);
}

/* The loops' counters, summed. */
typedef struct totals {
  uint64_t connections_total, requests_total, responses_by_status[6], infer_rows_total;
  uint64_t gpu_submitted, gpu_completed, gpu_failed, responses_dropped, truncated, parse_errors;
  uint64_t open_conns, free_workspaces, waiting, graphs;
  uint64_t success, failure[FAIL_REASONS], rows_done, execs, pending;
  uint64_t request_us, queue_us, input_us, infer_us, output_us;
  uint64_t stalled_picks, streams_added;
  uint64_t refused_conns, refused_fds, accept_errors, timeouts[3]; /* head, body, idle */
  uint64_t buffered, paused, read_pauses[3]; /* flow control (http/flow.c) */
  uint64_t queue_rejected;                   /* --max-queue-size (route.c) */
  uint64_t queue_timeouts;                   /* parameters.timeout (pool.c) */
  hist_sum_t latency, exec_rows;
} totals_t;

static void sum_triton(const counters_t *n, totals_t *t) {
  t->success += n->infer_success;
  for (int k = 0; k < FAIL_REASONS; k++)
    t->failure[k] += n->infer_failure[k];
  t->pending += n->waiting + n->batch_pending;
  t->rows_done += n->infer_rows_done;
  t->execs += n->execs;
  t->request_us += n->request_us;
  t->queue_us += n->queue_us;
  t->input_us += n->input_us;
  t->infer_us += n->infer_us;
  t->output_us += n->output_us;
  histogram_add(&t->latency, &n->latency);
  histogram_add(&t->exec_rows, &n->exec_rows);
  t->stalled_picks += n->stalled_picks;
  t->streams_added += n->streams_added;
  t->refused_conns += n->connections_refused;
  t->accept_errors += n->accept_errors;
  t->refused_fds += n->connections_refused_fds;
  t->timeouts[0] += n->timeouts_head;
  t->timeouts[1] += n->timeouts_body;
  t->timeouts[2] += n->timeouts_idle;
  t->buffered += n->buffered_bytes;
  t->paused += n->paused_conns;
  for (int i = 0; i < 3; i++)
    t->read_pauses[i] += n->read_pauses[i];
  t->queue_rejected += n->queue_rejected;
  t->queue_timeouts += n->queue_timeouts;
}

/* Flow control (http/flow.c): what the connections hold, the connections not read for it; the
 * inferences the queue policy refused (route.c). */
static void flow_metrics(FILE *f, const server_t *s, const totals_t *n) {
  metric(f, "cuv_infer_buffered_bytes", "gauge",
         "Bytes the connections hold: request bodies, answers, responses unsent, input kept.",
         n->buffered);
  metric(f, "cuv_infer_buffered_limit_bytes", "gauge",
         "Bytes held before only connections that hold nothing are read (--max-buffered).",
         s->max_buffered);
  metric(f, "cuv_infer_connections_paused", "gauge",
         "Connections not read now: their requests queued, responses unsent, or the server's cap.",
         n->paused);
  family(f, "cuv_infer_read_pauses_total", "counter",
         "Times a connection stopped being read, by the limit it reached.");
  static const char *const reasons[] = {"queue", "unsent", "server"};
  for (int i = 0; i < 3; i++)
    sample(f, "cuv_infer_read_pauses_total", "reason", reasons[i], n->read_pauses[i]);
  metric(f, "cuv_infer_queue_rejected_total", "counter",
         "Inferences answered 503 at once: the queue for a workspace was full (--max-queue-size).",
         n->queue_rejected);
  metric(f, "cuv_infer_queue_timeouts_total", "counter",
         "Inferences answered 503 \"Request timeout expired\": their parameters.timeout passed "
         "while they waited for a workspace (also nv_inference_request_failure REJECTED).",
         n->queue_timeouts);
}

/* The limits of a server on a network: the connection cap, refusals, timeouts (timeouts.c). */
static void limit_metrics(FILE *f, const server_t *s, const totals_t *n) {
  metric(f, "cuv_infer_connections_limit", "gauge",
         "Connections at most (--max-connections, under the descriptor limit).",
         s->max_connections);
  metric(f, "cuv_infer_connections_refused_total", "counter",
         "Connections answered 503 at once: over the limit.", n->refused_conns);
  metric(f, "cuv_infer_connections_refused_fds_total", "counter",
         "Connections closed at once, a 503 line sent if the socket took it: out of descriptors "
         "(accepted with the one kept in reserve).", n->refused_fds);
  metric(f, "cuv_infer_accept_errors_total", "counter",
         "Accepts that failed for another reason, or out of descriptors with none in reserve.",
         n->accept_errors);
  family(f, "cuv_infer_timeouts_total", "counter",
         "Requests answered 408 (their head or body too slow) and idle connections closed.");
  static const char *const stages[] = {"head", "body", "idle"};
  for (int i = 0; i < 3; i++)
    sample(f, "cuv_infer_timeouts_total", "stage", stages[i], n->timeouts[i]);
}

static void sum(const server_t *s, totals_t *t) {
  *t = (totals_t){0};
  for (unsigned i = 0; i < s->nloops; i++) {
    const counters_t *n = &s->loops[i].n;
    t->connections_total += n->connections_total;
    t->requests_total += n->requests_total;
    for (int k = 0; k < 6; k++)
      t->responses_by_status[k] += n->responses_by_status[k];
    t->infer_rows_total += n->infer_rows_total;
    /* completions before submissions, so that in-flight = submitted - completed never wraps */
    t->gpu_completed += n->gpu_completed;
    t->gpu_failed += n->gpu_failed;
    t->gpu_submitted += n->gpu_submitted;
    t->responses_dropped += n->responses_dropped;
    t->truncated += n->truncated;
    t->parse_errors += n->parse_errors;
    t->open_conns += n->open_conns;
    t->free_workspaces += n->free_workspaces;
    t->waiting += n->waiting;
    t->graphs += n->graphs;
    sum_triton(n, t);
  }
}

/* --isolate: the workers' reports added in (their cuv_stats, their model executions). */
static void add_workers(const server_t *s, cuv_stats_t *st, totals_t *t) {
  report_words_t w;
  if (!isolate_report(s, &w))
    return;
  uint64_t *to = (uint64_t *)(void *)st;
  const uint64_t *from = (const uint64_t *)(const void *)&w.r.cuv;
  for (size_t i = 0; i < sizeof *st / sizeof(uint64_t); i++)
    to[i] += from[i];
  t->execs += w.r.execs;
  for (unsigned i = 0; i < HIST_BUCKETS; i++)
    t->exec_rows.buckets[i] += w.r.batch_rows[i];
  t->exec_rows.count += w.r.batch_rows[HIST_BUCKETS];
  t->exec_rows.sum += w.r.batch_rows[HIST_BUCKETS + 1];
  t->stalled_picks += w.r.stalled_picks;
  t->streams_added += w.r.streams_added;
  t->graphs += w.r.graphs;
}

/* One of Triton's per-model metrics. */
static void triton(FILE *f, const char *name, const char *help, uint64_t v) {
  fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s{" MODEL_LABELS "} %llu\n", name, help, name,
          name, (unsigned long long)v);
}

/* nv_inference_request_failure by Triton's reasons (its labels in Triton's order). */
static void triton_failures(FILE *f, const totals_t *n) {
  static const char *const reasons[FAIL_REASONS] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};
  family(f, "nv_inference_request_failure", "counter",
         "Inference requests that failed, by reason: REJECTED refused before running (a queue "
         "full, shutting down), CANCELED their client gone before they ran, BACKEND their GPU "
         "work failed or their worker was lost, OTHER refused by the protocol's rules.");
  for (int k = 0; k < FAIL_REASONS; k++)
    fprintf(f, "nv_inference_request_failure{model=\"mlp\",reason=\"%s\",version=\"1\"} %llu\n",
            reasons[k], (unsigned long long)n->failure[k]);
}

static void triton_metrics(FILE *f, const totals_t *n) {
  triton(f, "nv_inference_request_success", "Inference requests whose GPU work gave outputs.",
         n->success);
  triton_failures(f, n);
  fprintf(f, "# HELP nv_inference_pending_request_count Inference requests complete and waiting "
             "to execute: for a workspace, in a pending batch, for a worker process.\n"
             "# TYPE nv_inference_pending_request_count gauge\n"
             "nv_inference_pending_request_count{" MODEL_LABELS "} %llu\n",
          (unsigned long long)n->pending);
  triton(f, "nv_inference_count", "Inferences performed (rows of the successful requests).",
         n->rows_done);
  triton(f, "nv_inference_exec_count", "Model executions (a request, or a batch of them).",
         n->execs);
  triton(f, "nv_inference_request_duration_us",
         "Inference requests' durations, from the whole message to the response, summed (us).",
         n->request_us);
  triton(f, "nv_inference_queue_duration_us",
         "Time inference requests waited for a workspace, batch or worker, summed (us).",
         n->queue_us);
  triton(f, "nv_inference_compute_input_duration_us",
         "Time spent making inputs ready on the host (reading, building, enqueueing) (us).",
         n->input_us);
  triton(f, "nv_inference_compute_infer_duration_us",
         "Time from submission to proven completion of the GPU work, summed (us).",
         n->infer_us);
  triton(f, "nv_inference_compute_output_duration_us",
         "Time from completion to the response made, summed (us).", n->output_us);
  histogram_render(f, "cuv_infer_request_duration_seconds",
                   "Inference requests' latency, from the whole message to the response.",
                   MODEL_LABELS, HIST_LATENCY, &n->latency);
  histogram_render(f, "cuv_infer_exec_rows", "Rows per model execution (the batch size).",
                   MODEL_LABELS, HIST_ROWS, &n->exec_rows);
}

static uint64_t us(uint64_t from, uint64_t to) { return to > from ? (to - from) / 1000 : 0; }

void metrics_request_done(loop_t *lp, const request_t *req) {
  if (!lp || !req || !route_runs_model(req->route) || !req->t_begin)
    return;
  counters_t *n = &lp->n;
  uint64_t now = uv_hrtime(), done = req->t_done ? req->t_done : now;
  uint64_t start = req->t_start ? req->t_start : done; /* never started: all queue */
  uint64_t submitted = req->t_submitted ? req->t_submitted : start;
  if (req->gpu_status == 0) {
    n->infer_success++;
    n->infer_rows_done += req->batch;
    gpu_t *g = req->gpu ? req->gpu : lp->gpu; /* --isolate's front: its loop's workers' */
    g->requests++;
    g->rows += req->batch;
  } else {
    n->infer_failure[req->rejected ? FAIL_REJECTED : FAIL_BACKEND]++;
  }
  n->request_us += us(req->t_begin, now);
  n->queue_us += us(req->t_begin + req->input_ns, start);
  n->input_us += req->input_ns / 1000 + us(start, submitted);
  n->infer_us += us(submitted, done);
  n->output_us += us(done, now);
  histogram_observe(&n->latency, HIST_LATENCY, us(req->t_begin, now));
}

void metrics_request_canceled(loop_t *lp, const request_t *req) {
  if (lp && req && route_runs_model(req->route) && req->t_begin)
    lp->n.infer_failure[FAIL_CANCELED]++;
}

void metrics_request_refused(loop_t *lp, const request_t *req) {
  if (lp && req && route_runs_model(req->route))
    lp->n.infer_failure[FAIL_OTHER]++;
}

/* Per device (label device="N", the index among those serving): how the balance went. */
typedef enum { DEV_REQUESTS, DEV_ROWS, DEV_STOLEN, DEV_CONNECTIONS, DEV_BUSY } dev_value_t;

static uint64_t dev_value(const gpu_t *g, dev_value_t k) {
  switch (k) {
  case DEV_REQUESTS: return g->requests;
  case DEV_ROWS: return g->rows;
  case DEV_STOLEN: return g->stolen;
  case DEV_CONNECTIONS: return g->connections;
  default: return g->busy;
  }
}

static void dev_family(FILE *f, const server_t *s, const char *name, const char *type,
                       const char *help, dev_value_t k) {
  family(f, name, type, help);
  for (unsigned i = 0; i < s->ndevices; i++) {
    char d[16];
    snprintf(d, sizeof d, "%u", i);
    sample(f, name, "device", d, dev_value(&s->gpus[i], k));
  }
}

static void device_metrics(FILE *f, const server_t *s) {
  metric(f, "cuv_infer_devices", "gauge", "Devices serving (--devices).", s->ndevices);
  dev_family(f, s, "cuv_infer_device_requests_total", "counter",
             "Inference requests answered with outputs from the device's GPU work.", DEV_REQUESTS);
  dev_family(f, s, "cuv_infer_device_rows_total", "counter", "Rows of those requests.", DEV_ROWS);
  dev_family(f, s, "cuv_infer_device_stolen_total", "counter",
             "Executions (requests, or batches) the device ran for another device's loops "
             "(--balance steal).", DEV_STOLEN);
  dev_family(f, s, "cuv_infer_device_connections_total", "counter",
             "Connections the device's loops accepted (the kernel's SO_REUSEPORT hash).",
             DEV_CONNECTIONS);
  dev_family(f, s, "cuv_infer_device_busy", "gauge", "The device's workspaces in use now.",
             DEV_BUSY);
}

char *metrics_render(const server_t *s, size_t *len) {
  char *text = NULL;
  FILE *f = open_memstream(&text, len);
  if (!f)
    return NULL;
  cuv_stats_t st;
  cuv_stats(&st);
  totals_t total, *n = &total;
  sum(s, n);
  add_workers(s, &st, n);

  metric(f, "cuv_submitted_total", "counter", "Executions cuv accepted (submit, sync, enqueue).",
         st.submitted);
  metric(f, "cuv_completed_total", "counter", "Submissions proven complete.", st.completed);
  family(f, "cuv_completed_by_path_total", "counter",
         "Submissions proven complete, by the path that proved it.");
  sample(f, "cuv_completed_by_path_total", "path", "spin", st.completed_spin);
  sample(f, "cuv_completed_by_path_total", "path", "reactor", st.completed_reactor);
  sample(f, "cuv_completed_by_path_total", "path", "hostfn", st.completed_hostfn);
  sample(f, "cuv_completed_by_path_total", "path", "sync", st.completed_sync);
  sample(f, "cuv_completed_by_path_total", "path", "event", st.completed_event);
  metric(f, "cuv_completed_polled_total", "counter",
         "Of the reactor's completions, those a polling loop saw first (cuv_queue_poll).",
         st.completed_polled);
  metric(f, "cuv_fallbacks_total", "counter",
         "Submissions completed through a host callback: their stream's word write failed.",
         st.fallbacks);
  metric(f, "cuv_faults_total", "counter", "Submissions completed with a device fault.",
         st.faults);
  metric(f, "cuv_waits_inserted_total", "counter", "Event waits cuv inserted between streams.",
         st.waits_inserted);
  metric(f, "cuv_leaked_total", "counter",
         "Submissions whose resources were leaked (completion unprovable).", st.leaked);
  metric(f, "cuv_reactor_wakeups_total", "counter", "Times the reactor thread left its park.",
         st.reactor_wakeups);
  metric(f, "cuv_in_flight", "gauge", "Submissions not yet proven complete.", st.in_flight);
  metric(f, "cuv_reactor_waiting", "gauge",
         "Submissions waiting in the reactor now, on their streams' timeline words.",
         st.reactor_waiting);
  triton_metrics(f, n);

  family(f, "cuv_infer_mode", "gauge", "How the server runs the GPU work (1 for its mode).");
  sample(f, "cuv_infer_mode", "mode", s->mode_name, 1);
  metric(f, "cuv_infer_connections_total", "counter", "Connections accepted.",
         n->connections_total);
  metric(f, "cuv_infer_loops", "gauge", "Event loops (threads) serving connections.", s->nloops);
  metric(f, "cuv_infer_connections_open", "gauge", "Connections open (or closing).",
         n->open_conns);
  metric(f, "cuv_infer_requests_total", "counter", "HTTP requests begun.", n->requests_total);
  family(f, "cuv_infer_responses_total", "counter", "HTTP responses written, by status class.");
  static const char *const classes[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
  for (int i = 1; i <= 5; i++)
    sample(f, "cuv_infer_responses_total", "code", classes[i], n->responses_by_status[i]);
  metric(f, "cuv_infer_rows_total", "counter", "Input rows received in valid POST /infer.",
         n->infer_rows_total);
  metric(f, "cuv_infer_gpu_submitted_total", "counter", "Inference requests started on the GPU.",
         n->gpu_submitted);
  metric(f, "cuv_infer_gpu_completed_total", "counter", "Inference requests the GPU completed.",
         n->gpu_completed);
  metric(f, "cuv_infer_gpu_failed_total", "counter",
         "Inference requests that failed or were refused.", n->gpu_failed);
  metric(f, "cuv_infer_gpu_in_flight", "gauge", "Inference requests started and not yet completed.",
         n->gpu_submitted - n->gpu_completed - n->gpu_failed);
  metric(f, "cuv_infer_waiting", "gauge", "Complete requests waiting for a free workspace.",
         n->waiting);
  metric(f, "cuv_infer_workspaces", "gauge", "Device workspaces (one per request in flight).",
         (uint64_t)s->front_workspaces);
  metric(f, "cuv_infer_workspaces_free", "gauge", "Device workspaces free now.",
         n->free_workspaces);
  /* cuv counts a graph's capture as a submission in flight for as long as the graph lives */
  metric(f, "cuv_infer_graphs", "gauge",
         "CUDA graphs captured and alive (0 without graphs, --no-graph; with --isolate the "
         "workers'; each counts in cuv_in_flight).",
         n->graphs);
  metric(f, "cuv_infer_responses_dropped_total", "counter",
         "Responses not delivered: the connection closed or failed first.", n->responses_dropped);
  metric(f, "cuv_infer_truncated_total", "counter",
         "Requests cut short by the peer closing the connection.", n->truncated);
  metric(f, "cuv_infer_parse_errors_total", "counter", "Malformed requests (answered 400).",
         n->parse_errors);
  metric(f, "cuv_infer_stream_stalled_picks_total", "counter",
         "Submissions that found a stream stalled (no progress for --stream-stall-ms) and went "
         "to another.", n->stalled_picks);
  metric(f, "cuv_infer_streams_added_total", "counter",
         "Streams made because every stream of a loop was stalled.", n->streams_added);
  limit_metrics(f, s, n);
  flow_metrics(f, s, n);
  device_metrics(f, s);
  isolate_metrics(s, f); /* --isolate: the worker processes (cuv_infer_worker_*) */
  batch_metrics(s, f); /* --coalesce: cuv_infer_batch* */
  nvml_render(s->nvml, f); /* Triton's nv_gpu_*, where NVML loaded */
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}
