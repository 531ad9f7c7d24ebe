/* pipeline: then, zip, shared and fork in one GPU pipeline, submitted into a libuv loop through
 * the bridge (include/cuv/uv.h) while a uv_timer keeps ticking on the same loop.
 *
 *   pipeline [n] [pipelines] [stage-us] [ptx-file]
 *
 * Each pipeline, one submission (x, y uploaded once, used by two branches on two streams):
 *
 *   inputs = shared(zip(htod x, htod y))                          both uploads, run once
 *   fork(  clone(inputs) ; delay ; pl_axpy  u = a*x + y           the executing stream
 *          clone(inputs) ; delay ; pl_mul   v = x*y        )      another stream of the policy,
 *                                                                 ordered after the uploads
 *   then:  delay ; pl_sub  w = u - v ; download w                 joined back, same stream
 *
 * `delay` keeps the stream busy for stage-us microseconds (on the GPU and on the simulator alike),
 * so the timer visibly ticks while the GPU works. Every pipeline's w is checked on the host in its
 * completion callback, which runs on the loop thread. Exit status: 0 when every result is right,
 * 77 without any CUDA driver (run it with CUV_DRIVER=sim), 1 otherwise. The kernels launch through
 * the typed launchers that cuv-launchers generated from pipeline.cu (pipeline_launchers.h), loaded
 * from the PTX embedded in the program, or from ptx-file when one is given. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuv.h>
#include <cuv/uv.h>
#ifdef PIPELINE_WITH_SIM
#include <cuv/sim.h>
#endif

#include "pipeline_launchers.h"

#define EXIT_NO_DRIVER 77

#ifdef PIPELINE_WITH_SIM
/* Host twins of pipeline.cu for libcuv-sim: same names and parameters; each runs the whole grid.
 * Simulated device memory is host memory, so a device pointer is a host address. */
#define DEV(p) ((float *)(uintptr_t)(*(cuv_deviceptr_t *)(p)))

static int twin_axpy(const cuv_sim_launch_t *launch, void **params) {
  unsigned n = *(unsigned *)params[0];
  float a = *(float *)params[1];
  const float *x = DEV(params[2]), *y = DEV(params[3]);
  float *u = DEV(params[4]);
  for (unsigned i = 0; i < n; i++)
    u[i] = a * x[i] + y[i];
  return 0;
}

static int twin_mul(const cuv_sim_launch_t *launch, void **params) {
  unsigned n = *(unsigned *)params[0];
  const float *x = DEV(params[1]), *y = DEV(params[2]);
  float *v = DEV(params[3]);
  for (unsigned i = 0; i < n; i++)
    v[i] = x[i] * y[i];
  return 0;
}

static int twin_sub(const cuv_sim_launch_t *launch, void **params) {
  unsigned n = *(unsigned *)params[0];
  const float *u = DEV(params[1]), *v = DEV(params[2]);
  float *w = DEV(params[3]);
  for (unsigned i = 0; i < n; i++)
    w[i] = u[i] - v[i];
  return 0;
}

static int twin_delay(const cuv_sim_launch_t *launch, void **params) {
  unsigned long long ns = *(unsigned long long *)params[0];
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0) {
  }
  return 0;
}

static void register_twins(void) {
  const size_t u = sizeof(unsigned), f = sizeof(float), p = sizeof(cuv_deviceptr_t);
  const size_t axpy[] = {u, f, p, p, p}, three[] = {u, p, p, p}, delay[] = {8};
  cuv_sim_register_kernel("pl_axpy", twin_axpy, 5, axpy);
  cuv_sim_register_kernel("pl_mul", twin_mul, 4, three);
  cuv_sim_register_kernel("pl_sub", twin_sub, 4, three);
  cuv_sim_register_kernel("pl_delay", twin_delay, 1, delay);
}
#else
static void register_twins(void) {}
#endif

typedef struct app app_t;

/* One pipeline: its device buffers and host inputs. */
typedef struct pipeline {
  app_t *app;
  unsigned index;
  cuv_buffer_t *x, *y, *u, *v, *w;
  float *hx, *hy;
  int ok;
} pipeline_t;

struct app {
  uv_loop_t loop;
  uv_timer_t timer;
  cuv_uv_t *bridge;
  cuv_device_t *dev;
  pipeline_module_t kernels; /* pl_axpy, pl_mul, pl_sub, pl_delay */
  unsigned n;
  float a;
  unsigned long long stage_ns;
  unsigned count, finished, failed;
  unsigned ticks, ticks_while_busy;
  uint64_t t0;
  pipeline_t *pipelines;
};

static double ms_since(const app_t *app) { return (double)(uv_hrtime() - app->t0) / 1e6; }

