/* tcp-infer: an HTTP/1.1 inference server on 127.0.0.1, built on libuv, whose GPU work goes
 * through cuv and comes back into the loop through the bridge (README.md: protocol, options).
 *
 *   tcp-infer [--port N] [--baseline] [--duration SECONDS|none] [--max-batch N]
 *             [--workspaces N] [--seed N] [--sim-delay-us N] [--cublas] [--ptx FILE]
 *
 * Prints "listening on 127.0.0.1:PORT" once it accepts connections (--port 0: an ephemeral
 * port). Stops on SIGINT, SIGTERM or after --duration: stops accepting, closes the connections,
 * lets the GPU work in flight complete, frees everything and exits 0. Exit status 77 when no CUDA
 * driver can be loaded (run it with CUV_DRIVER=sim), 1 on any other start-up failure. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

#define EXIT_NO_DRIVER 77

typedef struct options {
  int port;
  bool baseline, cublas;
  double duration; /* seconds; 0: until a signal */
  unsigned max_batch, workspaces, sim_delay_us;
  uint64_t seed;
  const char *ptx;
} options_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: tcp-infer [options]\n"
          "  --port N          TCP port on 127.0.0.1 (default 8080; 0: ephemeral, printed)\n"
          "  --baseline        run the GPU work in libuv's thread pool with a blocking cuv_sync\n"
          "  --duration S      stop after S seconds (default: none, until SIGINT/SIGTERM)\n"
          "  --max-batch N     largest batch accepted (default %u; more is 413)\n"
          "  --workspaces N    requests on the GPU at once (default 64)\n"
          "  --seed N          weight seed (default %u; clients must use the same)\n"
          "  --sim-delay-us N  on the simulator, each layer takes at least N us\n"
          "  --cublas          layers through cuBLAS (dlopen'd) when it loads, else the kernel\n"
          "  --ptx FILE        the kernel's PTX (default: the one built beside the program)\n",
          MLP_DEFAULT_MAX_BATCH, MLP_DEFAULT_SEED);
}

