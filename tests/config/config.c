/* The configuration API (include/cuv/config.h): defaults and the environment (CUV_* names, the
 * CUDA_ASYNC_* aliases), cuv_init_with applied once and read back, a second init, an op before
 * any init, queries before any init (they initialize nothing), invalid configurations, and a
 * driver path that does not load, with what cuv_init_error() says after each. A process is
 * initialized once, so each case runs in a child process of its own, forked before anything of
 * cuv's ran in this one (tests/uv/no-device.c's pattern); the child's exit status is the verdict,
 * and a failing child prints the line of the check that failed. Suites sim and gpu: the children
 * load the suite's driver (the gpu suite is skipped where it does not load). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "config.c:%d: %s\n", __LINE__, #cond);                                      \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

static const char *const variables[] = {
    "CUV_DRIVER",        "CUV_SPIN_BUDGET_US", "CUDA_ASYNC_SPIN_BUDGET_US", "CUV_HOST_SYNC",
    "CUDA_ASYNC_HOST_SYNC", "CUV_STRICT_HAZARDS",    "CUV_UV_POLL_MAX_US",
    "CUV_SUBMIT_THREADS", "CUV_SUBMIT_INLINE", "CUV_SUBMIT_RING",  "CUV_NCCL",
    "CUV_STREAMS",
};

/* The suite's driver, "sim" or "cuda" (its CUV_DRIVER, read before any child changes it). */
static const char *suite_driver;

/* Every setting's variable unset but the driver: the suite's. */
static void clear_env(void) {
  for (size_t i = 1; i < sizeof variables / sizeof variables[0]; i++)
    unsetenv(variables[i]);
}

static bool same_config(const cuv_config_t *a, const cuv_config_t *b) {
  return strcmp(a->driver ? a->driver : "cuda", b->driver ? b->driver : "cuda") == 0 &&
         a->spin_budget_us == b->spin_budget_us && a->host_sync == b->host_sync &&
         a->strict_hazards == b->strict_hazards &&
         a->uv_poll_max_us == b->uv_poll_max_us && a->submit_threads == b->submit_threads &&
         a->submit_inline == b->submit_inline && a->submit_ring == b->submit_ring &&
         a->streams == b->streams && strcmp(a->nccl ? a->nccl : "", b->nccl ? b->nccl : "") == 0;
}

/* A configuration unlike the defaults in every field. */
static cuv_config_t custom_config(void) {
  cuv_config_t c;
  cuv_config_default(&c);
  c.driver = suite_driver;
  c.spin_budget_us = 1 + cuvt_random_u32() % 999;
  c.host_sync = CUV_HOST_SYNC_BLOCK;
  c.strict_hazards = true;
  c.uv_poll_max_us = 1 + cuvt_random_u32() % 5000;
  c.submit_threads = 5 + cuvt_random_u32() % 60;
  c.submit_inline = CUV_SUBMIT_INLINE_NEVER;
  c.submit_ring = 2u << cuvt_random_u32() % 9;
  c.streams = 5 + cuvt_random_u32() % 1020;
  c.nccl = "/nonexistent/libnccl.so.2"; /* checked at init, opened only by a collective */
  return c;
}

static int child_defaults(void) {
  clear_env();
  cuv_config_t c;
  CHECK(cuv_config_default(&c) == 0);
  CHECK(strcmp(c.driver, suite_driver) == 0);
  CHECK(c.spin_budget_us == 20 && c.host_sync == CUV_HOST_SYNC_OFF);
  CHECK(!c.strict_hazards && c.uv_poll_max_us == 1000);
  CHECK(c.submit_threads == 4 && c.submit_inline == CUV_SUBMIT_INLINE_IDLE);
  CHECK(c.submit_ring == 1024 && c.nccl == NULL && c.streams == 4);
  unsetenv("CUV_DRIVER");
  CHECK(cuv_config_default(&c) == 0 && strcmp(c.driver, "cuda") == 0);
  setenv("CUV_DRIVER", "", 1); /* empty counts as unset */
  CHECK(cuv_config_default(&c) == 0 && strcmp(c.driver, "cuda") == 0);
  CHECK(cuv_config_default(NULL) == CUV_EINVAL);
  return 0;
}