/* A call that failed; while initialization has failed (every call then fails with its status),
 * also why: cuv_init_error names what cuv tried and the reason (the loader's, for a driver). */
static int fail(const char *what, int rc) {
  const char *why = cuv_init_error();
  fprintf(stderr, "pipeline: %s: %s (%s)%s%s\n", what, cuv_err_name(rc), cuv_strerror(rc),
          why ? ": " : "", why ? why : "");
  return EXIT_FAILURE;
}

/* One thread: it only watches the clock. */
static cuv_op_t *delay_op(app_t *app) {
  return pl_delay_launch(&app->kernels, cuv_for_num_elems_block(1, 1), app->stage_ns);
}

/* then: runs at execution time, once both branches were enqueued and joined. It receives the
 * fork's tuple (two units) and returns the last stage, enqueued on the same stream. */
static cuv_op_t *last_stage(cuv_output_t *branches, void *arg) {
  pipeline_t *p = arg;
  app_t *app = p->app;
  cuv_output_release(branches);
  cuv_op_t *sub = pl_sub_launch(&app->kernels, cuv_for_num_elems(app->n), app->n, p->u, p->v, p->w);
  return cuv_seq(cuv_seq(delay_op(app), sub), cuv_download(p->w, 0, app->n * sizeof(float)));
}

static cuv_op_t *build(pipeline_t *p) {
  app_t *app = p->app;
  size_t bytes = app->n * sizeof(float);
  cuv_op_t *uploads[] = {cuv_memcpy_htod(p->x, 0, p->hx, bytes, CUV_COPY_STAGE),
                         cuv_memcpy_htod(p->y, 0, p->hy, bytes, CUV_COPY_STAGE)};
  cuv_shared_t *inputs = cuv_shared(cuv_zip(uploads, 2));

  cuv_launch_config_t all = cuv_for_num_elems(app->n);
  cuv_op_t *axpy = pl_axpy_launch(&app->kernels, all, app->n, app->a, p->x, p->y, p->u);
  cuv_op_t *mul = pl_mul_launch(&app->kernels, all, app->n, p->x, p->y, p->v);
  cuv_op_t *branches[] = {
      cuv_seq(cuv_shared_clone(inputs), cuv_seq(delay_op(app), axpy)),
      cuv_seq(cuv_shared_clone(inputs), cuv_seq(delay_op(app), mul)),
  };
  cuv_shared_unref(inputs); /* the clones keep it */
  return cuv_then(cuv_fork(branches, 2), last_stage, p);
}

static void finish(app_t *app) {
  uv_timer_stop(&app->timer);
  uv_close((uv_handle_t *)&app->timer, NULL);
  cuv_uv_close(app->bridge, NULL, NULL); /* nothing left in flight: closes at once */
}

/* Completion, on the loop thread: w must be a*x + y - x*y. */
static void on_done(int status, cuv_output_t *out, void *arg) {
  pipeline_t *p = arg;
  app_t *app = p->app;
  double max_error = 0.0;
  if (status == 0) {
    const float *w = out->data;
    for (unsigned i = 0; i < app->n; i++) {
      double want = (double)app->a * p->hx[i] + p->hy[i] - (double)p->hx[i] * p->hy[i];
      double error = fabs(w[i] - want) / (1.0 + fabs(want));
      max_error = error > max_error ? error : max_error;
    }
    p->ok = max_error <= 1e-5;
    printf("[%7.2f ms] pipeline %u done: w = a*x + y - x*y, max error %.2g %s\n", ms_since(app),
           p->index, max_error, p->ok ? "OK" : "WRONG");
  } else {
    printf("[%7.2f ms] pipeline %u failed: %s\n", ms_since(app), p->index, cuv_strerror(status));
  }
  app->failed += !p->ok;
  if (++app->finished == app->count)
    finish(app);
}

static void on_tick(uv_timer_t *timer) {
  app_t *app = timer->data;
  unsigned busy = cuv_uv_pending(app->bridge);
  app->ticks++;
  app->ticks_while_busy += busy > 0;
  printf("[%7.2f ms] tick %u (%u pipelines in flight)\n", ms_since(app), app->ticks, busy);
}

