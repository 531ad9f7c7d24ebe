/* collectives: data-parallel steps on every GPU, driven from a libuv loop (include/cuv/uv.h).
 *
 *   collectives [--devices N] [--steps S] [--n ELEMENTS]     every device of this process
 *   collectives --processes N [--steps S] [--n ELEMENTS]     N processes on this host
 *   collectives --rank R --ranks N --host HOST --port PORT   one rank of a group of processes
 *
 * Every rank holds the same weights w. A step: each rank computes a gradient-like vector g from w
 * (dp_grad, which differs by rank), an all-reduce averages the g of all ranks, and each rank
 * applies the average (dp_apply). So the weights stay equal on every rank, and at the end each
 * rank checks its w against the same steps computed on the host.
 *
 * With every device of the process (the default), one communicator holds them all
 * (cuv_comm_init_all), and each step is three phases of submissions: the gradients (one per
 * device), the all-reduce (one op over every device), the updates. With ranks in processes, each
 * process holds one rank of one device (cuv_comm_init_rank), and a step is one op tree:
 * grad, then the all-reduce, then apply. Rank 0 makes the group's unique id and hands it over
 * TCP, on the same loop: it listens on HOST:PORT and writes the id's 128 bytes to each rank that
 * connects, while its own communicator is being created (the creation does not block the loop).
 * --processes starts the other ranks itself (uv_spawn, on 127.0.0.1 and a port of the system's
 * choosing); on several hosts, start one process per rank with --rank, --ranks, and rank 0's
 * address.
 *
 * With CUV_DRIVER=sim, --devices sets the simulator's device count, and the simulator's NCCL
 * joins the processes of one host through shared memory. The kernels launch through the typed
 * launchers cuv-launchers generated from collectives.cu, loaded from the PTX embedded in the
 * program. Exit status: 0 when every rank's weights are right, 77 without a CUDA driver or NCCL, 1
 * otherwise. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuv.h>
#include <cuv/uv.h>
#ifdef COLLECTIVES_WITH_SIM
#include <cuv/sim.h>
#endif

#include "collectives_launchers.h"

#define EXIT_NO_DRIVER 77
#define MAX_LOCAL 8
#define CONNECT_TRIES 100 /* a rank retries rank 0's address this many times, 100 ms apart */

#ifdef COLLECTIVES_WITH_SIM
/* Host twins of collectives.cu for libcuv-sim (a device pointer is a host address there). */
#define DEV(p) ((float *)(uintptr_t)(*(cuv_deviceptr_t *)(p)))

static int twin_grad(const cuv_sim_launch_t *launch, void **params) {
  unsigned n = *(unsigned *)params[0], step = *(unsigned *)params[1];
  unsigned rank = *(unsigned *)params[2];
  const float *w = DEV(params[3]);
  float *g = DEV(params[4]);
  for (unsigned i = 0; i < n; i++)
    g[i] = 0.5f * w[i] + (float)((rank + 1u) * ((i + step) % 7u));
  return 0;
}

static int twin_apply(const cuv_sim_launch_t *launch, void **params) {
  unsigned n = *(unsigned *)params[0];
  float lr = *(float *)params[1];
  const float *g = DEV(params[2]);
  float *w = DEV(params[3]);
  for (unsigned i = 0; i < n; i++)
    w[i] -= lr * g[i];
  return 0;
}

static void register_twins(void) {
  const size_t u = sizeof(unsigned), f = sizeof(float), p = sizeof(cuv_deviceptr_t);
  const size_t grad[] = {u, u, u, p, p}, apply[] = {u, f, p, p};
  cuv_sim_register_kernel("dp_grad", twin_grad, 5, grad);
  cuv_sim_register_kernel("dp_apply", twin_apply, 4, apply);
}

static void set_sim_devices(int n) { cuv_sim_set_device_count(n); }
#else
static void register_twins(void) {}
static void set_sim_devices(int n) { (void)n; }
#endif

