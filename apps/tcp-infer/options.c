/* tcp-infer: the server's command line (options.h). Each option is read on its own (numbers
 * whole and within their range), then the combinations are checked, each refusal naming the
 * options it is about. The worker process (--worker) gets the front's own options. */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mlp.h"
#include "options.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: tcp-infer [options]\n"
          "  --listen ADDR:PORT  where to listen: an IPv4 address, or IPv6 in brackets\n"
          "                    ([::1]:8080) (default 127.0.0.1:8080)\n"
          "  --port N          the port alone (default 8080; 0: ephemeral, printed)\n"
          "  --max-connections N  connections at once; more get 503 (default 10000, and at most\n"
          "                    what the descriptor limit leaves room for)\n"
          "  --max-header-bytes N  a request's line and headers at most; more: 431\n"
          "                    (default 16384)\n"
          "  --header-timeout-ms MS  a request's head must come within this (default 10000)\n"
          "  --body-timeout-ms MS    its body within this after its head (default 30000)\n"
          "  --idle-timeout-ms MS    an idle keep-alive connection is closed (default 60000)\n"
          "                    (each: 0 for none; a late request is answered 408)\n");
  fputs("  --max-conn-requests N  requests queued on a connection before it is not read\n"
          "                    until they are answered (default 64)\n"
          "  --max-conn-unsent BYTES  a connection's responses not yet sent before it is not\n"
          "                    read until they are (default 4194304)\n"
          "  --max-buffered BYTES  request bodies, answers and responses held over every\n"
          "                    connection before the server reads only from connections that\n"
          "                    hold nothing (default 67108864; each loop holds its share)\n"
        "  --max-queue-size N  inferences of a loop that may wait for a workspace; more are\n"
        "                    answered 503 with Retry-After (default 0: any number)\n"
        "  --priority-levels N  KServe's parameters.priority from 1 (taken first) to N, the\n"
        "                    default level (0 or none); above N: 400 (default 2; 1 to 64)\n",
        f);
  fprintf(f,
          "  --baseline        run the GPU work in libuv's thread pool with a blocking cuv_sync\n"
          "  --offload         enqueue the GPU work from libuv's thread pool (no waiting there)\n"
          "  --duration S      stop after S seconds (default: none, until SIGINT/SIGTERM)\n"
          "  --loops N         event loops per device, one thread each, sharing the port\n"
          "                    (default 1)\n"
          "  --devices N       serve on the first N devices, each with its --loops loops and\n"
          "                    workspaces (default: every device; at most %u)\n"
          "  --balance hash|steal  how work spreads over the devices: the kernel's hash of the\n"
          "                    connections alone, or also a less busy device running the work of\n"
          "                    a busy one's loops (default steal; hash with --isolate)\n"
          "  --max-batch N     largest batch accepted (default %u; more is 413)\n"
          "  --workspaces N    requests on the GPU at once, per loop (default 64)\n"
          "  --seed N          weight seed (default %u; clients must use the same)\n"
          "  --sim-delay-us N  on the simulator, each layer takes at least N us\n"
          "  --cublas          layers through cuBLAS (dlopen'd) when it loads, else the kernel\n"
          "  --ptx FILE        the kernels' PTX, built from mlp.cu (default: the one embedded)\n"
          "  --isolate         the GPU work in a worker process per loop, respawned when it dies\n"
          "  --isolate-queue N requests that may wait for a worker to be ready (default 1024)\n"
          "  --isolate-spares N  0 or 1: a started, idle worker per loop that takes over at once\n"
          "                    when the active one fails (default 1)\n"
          "  --isolate-timeout MS  kill a worker that leaves a request unanswered this long\n"
          "                    (default 10000; 0: never)\n"
          "  --isolate-start-timeout MS  kill a worker not ready this long after its start\n"
          "                    (default 60000; 0: never)\n"
          "  --isolate-deadline-ms MS  retry an inference on the next worker until answered or\n"
          "                    this long after it came in (default 30000)\n",
          MAX_DEVICES_OPTION, MLP_DEFAULT_MAX_BATCH, MLP_DEFAULT_SEED);
  fputs("  --hang-suspect-ms MS  an inference unanswered this long moves to the other ready\n"
        "                    worker (the spare), before the watchdog (default 100; 0: never)\n"
        "  --stall-suspect-ms MS  a worker that answered none of its requests this long (from\n"
        "                    its last reply, or its oldest request's send if later) has all\n"
        "                    its inferences moved to the other ready worker (default 20;\n"
        "                    0: never); one batch longer than MS on an idle worker runs twice\n"
        "  --debug-fault     with --isolate: POST /debug/fault makes a sticky device fault,\n"
        "                    POST /debug/hang a kernel that never ends\n"
        "  --debug-start-hang N  with --debug-fault: each loop's first N workers hang (60 s)\n"
        "                    before they are ready, as a worker stuck in its start-up would\n",
        f);
  fprintf(f, /* in parts: a string literal past 4095 bytes is not portable C */
          "  --coalesce [ROWS] dynamic batching: requests become batches of up to ROWS rows, one\n"
          "                    GPU submission each (default %u; at least --max-batch)\n"
          "  --max-queue-delay-us N  with batching: a batch waits for more requests until its\n"
          "                    oldest waited N us (default 0: the end of the loop iteration)\n"
          "  --preferred-batch LIST  with batching: rows (comma-separated) at which a batch\n"
          "                    leaves at once, without waiting out the delay\n"
          "  --streams N       streams per loop the GPU work goes to (default 4)\n"
          "  --stream-stall-ms MS  a stream whose work showed no progress this long gets no more\n"
          "                    work until it does (default 100; 0: never)\n"
          "  --graph           replay a CUDA graph of each workspace's whole op (upload, layers,\n"
          "                    download), one per power of two of rows, captured on first use\n"
          "                    (the default, except with --baseline, --offload, --cublas and\n"
          "                    --model-dir, which refuse --graph, and --isolate, which takes it)\n"
          "  --no-graph        no graphs: each op's copies and launches enqueued anew\n"
          "  --stage-sample N  time the stages of one request in N (the cuv modes, with or\n"
          "                    without graphs) and print their medians and p99 at exit\n"
          "                    (default 0: off)\n"
          "  --help, --version\n",
          COALESCE_DEFAULT_ROWS);
  fputs("  --model-dir DIR   serve the models of a repository, one folder each (config.json,\n"
        "                    model.safetensors; README: A model repository) instead of the\n"
        "                    seeded MLP (KServe's spelling --model_dir too; --http_port N is\n"
        "                    --port N)\n", f);
}