/* Each CUV_* name, each alias alone, and the CUV_* name winning over its alias. */
static int child_environment(void) {
  clear_env();
  cuv_config_t c;
  setenv("CUV_SPIN_BUDGET_US", "7", 1);
  setenv("CUV_HOST_SYNC", "spin", 1);
  setenv("CUV_STRICT_HAZARDS", "1", 1);
  setenv("CUV_UV_POLL_MAX_US", "0", 1);
  setenv("CUV_SUBMIT_THREADS", "0", 1);
  setenv("CUV_SUBMIT_INLINE", "always", 1);
  setenv("CUV_SUBMIT_RING", "65536", 1);
  setenv("CUV_NCCL", "/opt/nccl/lib/libnccl.so.2", 1);
  setenv("CUV_STREAMS", "1024", 1);
  CHECK(cuv_config_default(&c) == 0);
  CHECK(strcmp(c.nccl, "/opt/nccl/lib/libnccl.so.2") == 0);
  CHECK(c.spin_budget_us == 7 && c.host_sync == CUV_HOST_SYNC_SPIN);
  CHECK(c.strict_hazards && c.uv_poll_max_us == 0);
  CHECK(c.submit_threads == 0 && c.submit_inline == CUV_SUBMIT_INLINE_ALWAYS);
  CHECK(c.submit_ring == 65536 && c.streams == 1024);
  clear_env();
  setenv("CUDA_ASYNC_SPIN_BUDGET_US", "9", 1);
  setenv("CUDA_ASYNC_HOST_SYNC", "block", 1);
  CHECK(cuv_config_default(&c) == 0);
  CHECK(c.spin_budget_us == 9 && c.host_sync == CUV_HOST_SYNC_BLOCK);
  setenv("CUDA_ASYNC_HOST_SYNC", "spinwait", 1); /* the seed's long spellings */
  CHECK(cuv_config_default(&c) == 0 && c.host_sync == CUV_HOST_SYNC_SPIN);
  setenv("CUDA_ASYNC_HOST_SYNC", "blocking", 1);
  CHECK(cuv_config_default(&c) == 0 && c.host_sync == CUV_HOST_SYNC_BLOCK);
  setenv("CUV_SPIN_BUDGET_US", "1000000", 1);
  setenv("CUV_HOST_SYNC", "off", 1);
  CHECK(cuv_config_default(&c) == 0);
  CHECK(c.spin_budget_us == 1000000 && c.host_sync == CUV_HOST_SYNC_OFF);
  return 0;
}

/* A variable out of range: cuv_config_default says so and keeps that field's default; the
 * implicit init refuses, names the variable, and initializes nothing, so fixing the environment
 * lets the next call initialize. */
static int child_environment_invalid(void) {
  static const char *const bad[][2] = {
      {"CUV_SPIN_BUDGET_US", "-5"},        {"CUV_SPIN_BUDGET_US", "1000001"},
      {"CUDA_ASYNC_SPIN_BUDGET_US", "2x"}, {"CUV_HOST_SYNC", "spinn"},
      {"CUV_STRICT_HAZARDS", "yes"},       {"CUV_UV_POLL_MAX_US", "99999999999999999999"},
      {"CUV_DRIVER", "simm"},              {"CUV_SUBMIT_THREADS", "65"},
      {"CUV_SUBMIT_INLINE", "sometimes"},  {"CUV_SUBMIT_RING", "1000"},
      {"CUV_SUBMIT_RING", "1"},            {"CUV_SUBMIT_RING", "131072"},
      {"CUV_NCCL", "libnccl.so.2"}, /* a name, not a path: a typo of "sim" would search */
      {"CUV_STREAMS", "0"},                {"CUV_STREAMS", "1025"},
      {"CUV_STREAMS", "4 "},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    clear_env();
    unsetenv("CUV_DRIVER");
    setenv(bad[i][0], bad[i][1], 1);
    cuv_config_t c;
    CHECK(cuv_config_default(&c) == CUV_EINVAL);
    CHECK(strcmp(c.driver, "cuda") == 0 && c.spin_budget_us == 20);
    CHECK(c.host_sync == CUV_HOST_SYNC_OFF);
    CHECK(!c.strict_hazards && c.uv_poll_max_us == 1000);
    CHECK(c.submit_threads == 4 && c.submit_inline == CUV_SUBMIT_INLINE_IDLE);
    CHECK(c.submit_ring == 1024 && c.streams == 4);
    CHECK(cuv_init() == CUV_EINVAL);
    const char *why = cuv_init_error();
    CHECK(why && strstr(why, bad[i][0]) && strstr(why, bad[i][1]));
    CHECK(cuv_config_get(&c) == CUV_EINVAL); /* none in force */
    unsetenv(bad[i][0]);
  }
  setenv("CUV_DRIVER", suite_driver, 1);
  CHECK(cuv_init() == 0);
  CHECK(cuv_init_error() == NULL);
  CHECK(cuv_driver_is_sim() == (strcmp(suite_driver, "sim") == 0));
  return 0;
}