/* ---- the program's state ---- */

typedef struct local {
  cuv_device_t *dev;
  collectives_module_t kernels;
  cuv_buffer_t *w, *g;
  int rank; /* in the group */
} local_t;

typedef struct options {
  int devices, processes, rank, ranks, port;
  unsigned steps, n;
  const char *host;
} options_t;

typedef struct app {
  options_t opt;
  uv_loop_t loop;
  cuv_uv_t *bridge;
  int nlocal;
  local_t local[MAX_LOCAL];
  cuv_comm_t *comm;
  unsigned step;
  int pending; /* submissions of the current phase not yet called back */
  int failed;
  float lr;
  cuv_nccl_id_t id;
  /* rank 0 of processes: the listener and the ranks it started */
  uv_tcp_t server;
  int served, spawned, exited;
  uv_process_t children[64];
  /* another rank: its connection to rank 0 */
  uv_tcp_t conn;
  uv_connect_t connect;
  uv_timer_t retry;
  size_t id_bytes;
  int tries;
} app_t;

static int report(app_t *app, const char *what, int rc) {
  /* Why, where cuv says: NCCL's failure, or initialization's while it has failed. */
  const char *why = cuv_nccl_error() ? cuv_nccl_error() : cuv_init_error();
  fprintf(stderr, "collectives (rank %d): %s: %s (%s)%s%s\n", app->local[0].rank, what,
          cuv_err_name(rc), cuv_strerror(rc), why ? ": " : "", why ? why : "");
  app->failed = 1;
  return rc;
}

static float initial_weight(unsigned i) { return (float)((int)(i % 13u) - 6); }

/* ---- the steps ---- */

static cuv_op_t *grad_op(app_t *app, local_t *l) {
  return dp_grad_launch(&l->kernels, cuv_for_num_elems(app->opt.n), app->opt.n, app->step,
                        (unsigned)l->rank, l->w, l->g);
}

static cuv_op_t *apply_op(app_t *app, local_t *l) {
  return dp_apply_launch(&l->kernels, cuv_for_num_elems(app->opt.n), app->opt.n, app->lr, l->g,
                         l->w);
}

/* Averages every rank's g, in place. */
static cuv_op_t *average_op(app_t *app) {
  cuv_buffer_t *g[MAX_LOCAL];
  for (int i = 0; i < app->nlocal; i++)
    g[i] = app->local[i].g;
  return cuv_comm_all_reduce(app->comm, NULL, g, app->opt.n, CUV_NCCL_FLOAT32, CUV_NCCL_AVG);
}

static void next_phase(app_t *app, int phase);

/* A submission's phase: its callback starts the next once the whole phase called back. */
typedef struct phase_arg {
  app_t *app;
  int phase;
} phase_arg_t;

static void phase_done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  phase_arg_t *p = arg;
  app_t *app = p->app;
  if (status != 0)
    report(app, "a step's submission", status);
  if (--app->pending == 0 && !app->failed)
    next_phase(app, p->phase + 1);
  else if (app->pending == 0)
    cuv_uv_close(app->bridge, NULL, NULL);
}

static void submit(app_t *app, cuv_op_t *op, int phase) {
  static phase_arg_t args[3];
  args[phase] = (phase_arg_t){app, phase};
  app->pending++;
  int rc = cuv_uv_submit(app->bridge, op, phase_done, &args[phase], NULL);
  if (rc != 0) {
    app->pending--;
    report(app, "cuv_uv_submit", rc);
  }
}

static void finish(app_t *app);

/* Phase 0: every rank's gradient; 1: the average; 2: every update. One local rank (a process
 * of a group) does all three in one tree instead, as phase 2. */