static int parse_options(int argc, char **argv, options_t *o) {
  static const struct option longs[] = {
      {"port", required_argument, NULL, 'p'},       {"baseline", no_argument, NULL, 'b'},
      {"duration", required_argument, NULL, 'd'},   {"max-batch", required_argument, NULL, 'm'},
      {"workspaces", required_argument, NULL, 'w'}, {"seed", required_argument, NULL, 's'},
      {"sim-delay-us", required_argument, NULL, 'D'}, {"cublas", no_argument, NULL, 'c'},
      {"ptx", required_argument, NULL, 'x'},        {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  *o = (options_t){.port = 8080, .max_batch = MLP_DEFAULT_MAX_BATCH, .workspaces = 64,
                   .seed = MLP_DEFAULT_SEED, .ptx = TCP_INFER_PTX_PATH};
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 'p': o->port = atoi(optarg); break;
    case 'b': o->baseline = true; break;
    case 'd': o->duration = strcmp(optarg, "none") ? atof(optarg) : 0.0; break;
    case 'm': o->max_batch = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'w': o->workspaces = (unsigned)strtoul(optarg, NULL, 10); break;
    case 's': o->seed = strtoull(optarg, NULL, 0); break;
    case 'D': o->sim_delay_us = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'c': o->cublas = true; break;
    case 'x': o->ptx = optarg; break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
  }
  if (optind != argc || o->port < 0 || o->port > 65535 || o->max_batch == 0 ||
      o->max_batch > 65536 || o->workspaces == 0 || o->duration < 0) {
    usage(stderr);
    return -1;
  }
  return 0;
}

static void stop(server_t *s, const char *why) {
  if (s->stopping)
    return;
  s->stopping = true;
  printf("tcp-infer: stopping (%s)\n", why);
  uv_close((uv_handle_t *)&s->listener, NULL);
  uv_close((uv_handle_t *)&s->sigint, NULL);
  uv_close((uv_handle_t *)&s->sigterm, NULL);
  uv_close((uv_handle_t *)&s->duration, NULL);
  conn_close_all(s);
  /* Work in flight still completes (its requests are orphans now) before the bridge closes. */
  if (s->bridge)
    cuv_uv_close(s->bridge, NULL, NULL);
}

static void on_signal(uv_signal_t *handle, int signum) {
  stop(handle->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_duration(uv_timer_t *timer) { stop(timer->data, "duration elapsed"); }

static int fail(const char *what, int rc) {
  fprintf(stderr, "tcp-infer: %s: %s (%s)\n", what, cuv_err_name(rc), cuv_strerror(rc));
  return EXIT_FAILURE;
}

static int listen_on(server_t *s, int port) {
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", port, &addr);
  uv_tcp_init(s->loop, &s->listener);
  s->listener.data = s;
  int rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&s->listener, 1024, conn_on_connection);
  if (rc != 0) {
    fprintf(stderr, "tcp-infer: cannot listen on 127.0.0.1:%d: %s\n", port, uv_strerror(rc));
    return -1;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
  return ntohs(((struct sockaddr_in *)&bound)->sin_port);
}

int main(int argc, char **argv) {
  options_t o;
  if (parse_options(argc, argv, &o) != 0)
    return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN); /* a peer that went away is a write error, not a signal */

  infer_register_twin(o.sim_delay_us);
  int rc = cuv_init();
  if (rc == CUV_ENODRIVER) {
    fprintf(stderr, "tcp-infer: %s\n", cuv_strerror(rc));
    return EXIT_NO_DRIVER;
  }
  if (rc != 0)
    return fail("cuv_init", rc);

  static server_t srv; /* large (read buffer), one per process */
  server_t *s = &srv;
  s->max_batch = o.max_batch;
  s->baseline = o.baseline;
  conn_settings_init(&s->settings);
  if ((rc = cuv_device_open(&s->dev, 0)) != 0)
    return fail("cuv_device_open", rc);
  if ((rc = infer_init(s, o.ptx, o.seed, o.workspaces)) != 0)
    return fail("loading the model", rc);
  if (o.cublas)
    s->cublas = infer_cublas_open(s) == 0;

  uv_loop_t loop;
  uv_loop_init(&loop);
  s->loop = &loop;
  if (!s->baseline && (rc = cuv_uv_open(&s->bridge, &loop)) != 0)
    return fail("cuv_uv_open", rc);
  int port = listen_on(s, o.port);
  if (port < 0)
    return EXIT_FAILURE;
  uv_signal_init(&loop, &s->sigint);
  uv_signal_init(&loop, &s->sigterm);
  s->sigint.data = s->sigterm.data = s;
  uv_signal_start(&s->sigint, on_signal, SIGINT);
  uv_signal_start(&s->sigterm, on_signal, SIGTERM);
  uv_timer_init(&loop, &s->duration);
  s->duration.data = s;
  if (o.duration > 0)
    uv_timer_start(&s->duration, on_duration, (uint64_t)(o.duration * 1000.0), 0);

  printf("tcp-infer: %s mode on %s (%s), MLP %u-%u-%u (ReLU) with %s, seed %llu, "
         "max batch %u, %u workspaces\n",
         s->baseline ? "baseline (uv_queue_work + cuv_sync)" : "cuv (cuv_uv_submit)",
         cuv_driver_is_sim() ? "the simulator" : "the GPU", cuv_device_name(s->dev), MLP_IN,
         MLP_HIDDEN, MLP_OUT, s->cublas ? "cuBLAS" : "its own kernel",
         (unsigned long long)o.seed, o.max_batch, o.workspaces);
  printf("listening on 127.0.0.1:%d\n", port);

  uv_run(&loop, UV_RUN_DEFAULT);

  printf("tcp-infer: served %llu requests on %llu connections (%llu GPU batches, %llu responses "
         "dropped)\n",
         (unsigned long long)s->n.requests_total, (unsigned long long)s->n.connections_total,
         (unsigned long long)s->n.gpu_completed, (unsigned long long)s->n.responses_dropped);
  infer_free(s);
  cuv_device_close(s->dev);
  if (uv_loop_close(&loop) != 0) {
    fprintf(stderr, "tcp-infer: handles left open at exit\n");
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