static void count_done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  *(int *)arg = status;
}

/* Completes one memset through a queue and returns which path proved it: 'r' reactor, 'h' host
 * function, 's' inline spin; 0 on failure. */
static char completion_path(void) {
  cuv_device_t *dev;
  cuv_buffer_t *buf;
  cuv_queue_t *q;
  if (cuv_device_open(&dev, 0) || cuv_buffer_create(&buf, dev, 4096) ||
      cuv_queue_create(&q, NULL, NULL))
    return 0;
  cuv_stats_t before, after;
  cuv_stats(&before);
  int status = 1, rc = cuv_submit(q, cuv_memset32(buf, 0, 7, 1024), count_done, &status, NULL);
  for (int i = 0; rc == 0 && status == 1 && i < 100; i++) {
    cuv_queue_wait(q, 100);
    cuv_queue_drain(q);
  }
  cuv_stats(&after);
  cuv_queue_destroy(q);
  cuv_buffer_unref(buf);
  cuv_device_unref(dev);
  if (rc != 0 || status != 0)
    return 0;
  if (after.completed_hostfn > before.completed_hostfn)
    return 'h';
  if (after.completed_reactor > before.completed_reactor)
    return 'r';
  return after.completed_spin > before.completed_spin ? 's' : 0;
}

/* cuv_init_with applies the configuration: read back whole, and the completion path follows it
 * (host_sync "block": every completion through a host function). */
static int child_init_with(void) {
  clear_env();
  setenv("CUV_SPIN_BUDGET_US", "5", 1); /* the environment does not count once init is explicit */
  cuv_config_t want = custom_config(), got;
  char driver[8];
  snprintf(driver, sizeof driver, "%s", suite_driver);
  want.driver = driver;
  CHECK(cuv_init_with(&want) == 0);
  driver[0] = 'x'; /* init copied the string */
  want.driver = suite_driver;
  CHECK(cuv_config_get(&got) == 0);
  CHECK(same_config(&got, &want));
  CHECK(strcmp(cuv_driver_name(), suite_driver) == 0);
  CHECK(completion_path() == 'h');
  return 0;
}

static int child_init_with_off(void) {
  clear_env();
  cuv_config_t c;
  cuv_config_default(&c);
  c.spin_budget_us = 0; /* no inline spin: the reactor proves it */
  CHECK(cuv_init_with(&c) == 0);
  CHECK(completion_path() == 'r');
  return 0;
}

/* A second init: the same configuration returns the first's status, another is CUV_EBUSY, and
 * cuv_init() (no configuration of its own) returns the status; nothing changes. */
static int child_init_twice(void) {
  clear_env();
  cuv_config_t first = custom_config(), other = first, got;
  CHECK(cuv_init_with(&first) == 0);
  CHECK(cuv_init_with(&first) == 0);
  CHECK(cuv_init_error() == NULL);
  other.spin_budget_us = first.spin_budget_us + 1;
  CHECK(cuv_init_with(&other) == CUV_EBUSY);
  char want[128];
  snprintf(want, sizeof want, "spin_budget_us is %u, not %u", first.spin_budget_us,
           other.spin_budget_us);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), want));
  CHECK(cuv_init_with(&first) == 0 && cuv_init_error() == NULL);
  other = first;
  other.driver = strcmp(suite_driver, "sim") == 0 ? "cuda" : "sim";
  CHECK(cuv_init_with(&other) == CUV_EBUSY);
  snprintf(want, sizeof want, "driver is \"%s\", not \"%s\"", suite_driver, other.driver);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), want));
  CHECK(cuv_init() == 0);
  CHECK(cuv_init_error() == NULL); /* a call of its own: the refusal's text is gone */
  CHECK(cuv_config_get(&got) == 0 && same_config(&got, &first));
  return 0;
}

