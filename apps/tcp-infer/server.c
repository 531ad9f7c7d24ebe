/* tcp-infer: an HTTP/1.1 inference server (on 127.0.0.1 unless --listen says otherwise), built on
 * libuv, whose GPU work goes through cuv and comes back into the loop through the bridge
 * (README.md: protocol, options; options.c reads them, --help lists them).
 *
 *   tcp-infer [--listen ADDR:PORT | --port N] [--baseline|--offload] [--loops N]
 *             [--graph|--no-graph] [--devices N [--balance hash|steal]]
 *             [--coalesce [ROWS] [--max-queue-delay-us N] [--preferred-batch LIST]]
 *             [--isolate [--isolate-spares 0|1] [--isolate-timeout MS] [--debug-fault]] ...
 *
 * Prints "listening on ADDR:PORT" once it accepts connections (--port 0: an ephemeral port).
 * Stops on SIGINT, SIGTERM or after --duration: stops accepting, closes the connections, lets the
 * GPU work in flight complete, frees everything and exits 0. Exit status 77 when no CUDA driver
 * can be loaded (run it with CUV_DRIVER=sim), 2 on a usage error, 1 on any other start-up
 * failure. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accept.h"
#include "backend.h"
#include "cli.h"
#include "conn.h"
#include "cublas.h"
#include "model.h"
#include "nvml.h"
#include "options.h"
#include "repo.h"
#include "server.h"
#include "timeouts.h"
#include "worker.h"

#define EXIT_NO_DRIVER 77

/* Why the driver did not load or start, while no initialization succeeded (cuv_init_error):
 * the reason a call failed with, since every call fails with the initialization's status then. */
static const char *init_reason(void) { return cuv_driver_name() ? NULL : cuv_init_error(); }

static int fail(const char *what, int rc) {
  const char *why = init_reason();
  fprintf(stderr, "tcp-infer: %s: %s (%s)%s%s\n", what, cuv_err_name(rc), cuv_strerror(rc),
          why ? ": " : "", why ? why : "");
  return EXIT_FAILURE;
}

/* ---- one loop per thread ------------------------------------------------------------------ */

/* On the loop's thread: stop accepting, close the connections (work in flight still completes:
 * its requests are orphans now), and close the bridge once that work's callbacks ran. */
static void loop_stop(uv_async_t *async) {
  loop_t *lp = async->data;
  lp->stopping = true;
  uv_close((uv_handle_t *)&lp->stop, NULL);
  accept_stop(lp);
  timeouts_stop(lp);
  conn_loop_close(lp);
  if (lp->bridge)
    cuv_uv_close(lp->bridge, NULL, NULL);
  if (lp->backend->stop)
    lp->backend->stop(lp); /* --isolate: the worker finishes its work and exits */
}

/* The loop's handles, workspaces and bridge; 0 or a cuv status. */
static int loop_setup(loop_t *lp) {
  int rc = lp->backend->init(lp); /* the bridge too, where the backend submits through one */
  if (rc != 0)
    return rc;
  int uv_rc = accept_start(lp);
  if (uv_rc != 0) {
    fprintf(stderr, "tcp-infer: cannot listen: %s\n", uv_strerror(uv_rc));
    return CUV_EINVAL;
  }
  timeouts_start(lp); /* the connections' timeouts */
  return 0;
}

static void loop_main(void *arg) {
  loop_t *lp = arg;
  /* Named, so per-thread CPU (the benches' cpu.sh, top -H) tells a loop from a pool thread. */
  char name[16];
  snprintf(name, sizeof name, "infer-loop-%u", lp->index);
  pthread_setname_np(pthread_self(), name);
  lp->setup_status = loop_setup(lp);
  uv_sem_post(&lp->srv->ready);
  uv_barrier_wait(&lp->srv->set_up);
  uv_run(&lp->loop, UV_RUN_DEFAULT); /* until loop_stop, and every callback after it */
  if (lp->backend->close)
    lp->backend->close(lp);
  if (uv_loop_close(&lp->loop) != 0)
    lp->setup_status = CUV_EBUSY; /* a handle left open */
}

/* ---- the main thread: signals, duration ------------------------------------------------- */

typedef struct control {
  server_t *s;
  uv_signal_t sigint, sigterm;
  uv_timer_t duration;
  bool stopped;
} control_t;

