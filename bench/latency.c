/* cuv-bench-latency: how fast GPU completions reach a libuv loop, against the raw driver in the
 * same run: the raw rows are the floor (the driver calls alone), and cuv's rows stand beside them.
 *
 *   cuv-bench-latency [--iters N] [--tp-ms MS] [--idle-ms MS] [--long-ms MS]
 *
 * 1. Latency of one empty kernel, submit -> callback on the loop thread, one in flight, N times
 *    (p50/p90/p99/mean): raw launch + cuStreamSynchronize; raw launch + cuLaunchHostFunc whose
 *    host function sends a uv_async_t; raw launch + flag write polled by the loop from a uv_idle_t
 *    (the floor the bridge's keepalive aims at); cuv_sync; and the bridge (cuv_uv_submit) with
 *    the process's configured completion (CUV_SPIN_BUDGET_US, CUV_HOST_SYNC: cuv_config_t), with
 *    spin 0 (the reactor alone), and with host sync spin and block. cuv reads its environment
 *    once per process, so the last three rows come from this program re-executed with that
 *    environment (--child MODE prints one row).
 * 2. Throughput: K = 1, 4, 16, 64, 256 independent pipelines into one loop thread, each
 *    resubmitting its empty kernel from its callback, for MS milliseconds: completions/s of the
 *    bridge against raw launch + cuStreamWriteValue32 polled by a spinning thread that wakes the
 *    loop (tp_poller below), and against raw launch + cuLaunchHostFunc.
 * 3. Reactor CPU with nothing in flight: the cuv-reactor thread's CPU time over MS idle
 *    milliseconds after the work (it must park), and the whole process's.
 * 4. Reactor CPU during long work: one kernel that runs --long-ms milliseconds (sleep_then_write),
 *    submitted into a cuv_queue that this thread waits on; the cuv-reactor thread's and the
 *    process's CPU over its run, and how long after the kernel's own duration its callback ran.
 *
 * With CUV_BENCH_CSV_DIR set (an existing folder), each latency row also writes its distribution
 * (latency-<row>.csv: quantile, microseconds; 201 points) and section 2 writes throughput.csv
 * (K, raw flag, raw hostfn, cuv bridge, completions/s), for bench/plot.sh.
 *
 * The raw rows call the driver cuv loaded (CUV_DRIVER: libcuda.so.1, or libcuv-sim, which this
 * program links for the kernels' host twins), resolved with dlopen + cuGetProcAddress_v2, in the
 * context cuv uses. Kernels come from the test module (tests/kernels). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuv/uv.h>

#include "raw.h"
#include "twins.h"

#define MAX_K 256
#define STREAMS 4 /* raw pipelines spread over as many streams as cuv's default policy has */

static int iters = 20000, tp_ms = 500, idle_ms = 1000, long_ms = 2000;

static void die(const char *what, int rc) {
  fprintf(stderr, "cuv-bench-latency: %s: %s (%s)\n", what, cuv_err_name(rc), cuv_strerror(rc));
  exit(1);
}

/* ---- results ---- */

typedef struct row {
  const char *name;
  double p50, p90, p99, mean; /* microseconds */
  int n;
  int ok;
  char path[128]; /* which completion path delivered (cuv rows) */
} row_t;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* CUV_BENCH_CSV_DIR/NAME, opened for writing, or NULL when the variable is unset. */
static FILE *csv_open(const char *name) {
  const char *dir = getenv("CUV_BENCH_CSV_DIR");
  if (!dir || !*dir)
    return NULL;
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f)
    fprintf(stderr, "cuv-bench-latency: cannot write %s\n", path);
  return f;
}

/* The sorted samples of a row as 201 quantiles, in latency-<row>.csv (the row's name with every
 * character but letters and digits made '-'). */
static void csv_distribution(const char *name, const uint64_t *sorted, int n) {
  char file[160] = "latency-";
  size_t at = strlen(file);
  for (const char *c = name; *c && at < sizeof file - 5; c++)
    file[at++] = isalnum((unsigned char)*c) ? (char)tolower((unsigned char)*c) : '-';
  snprintf(file + at, sizeof file - at, ".csv");
  FILE *f = csv_open(file);
  if (!f)
    return;
  fprintf(f, "# %s\nquantile,us\n", name);
  for (int i = 0; i <= 200; i++) {
    int k = (int)((long long)(n - 1) * i / 200);
    fprintf(f, "%.3f,%.3f\n", i / 200.0, sorted[k] / 1e3);
  }
  fclose(f);
}