static void next_phase(app_t *app, int phase) {
  if (phase == 3) {
    if (++app->step < app->opt.steps)
      next_phase(app, 0);
    else
      finish(app);
    return;
  }
  if (app->nlocal == 1 && phase == 0) {
    local_t *l = &app->local[0];
    submit(app, cuv_seq(grad_op(app, l), cuv_seq(average_op(app), apply_op(app, l))), 2);
    return;
  }
  if (phase == 1) {
    submit(app, average_op(app), 1);
    return;
  }
  for (int i = 0; i < app->nlocal; i++)
    submit(app, phase == 0 ? grad_op(app, &app->local[i]) : apply_op(app, &app->local[i]), phase);
}

/* ---- the check ---- */

/* The same steps on the host, in double: the weights every rank must hold. */
static double *host_weights(const app_t *app) {
  double *w = malloc(app->opt.n * sizeof *w);
  int nranks = cuv_comm_size(app->comm);
  double mean_scale = (nranks + 1) / 2.0; /* the mean of rank + 1 */
  for (unsigned i = 0; i < app->opt.n; i++) {
    w[i] = initial_weight(i);
    for (unsigned s = 0; s < app->opt.steps; s++)
      w[i] -= app->lr * (0.5 * w[i] + mean_scale * ((i + s) % 7u));
  }
  return w;
}

static int check_rank(app_t *app, local_t *l, const double *want) {
  float *got = malloc(app->opt.n * sizeof *got);
  int rc = cuv_sync(cuv_memcpy_dtoh(got, l->w, 0, app->opt.n * sizeof *got), NULL);
  double worst = 0;
  for (unsigned i = 0; rc == 0 && i < app->opt.n; i++) {
    double error = fabs(got[i] - want[i]) / (1.0 + fabs(want[i]));
    worst = error > worst ? error : worst;
  }
  bool ok = rc == 0 && worst <= 1e-4;
  printf("rank %d (device %d): %u steps of %u weights, largest error %.2g: %s\n", l->rank,
         cuv_device_ordinal(l->dev), app->opt.steps, app->opt.n, worst, ok ? "OK" : "WRONG");
  free(got);
  return ok ? 0 : 1;
}

static void finish(app_t *app) {
  double *want = host_weights(app);
  for (int i = 0; i < app->nlocal; i++)
    app->failed |= check_rank(app, &app->local[i], want);
  free(want);
  cuv_uv_close(app->bridge, NULL, NULL);
}

/* ---- the communicator ---- */

static void comm_ready(int status, cuv_output_t *output, void *arg) {
  app_t *app = arg;
  if (status != 0) {
    report(app, "creating the communicator", status);
    cuv_uv_close(app->bridge, NULL, NULL);
    return;
  }
  app->comm = cuv_output_take(output).data;
  printf("rank %d: communicator of %d ranks ready (%d on this process)\n", app->local[0].rank,
         cuv_comm_size(app->comm), (int)cuv_comm_local_count(app->comm));
  next_phase(app, 0);
}

static void create_comm(app_t *app) {
  cuv_op_t *op;
  if (app->opt.ranks > 0) {
    op = cuv_comm_init_rank(app->local[0].dev, &app->id, app->local[0].rank, app->opt.ranks);
  } else {
    cuv_device_t *devs[MAX_LOCAL];
    for (int i = 0; i < app->nlocal; i++)
      devs[i] = app->local[i].dev;
    op = cuv_comm_init_all(devs, (size_t)app->nlocal);
  }
  int rc = cuv_uv_submit(app->bridge, op, comm_ready, app, NULL);
  if (rc != 0) {
    report(app, "submitting the communicator's creation", rc);
    cuv_uv_close(app->bridge, NULL, NULL);
  }
}

/* ---- rank 0: the id over TCP, and the other ranks' processes ---- */

static void free_handle(uv_handle_t *handle) { free(handle); }

static void id_written(uv_write_t *req, int status) {
  if (status != 0)
    fprintf(stderr, "collectives: sending the id: %s\n", uv_strerror(status));
  uv_close((uv_handle_t *)req->handle, free_handle);
  free(req);
}