/* Each field of a valid configuration unlike the one in force, after a successful init: refused
 * with CUV_EBUSY, the field named with both values, nothing changed; the identical one is 0 and
 * leaves no text. */
static int child_init_other_fields(void) {
  clear_env();
  cuv_config_t first, got;
  cuv_config_default(&first);
  first.driver = suite_driver;
  CHECK(cuv_init_with(&first) == 0);
  char want[128];
#define OTHER(name, value, held, asked)                                                           \
  do {                                                                                            \
    cuv_config_t other = first;                                                                   \
    other.name = value;                                                                           \
    CHECK(cuv_init_with(&other) == CUV_EBUSY);                                                    \
    snprintf(want, sizeof want, "its %s is %s, not %s", #name, held, asked);                      \
    CHECK(cuv_init_error() && strstr(cuv_init_error(), want));                                    \
  } while (0)
  OTHER(spin_budget_us, 21, "20", "21");
  OTHER(host_sync, CUV_HOST_SYNC_BLOCK, "0", "2");
  OTHER(strict_hazards, true, "0", "1");
  OTHER(uv_poll_max_us, 1001, "1000", "1001");
  OTHER(submit_threads, 5, "4", "5");
  OTHER(submit_inline, CUV_SUBMIT_INLINE_ALWAYS, "0", "2");
  OTHER(submit_ring, 2048, "1024", "2048");
  OTHER(streams, 5, "4", "5");
  OTHER(nccl, "sim", "\"\"", "\"sim\"");
#undef OTHER
  CHECK(cuv_config_get(&got) == 0 && same_config(&got, &first));
  CHECK(cuv_init_with(&first) == 0 && cuv_init_error() == NULL);
  return 0;
}

/* An op before any init initializes with the environment's configuration; an explicit init
 * after it with another configuration is CUV_EBUSY. */
static int child_op_before_init(void) {
  clear_env();
  setenv("CUV_SPIN_BUDGET_US", "3", 1);
  setenv("CUDA_ASYNC_HOST_SYNC", "spin", 1);
  int value = 41;
  cuv_output_t out = {0};
  CHECK(cuv_sync(cuv_value(&value, NULL), &out) == 0 && out.data == &value);
  cuv_output_release(&out);
  cuv_config_t got, want;
  CHECK(cuv_config_default(&want) == 0);
  CHECK(cuv_config_get(&got) == 0 && same_config(&got, &want));
  CHECK(got.spin_budget_us == 3 && got.host_sync == CUV_HOST_SYNC_SPIN);
  CHECK(cuv_init_with(&want) == 0);
  want.spin_budget_us = 4;
  CHECK(cuv_init_with(&want) == CUV_EBUSY);
  return 0;
}

/* Queries before any init initialize nothing: cuv_config_get says what cuv_init() would apply,
 * the driver is not named yet, and a cuv_init_with after them applies the configuration given. */
static int child_queries_before_init(void) {
  clear_env();
  setenv("CUV_SPIN_BUDGET_US", "7", 1);
  setenv("CUV_STREAMS", "9", 1);
  cuv_config_t env, got;
  CHECK(cuv_config_default(&env) == 0);
  for (int look = 0; look < 2; look++) { /* looking again still initializes nothing */
    CHECK(cuv_driver_name() == NULL);
    CHECK(!cuv_driver_is_sim());
    CHECK(cuv_config_get(&got) == 0 && same_config(&got, &env));
    CHECK(got.spin_budget_us == 7);
    CHECK(got.streams == 9 && strcmp(got.driver, suite_driver) == 0 && strcmp(got.nccl, "") == 0);
    CHECK(cuv_init_error() == NULL);
  }
  cuv_config_t want = custom_config();
  CHECK(cuv_init_with(&want) == 0);
  CHECK(cuv_init_error() == NULL);
  CHECK(cuv_config_get(&got) == 0 && same_config(&got, &want));
  CHECK(strcmp(cuv_driver_name(), suite_driver) == 0);
  CHECK(cuv_driver_is_sim() == (strcmp(suite_driver, "sim") == 0));
  CHECK(completion_path() == 'h'); /* host_sync "block": the configuration given is in force */
  return 0;
}

/* A query of an environment that cuv_init() would refuse: CUV_EINVAL, no text (a query is no
 * initialization call), nothing initialized: an explicit configuration still initializes. */
static int child_query_refused_env(void) {
  clear_env();
  setenv("CUV_STREAMS", "0", 1);
  cuv_config_t got;
  CHECK(cuv_config_get(&got) == CUV_EINVAL);
  CHECK(got.streams == 4 && got.spin_budget_us == 20); /* those fields' defaults */
  CHECK(cuv_init_error() == NULL && cuv_driver_name() == NULL);
  cuv_config_t c;
  cuv_config_default(&c); /* CUV_EINVAL too; the fields are filled */
  c.spin_budget_us = 0;
  CHECK(cuv_init_with(&c) == 0);
  CHECK(cuv_config_get(&got) == 0 && same_config(&got, &c));
  CHECK(completion_path() == 'r'); /* no inline spin: the configuration given is in force */
  return 0;
}

/* cuv_driver_version must ask the driver: before any init it initializes with the environment's
 * configuration (include/cuv.h), and a cuv_init_with of another one is then refused. */
static int child_version_initializes(void) {
  clear_env();
  setenv("CUV_SPIN_BUDGET_US", "3", 1);
  int version = 0;
  CHECK(cuv_driver_version(&version) == 0 && version > 0);
  CHECK(strcmp(cuv_driver_name(), suite_driver) == 0);
  cuv_config_t c;
  CHECK(cuv_config_get(&c) == 0 && c.spin_budget_us == 3);
  c.spin_budget_us = 4;
  CHECK(cuv_init_with(&c) == CUV_EBUSY);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), "spin_budget_us is 3, not 4"));
  return 0;
}