/* --coalesce's optional ROWS, as "--coalesce=ROWS" or as the next argument when it is a number. */
static bool coalesce_rows(const char *arg, int argc, char **argv, unsigned *rows) {
  if (!arg && optind < argc && isdigit((unsigned char)argv[optind][0]))
    arg = argv[optind++];
  if (!arg) {
    *rows = COALESCE_DEFAULT_ROWS;
    return true;
  }
  if (!cli_unsigned("--coalesce", arg, 0, 65536, rows))
    return false;
  if (*rows == 0)
    *rows = 1; /* 0 is "on" too: one row, then at least --max-batch */
  return true;
}

/* --preferred-batch 8,16,32: rows, ascending once read. */
static bool preferred_list(const char *arg, options_t *o) {
  char copy[256], *save = NULL;
  snprintf(copy, sizeof copy, "%s", arg);
  o->npreferred = 0;
  for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    unsigned rows, i;
    if (o->npreferred == 8) {
      cli_usage_error("--preferred-batch: 8 sizes at most");
      return false;
    }
    if (!cli_unsigned("--preferred-batch", t, 1, 65536, &rows))
      return false;
    for (i = o->npreferred; i > 0 && o->preferred[i - 1] > rows; i--)
      o->preferred[i] = o->preferred[i - 1];
    o->preferred[i] = rows;
    o->npreferred++;
  }
  if (o->npreferred)
    return true;
  cli_usage_error("--preferred-batch: a list of rows, such as 8,16,32");
  return false;
}

/* --balance hash|steal */
static bool balance(const char *arg, options_t *o) {
  o->balance_given = true;
  if (!strcmp(arg, "hash") || !strcmp(arg, "steal"))
    return o->balance_steal = arg[0] == 's', true;
  cli_usage_error("--balance: '%s' is neither hash nor steal", arg);
  return false;
}

/* --graph or --no-graph: one or the other (either once or more). */
static bool ask_graph(graph_asked_t asked, options_t *o) {
  if (o->graph_asked && o->graph_asked != asked) {
    cli_usage_error("--graph and --no-graph: one or the other");
    return false;
  }
  o->graph_asked = asked;
  return true;
}