static row_t summarize(const char *name, uint64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_u64);
  csv_distribution(name, v, n);
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += (double)v[i];
  return (row_t){.name = name, .p50 = v[n / 2] / 1e3, .p90 = v[n * 9 / 10] / 1e3,
                 .p99 = v[n * 99 / 100] / 1e3, .mean = sum / n / 1e3, .n = n, .ok = 1};
}

static cuv_stats_t stats_before;
static void path_begin(void) { cuv_stats(&stats_before); }
static void path_end(row_t *r) {
  cuv_stats_t s;
  cuv_stats(&s);
  snprintf(r->path, sizeof r->path,
           "reactor %llu (polled %llu) hostfn %llu spin %llu sync %llu fallback %llu",
           (unsigned long long)(s.completed_reactor - stats_before.completed_reactor),
           (unsigned long long)(s.completed_polled - stats_before.completed_polled),
           (unsigned long long)(s.completed_hostfn - stats_before.completed_hostfn),
           (unsigned long long)(s.completed_spin - stats_before.completed_spin),
           (unsigned long long)(s.completed_sync - stats_before.completed_sync),
           (unsigned long long)(s.fallbacks - stats_before.fallbacks));
}

/* ---- cuv and the raw driver it loaded ---- */

static cuv_device_t *dev;
static cuv_kernel_t *empty;
static uv_loop_t *loop;

static struct {
  __typeof__(cuLaunchKernel) *launch;
  __typeof__(cuStreamSynchronize) *synchronize;
  __typeof__(cuStreamCreate) *stream_create;
  __typeof__(cuLaunchHostFunc) *host_func;
  __typeof__(cuStreamWriteValue32) *write_value;
  __typeof__(cuMemHostAlloc) *host_alloc;
  __typeof__(cuMemHostGetDevicePointer) *host_device_ptr;
  CUfunction fn;
  CUstream st[STREAMS];
  volatile uint32_t *slots; /* pinned, device-mapped: one flag per pipeline */
  CUdeviceptr slots_dev;
} raw;

static cuv_op_t *empty_op(void) { return cuv_launch(empty, CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0); }

static void setup_cuv(void) {
  cuvt_register_twins(); /* for the simulator; harmless on a GPU */
  int rc = bench_cuv_kernel(CUV_BENCH_PTX_PATH, "empty_kernel", &dev, &empty);
  if (rc < 0)
    die("setup", rc);
  loop = uv_default_loop();
}