/* Each field out of range, one at a time: CUV_EINVAL, a sentence naming the field, nothing
 * initialized; then a valid configuration still initializes. */
static int child_invalid_configs(void) {
  clear_env();
  char long_path[PATH_MAX + 8];
  memset(long_path, 'a', sizeof long_path - 1);
  long_path[0] = '/';
  long_path[sizeof long_path - 1] = '\0';
  cuv_config_t base;
  cuv_config_default(&base);
  cuv_config_t bad[24];
  const char *field[24];
  size_t n = 0;
#define BAD(name, expr)                                                                           \
  do {                                                                                            \
    bad[n] = base;                                                                                \
    bad[n].expr;                                                                                  \
    field[n++] = name;                                                                            \
  } while (0)
  BAD("driver", driver = "simm");
  BAD("driver", driver = "");
  BAD("driver", driver = "libcuda.so.1"); /* a library name, not a path */
  BAD("driver", driver = long_path);
  BAD("spin_budget_us", spin_budget_us = 1000001);
  BAD("spin_budget_us", spin_budget_us = (unsigned)-1);
  BAD("host_sync", host_sync = (cuv_host_sync_t)3);
  BAD("host_sync", host_sync = (cuv_host_sync_t)-1);
  BAD("uv_poll_max_us", uv_poll_max_us = 1000001);
  BAD("uv_poll_max_us", uv_poll_max_us = (unsigned)-5);
  BAD("submit_threads", submit_threads = 65);
  BAD("submit_inline", submit_inline = (cuv_submit_inline_t)3);
  BAD("submit_inline", submit_inline = (cuv_submit_inline_t)-1);
  BAD("submit_ring", submit_ring = 1000);
  BAD("submit_ring", submit_ring = 1);
  BAD("submit_ring", submit_ring = 131072);
  BAD("streams", streams = 0);
  BAD("streams", streams = 1025);
  BAD("nccl", nccl = "libnccl.so.2"); /* a library name, not a path */
  BAD("nccl", nccl = long_path);
#undef BAD
  for (size_t i = 0; i < n; i++) {
    CHECK(cuv_init_with(&bad[i]) == CUV_EINVAL);
    const char *why = cuv_init_error();
    CHECK(why && strstr(why, field[i]));
  }
  CHECK(cuv_init_with(&base) == 0);
  CHECK(cuv_init_error() == NULL);
  for (size_t i = 0; i < n; i++) { /* checked before it is compared with the one in force */
    CHECK(cuv_init_with(&bad[i]) == CUV_EINVAL);
    const char *why = cuv_init_error(); /* named after a successful init too */
    CHECK(why && strstr(why, field[i]));
  }
  CHECK(cuv_init_with(NULL) == CUV_EINVAL);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), "NULL"));
  cuv_config_t got;
  CHECK(cuv_config_get(&got) == 0 && same_config(&got, &base)); /* nothing changed */
  CHECK(cuv_init() == 0 && cuv_init_error() == NULL);
  CHECK(cuv_init_with(&bad[0]) == CUV_EINVAL && cuv_init_error());
  CHECK(cuv_init_with(&base) == 0 && cuv_init_error() == NULL);
  return 0;
}

