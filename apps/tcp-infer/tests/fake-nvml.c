/* tcp-infer's tests: a stand-in for libnvidia-ml.so.1 with the functions gpu/nvml.c resolves,
 * answering fixed readings, so that nvml-test.c checks what GET /metrics would show of them
 * without a GPU: two devices; the second's power reading fails (its family leaves it out).
 * FAKE_NVML_INIT_FAILS set in the environment makes nvmlInit_v2 fail, as without a driver. */
#include <stdlib.h>
#include <string.h>

typedef struct fake_device {
  const char *uuid;
  unsigned int util, mw;
  unsigned long long total, used;
  int power_fails;
} fake_device_t;

static fake_device_t devices[] = {
    {"GPU-fake-0", 37, 71500, 85899345920ull, 1073741824ull, 0},
    {"GPU-fake-1", 100, 0, 150323855360ull, 150000000000ull, 1},
};

typedef struct {
  unsigned int gpu, memory;
} fake_utilization_t;
typedef struct {
  unsigned long long total, free, used;
} fake_memory_t;

/* NVML's names, declared for -Wmissing-prototypes: this file is their only definition. */
int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned int *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, fake_device_t **d);
int nvmlDeviceGetUUID(fake_device_t *d, char *out, unsigned int len);
int nvmlDeviceGetUtilizationRates(fake_device_t *d, fake_utilization_t *u);
int nvmlDeviceGetMemoryInfo(fake_device_t *d, fake_memory_t *m);
int nvmlDeviceGetPowerUsage(fake_device_t *d, unsigned int *mw);

int nvmlInit_v2(void) { return getenv("FAKE_NVML_INIT_FAILS") ? 9 : 0; }
int nvmlShutdown(void) { return 0; }

int nvmlDeviceGetCount_v2(unsigned int *n) {
  *n = 2;
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, fake_device_t **d) {
  if (i >= 2)
    return 2;
  *d = &devices[i];
  return 0;
}

int nvmlDeviceGetUUID(fake_device_t *d, char *out, unsigned int len) {
  if (strlen(d->uuid) >= len)
    return 7;
  strcpy(out, d->uuid);
  return 0;
}

int nvmlDeviceGetUtilizationRates(fake_device_t *d, fake_utilization_t *u) {
  u->gpu = d->util;
  u->memory = 0;
  return 0;
}

int nvmlDeviceGetMemoryInfo(fake_device_t *d, fake_memory_t *m) {
  m->total = d->total;
  m->used = d->used;
  m->free = d->total - d->used;
  return 0;
}

int nvmlDeviceGetPowerUsage(fake_device_t *d, unsigned int *mw) {
  if (d->power_fails)
    return 3;
  *mw = d->mw;
  return 0;
}