static void stop_all(control_t *c, const char *why) {
  if (c->stopped)
    return;
  c->stopped = true;
  printf("tcp-infer: stopping (%s)\n", why);
  uv_close((uv_handle_t *)&c->sigint, NULL);
  uv_close((uv_handle_t *)&c->sigterm, NULL);
  uv_close((uv_handle_t *)&c->duration, NULL);
  for (unsigned i = 0; i < c->s->nloops; i++)
    uv_async_send(&c->s->loops[i].stop);
}

static void on_signal(uv_signal_t *handle, int signum) {
  stop_all(handle->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_duration(uv_timer_t *timer) { stop_all(timer->data, "duration elapsed"); }

/* Before the main loop runs: a loop that failed its set-up stops them all. */
static int check_loops(control_t *c) {
  int status = EXIT_SUCCESS;
  for (unsigned i = 0; i < c->s->nloops; i++)
    if (c->s->loops[i].setup_status != 0) {
      fail("setting up a loop", c->s->loops[i].setup_status);
      status = EXIT_FAILURE;
      stop_all(c, "start-up failed");
    }
  return status;
}

static void control_start(control_t *c, uv_loop_t *main_loop, double duration) {
  uv_signal_init(main_loop, &c->sigint);
  uv_signal_init(main_loop, &c->sigterm);
  uv_timer_init(main_loop, &c->duration);
  c->sigint.data = c->sigterm.data = c->duration.data = c;
  uv_signal_start(&c->sigint, on_signal, SIGINT);
  uv_signal_start(&c->sigterm, on_signal, SIGTERM);
  if (duration > 0)
    uv_timer_start(&c->duration, on_duration, (uint64_t)(duration * 1000.0), 0);
}

/* ---- start-up and shutdown ---------------------------------------------------------------- */

static server_t server_config(const options_t *o, int argc, char **argv) {
  server_t s = {.max_batch = o->max_batch, .workspaces_per_loop = o->workspaces,
                .loops_per_device = o->loops, .baseline = o->baseline, .offload = o->offload,
                .isolate = o->isolate, .debug_fault = o->debug_fault,
                .isolate_queue = o->isolate_queue, .isolate_spares = o->isolate_spares,
                .isolate_timeout_ms = o->isolate_timeout_ms, .argc = argc, .argv = argv,
                .coalesce = o->coalesce, .graph = o->graph,
                .queue_delay_us = o->queue_delay_us, .npreferred = o->npreferred,
                .nstreams = o->streams, .stream_stall_ms = o->stream_stall_ms,
                .stage_sample = o->stage_sample,
                .isolate_start_timeout_ms = o->isolate_start_timeout_ms,
                .isolate_deadline_ms = o->isolate_deadline_ms,
                .hang_suspect_ms = o->hang_suspect_ms, .stall_suspect_ms = o->stall_suspect_ms,
                .debug_start_hang = o->debug_start_hang, .worker_start = o->worker_start,
                .max_connections = o->max_connections, .max_header_bytes = o->max_header_bytes,
                .header_timeout_ms = o->header_timeout_ms, .body_timeout_ms = o->body_timeout_ms,
                .idle_timeout_ms = o->idle_timeout_ms,
                .max_conn_requests = o->max_conn_requests,
                .max_conn_unsent = o->max_conn_unsent, .max_buffered = o->max_buffered,
                .max_queue_size = o->max_queue_size, .priority_levels = o->priority_levels,
                .balance = o->balance_steal ? BALANCE_STEAL : BALANCE_HASH};
  memcpy(s.preferred, o->preferred, sizeof s.preferred);
  s.staged_input = o->coalesce || o->graph;
  s.staged_output = o->graph;
  s.mode_name = o->baseline ? "baseline" : o->offload ? "offload" : o->graph ? "graph" : "cuv";
  return s;
}

/* How many devices serve, and which: --devices N of those there are (every one by default); a
 * worker (--isolate) one, the device its front gave it. An exit status. */
static int pick_devices(server_t *s, const options_t *o) {
  int count = 0;
  int rc = cuv_device_count(&count);
  if (rc != 0)
    return fail("cuv_device_count", rc);
  unsigned want = o->worker ? 1 : o->devices ? o->devices : (unsigned)count;
  if (!o->worker && want > (unsigned)count)
    return cli_usage_error("--devices %u: this machine has %d device%s", want, count,
                           count == 1 ? "" : "s");
  if (want == 0)
    return fail("no device", CUV_ENODEV);
  s->ndevices = want > MAX_DEVICES ? MAX_DEVICES : want;
  s->nloops = s->loops_per_device * s->ndevices;
  s->front_workspaces = s->isolate ? 0 : s->workspaces_per_loop * s->nloops;
  if (s->ndevices == 1)
    s->balance = BALANCE_HASH; /* nothing to steal from: the one-device server as it was */
  for (unsigned i = 0; i < s->ndevices; i++)
    s->gpus[i] = (gpu_t){.srv = s, .index = i,
                         .ordinal = o->worker ? (int)o->worker_device : (int)i};
  return EXIT_SUCCESS;
}

/* The models: a repository's (--model-dir; each model refused says why on stderr, and the
 * others are served), or the seeded MLP; the workspaces are sized for the largest. An exit
 * status. */
static int load_models(server_t *s, const options_t *o) {
  char why[512];
  if (!o->model_dir && repo_seeded(&s->models, &s->nmodels, o->seed, o->max_batch) != 0)
    return fail("making the seeded model", CUV_ENOMEM);
  if (o->model_dir && repo_load(o->model_dir, &s->models, &s->nmodels, why, sizeof why) != 0) {
    fprintf(stderr, "tcp-infer: --model-dir: %s\n", why);
    return EXIT_FAILURE;
  }
  s->repository = o->model_dir != NULL;
  s->bounds = repo_bounds(s->models, s->nmodels);
  if (s->bounds.in == 0) /* no model loaded: workspaces of one value, never run */
    s->bounds = (repo_bounds_t){.in = 1, .out = 1, .rows = 1};
  if (s->repository)
    s->max_batch = s->bounds.rows; /* each model's own; the workspaces hold the largest */
  s->workspace_rows = s->coalesce ? s->coalesce : s->max_batch;
  return EXIT_SUCCESS;
}

/* One device and its copy of the model (kernels, weights; cuBLAS when asked and found). */
static int open_device(gpu_t *g, const options_t *o, bool *cublas) {
  int rc = cuv_device_open(&g->dev, g->ordinal);
  if (rc != 0)
    return fail("cuv_device_open", rc);
  if ((rc = model_init(g, o->ptx)) != 0)
    return fail("loading the model", rc);
  *cublas = o->cublas && model_cublas_open(g) == 0;
  return EXIT_SUCCESS;
}

/* cuv, and the device and the model unless --isolate (the front never opens the device, its
 * workers do); an exit status. */
static int open_gpu(server_t *s, const options_t *o, bool *cublas) {
  model_register_twins(o->sim_delay_us);
  worker_register_twins(); /* the module loads every kernel of mlp.cu, the debug ones too */
  int rc = cuv_init();
  if (rc == CUV_ENODRIVER) {
    const char *why = init_reason();
    fprintf(stderr, "tcp-infer: no CUDA driver: %s; CUV_DRIVER=sim runs it on the CPU simulator\n",
            why ? why : cuv_strerror(rc));
    return EXIT_NO_DRIVER;
  }
  if (rc != 0)
    return fail("cuv_init", rc);
  int status = pick_devices(s, o);
  for (unsigned i = 0; !o->isolate && status == EXIT_SUCCESS && i < s->ndevices; i++)
    status = open_device(&s->gpus[i], o, cublas);
  return status;
}

/* The loops: sockets bound here (the first one picks the port), the rest on their threads;
 * returns once each listens or failed to. */
static int start_loops(server_t *s, listen_addr_t *where) {
  s->loops = calloc(s->nloops, sizeof *s->loops);
  if (!s->loops)
    return fail("calloc", CUV_ENOMEM);
  for (unsigned i = 0; i < s->nloops; i++) {
    loop_t *lp = &s->loops[i];
    lp->srv = s;
    lp->backend = backend_select(s); /* once: how every request of the loop runs */
    lp->gpu = &s->gpus[i / s->loops_per_device];
    lp->index = i;
    conn_settings_init(&lp->settings);
    if ((lp->listen_fd = listen_socket(where, s->nloops > 1)) < 0)
      return EXIT_FAILURE;
    uv_loop_init(&lp->loop);
    uv_async_init(&lp->loop, &lp->stop, loop_stop);
    lp->stop.data = lp;
  }
  uv_sem_init(&s->ready, 0);
  uv_barrier_init(&s->set_up, s->nloops);
  for (unsigned i = 0; i < s->nloops; i++)
    if (uv_thread_create(&s->loops[i].thread, loop_main, &s->loops[i]) != 0)
      return fail("uv_thread_create", CUV_ENOMEM);
  for (unsigned i = 0; i < s->nloops; i++)
    uv_sem_wait(&s->ready);
  return EXIT_SUCCESS;
}

/* A repository's models, one line each: its layers, or why it is not served. */
static void print_models(const server_t *s) {
  for (unsigned i = 0; s->repository && i < s->nmodels; i++) {
    const model_t *m = &s->models[i];
    if (!m->ready) {
      printf("tcp-infer: model \"%s\": UNAVAILABLE (%s)\n", m->name, m->why);
      continue;
    }
    printf("tcp-infer: model \"%s\": READY, layers %u", m->name, m->dims[0]);
    for (unsigned k = 1; k <= m->nlayers; k++)
      printf("-%u", m->dims[k]);
    printf(" (%s), max batch %u\n", m->relu ? "ReLU" : "no activation", m->max_batch);
  }
}

static void print_banner(const server_t *s, const options_t *o, bool cublas,
                         const listen_addr_t *where) {
  char model[128];
  unsigned ready = 0;
  for (unsigned i = 0; i < s->nmodels; i++)
    ready += s->models[i].ready;
  if (s->repository)
    snprintf(model, sizeof model, "%u model%s of the repository (%u ready)", s->nmodels,
             s->nmodels == 1 ? "" : "s", ready);
  else
    snprintf(model, sizeof model, "MLP %u-%u-%u (ReLU) with %s, seed %llu, max batch %u", MLP_IN,
             MLP_HIDDEN, MLP_OUT, cublas ? "cuBLAS" : "its own kernel",
             (unsigned long long)o->seed, o->max_batch);
  printf("tcp-infer: %s%s mode on %s (%s), %u loop%s per device, %s, %u workspaces per loop\n",
         s->isolate ? "isolated (worker processes), " : "",
         s->baseline  ? "baseline (uv_queue_work + cuv_sync)"
         : s->offload ? "cuv (cuv_uv_submit from the thread pool)"
         : s->graph   ? "cuv with CUDA graphs (cuv_uv_submit of cuv_graph_launch)"
                      : "cuv without graphs (cuv_uv_submit)",
         cuv_driver_is_sim() ? "the simulator" : "the GPU",
         s->gpus[0].dev ? cuv_device_name(s->gpus[0].dev) : "device 0", o->loops,
         o->loops > 1 ? "s" : "", model, o->workspaces);
  print_models(s);
  if (s->ndevices > 1)
    printf("tcp-infer: %u devices, %u loops in all; balance: %s\n", s->ndevices, s->nloops,
           s->balance == BALANCE_STEAL ? "steal (a less busy device runs a busy one's work)"
                                       : "hash (the kernel's SO_REUSEPORT hash alone)");
  if (s->coalesce)
    printf("tcp-infer: dynamic batching, up to %u rows per GPU submission, waiting %u us at most "
           "(0: one loop iteration)%s\n", s->coalesce, s->queue_delay_us,
           s->npreferred ? ", preferred sizes given" : "");
  if (s->isolate && s->isolate_timeout_ms)
    printf("tcp-infer: %u spare worker%s per loop; a worker that leaves a request unanswered "
           "for %u ms is killed\n", s->isolate_spares, s->isolate_spares == 1 ? "" : "s",
           s->isolate_timeout_ms);
  else if (s->isolate)
    printf("tcp-infer: %u spare worker%s per loop; no hang watchdog\n", s->isolate_spares,
           s->isolate_spares == 1 ? "" : "s");
  if (s->max_connections < o->max_connections)
    printf("tcp-infer: at most %u connections: what the descriptor limit leaves room for\n",
           s->max_connections);
  char addr[96];
  listen_addr_format(where, addr, sizeof addr);
  printf("listening on %s\n", addr);
}

/* After stop_all: waits for every loop, prints what was served; an exit status. */
static int join_loops(server_t *s) {
  int status = EXIT_SUCCESS;
  uint64_t requests = 0, conns = 0, batches = 0, dropped = 0;
  for (unsigned i = 0; i < s->nloops; i++) {
    loop_t *lp = &s->loops[i];
    uv_thread_join(&lp->thread);
    if (lp->setup_status == CUV_EBUSY) {
      fprintf(stderr, "tcp-infer: loop %u had handles open at exit\n", i);
      status = EXIT_FAILURE;
    }
    requests += lp->n.requests_total;
    conns += lp->n.connections_total;
    batches += s->coalesce && !s->isolate ? lp->n.batches : lp->n.gpu_completed;
    dropped += lp->n.responses_dropped;
  }
  printf("tcp-infer: served %llu requests on %llu connections (%llu GPU batches, %llu responses "
         "dropped)\n",
         (unsigned long long)requests, (unsigned long long)conns, (unsigned long long)batches,
         (unsigned long long)dropped);
  stages_report(s);
  for (unsigned i = 0; i < s->nloops; i++)
    stages_loop_free(&s->loops[i]);
  uv_sem_destroy(&s->ready);
  uv_barrier_destroy(&s->set_up);
  /* after every loop ended: GET /stats on any loop read them */
  for (unsigned i = 0; i < s->nloops; i++) {
    const backend_t *b = s->loops[i].backend;
    if (b && b->finish && b->finish(&s->loops[i]) != 0) {
      fprintf(stderr, "tcp-infer: loop %u's worker did not exit cleanly\n", i);
      status = EXIT_FAILURE;
    }
  }
  return status;
}

/* The main thread's loop: signals and --duration, until stop_all; an exit status. */
static int serve(server_t *s, const options_t *o, bool cublas, const listen_addr_t *where) {
  uv_loop_t main_loop;
  uv_loop_init(&main_loop);
  control_t c = {.s = s};
  control_start(&c, &main_loop, o->duration);
  int status = check_loops(&c);
  if (status == EXIT_SUCCESS)
    print_banner(s, o, cublas, where);
  uv_run(&main_loop, UV_RUN_DEFAULT); /* until stop_all */
  if (join_loops(s) != EXIT_SUCCESS)
    status = EXIT_FAILURE;
  if (uv_loop_close(&main_loop) != 0)
    status = EXIT_FAILURE;
  return status;
}

static void server_close(server_t *s) {
  free(s->loops);
  nvml_close(s->nvml);
  s->nvml = NULL;
  for (unsigned i = 0; i < s->ndevices; i++) {
    model_free(&s->gpus[i]);
    if (s->gpus[i].dev)
      cuv_device_unref(s->gpus[i].dev);
    s->gpus[i].dev = NULL;
  }
  repo_free(s->models, s->nmodels);
  s->models = NULL;
  s->nmodels = 0;
}

int main(int argc, char **argv) {
  options_t o;
  int rc = options_parse(argc, argv, &o);
  if (rc != 0)
    return rc;
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN); /* a peer that went away is a write error, not a signal */

  server_t srv = server_config(&o, argc, argv);
  bool cublas = false;
  int status = load_models(&srv, &o);
  if (status == EXIT_SUCCESS)
    status = open_gpu(&srv, &o, &cublas);
  if (status != EXIT_SUCCESS) {
    server_close(&srv); /* what the start-up made before it failed (the kernels' module) */
    return status;
  }
  if (o.worker) { /* frames from the front on fd 3 instead of connections */
    status = worker_main(&srv);
    repo_free(srv.models, srv.nmodels); /* the rest is worker_main's own to close */
    return status;
  }
  if (!cuv_driver_is_sim()) /* the simulator's GPU is no GPU of the machine's */
    srv.nvml = nvml_open("libnvidia-ml.so.1");
  listen_addr_t where = o.listen;
  unsigned room = listen_fd_room(srv.nloops);
  if (room && srv.max_connections > room)
    srv.max_connections = room; /* so that the 503 beyond it still has a descriptor to go by */
  if ((status = start_loops(&srv, &where)) != EXIT_SUCCESS) {
    repo_free(srv.models, srv.nmodels);
    return status;
  }
  status = serve(&srv, &o, cublas, &where);
  server_close(&srv);
  return status;
}
