#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "twins.h"

static cuv_device_t *device;
static cuv_module_t *module;
static int is_sim;
static uint64_t rng_state;

const char *cuvt_suite_name(void) {
  const char *suite = getenv("CUVT_SUITE");
  return suite ? suite : "sim";
}

const char *cuvt_ptx_path(void) { return CUVT_PTX_PATH; }

static void seed_rng(void) {
  const char *fixed = getenv("CUVT_SEED");
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  rng_state = fixed ? strtoull(fixed, NULL, 10) : (uint64_t)t.tv_nsec ^ (uint64_t)t.tv_sec << 20;
  if (!rng_state)
    rng_state = 1;
  fprintf(stderr, "# CUVT_SEED=%llu\n", (unsigned long long)rng_state);
}

void cuvt_init(void) {
  seed_rng();
  cuvt_register_twins();
  int rc = cuv_init();
  int is_gpu_suite = strcmp(cuvt_suite_name(), "gpu") == 0;
  if (rc == CUV_ENODRIVER && is_gpu_suite) {
    printf("1..0 # SKIP no GPU: %s\n", cuv_strerror(rc));
    exit(77); /* the gpu suite's protocol is exitcode: 77 is skipped */
  }
  if (rc != 0) {
    fprintf(stderr, "cuv_init: %s (%s)\n", cuv_err_name(rc), cuv_strerror(rc));
    exit(1);
  }
  is_sim = cuv_driver_is_sim();
  if (is_gpu_suite && is_sim) {
    fprintf(stderr, "gpu suite running on the simulator: CUV_DRIVER is set wrongly\n");
    exit(1);
  }
  rc = cuv_device_open(&device, 0);
  if (rc == 0)
    rc = cuv_module_load_file(&module, device, CUVT_PTX_PATH);
  if (rc != 0) {
    fprintf(stderr, "test setup: %s (%s)\n", cuv_err_name(rc), cuv_strerror(rc));
    exit(1);
  }
}

int cuvt_is_sim(void) { return is_sim; }
cuv_device_t *cuvt_device(void) { return device; }

cuv_kernel_t *cuvt_kernel(const char *name) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static struct {
    char name[64];
    cuv_kernel_t *kernel;
  } cache[32];
  cuv_kernel_t *found = NULL;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < 32; i++) {
    if (!cache[i].kernel) { /* first free slot: not cached yet */
      if (cuv_kernel_get(&cache[i].kernel, module, name) == 0)
        snprintf(cache[i].name, sizeof cache[i].name, "%s", name);
      found = cache[i].kernel;
      break;
    }
    if (strcmp(cache[i].name, name) == 0) {
      found = cache[i].kernel;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return found;
}

/* xorshift64*: fast, and reproducible from the printed seed. */
uint32_t cuvt_random_u32(void) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  if (!rng_state) /* unit tests never call cuvt_init; a zero state would stay zero */
    seed_rng();
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t r = rng_state * 2685821657736338717ull;
  pthread_mutex_unlock(&lock);
  return (uint32_t)(r >> 32);
}

void cuvt_random_floats(float *out, size_t n) {
  for (size_t i = 0; i < n; i++)
    out[i] = (float)(cuvt_random_u32() % 2000001u) / 1000.0f - 1000.0f;
}

int cuvt_child_status(int (*child)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0)
    _exit(child());
  int wstatus;
  if (pid < 0 || waitpid(pid, &wstatus, 0) != pid || !WIFEXITED(wstatus))
    return -1;
  return WEXITSTATUS(wstatus);
}

void cuvt_drain_until_retired(cuv_queue_t *q) {
  for (int idle = 0; cuv_queue_pending(q) > 0;) {
    int rc = cuv_queue_wait(q, 1000);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    idle = cuv_queue_drain(q) > 0 || rc == 0 ? 0 : idle + 1;
    if (idle > 120) /* a watchdog, not a timing assertion */
      fail_msg("%u submissions never retired", cuv_queue_pending(q));
  }
}

bool cuvt_wait_flag(atomic_int *flag) {
  struct timespec pause = {0, 1000000L};
  for (int waited = 0; !atomic_load(flag); waited++) {
    if (waited > 20000)
      return false;
    nanosleep(&pause, NULL);
  }
  return true;
}

unsigned cuvt_spin_budget_us(void) {
  cuv_config_t c;
  cuv_config_get(&c); /* a refused environment leaves that field its default */
  return c.spin_budget_us;
}

bool cuvt_readable(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int rc;
  while ((rc = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
    ;
  return rc == 1 && (p.revents & POLLIN);
}