static void on_connection(uv_stream_t *server, int status) {
  app_t *app = server->data;
  uv_tcp_t *client = malloc(sizeof *client);
  uv_write_t *req = malloc(sizeof *req);
  if (status != 0 || !client || !req || uv_tcp_init(&app->loop, client) != 0) {
    free(client);
    free(req);
    return;
  }
  uv_buf_t buf = uv_buf_init(app->id.bytes, sizeof app->id.bytes);
  if (uv_accept(server, (uv_stream_t *)client) != 0 ||
      uv_write(req, (uv_stream_t *)client, &buf, 1, id_written) != 0) {
    free(req);
    uv_close((uv_handle_t *)client, free_handle);
    return;
  }
  if (++app->served == app->opt.ranks - 1)
    uv_close((uv_handle_t *)&app->server, NULL); /* every rank has the id */
}

static void child_exited(uv_process_t *child, int64_t status, int signal) {
  app_t *app = child->data;
  if (status != 0 || signal != 0) {
    fprintf(stderr, "collectives: a rank's process ended with status %lld, signal %d\n",
            (long long)status, signal);
    app->failed = 1;
  }
  app->exited++;
  uv_close((uv_handle_t *)child, NULL);
}

/* --processes: the other ranks, this program again, with rank 0's address. */
static int spawn_ranks(app_t *app, const char *self) {
  char ranks[16], port[16], steps[16], n[16], rank[16];
  snprintf(ranks, sizeof ranks, "%d", app->opt.ranks);
  snprintf(port, sizeof port, "%d", app->opt.port);
  snprintf(steps, sizeof steps, "%u", app->opt.steps);
  snprintf(n, sizeof n, "%u", app->opt.n);
  for (int r = 1; r < app->opt.ranks && r <= (int)(sizeof app->children / sizeof app->children[0]);
       r++) {
    snprintf(rank, sizeof rank, "%d", r);
    char *args[] = {(char *)self, "--rank", rank, "--ranks", ranks, "--host", "127.0.0.1",
                    "--port", port, "--steps", steps, "--n", n, NULL};
    uv_stdio_container_t stdio[3] = {{UV_INHERIT_FD, {.fd = 0}},
                                     {UV_INHERIT_FD, {.fd = 1}},
                                     {UV_INHERIT_FD, {.fd = 2}}};
    uv_process_options_t o = {
        .exit_cb = child_exited, .file = self, .args = args, .stdio_count = 3, .stdio = stdio};
    app->children[r - 1].data = app;
    int rc = uv_spawn(&app->loop, &app->children[r - 1], &o);
    if (rc != 0)
      return report(app, "uv_spawn", rc);
    app->spawned++;
  }
  return 0;
}

/* Rank 0 listens (a port of the system's choosing with --processes) and makes the id. */
static int serve_id(app_t *app, const char *self) {
  struct sockaddr_in addr;
  int rc = cuv_nccl_unique_id(&app->id);
  if (rc != 0)
    return report(app, "cuv_nccl_unique_id", rc);
  if ((rc = uv_ip4_addr(app->opt.host, app->opt.port, &addr)) != 0 ||
      (rc = uv_tcp_init(&app->loop, &app->server)) != 0 ||
      (rc = uv_tcp_bind(&app->server, (const struct sockaddr *)&addr, 0)) != 0 ||
      (rc = uv_listen((uv_stream_t *)&app->server, 64, on_connection)) != 0)
    return report(app, "listening for the other ranks", rc);
  app->server.data = app;
  int len = sizeof addr;
  uv_tcp_getsockname(&app->server, (struct sockaddr *)&addr, &len);
  app->opt.port = ntohs(addr.sin_port);
  printf("rank 0: handing the group's id out on %s:%d\n", app->opt.host, app->opt.port);
  return app->opt.processes > 0 ? spawn_ranks(app, self) : 0;
}

/* ---- another rank: the id from rank 0 ---- */