static void setup_raw(void) {
  raw_open("cuv-bench-latency", dev);
  raw_resolve("cuLaunchKernel", &raw.launch);
  raw_resolve("cuStreamSynchronize", &raw.synchronize);
  raw_resolve("cuStreamCreate", &raw.stream_create);
  raw_resolve("cuLaunchHostFunc", &raw.host_func);
  raw_resolve("cuStreamWriteValue32", &raw.write_value);
  raw_resolve("cuMemHostAlloc", &raw.host_alloc);
  raw_resolve("cuMemHostGetDevicePointer", &raw.host_device_ptr);
  raw.fn = raw_kernel(CUV_BENCH_PTX_PATH, "empty_kernel");
  for (int i = 0; i < STREAMS; i++)
    raw_check("cuStreamCreate", raw.stream_create(&raw.st[i], CU_STREAM_NON_BLOCKING));
  void *host;
  raw_check("cuMemHostAlloc", raw.host_alloc(&host, MAX_K * sizeof(uint32_t),
                                             CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  memset(host, 0, MAX_K * sizeof(uint32_t));
  raw.slots = host;
  raw_check("cuMemHostGetDevicePointer", raw.host_device_ptr(&raw.slots_dev, host, 0));
}

static void raw_launch(CUstream s) {
  raw_check("cuLaunchKernel", raw.launch(raw.fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
}

static uint32_t slot_load(int k) { return __atomic_load_n(&raw.slots[k], __ATOMIC_ACQUIRE); }

static void raw_drain_streams(void) {
  for (int i = 0; i < STREAMS; i++)
    raw_check("cuStreamSynchronize", raw.synchronize(raw.st[i]));
}

/* ---- 1. latency: one in flight, resubmitted from its completion ---- */

static struct {
  uint64_t *v;
  int n, i, warm;  /* samples wanted, taken; warm-up iterations left */
  uint64_t t0;
  void (*submit)(void);
  uv_async_t async;
  uv_idle_t idle;
  uint32_t expect;
} lat;

/* Records one completion; the next submission, or the end. */
static int lat_record(void) {
  uint64_t t = now_ns() - lat.t0;
  if (lat.warm > 0)
    lat.warm--;
  else
    lat.v[lat.i++] = t;
  return lat.i < lat.n;
}

static void lat_begin(void (*submit)(void)) {
  lat.i = 0;
  lat.warm = iters / 10 < 100 ? iters / 10 : 100;
  lat.submit = submit;
}

/* raw: launch + cuStreamSynchronize (no loop: the blocking floor). */
static row_t lat_raw_sync(void) {
  lat_begin(NULL);
  while (lat.i < lat.n) {
    lat.t0 = now_ns();
    raw_launch(raw.st[0]);
    raw_check("cuStreamSynchronize", raw.synchronize(raw.st[0]));
    lat_record();
  }
  return summarize("raw: launch + cuStreamSynchronize", lat.v, lat.n);
}

/* raw: launch + cuLaunchHostFunc -> uv_async_send -> the loop. */
static void CUDA_CB hostfn_wake(void *arg) { uv_async_send(&lat.async); }

static void hostfn_submit(void) {
  lat.t0 = now_ns();
  raw_launch(raw.st[0]);
  raw_check("cuLaunchHostFunc", raw.host_func(raw.st[0], hostfn_wake, NULL));
}

static void on_hostfn_async(uv_async_t *h) {
  if (lat_record())
    hostfn_submit();
  else
    uv_unref((uv_handle_t *)h);
}

static row_t lat_raw_hostfn(void) {
  lat_begin(hostfn_submit);
  uv_async_init(loop, &lat.async, on_hostfn_async);
  hostfn_submit();
  uv_run(loop, UV_RUN_DEFAULT);
  raw_drain_streams(); /* the last host function has returned: nothing sends any more */
  uv_close((uv_handle_t *)&lat.async, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  return summarize("raw: launch + hostfn -> uv_async", lat.v, lat.n);
}

/* raw: launch + flag write, the loop polls the flag from a uv_idle_t. */
static void flag_submit(void) {
  lat.t0 = now_ns();
  lat.expect++;
  raw_launch(raw.st[0]);
  raw_check("cuStreamWriteValue32", raw.write_value(raw.st[0], raw.slots_dev, lat.expect, 0));
}

static void on_flag_idle(uv_idle_t *h) {
  if (slot_load(0) != lat.expect)
    return;
  if (lat_record())
    flag_submit();
  else
    uv_idle_stop(h);
}

static row_t lat_raw_flag_idle(void) {
  lat_begin(flag_submit);
  lat.expect = 1000000;
  uv_idle_init(loop, &lat.idle);
  flag_submit();
  uv_idle_start(&lat.idle, on_flag_idle);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&lat.idle, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  return summarize("raw: launch + flag, loop idle-polls", lat.v, lat.n);
}

/* raw: launch + flag write, a spinning thread sees the flag and wakes the loop (the floor of the
 * reactor path, spin 0). */
static atomic_int poll_run;
static _Atomic uint32_t poll_want; /* the value the flag will take next (0: none) */

static void *flag_poller(void *arg) {
  uint32_t sent = 0;
  uint64_t sent_at = 0;
  while (atomic_load_explicit(&poll_run, memory_order_relaxed)) {
    uint32_t want = atomic_load_explicit(&poll_want, memory_order_acquire);
    if (!want || slot_load(0) != want)
      continue;
    /* One wake per completion; again after 1 ms if the loop has not moved on, so a wake the loop
     * consumed early (it found the flag not yet visible) cannot stall the row. */
    uint64_t now = now_ns();
    if (want != sent || now - sent_at > 1000000u) {
      sent = want;
      sent_at = now;
      uv_async_send(&lat.async);
    }
  }
  return NULL;
}

static void flag_submit_polled(void) {
  atomic_store_explicit(&poll_want, lat.expect + 1, memory_order_release);
  flag_submit();
}

static void on_flag_async(uv_async_t *h) {
  if (slot_load(0) != lat.expect)
    return; /* a coalesced or early wake */
  if (lat_record())
    flag_submit_polled();
  else
    uv_unref((uv_handle_t *)h);
}

static row_t lat_raw_flag_reactor(void) {
  lat_begin(flag_submit_polled);
  lat.expect = 2000000;
  uv_async_init(loop, &lat.async, on_flag_async);
  atomic_store(&poll_run, 1);
  pthread_t poller;
  if (pthread_create(&poller, NULL, flag_poller, NULL) != 0)
    die("pthread_create", CUV_ETHREAD);
  flag_submit_polled();
  uv_run(loop, UV_RUN_DEFAULT);
  atomic_store(&poll_run, 0);
  pthread_join(poller, NULL);
  uv_close((uv_handle_t *)&lat.async, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  return summarize("raw: launch + flag -> thread -> uv_async", lat.v, lat.n);
}

/* cuv_sync of the empty kernel (no loop). */
static row_t lat_cuv_sync(void) {
  lat_begin(NULL);
  path_begin();
  while (lat.i < lat.n) {
    lat.t0 = now_ns();
    int rc = cuv_sync(empty_op(), NULL);
    if (rc < 0)
      die("cuv_sync", rc);
    lat_record();
  }
  row_t r = summarize("cuv_sync", lat.v, lat.n);
  path_end(&r);
  return r;
}

/* The bridge: the clock starts before the op is built. */
static cuv_uv_t *bridge;

static void bridge_done(int status, cuv_output_t *out, void *arg);
static void bridge_submit(void) {
  lat.t0 = now_ns();
  int rc = cuv_uv_submit(bridge, empty_op(), bridge_done, NULL, NULL);
  if (rc < 0)
    die("cuv_uv_submit", rc);
}

static void bridge_done(int status, cuv_output_t *out, void *arg) {
  if (status < 0)
    die("bridge callback", status);
  if (lat_record())
    bridge_submit();
}

static void close_bridge(void) {
  cuv_uv_close(bridge, NULL, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
}

static row_t lat_bridge(const char *name) {
  int rc = cuv_uv_open(&bridge, loop);
  if (rc < 0)
    die("cuv_uv_open", rc);
  lat_begin(bridge_submit);
  path_begin();
  bridge_submit();
  uv_run(loop, UV_RUN_DEFAULT);
  row_t r = summarize(name, lat.v, lat.n);
  path_end(&r);
  close_bridge();
  return r;
}

/* ---- re-executing ourselves with another environment, for one bridge row ---- */

typedef struct child_mode {
  const char *arg;   /* --child ARG */
  const char *name;  /* row label */
  const char *env[2]; /* set in the child (NULL: keep the parent's) */
} child_mode_t;

static const child_mode_t child_modes[] = {
    {"spin0", "cuv bridge, spin 0 (reactor)", {"CUV_SPIN_BUDGET_US=0", "CUV_HOST_SYNC=off"}},
    {"hostsync-spin", "cuv bridge, host sync spin", {"CUV_HOST_SYNC=spin", NULL}},
    {"hostsync-block", "cuv bridge, host sync block", {"CUV_HOST_SYNC=block", NULL}},
};
#define N_CHILD_MODES (sizeof child_modes / sizeof child_modes[0])

extern char **environ;

/* The environment with `set` (NAME=VALUE strings) replacing or adding variables. */
static char **child_env(const char *const *set, size_t n_set) {
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = calloc(n + n_set + 1, sizeof *env);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int replaced = 0;
    for (size_t j = 0; j < n_set; j++) {
      if (!set[j])
        continue;
      size_t name_len = (size_t)(strchr(set[j], '=') - set[j]) + 1;
      replaced |= strncmp(environ[i], set[j], name_len) == 0;
    }
    if (!replaced)
      env[m++] = environ[i];
  }
  for (size_t j = 0; j < n_set; j++)
    if (set[j])
      env[m++] = (char *)set[j];
  return env;
}

/* Runs `self --child MODE --iters N` and reads its one result line. */
static row_t run_child(const child_mode_t *mode) {
  row_t r = {.name = mode->name};
  int fds[2];
  if (pipe(fds) != 0)
    return r;
  char iters_text[32];
  snprintf(iters_text, sizeof iters_text, "%d", iters);
  char *argv[] = {"cuv-bench-latency", "--child", (char *)mode->arg, "--iters", iters_text, NULL};
  char **env = child_env(mode->env, 2);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) { /* only async-signal-safe calls until exec */
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execve("/proc/self/exe", argv, env);
    _exit(127);
  }
  free(env);
  close(fds[1]);
  FILE *f = fdopen(fds[0], "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    if (sscanf(line, "ROW %lf %lf %lf %lf %d %95[^\n]", &r.p50, &r.p90, &r.p99, &r.mean, &r.n,
               r.path) >= 5)
      r.ok = 1;
  }
  if (f)
    fclose(f);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    r.ok = 0;
  return r;
}

static int child_main(const char *arg) {
  for (size_t i = 0; i < N_CHILD_MODES; i++) {
    if (strcmp(arg, child_modes[i].arg) != 0)
      continue;
    row_t r = lat_bridge(child_modes[i].name);
    printf("ROW %.3f %.3f %.3f %.3f %d %s\n", r.p50, r.p90, r.p99, r.mean, r.n, r.path);
    return 0;
  }
  fprintf(stderr, "cuv-bench-latency: unknown child mode %s\n", arg);
  return 2;
}

/* ---- 2. throughput: K pipelines into one loop thread ---- */

static struct {
  int k;
  uint64_t end;
  long done;
  uint64_t submit_ns; /* loop-thread time inside the submissions */
  long submits;
  int in_flight;
  uint32_t seq[MAX_K];          /* raw flag: the value pipeline k waits for (loop thread) */
  _Atomic uint32_t want[MAX_K]; /* ... published for the poller */
  atomic_int ready[MAX_K];      /* raw hostfn: set by the host function */
  atomic_int run;
  uv_async_t async;
} tp;

static void tp_flag_submit(int k) {
  uint64_t t0 = now_ns();
  CUstream s = raw.st[k % STREAMS];
  raw_launch(s);
  tp.seq[k]++;
  atomic_store_explicit(&tp.want[k], tp.seq[k], memory_order_release);
  raw_check("cuStreamWriteValue32",
            raw.write_value(s, raw.slots_dev + 4u * (unsigned)k, tp.seq[k], 0));
  tp.submit_ns += now_ns() - t0;
  tp.submits++;
}

/* The raw reactor: spins over the flags and wakes the loop when one landed. */
static void *tp_poller(void *arg) {
  while (atomic_load_explicit(&tp.run, memory_order_relaxed)) {
    for (int k = 0; k < tp.k; k++) {
      uint32_t want = atomic_load_explicit(&tp.want[k], memory_order_acquire);
      if (want && slot_load(k) == want) {
        uv_async_send(&tp.async);
        break;
      }
    }
  }
  return NULL;
}

static void on_tp_flag(uv_async_t *h) {
  int more = now_ns() < tp.end;
  for (int k = 0; k < tp.k; k++) {
    if (!tp.seq[k] || atomic_load(&tp.want[k]) == 0 || slot_load(k) != tp.seq[k])
      continue;
    tp.done++;
    if (more) {
      tp_flag_submit(k);
    } else {
      atomic_store(&tp.want[k], 0); /* this pipeline is finished */
      tp.in_flight--;
    }
  }
  if (tp.in_flight == 0)
    uv_unref((uv_handle_t *)h);
}

static void CUDA_CB tp_hostfn(void *arg) {
  atomic_store(&tp.ready[(intptr_t)arg], 1);
  uv_async_send(&tp.async);
}

static void tp_hostfn_submit(int k) {
  uint64_t t0 = now_ns();
  CUstream s = raw.st[k % STREAMS];
  raw_launch(s);
  raw_check("cuLaunchHostFunc", raw.host_func(s, tp_hostfn, (void *)(intptr_t)k));
  tp.submit_ns += now_ns() - t0;
  tp.submits++;
}

static void on_tp_hostfn(uv_async_t *h) {
  int more = now_ns() < tp.end;
  for (int k = 0; k < tp.k; k++) {
    if (!atomic_exchange(&tp.ready[k], 0))
      continue;
    tp.done++;
    if (more)
      tp_hostfn_submit(k);
    else
      tp.in_flight--;
  }
  if (tp.in_flight == 0)
    uv_unref((uv_handle_t *)h);
}

static void tp_bridge_done(int status, cuv_output_t *out, void *arg);
static void tp_bridge_submit(void) {
  uint64_t t0 = now_ns();
  int rc = cuv_uv_submit(bridge, empty_op(), tp_bridge_done, NULL, NULL);
  if (rc < 0)
    die("cuv_uv_submit", rc);
  tp.submit_ns += now_ns() - t0;
  tp.submits++;
}

static void tp_bridge_done(int status, cuv_output_t *out, void *arg) {
  if (status < 0)
    die("bridge callback", status);
  tp.done++;
  if (now_ns() < tp.end)
    tp_bridge_submit();
}

enum tp_kind { TP_FLAG, TP_HOSTFN, TP_BRIDGE };

/* Completions per second of K pipelines for tp_ms, counting the tail until the last lands;
 * *submit_us: mean loop-thread time per submission. */
static double throughput(enum tp_kind kind, int k, double *submit_us) {
  memset(&tp, 0, sizeof tp);
  for (int i = 0; i < MAX_K; i++)
    raw.slots[i] = 0;
  tp.k = k;
  tp.in_flight = k;
  atomic_store(&tp.run, 1);
  pthread_t poller;
  if (kind == TP_BRIDGE) {
    int rc = cuv_uv_open(&bridge, loop);
    if (rc < 0)
      die("cuv_uv_open", rc);
  } else {
    uv_async_init(loop, &tp.async, kind == TP_FLAG ? on_tp_flag : on_tp_hostfn);
  }
  uint64_t start = now_ns();
  tp.end = start + (uint64_t)tp_ms * 1000000ull;
  if (kind == TP_FLAG && pthread_create(&poller, NULL, tp_poller, NULL) != 0)
    die("pthread_create", CUV_ETHREAD);
  for (int i = 0; i < k; i++) {
    if (kind == TP_FLAG)
      tp_flag_submit(i);
    else if (kind == TP_HOSTFN)
      tp_hostfn_submit(i);
    else
      tp_bridge_submit();
  }
  uv_run(loop, UV_RUN_DEFAULT);
  double secs = (double)(now_ns() - start) / 1e9;
  if (kind == TP_BRIDGE) {
    close_bridge();
  } else {
    atomic_store(&tp.run, 0);
    if (kind == TP_FLAG)
      pthread_join(poller, NULL);
    raw_drain_streams(); /* no host function can send any more */
    uv_close((uv_handle_t *)&tp.async, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
  }
  *submit_us = tp.submits ? (double)tp.submit_ns / (double)tp.submits / 1e3 : 0;
  return (double)tp.done / secs;
}

/* ---- 3. reactor CPU when idle ---- */

/* CPU seconds of the thread named `name` in this process, or -1. */
static double thread_cpu_s(const char *name) {
  DIR *dir = opendir("/proc/self/task");
  double cpu = -1;
  struct dirent *e;
  while (dir && cpu < 0 && (e = readdir(dir))) {
    char path[300], text[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    int match = fgets(text, sizeof text, f) && strncmp(text, name, strlen(name)) == 0;
    fclose(f);
    if (!match)
      continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
      fclose(f);
    text[n] = '\0';
    char *p = strrchr(text, ')'); /* after the command name: utime and stime are fields 14, 15 */
    unsigned long utime, stime;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                    &stime) == 2)
      cpu = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
  }
  if (dir)
    closedir(dir);
  return cpu;
}

static double process_cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
         u.ru_stime.tv_usec / 1e6;
}

/* ---- 4. reactor CPU during one long kernel ---- */

static void long_done(int status, cuv_output_t *out, void *arg) {
  (void)out;
  *(int *)arg = status < 0 ? status : 1;
}

/* One sleep_then_write of `ms` through cuv_submit (no spin: the reactor alone watches it). */
static void long_kernel_cpu(int ms) {
  cuv_device_t *d; /* one more reference of the same device */
  cuv_kernel_t *k;
  cuv_buffer_t *flag;
  cuv_queue_t *q;
  int rc = bench_cuv_kernel(CUV_BENCH_PTX_PATH, "sleep_then_write", &d, &k);
  if (rc == 0)
    rc = cuv_buffer_create(&flag, d, sizeof(unsigned));
  if (rc == 0)
    rc = cuv_queue_create(&q, NULL, NULL);
  if (rc < 0)
    die("long kernel setup", rc);
  unsigned long long ns = (unsigned long long)ms * 1000000ull;
  unsigned value = 1;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_WRITE(flag)};
  cuv_submit_opts_t opts = {.flags = CUV_SUBMIT_NO_SPIN};
  int done = 0;
  double reactor0 = thread_cpu_s("cuv-reactor"), process0 = process_cpu_s();
  uint64_t t0 = now_ns();
  rc = cuv_submit(q, cuv_launch(k, CUV_DIM1(1), CUV_DIM1(1), 0, args, 3), long_done, &done, &opts);
  while (rc == 0 && done == 0) {
    cuv_queue_wait(q, 10000);
    cuv_queue_drain(q);
  }
  uint64_t t1 = now_ns();
  double reactor1 = thread_cpu_s("cuv-reactor"), process1 = process_cpu_s();
  if (rc < 0 || done < 0)
    die("long kernel", rc < 0 ? rc : done);
  double secs = (double)(t1 - t0) / 1e9;
  printf("\n4. one %d ms kernel (reactor alone): cuv-reactor thread %.2f%% CPU, process %.2f%% CPU "
         "over its %.3f s; callback %.0f us after the kernel's %d ms\n",
         ms, 100.0 * (reactor1 - reactor0) / secs, 100.0 * (process1 - process0) / secs, secs,
         (double)(t1 - t0) / 1e3 - ms * 1000.0, ms);
  cuv_queue_destroy(q);
  cuv_buffer_unref(flag);
  cuv_kernel_unref(k);
  cuv_device_unref(d);
}

/* ---- main ---- */

static void print_row(const row_t *r, const row_t *sync, const row_t *hostfn) {
  if (!r->ok) {
    printf("%-42s  failed\n", r->name);
    return;
  }
  printf("%-42s %8.2f %8.2f %8.2f %8.2f  %7.2fx  %7.2fx  %s\n", r->name, r->p50, r->p90, r->p99,
         r->mean, r->p50 / sync->p50, r->p50 / hostfn->p50, r->path);
}

int main(int argc, char **argv) {
  const char *child = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--tp-ms") == 0 && i + 1 < argc)
      tp_ms = atoi(argv[++i]);
    else if (strcmp(argv[i], "--idle-ms") == 0 && i + 1 < argc)
      idle_ms = atoi(argv[++i]);
    else if (strcmp(argv[i], "--long-ms") == 0 && i + 1 < argc)
      long_ms = atoi(argv[++i]);
    else if (strcmp(argv[i], "--child") == 0 && i + 1 < argc)
      child = argv[++i];
    else {
      fprintf(stderr,
              "usage: cuv-bench-latency [--iters N] [--tp-ms MS] [--idle-ms MS] [--long-ms MS]\n");
      return 2;
    }
  }
  if (iters < 10)
    iters = 10;
  setvbuf(stdout, NULL, _IOLBF, 0); /* rows appear as they are measured, also through a pipe */
  lat.n = iters;
  lat.v = calloc((size_t)iters, sizeof *lat.v);
  setup_cuv();
  if (child)
    return child_main(child);
  setup_raw();

  cuv_config_t config;
  cuv_config_get(&config); /* initialized by setup_cuv */
  static const char *const host_sync[] = {"", ", host sync spin", ", host sync block"};
  char configured[96];
  snprintf(configured, sizeof configured, "cuv bridge, configured (spin %u%s)",
           config.spin_budget_us, host_sync[config.host_sync]);
  printf("cuv-bench-latency: %s, driver %s, libuv %s, %d iterations per row\n",
         cuv_device_name(dev), cuv_driver_name(), uv_version_string(), iters);
  printf("\n1. empty kernel, submit -> callback on the loop thread (us; ratios of p50)\n");
  printf("%-42s %8s %8s %8s %8s  %8s  %8s  %s\n", "", "p50", "p90", "p99", "mean", "/sync",
         "/hostfn", "completed by");
  /* Each row is printed as soon as it is measured (the two baselines first). */
  row_t base_sync = lat_raw_sync(), base_hostfn = lat_raw_hostfn(), r;
  print_row(&base_sync, &base_sync, &base_hostfn);
  print_row(&base_hostfn, &base_sync, &base_hostfn);
  r = lat_raw_flag_idle();
  print_row(&r, &base_sync, &base_hostfn);
  r = lat_raw_flag_reactor();
  print_row(&r, &base_sync, &base_hostfn);
  r = lat_cuv_sync();
  print_row(&r, &base_sync, &base_hostfn);
  r = lat_bridge(configured);
  print_row(&r, &base_sync, &base_hostfn);
  int failed = 0;
  for (size_t i = 0; i < N_CHILD_MODES; i++) {
    r = run_child(&child_modes[i]);
    print_row(&r, &base_sync, &base_hostfn);
    failed |= !r.ok;
  }
  printf("targets (on the GPU): configured <= 1.20x /sync and <= 0.50x /hostfn; spin 0 <= 2.00x "
         "/sync\n");

  printf("\n2. K pipelines into one loop thread, completions/s (%d ms each; raw on %d streams)\n",
         tp_ms, STREAMS);
  printf("%5s %12s %12s %12s %9s %9s   %s\n", "K", "raw flag", "raw hostfn", "cuv bridge",
         "/flag", "/hostfn", "loop-thread us per submit: flag, hostfn, cuv");
  static const int ks[] = {1, 4, 16, 64, 256};
  FILE *tp_csv = csv_open("throughput.csv");
  if (tp_csv)
    fprintf(tp_csv, "K,raw_flag,raw_hostfn,cuv_bridge\n");
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    double us_flag, us_hostfn, us_cuv;
    double flag = throughput(TP_FLAG, ks[i], &us_flag);
    double hostfn = throughput(TP_HOSTFN, ks[i], &us_hostfn);
    double cuv = throughput(TP_BRIDGE, ks[i], &us_cuv);
    if (tp_csv)
      fprintf(tp_csv, "%d,%.0f,%.0f,%.0f\n", ks[i], flag, hostfn, cuv);
    printf("%5d %12.0f %12.0f %12.0f %8.2fx %8.2fx   %6.2f %6.2f %6.2f\n", ks[i], flag, hostfn,
           cuv, cuv / flag, cuv / hostfn, us_flag, us_hostfn, us_cuv);
  }
  if (tp_csv)
    fclose(tp_csv);
  printf("targets (on the GPU): /flag >= 0.95 and /hostfn >= 2.0 at K = 64..256\n");

  /* Nothing in flight now: the reactor should park after its short linger. */
  struct timespec settle = {0, 10 * 1000000L};
  nanosleep(&settle, NULL);
  double reactor0 = thread_cpu_s("cuv-reactor"), process0 = process_cpu_s();
  struct timespec idle = {idle_ms / 1000, (long)(idle_ms % 1000) * 1000000L};
  nanosleep(&idle, NULL);
  double reactor1 = thread_cpu_s("cuv-reactor"), process1 = process_cpu_s();
  cuv_stats_t s;
  cuv_stats(&s);
  printf("\n3. idle %d ms after the work: ", idle_ms);
  if (reactor0 < 0 || reactor1 < 0)
    printf("no cuv-reactor thread found;");
  else
    printf("cuv-reactor thread %.1f%% CPU (%s);", 100.0 * (reactor1 - reactor0) * 1000 / idle_ms,
           reactor1 - reactor0 <= 0.05 * idle_ms / 1000 ? "parked" : "NOT parked");
  printf(" process %.1f%% CPU; slots in use %llu, in flight %llu, reactor wake-ups %llu\n",
         100.0 * (process1 - process0) * 1000 / idle_ms, (unsigned long long)s.reactor_waiting,
         (unsigned long long)s.in_flight, (unsigned long long)s.reactor_wakeups);
  if (long_ms > 0)
    long_kernel_cpu(long_ms);

  uv_loop_close(loop);
  cuv_kernel_unref(empty);
  cuv_device_unref(dev);
  free(lat.v);
  return failed ? 1 : 0;
}