static int child_invalid_then_valid(void) {
  clear_env();
  CHECK(cuv_init_with(NULL) == CUV_EINVAL);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), "NULL"));
  cuv_config_t c;
  cuv_config_default(&c);
  c.uv_poll_max_us = 1000001;
  CHECK(cuv_init_with(&c) == CUV_EINVAL);
  c.uv_poll_max_us = 7;
  CHECK(cuv_init_with(&c) == 0);
  CHECK(cuv_init_error() == NULL);
  cuv_config_t got;
  CHECK(cuv_config_get(&got) == 0 && got.uv_poll_max_us == 7);
  CHECK(cuv_config_get(NULL) == CUV_EINVAL);
  return 0;
}

/* Threads racing to initialize: one initialization, every thread sees its status and its
 * configuration (TSan checks the rest). */
#define RACERS 8
static cuv_config_t race_config;

static void *racer(void *arg) {
  intptr_t i = (intptr_t)arg;
  cuv_config_t got;
  int rc = i % 2 ? cuv_init_with(&race_config) : cuv_config_get(&got);
  if (rc == 0 && i % 2 == 0 && !same_config(&got, &race_config))
    rc = 1;
  return (void *)(intptr_t)rc;
}

static int child_concurrent_init(void) {
  clear_env();
  race_config = custom_config();
  race_config.spin_budget_us = 0;
  /* The environment says the same as race_config, so whichever thread initializes, the
   * configuration in force is the same. */
  char poll[16];
  snprintf(poll, sizeof poll, "%u", race_config.uv_poll_max_us);
  setenv("CUV_SPIN_BUDGET_US", "0", 1);
  setenv("CUV_HOST_SYNC", "block", 1);
  setenv("CUV_STRICT_HAZARDS", "1", 1);
  setenv("CUV_UV_POLL_MAX_US", poll, 1);
  char threads_text[16], ring[16];
  snprintf(threads_text, sizeof threads_text, "%u", race_config.submit_threads);
  snprintf(ring, sizeof ring, "%u", race_config.submit_ring);
  setenv("CUV_SUBMIT_THREADS", threads_text, 1);
  setenv("CUV_SUBMIT_INLINE", "never", 1);
  setenv("CUV_SUBMIT_RING", ring, 1);
  setenv("CUV_NCCL", race_config.nccl, 1);
  char streams[16];
  snprintf(streams, sizeof streams, "%u", race_config.streams);
  setenv("CUV_STREAMS", streams, 1);
  pthread_t threads[RACERS];
  for (intptr_t i = 0; i < RACERS; i++)
    CHECK(pthread_create(&threads[i], NULL, racer, (void *)i) == 0);
  int failed = 0;
  for (int i = 0; i < RACERS; i++) {
    void *rc;
    CHECK(pthread_join(threads[i], &rc) == 0);
    failed += rc != NULL;
  }
  CHECK(failed == 0);
  return 0;
}

/* A driver path that does not load: CUV_ENODRIVER, and cuv_init_error names the path; the
 * failure is the process's answer from then on. Through cuv_init_with, then (another child)
 * through CUV_DRIVER and the implicit init. */
static int check_typo_refused(const char *path) {
  const char *why = cuv_init_error();
  CHECK(why && strstr(why, path));
  CHECK(cuv_driver_name() == NULL);
  cuv_device_t *dev = NULL;
  CHECK(cuv_device_open(&dev, 0) == CUV_ENODRIVER && !dev);
  CHECK(cuv_init() == CUV_ENODRIVER);
  cuv_config_t got;
  CHECK(cuv_config_get(&got) == 0 && strcmp(got.driver, path) == 0);
  return 0;
}

