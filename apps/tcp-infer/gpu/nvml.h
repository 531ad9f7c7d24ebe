/* tcp-infer: the GPUs' own state through NVML (nvml.c), for GET /metrics. */
#ifndef TCP_INFER_NVML_H
#define TCP_INFER_NVML_H

#include <stdio.h>

typedef struct nvml nvml_t;

/* NVML from the library `lib` (libnvidia-ml.so.1 on a machine with NVIDIA's driver), initialized;
 * NULL where it is absent: the library does not load, lacks a function, or its init fails (no
 * driver, no GPU). The metrics are then absent, never zeros. */
nvml_t *nvml_open(const char *lib);
/* Triton's GPU metrics for every device NVML sees, labelled by its UUID: nv_gpu_utilization
 * (0 to 1), nv_gpu_memory_used_bytes, nv_gpu_memory_total_bytes, nv_gpu_power_usage (watts); a
 * device whose reading fails is left out of that family. Nothing when n is NULL. Any thread. */
void nvml_render(const nvml_t *n, FILE *f);
/* nvmlShutdown and the library closed; NULL is a no-op. */
void nvml_close(nvml_t *n);

#endif