/* The command line, for --coalesce's optional ROWS (getopt_long hands out no next argument). */
static struct {
  int argc;
  char **argv;
} line;

/* One option; false after a usage error. */
static bool option(int ch, void *arg) {
  options_t *o = arg;
  uint64_t v;
  switch (ch) {
  case 'p': return cli_uint("--port", optarg, 0, 65535, &v) && (o->listen.port = (int)v, true);
  case 'E':
    if (listen_addr_parse(optarg, &o->listen))
      return true;
    cli_usage_error("--listen: '%s' is no ADDR:PORT (127.0.0.1:8080, [::1]:8080)", optarg);
    return false;
  case 'N': return cli_unsigned("--max-connections", optarg, 1, 1000000, &o->max_connections);
  case 'B': return cli_unsigned("--max-header-bytes", optarg, 256, 1u << 20, &o->max_header_bytes);
  case 'h' + 256:
    return cli_unsigned("--header-timeout-ms", optarg, 0, 86400000, &o->header_timeout_ms);
  case 'b' + 256:
    return cli_unsigned("--body-timeout-ms", optarg, 0, 86400000, &o->body_timeout_ms);
  case 'i' + 256:
    return cli_unsigned("--idle-timeout-ms", optarg, 0, 86400000, &o->idle_timeout_ms);
  case 'r' + 256:
    return cli_unsigned("--max-conn-requests", optarg, 1, 65536, &o->max_conn_requests);
  case 'u' + 256:
    return cli_uint("--max-conn-unsent", optarg, 4096, UINT64_C(1) << 40, &o->max_conn_unsent);
  case 'M' + 256:
    return cli_uint("--max-buffered", optarg, 65536, UINT64_C(1) << 44, &o->max_buffered);
  case 'q' + 256:
    return cli_unsigned("--max-queue-size", optarg, 0, 1u << 24, &o->max_queue_size);
  case 'p' + 256:
    return cli_unsigned("--priority-levels", optarg, 1, 64, &o->priority_levels);
  case 'b': o->baseline = true; return true;
  case 'o': o->offload = true; return true;
  case 'd':
    if (!strcmp(optarg, "none"))
      return o->duration = 0, true;
    return cli_seconds("--duration", optarg, 0, 1e9, &o->duration);
  case 'l': return cli_unsigned("--loops", optarg, 1, 64, &o->loops);
  case 'm': return cli_unsigned("--max-batch", optarg, 1, 65536, &o->max_batch);
  case 'w': return cli_unsigned("--workspaces", optarg, 1, 4096, &o->workspaces);
  case 's': return cli_uint("--seed", optarg, 0, UINT64_MAX, &o->seed);
  case 'D': return cli_unsigned("--sim-delay-us", optarg, 0, 60000000, &o->sim_delay_us);
  case 'c': o->cublas = true; return true;
  case 'x': o->ptx = optarg; return true;
  case 'M': o->model_dir = optarg; return true;
  case 'I': o->isolate = true; return true;
  case 'F': o->debug_fault = true; return true;
  case 'W': o->worker = true; return true;
  case 'Q': return cli_unsigned("--isolate-queue", optarg, 0, 1u << 24, &o->isolate_queue);
  case 'C': return coalesce_rows(optarg, line.argc, line.argv, &o->coalesce);
  case 'G': return ask_graph(GRAPH_ON, o);
  case 'g' + 256: return ask_graph(GRAPH_OFF, o);
  case 'S': return cli_unsigned("--isolate-spares", optarg, 0, 1, &o->isolate_spares);
  case 'T': return cli_unsigned("--isolate-timeout", optarg, 0, 86400000, &o->isolate_timeout_ms);
  case 'q': return cli_unsigned("--max-queue-delay-us", optarg, 0, 10000000, &o->queue_delay_us);
  case 'P': return preferred_list(optarg, o);
  case 'n': return cli_unsigned("--streams", optarg, 1, 16, &o->streams);
  case 'A':
    return cli_unsigned("--isolate-start-timeout", optarg, 0, 86400000,
                        &o->isolate_start_timeout_ms);
  case 'e' + 256:
    return cli_unsigned("--isolate-deadline-ms", optarg, 1, 86400000, &o->isolate_deadline_ms);
  case 's' + 256:
    return cli_unsigned("--hang-suspect-ms", optarg, 0, 86400000, &o->hang_suspect_ms);
  case 'S' + 256:
    return cli_unsigned("--stall-suspect-ms", optarg, 0, 86400000, &o->stall_suspect_ms);
  case 'H': return cli_unsigned("--debug-start-hang", optarg, 0, 1000, &o->debug_start_hang);
  case 'K': return cli_unsigned("--worker-start", optarg, 1, UINT32_MAX, &o->worker_start);
  case 'L': return cli_unsigned("--stream-stall-ms", optarg, 0, 3600000, &o->stream_stall_ms);
  case 'v': return cli_unsigned("--devices", optarg, 1, MAX_DEVICES_OPTION, &o->devices);
  case 'y': return balance(optarg, o);
  case 'j': return cli_unsigned("--stage-sample", optarg, 0, 1000000000, &o->stage_sample);
  case 'k':
    return cli_unsigned("--worker-device", optarg, 0, MAX_DEVICES_OPTION - 1, &o->worker_device);
  default: return false;
  }
}