static void id_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  app_t *app = handle->data;
  (void)suggested;
  *buf = uv_buf_init(app->id.bytes + app->id_bytes, (unsigned)(sizeof app->id - app->id_bytes));
}

static void id_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  app_t *app = stream->data;
  (void)buf;
  if (nread > 0)
    app->id_bytes += (size_t)nread;
  if (nread >= 0 && app->id_bytes < sizeof app->id)
    return;
  uv_close((uv_handle_t *)stream, NULL);
  if (app->id_bytes == sizeof app->id)
    create_comm(app);
  else
    report(app, "reading the id from rank 0", nread < 0 ? (int)nread : UV_EOF);
}

static void try_connect(app_t *app);

static void on_retry(uv_timer_t *timer) { try_connect(timer->data); }

static void connected(uv_connect_t *req, int status) {
  app_t *app = req->data;
  if (status == 0) {
    uv_close((uv_handle_t *)&app->retry, NULL);
    uv_read_start((uv_stream_t *)&app->conn, id_alloc, id_read);
    return;
  }
  uv_close((uv_handle_t *)&app->conn, NULL); /* rank 0 may not listen yet: again, later */
  if (++app->tries < CONNECT_TRIES) {
    uv_timer_start(&app->retry, on_retry, 100, 0);
    return;
  }
  uv_close((uv_handle_t *)&app->retry, NULL);
  report(app, "connecting to rank 0", status);
}

static void try_connect(app_t *app) {
  struct sockaddr_in addr;
  int rc = uv_ip4_addr(app->opt.host, app->opt.port, &addr);
  if (rc == 0 && (rc = uv_tcp_init(&app->loop, &app->conn)) == 0) {
    app->conn.data = app->connect.data = app;
    rc = uv_tcp_connect(&app->connect, &app->conn, (const struct sockaddr *)&addr, connected);
  }
  if (rc != 0)
    report(app, "connecting to rank 0", rc);
}

/* ---- set-up ---- */

static int open_local(app_t *app, local_t *l, int ordinal, int rank) {
  size_t bytes = app->opt.n * sizeof(float);
  float *w = malloc(bytes);
  for (unsigned i = 0; i < app->opt.n; i++)
    w[i] = initial_weight(i);
  l->rank = rank;
  int rc = cuv_device_open(&l->dev, ordinal);
  if (rc == 0)
    rc = collectives_module_load(&l->kernels, l->dev);
  if (rc == 0)
    rc = cuv_buffer_create(&l->w, l->dev, bytes);
  if (rc == 0)
    rc = cuv_buffer_create(&l->g, l->dev, bytes);
  if (rc == 0)
    rc = cuv_sync(cuv_memcpy_htod(l->w, 0, w, bytes, CUV_COPY_STAGE), NULL);
  free(w);
  return rc;
}

static void close_local(local_t *l) {
  cuv_buffer_unref(l->w);
  cuv_buffer_unref(l->g);
  collectives_module_destroy(&l->kernels);
  cuv_device_unref(l->dev);
}

/* NCCL refuses two ranks of a group on one GPU: --processes N needs N of them here. */
static bool too_few_gpus(const options_t *o) {
  int count = 0;
  if (o->processes == 0 || cuv_device_count(&count) != 0 || o->processes <= count)
    return false;
  fprintf(stderr, "collectives: --processes %d needs %d GPUs, this machine has %d\n",
          o->processes, o->processes, count);
  return true;
}

/* This process's ranks: every device, or (a group of processes) the rank's device. */
static int open_ranks(app_t *app) {
  int count = 0, rc = cuv_device_count(&count);
  if (rc != 0)
    return rc;
  bool group = app->opt.ranks > 0;
  app->nlocal = group ? 1 : count < MAX_LOCAL ? count : MAX_LOCAL;
  if (app->opt.devices > 0 && !group && app->opt.devices < app->nlocal)
    app->nlocal = app->opt.devices;
  for (int i = 0; rc == 0 && i < app->nlocal; i++)
    rc = open_local(app, &app->local[i], group ? app->opt.rank % count : i,
                    group ? app->opt.rank : i);
  return rc;
}