static void random_floats(float *out, unsigned n, unsigned *seed) {
  for (unsigned i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    out[i] = (float)(*seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
  }
}

/* From ptx when given, else the PTX embedded in the program. */
static int load_kernels(app_t *app, const char *ptx) {
  int rc = ptx ? pipeline_module_load_file(&app->kernels, app->dev, ptx)
               : pipeline_module_load(&app->kernels, app->dev);
  if (rc != 0)
    fprintf(stderr, "pipeline: cannot load %s\n", ptx ? ptx : "the embedded PTX");
  return rc;
}

static int make_pipeline(app_t *app, pipeline_t *p, unsigned index, unsigned *seed) {
  size_t bytes = app->n * sizeof(float);
  *p = (pipeline_t){.app = app, .index = index};
  p->hx = malloc(bytes);
  p->hy = malloc(bytes);
  if (!p->hx || !p->hy)
    return CUV_ENOMEM;
  random_floats(p->hx, app->n, seed);
  random_floats(p->hy, app->n, seed);
  cuv_buffer_t **bufs[] = {&p->x, &p->y, &p->u, &p->v, &p->w};
  for (size_t i = 0; i < 5; i++) {
    int rc = cuv_buffer_create(bufs[i], app->dev, bytes);
    if (rc != 0)
      return rc;
  }
  return 0;
}

static void free_pipeline(pipeline_t *p) {
  cuv_buffer_t *bufs[] = {p->x, p->y, p->u, p->v, p->w};
  for (size_t i = 0; i < 5; i++)
    if (bufs[i])
      cuv_buffer_unref(bufs[i]);
  free(p->hx);
  free(p->hy);
}

int main(int argc, char **argv) {
  app_t app = {.a = 2.5f};
  app.n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1u << 16;
  app.count = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 4;
  app.stage_ns = (argc > 3 ? strtoull(argv[3], NULL, 10) : 4000) * 1000u;
  const char *ptx = argc > 4 ? argv[4] : NULL;
  app.n = app.n ? app.n : 1;
  app.count = app.count ? app.count : 1;
  setvbuf(stdout, NULL, _IOLBF, 0);

  register_twins();
  int rc = cuv_init();
  if (rc == CUV_ENODRIVER) {
    const char *why = cuv_init_error();
    fprintf(stderr, "pipeline: no CUDA driver: %s; CUV_DRIVER=sim runs it on the CPU simulator\n",
            why ? why : cuv_strerror(rc));
    return EXIT_NO_DRIVER;
  }
  if (rc != 0)
    return fail("cuv_init", rc);
  if ((rc = cuv_device_open(&app.dev, 0)) != 0)
    return fail("cuv_device_open", rc);
  printf("driver: %s, device: %s\n", cuv_driver_is_sim() ? "sim" : "cuda",
         cuv_device_name(app.dev));
  if ((rc = load_kernels(&app, ptx)) != 0)
    return fail("loading the kernels", rc);

  app.pipelines = calloc(app.count, sizeof *app.pipelines);
  if (!app.pipelines)
    return fail("calloc", CUV_ENOMEM);
  unsigned seed = (unsigned)time(NULL);
  for (unsigned i = 0; i < app.count; i++)
    if ((rc = make_pipeline(&app, &app.pipelines[i], i, &seed)) != 0)
      return fail("making the inputs", rc);

  uv_loop_init(&app.loop);
  if ((rc = cuv_uv_open(&app.bridge, &app.loop)) != 0)
    return fail("cuv_uv_open", rc);
  uv_timer_init(&app.loop, &app.timer);
  app.timer.data = &app;
  uint64_t tick_ms = app.stage_ns >= 4000000u ? app.stage_ns / 2000000u : 2;
  uv_timer_start(&app.timer, on_tick, tick_ms, tick_ms);

  app.t0 = uv_hrtime();
  for (unsigned i = 0; i < app.count; i++) {
    pipeline_t *p = &app.pipelines[i];
    if ((rc = cuv_uv_submit(app.bridge, build(p), on_done, p, NULL)) != 0)
      return fail("cuv_uv_submit", rc);
  }
  printf("[%7.2f ms] submitted %u pipelines of n=%u (2 uploads, 2 branches on 2 streams, "
         "3 kernels + 3 delays of %llu us, 1 download each); the timer ticks every %" PRIu64
         " ms\n",
         ms_since(&app), app.count, app.n, app.stage_ns / 1000u, tick_ms);

  uv_run(&app.loop, UV_RUN_DEFAULT); /* returns once the last callback closed the bridge */
  int closed = uv_loop_close(&app.loop);

  printf("%u of %u pipelines correct; the loop ticked %u times while GPU work was in flight\n",
         app.count - app.failed, app.count, app.ticks_while_busy);
  for (unsigned i = 0; i < app.count; i++)
    free_pipeline(&app.pipelines[i]);
  free(app.pipelines);
  pipeline_module_destroy(&app.kernels);
  cuv_device_unref(app.dev);
  if (closed != 0) {
    fprintf(stderr, "pipeline: the loop still had handles open\n");
    return EXIT_FAILURE;
  }
  return app.failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
