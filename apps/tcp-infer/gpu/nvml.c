/* tcp-infer: NVML, NVIDIA's management library, loaded with dlopen: the server does not link it
 * and has no nvml.h to build with, so the few functions and types it reads are declared here as
 * NVML's API (version 2 of init, count and handle) defines them. Where the library is absent (the
 * simulator, a machine without NVIDIA's driver) nvml_open gives NULL and GET /metrics has no GPU
 * metrics, rather than zeros that would read as an idle GPU.
 *
 * Readings are taken when /metrics is rendered, on whichever loop asks; NVML is thread-safe. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"

/* NVML's own declarations (nvml.h): a status (0: success), an opaque device handle, and the
 * structs of the readings used here. */
typedef int nvml_return_t;
typedef struct nvml_device *nvml_device_t;
typedef struct {
  unsigned int gpu, memory; /* percent of the last sample period */
} nvml_utilization_t;
typedef struct {
  unsigned long long total, free, used; /* bytes */
} nvml_memory_t;

#define NVML_UUID_LEN 96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE (80), with room */
#define NVML_MAX_DEVICES 64

struct nvml {
  void *lib;
  nvml_return_t (*shutdown)(void);
  nvml_return_t (*count)(unsigned int *);
  nvml_return_t (*handle)(unsigned int, nvml_device_t *);
  nvml_return_t (*uuid)(nvml_device_t, char *, unsigned int);
  nvml_return_t (*utilization)(nvml_device_t, nvml_utilization_t *);
  nvml_return_t (*memory)(nvml_device_t, nvml_memory_t *);
  nvml_return_t (*power)(nvml_device_t, unsigned int *); /* milliwatts */
};

static bool resolve(nvml_t *n) {
  *(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
  *(void **)&n->count = dlsym(n->lib, "nvmlDeviceGetCount_v2");
  *(void **)&n->handle = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
  *(void **)&n->uuid = dlsym(n->lib, "nvmlDeviceGetUUID");
  *(void **)&n->utilization = dlsym(n->lib, "nvmlDeviceGetUtilizationRates");
  *(void **)&n->memory = dlsym(n->lib, "nvmlDeviceGetMemoryInfo");
  *(void **)&n->power = dlsym(n->lib, "nvmlDeviceGetPowerUsage");
  return n->shutdown && n->count && n->handle && n->uuid && n->utilization && n->memory &&
         n->power;
}

nvml_t *nvml_open(const char *lib) {
  if (!lib)
    return NULL;
  nvml_t *n = calloc(1, sizeof *n);
  if (!n)
    return NULL;
  n->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  nvml_return_t (*init)(void) = NULL;
  if (n->lib)
    *(void **)&init = dlsym(n->lib, "nvmlInit_v2");
  if (!n->lib || !init || !resolve(n) || init() != 0) {
    if (n->lib)
      dlclose(n->lib);
    free(n);
    return NULL;
  }
  return n;
}

void nvml_close(nvml_t *n) {
  if (!n)
    return;
  n->shutdown();
  dlclose(n->lib);
  free(n);
}

/* One family: a reading of each device, those that fail left out. */
typedef enum { READ_UTILIZATION, READ_MEMORY_USED, READ_MEMORY_TOTAL, READ_POWER } reading_t;

static bool read_device(const nvml_t *n, nvml_device_t d, reading_t what, double *v) {
  nvml_utilization_t u;
  nvml_memory_t m;
  unsigned int mw;
  switch (what) {
  case READ_UTILIZATION:
    if (n->utilization(d, &u) != 0)
      return false;
    *v = u.gpu / 100.0;
    return true;
  case READ_MEMORY_USED:
  case READ_MEMORY_TOTAL:
    if (n->memory(d, &m) != 0)
      return false;
    *v = (double)(what == READ_MEMORY_USED ? m.used : m.total);
    return true;
  default:
    if (n->power(d, &mw) != 0)
      return false;
    *v = mw / 1000.0;
    return true;
  }
}

/* A label value as the text format needs it: backslash, quote and newline escaped (a UUID has
 * none, but the text is the library's). */
static void put_label(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == '"')
      fputc('\\', f);
    if (*s == '\n')
      fputs("\\n", f);
    else
      fputc(*s, f);
  }
}

void nvml_render(const nvml_t *n, FILE *f) {
  unsigned int count = 0;
  if (!n || !f || n->count(&count) != 0 || count == 0)
    return;
  if (count > NVML_MAX_DEVICES)
    count = NVML_MAX_DEVICES;
  static const struct {
    const char *name, *help;
  } families[] = {
      {"nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0) (NVML)."},
      {"nv_gpu_memory_used_bytes", "GPU used memory, in bytes (NVML)."},
      {"nv_gpu_memory_total_bytes", "GPU total memory, in bytes (NVML)."},
      {"nv_gpu_power_usage", "GPU power usage, in watts (NVML)."},
  };
  nvml_device_t dev[NVML_MAX_DEVICES];
  char uuid[NVML_MAX_DEVICES][NVML_UUID_LEN];
  for (unsigned int i = 0; i < count; i++)
    if (n->handle(i, &dev[i]) != 0 || n->uuid(dev[i], uuid[i], NVML_UUID_LEN) != 0)
      dev[i] = NULL;
    else
      uuid[i][NVML_UUID_LEN - 1] = '\0';
  for (reading_t k = READ_UTILIZATION; k <= READ_POWER; k++) {
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", families[k].name, families[k].help,
            families[k].name);
    for (unsigned int i = 0; i < count; i++) {
      double v;
      if (!dev[i] || !read_device(n, dev[i], k, &v))
        continue;
      fprintf(f, "%s{gpu_uuid=\"", families[k].name);
      put_label(f, uuid[i]);
      fprintf(f, "\"} %.17g\n", v);
    }
  }
}