static int parse(int argc, char **argv, options_t *o) {
  *o = (options_t){.steps = 10, .n = 4096, .host = "127.0.0.1"};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    int x = atoi(v);
    if (strcmp(k, "--devices") == 0) o->devices = x;
    else if (strcmp(k, "--processes") == 0) o->processes = o->ranks = x;
    else if (strcmp(k, "--rank") == 0) o->rank = x;
    else if (strcmp(k, "--ranks") == 0) o->ranks = x;
    else if (strcmp(k, "--port") == 0) o->port = x;
    else if (strcmp(k, "--host") == 0) o->host = v;
    else if (strcmp(k, "--steps") == 0) o->steps = (unsigned)x;
    else if (strcmp(k, "--n") == 0) o->n = (unsigned)x;
    else return -1;
  }
  if ((argc - 1) % 2 || o->n == 0 || o->steps == 0 || o->rank < 0 ||
      (o->ranks > 0 && o->rank >= o->ranks) || (o->ranks > 0 && o->processes == 0 && !o->port &&
                                                o->rank > 0))
    return -1;
  return 0;
}

static int run(app_t *app) {
  char self[4096];
  size_t self_len = sizeof self;
  if (uv_exepath(self, &self_len) != 0)
    return report(app, "uv_exepath", UV_EINVAL);
  int rc = uv_loop_init(&app->loop);
  if (rc == 0)
    rc = cuv_uv_open(&app->bridge, &app->loop);
  if (rc != 0)
    return report(app, "opening the loop", rc);
  if (app->opt.ranks > 0 && app->opt.rank == 0)
    rc = serve_id(app, self);
  if (rc == 0 && (app->opt.ranks == 0 || app->opt.rank == 0))
    create_comm(app); /* rank 0 creates its own while it serves the id */
  else if (rc == 0) {
    uv_timer_init(&app->loop, &app->retry);
    app->retry.data = app;
    try_connect(app);
  }
  uv_run(&app->loop, UV_RUN_DEFAULT);
  if (app->spawned != app->exited)
    app->failed = 1;
  return uv_loop_close(&app->loop) == 0 ? 0 : report(app, "closing the loop", UV_EBUSY);
}

int main(int argc, char **argv) {
  static app_t app;
  if (parse(argc, argv, &app.opt) != 0) {
    fprintf(stderr, "usage: %s [--devices N | --processes N | --rank R --ranks N --host HOST "
                    "--port PORT] [--steps S] [--n ELEMENTS]\n", argv[0]);
    return EXIT_FAILURE;
  }
  app.lr = 0.1f;
  register_twins();
  if (app.opt.devices > 0)
    set_sim_devices(app.opt.devices);
  int rc = cuv_init(), version = 0;
  if (rc == 0)
    rc = cuv_nccl_version(&version);
  if (rc == CUV_ENODRIVER) {
    const char *why = cuv_init_error();
    fprintf(stderr, "collectives: no CUDA driver: %s; CUV_DRIVER=sim runs it on the CPU "
                    "simulator\n", why ? why : cuv_strerror(rc));
    return EXIT_NO_DRIVER;
  }
  if (rc == CUV_ENONCCL) {
    fprintf(stderr, "collectives: %s (%s)\n", cuv_strerror(rc), cuv_nccl_error());
    return EXIT_NO_DRIVER;
  }
  if (rc == 0 && too_few_gpus(&app.opt))
    return EXIT_NO_DRIVER;
  if (rc == 0)
    rc = open_ranks(&app);
  if (rc != 0)
    return report(&app, "setting up", rc), EXIT_FAILURE;
  if (run(&app) != 0)
    app.failed = 1;
  cuv_comm_unref(app.comm);
  for (int i = 0; i < app.nlocal; i++)
    close_local(&app.local[i]);
  return app.failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