/* Whether the server replays graphs: as asked, else where the mode can (the bridge's modes in
 * process, where bench/RESULTS.md's "tcp-infer" measured them paying) and not where it cannot
 * (--baseline, --offload, --cublas, --model-dir) or where it is not tested by default (--isolate
 * and its workers: a worker reads the front's own options, so it replays when they say --graph).
 * Called after the refusals: what is asked is possible here. */
static bool graph_in_effect(const options_t *o) {
  if (o->graph_asked != GRAPH_DEFAULT)
    return o->graph_asked == GRAPH_ON;
  return !(o->baseline || o->offload || o->cublas || o->model_dir || o->isolate || o->worker);
}

/* The options together; 0 or CLI_USAGE after its message. */
static int check(options_t *o) {
  if (o->baseline && o->offload)
    return cli_usage_error("--baseline and --offload: one or the other");
  if (o->debug_fault && !o->isolate && !o->worker) /* a fault in process is for good */
    return cli_usage_error("--debug-fault needs --isolate");
  if (o->debug_start_hang && !o->debug_fault)
    return cli_usage_error("--debug-start-hang needs --debug-fault");
  if ((o->queue_delay_us || o->npreferred) && !o->coalesce)
    o->coalesce = COALESCE_DEFAULT_ROWS; /* Triton's delay and sizes are batching's */
  if (o->coalesce && o->offload)
    return cli_usage_error("--coalesce (or its delay, its sizes) and --offload: one or the other");
  /* --graph replays on the loop thread; cuBLAS inside a capture is not tested */
  if (o->graph_asked == GRAPH_ON && (o->baseline || o->offload || o->cublas))
    return cli_usage_error("--graph goes with none of --baseline, --offload, --cublas");
  if (o->coalesce && o->coalesce < o->max_batch)
    o->coalesce = o->max_batch; /* a batch always takes any one request */
  if (o->npreferred && o->preferred[o->npreferred - 1] > o->coalesce)
    return cli_usage_error("--preferred-batch: %u rows is more than a batch holds (--coalesce %u)",
                           o->preferred[o->npreferred - 1], o->coalesce);
  /* a repository's models run in the modes of one request per op, on the kernel: batching, the
   * graphs, cuBLAS and the workers are the seeded MLP's */
  if (o->model_dir && (o->coalesce || o->graph_asked == GRAPH_ON || o->cublas || o->isolate))
    return cli_usage_error("--model-dir goes with none of --coalesce (its delay, its sizes), "
                           "--graph, --cublas, --isolate");
  /* a worker's loop runs requests through its front's one loop: no other device to steal for */
  if (o->isolate && o->balance_steal)
    return cli_usage_error("--balance steal and --isolate: a worker serves its own loop; use "
                           "--balance hash");
  o->graph = graph_in_effect(o);
  if (!o->balance_given)
    o->balance_steal = !o->isolate && !o->worker; /* the default (README: Several GPUs) */
  if (o->worker) {
    o->isolate = false; /* the worker gets the front's options: it is the one that runs them */
    o->balance_steal = false;
  }
  return 0;
}

