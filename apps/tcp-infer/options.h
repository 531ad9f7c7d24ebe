/* tcp-infer: the server's command line (options.c): every option read and checked, alone and
 * together, into options_t; a usage error names the option and exits 2 (cli.h). */
#ifndef TCP_INFER_OPTIONS_H
#define TCP_INFER_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "listen.h"

#define COALESCE_DEFAULT_ROWS 1024
#define MAX_DEVICES_OPTION 16 /* --devices at most (server.h: MAX_DEVICES) */

/* --graph, --no-graph as given; GRAPH_DEFAULT: neither (options.c decides). */
typedef enum { GRAPH_DEFAULT, GRAPH_ON, GRAPH_OFF } graph_asked_t;

typedef struct options {
  listen_addr_t listen; /* --listen ADDR:PORT, --port N (default 127.0.0.1:8080) */
  bool baseline, offload, cublas;
  /* graph: whether the server replays CUDA graphs, the one field it reads, decided from
   * graph_asked and the mode (options.c: graph_in_effect; README: CUDA graphs) */
  graph_asked_t graph_asked;
  bool graph;
  bool isolate, debug_fault, worker; /* worker: started by --isolate (isolate.c, worker.c) */
  unsigned isolate_queue, isolate_spares, isolate_timeout_ms, isolate_start_timeout_ms;
  unsigned isolate_deadline_ms, hang_suspect_ms; /* --isolate-deadline-ms, --hang-suspect-ms */
  unsigned stall_suspect_ms; /* --stall-suspect-ms: a worker silent this long has its work moved */
  unsigned debug_start_hang; /* --debug-start-hang N: the first N workers of a loop hang at start */
  unsigned worker_start;     /* --worker-start K: this worker is its loop's K-th (isolate.c) */
  unsigned worker_device;    /* --worker-device D: the device this worker opens (isolate.c) */
  unsigned devices;          /* --devices N: a server on each of the first N; 0: every device */
  bool balance_steal;        /* --balance steal (else hash; server.h: balance_t) */
  bool balance_given;        /* --balance was on the command line */
  double duration; /* seconds; 0: until a signal */
  unsigned max_batch, workspaces, sim_delay_us, loops;
  unsigned coalesce;       /* rows per batch; 0: off */
  unsigned queue_delay_us; /* --max-queue-delay-us */
  unsigned preferred[8], npreferred; /* --preferred-batch, ascending */
  unsigned streams, stream_stall_ms;  /* --streams, --stream-stall-ms (streams.c) */
  unsigned stage_sample;              /* --stage-sample N (stages.c); 0: off */
  uint64_t seed;
  const char *ptx;
  const char *model_dir; /* --model-dir DIR: a model repository (repo.c); NULL: the seeded MLP */
  /* a server on a network: connections at most, a request head's bytes at most, the head's,
   * body's and idle keep-alive's timeouts (0: none) */
  unsigned max_connections, max_header_bytes;
  unsigned header_timeout_ms, body_timeout_ms, idle_timeout_ms;
  /* flow control (http/flow.c): a connection's requests queued and bytes unsent before it is not
   * read, the bytes the server holds over every connection */
  unsigned max_conn_requests;
  uint64_t max_conn_unsent, max_buffered;
  unsigned max_queue_size; /* --max-queue-size N: inferences waiting per loop; 0: any */
  unsigned priority_levels; /* --priority-levels N: KServe's parameters.priority from 1 to N */
} options_t;

/* 0, or CLI_USAGE after a usage error's message; --help and --version print and exit 0. */
int options_parse(int argc, char **argv, options_t *o);

#endif