static const char typo_path[] = "/nonexistent/cuv-typo/libcuda.so.1";

static int child_driver_typo(void) {
  clear_env();
  cuv_config_t c;
  cuv_config_default(&c);
  c.driver = typo_path;
  CHECK(cuv_init_with(&c) == CUV_ENODRIVER);
  CHECK(cuv_init_with(&c) == CUV_ENODRIVER);
  return check_typo_refused(typo_path);
}

static int child_driver_typo_env(void) {
  clear_env();
  setenv("CUV_DRIVER", typo_path, 1);
  CHECK(cuv_init() == CUV_ENODRIVER);
  return check_typo_refused(typo_path);
}

/* After a failed init, a refusal says its own reason, and the next call that returns the
 * failure says the failure's again. */
static int child_driver_typo_then_refusals(void) {
  clear_env();
  cuv_config_t c, other;
  cuv_config_default(&c);
  c.driver = typo_path;
  CHECK(cuv_init_with(&c) == CUV_ENODRIVER);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), typo_path));
  other = c;
  other.submit_ring = 3;
  CHECK(cuv_init_with(&other) == CUV_EINVAL);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), "submit_ring"));
  CHECK(cuv_init() == CUV_ENODRIVER);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), typo_path));
  other = c;
  other.streams = 5;
  CHECK(cuv_init_with(&other) == CUV_EBUSY);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), "streams is 4, not 5"));
  CHECK(cuv_init_with(&c) == CUV_ENODRIVER);
  CHECK(cuv_init_error() && strstr(cuv_init_error(), typo_path));
  return 0;
}

static void run_in_child(int (*child)(void)) {
  assert_int_equal(cuvt_child_status(child), 0);
}

static int child_probe(void) { return cuv_init() == CUV_ENODRIVER ? 77 : 0; }

#define CHILD_TEST(name)                                                                          \
  static void test_##name(void **state) {                                                         \
    (void)state;                                                                                  \
    run_in_child(child_##name);                                                                   \
  }
CHILD_TEST(defaults)
CHILD_TEST(environment)
CHILD_TEST(environment_invalid)
CHILD_TEST(init_with)
CHILD_TEST(init_with_off)
CHILD_TEST(init_twice)
CHILD_TEST(init_other_fields)
CHILD_TEST(op_before_init)
CHILD_TEST(queries_before_init)
CHILD_TEST(query_refused_env)
CHILD_TEST(version_initializes)
CHILD_TEST(invalid_configs)
CHILD_TEST(invalid_then_valid)
CHILD_TEST(concurrent_init)
CHILD_TEST(driver_typo)
CHILD_TEST(driver_typo_env)
CHILD_TEST(driver_typo_then_refusals)

int main(void) {
  /* No cuvt_init: it would initialize this process, which each child must do itself. */
  const char *driver = getenv("CUV_DRIVER");
  suite_driver = driver && *driver ? driver : "cuda";
  if (strcmp(cuvt_suite_name(), "gpu") == 0 && cuvt_child_status(child_probe) == 77) {
    printf("1..0 # SKIP no GPU\n");
    return 77; /* the gpu suite's protocol is exitcode: 77 is skipped */
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_environment),
      cmocka_unit_test(test_environment_invalid),
      cmocka_unit_test(test_init_with),
      cmocka_unit_test(test_init_with_off),
      cmocka_unit_test(test_init_twice),
      cmocka_unit_test(test_init_other_fields),
      cmocka_unit_test(test_op_before_init),
      cmocka_unit_test(test_queries_before_init),
      cmocka_unit_test(test_query_refused_env),
      cmocka_unit_test(test_version_initializes),
      cmocka_unit_test(test_invalid_configs),
      cmocka_unit_test(test_invalid_then_valid),
      cmocka_unit_test(test_concurrent_init),
      cmocka_unit_test(test_driver_typo),
      cmocka_unit_test(test_driver_typo_env),
      cmocka_unit_test(test_driver_typo_then_refusals),
  };
  return cuvt_run(tests);
}