int options_parse(int argc, char **argv, options_t *o) {
  static const struct option longs[] = {
      {"port", required_argument, NULL, 'p'},       {"baseline", no_argument, NULL, 'b'},
      {"http_port", required_argument, NULL, 'p'}, /* KServe's spellings */
      {"model-dir", required_argument, NULL, 'M'},  {"model_dir", required_argument, NULL, 'M'},
      {"duration", required_argument, NULL, 'd'},   {"max-batch", required_argument, NULL, 'm'},
      {"workspaces", required_argument, NULL, 'w'}, {"seed", required_argument, NULL, 's'},
      {"sim-delay-us", required_argument, NULL, 'D'}, {"cublas", no_argument, NULL, 'c'},
      {"ptx", required_argument, NULL, 'x'},        {"loops", required_argument, NULL, 'l'},
      {"offload", no_argument, NULL, 'o'},          {"help", no_argument, NULL, 'h'},
      {"isolate", no_argument, NULL, 'I'},          {"debug-fault", no_argument, NULL, 'F'},
      {"worker", no_argument, NULL, 'W'},           {"isolate-queue", required_argument, NULL, 'Q'},
      {"coalesce", optional_argument, NULL, 'C'},   {"graph", no_argument, NULL, 'G'},
      {"no-graph", no_argument, NULL, 'g' + 256},
      {"isolate-spares", required_argument, NULL, 'S'},
      {"isolate-timeout", required_argument, NULL, 'T'},
      {"max-queue-delay-us", required_argument, NULL, 'q'},
      {"preferred-batch", required_argument, NULL, 'P'},
      {"streams", required_argument, NULL, 'n'},
      {"isolate-start-timeout", required_argument, NULL, 'A'},
      {"isolate-deadline-ms", required_argument, NULL, 'e' + 256},
      {"hang-suspect-ms", required_argument, NULL, 's' + 256},
      {"stall-suspect-ms", required_argument, NULL, 'S' + 256},
      {"debug-start-hang", required_argument, NULL, 'H'},
      {"worker-start", required_argument, NULL, 'K'},
      {"listen", required_argument, NULL, 'E'},
      {"stage-sample", required_argument, NULL, 'j'},
      {"max-connections", required_argument, NULL, 'N'},
      {"max-header-bytes", required_argument, NULL, 'B'},
      {"header-timeout-ms", required_argument, NULL, 'h' + 256},
      {"body-timeout-ms", required_argument, NULL, 'b' + 256},
      {"idle-timeout-ms", required_argument, NULL, 'i' + 256},
      {"max-conn-requests", required_argument, NULL, 'r' + 256},
      {"max-conn-unsent", required_argument, NULL, 'u' + 256},
      {"max-buffered", required_argument, NULL, 'M' + 256},
      {"max-queue-size", required_argument, NULL, 'q' + 256},
      {"priority-levels", required_argument, NULL, 'p' + 256},
      {"stream-stall-ms", required_argument, NULL, 'L'},
      {"devices", required_argument, NULL, 'v'},
      {"balance", required_argument, NULL, 'y'},
      {"worker-device", required_argument, NULL, 'k'},
      {"version", no_argument, NULL, 'V'},          {NULL, 0, NULL, 0}};
  *o = (options_t){.listen = {"127.0.0.1", 8080}, .max_batch = MLP_DEFAULT_MAX_BATCH,
                   .workspaces = 64, .max_connections = 10000, .max_header_bytes = 16384,
                   .header_timeout_ms = 10000, .body_timeout_ms = 30000,
                   .idle_timeout_ms = 60000, .max_conn_requests = 64,
                   .max_conn_unsent = 4u << 20, .max_buffered = 64u << 20,
                   .seed = MLP_DEFAULT_SEED, .loops = 1, /* .ptx NULL: the embedded PTX */
                   .isolate_queue = 1024, .isolate_spares = 1, .isolate_timeout_ms = 10000,
                   .streams = 4, .stream_stall_ms = 100, .isolate_start_timeout_ms = 60000,
                   .isolate_deadline_ms = 30000, .hang_suspect_ms = 100, .stall_suspect_ms = 20,
                   .priority_levels = 2};
  line.argc = argc;
  line.argv = argv;
  int rc = cli_parse(argc, argv, "", longs, option, usage, o); /* exits after --help, --version */
  if (rc != 0)
    return rc;
  if (optind != argc)
    return cli_usage_error("'%s': no such option (options begin with --)", argv[optind]);
  return check(o);
}
