/* Environment variables are read once, when the driver is first loaded, so the completion path
 * of a process never changes under its feet. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

cuv__config_t cuv__config = {
    .spin_budget_us = 20, .host_sync = CUV__HOST_SYNC_OFF, .reactor_slots = 4096};

static unsigned env_unsigned(const char *name, unsigned fallback, unsigned max) {
  const char *text = getenv(name);
  if (!text || !*text)
    return fallback;
  char *end;
  unsigned long value = strtoul(text, &end, 10);
  if (*end != '\0' || value > max)
    return fallback;
  return (unsigned)value;
}

void cuv__config_load(void) {
  cuv__config.spin_budget_us = env_unsigned("CUDA_ASYNC_SPIN_BUDGET_US", 20, 1000000);
  cuv__config.reactor_slots = env_unsigned("CUV_REACTOR_SLOTS", 4096, 1u << 20);
  const char *sync = getenv("CUDA_ASYNC_HOST_SYNC");
  if (sync && strcmp(sync, "spin") == 0)
    cuv__config.host_sync = CUV__HOST_SYNC_SPIN;
  else if (sync && strcmp(sync, "block") == 0)
    cuv__config.host_sync = CUV__HOST_SYNC_BLOCK;
  const char *strict = getenv("CUV_STRICT_HAZARDS");
  cuv__config.strict_hazards = strict && strcmp(strict, "1") == 0;
}

uint64_t cuv__now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

CUV_EXTERN unsigned cuv_spin_budget_us(void) {
  cuv__driver_init(); /* the environment is read there, once */
  return cuv__config.spin_budget_us;
}
