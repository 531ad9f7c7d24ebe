/* cuv-bench-peer: a peer copy of S MiB (default 256) from device 0 to device 1, cuv against the
 * raw driver in the same run.
 *
 *   cuv-bench-peer [--mib S] [--reps R]
 *
 * Columns, median of R copies each (default 21), the two sides taking turns copy by copy:
 *   raw   cuMemcpyPeerAsync on a stream of device 1 + cuStreamSynchronize, through the driver cuv
 *         loaded (CUV_DRIVER), opened again (raw.c), peer access enabled from device 1 to device
 *         0 as cuv enables it (an access already enabled is fine)
 *   cuv   cuv_sync(cuv_memcpy_peer(dst, 0, src, 0, S MiB)) between cuv buffers of the two
 *         devices: the op built, scheduled, enqueued, and waited for
 * Both copy between the same two allocations, so they move the same bytes over the same link.
 * Printed: the medians, GB/s, and cuv's bandwidth as a fraction of raw's (bar 0.95: cuv-bench-peer,
 * bench/RESULTS.md). The copied data is checked once after each side ran. It needs two devices
 * (on the simulator: CUV_SIM_DEVICES=2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuv.h>

#include "raw.h"

static const char *const usage = "usage: cuv-bench-peer [--mib S] [--reps R]\n";

static void check(const char *what, int rc) {
  if (rc < 0) {
    fprintf(stderr, "cuv-bench-peer: %s: %s (%s)\n", what, cuv_err_name(rc), cuv_strerror(rc));
    exit(1);
  }
}

static struct {
  __typeof__(cuCtxSetCurrent) *set_current;
  __typeof__(cuCtxEnablePeerAccess) *enable_peer;
  __typeof__(cuStreamCreate) *stream_create;
  __typeof__(cuStreamSynchronize) *stream_sync;
  __typeof__(cuMemcpyPeerAsync) *copy_peer;
} raw;

static CUstream raw_stream; /* device 1's */

/* The raw side in device 1's context: its stream, and peer access to device 0's memory. */
static void setup_raw(cuv_device_t *d0, cuv_device_t *d1) {
  raw_open("cuv-bench-peer", d1);
  raw_resolve("cuCtxSetCurrent", &raw.set_current);
  raw_resolve("cuCtxEnablePeerAccess", &raw.enable_peer);
  raw_resolve("cuStreamCreate", &raw.stream_create);
  raw_resolve("cuStreamSynchronize", &raw.stream_sync);
  raw_resolve("cuMemcpyPeerAsync", &raw.copy_peer);
  raw_check("cuStreamCreate", raw.stream_create(&raw_stream, CU_STREAM_NON_BLOCKING));
  CUresult r = raw.enable_peer(cuv_device_context(d0), 0);
  if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED && r != CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
    raw_check("cuCtxEnablePeerAccess", r);
}

static double raw_copy(cuv_buffer_t *dst, cuv_buffer_t *src, size_t bytes) {
  cuv_device_t *dd = cuv_buffer_device(dst), *sd = cuv_buffer_device(src);
  raw_check("cuCtxSetCurrent", raw.set_current(cuv_device_context(dd)));
  double t0 = now_us();
  raw_check("cuMemcpyPeerAsync",
            raw.copy_peer(cuv_buffer_ptr(dst), cuv_device_context(dd), cuv_buffer_ptr(src),
                          cuv_device_context(sd), bytes, raw_stream));
  raw_check("cuStreamSynchronize", raw.stream_sync(raw_stream));
  return now_us() - t0;
}

static double cuv_copy(cuv_buffer_t *dst, cuv_buffer_t *src, size_t bytes) {
  double t0 = now_us();
  check("cuv_sync(cuv_memcpy_peer)", cuv_sync(cuv_memcpy_peer(dst, 0, src, 0, bytes), NULL));
  return now_us() - t0;
}

/* dst holds src's pattern word at its start and its end (then cleared for the next side). */
static void check_copied(cuv_buffer_t *dst, size_t bytes, uint32_t pattern, const char *side) {
  uint32_t ends[2] = {0, 0};
  check("read back", cuv_sync(cuv_memcpy_dtoh(&ends[0], dst, 0, 4), NULL));
  check("read back", cuv_sync(cuv_memcpy_dtoh(&ends[1], dst, bytes - 4, 4), NULL));
  if (ends[0] != pattern || ends[1] != pattern) {
    fprintf(stderr, "cuv-bench-peer: the %s copy left %08x..%08x, not %08x\n", side, ends[0],
            ends[1], pattern);
    exit(1);
  }
  check("clear", cuv_sync(cuv_memset32(dst, 0, 0, bytes / 4), NULL));
}

int main(int argc, char **argv) {
  int mib = 256, reps = 21;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
      mib = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else {
      fputs(usage, stderr);
      return 2;
    }
  }
  if (mib < 1 || reps < 1) {
    fputs(usage, stderr);
    return 2;
  }
  int count = 0;
  check("cuv_device_count", cuv_device_count(&count));
  if (count < 2) {
    fprintf(stderr, "cuv-bench-peer: needs two devices, found %d (simulator: "
                    "CUV_SIM_DEVICES=2)\n", count);
    return 1;
  }
  cuv_device_t *d0, *d1;
  check("device 0", cuv_device_open(&d0, 0));
  check("device 1", cuv_device_open(&d1, 1));
  size_t bytes = (size_t)mib << 20;
  cuv_buffer_t *src, *dst;
  check("source", cuv_buffer_create(&src, d0, bytes));
  check("destination", cuv_buffer_create(&dst, d1, bytes));
  uint32_t pattern = 0x5eed0000u | (uint32_t)mib;
  check("fill", cuv_sync(cuv_memset32(src, 0, pattern, bytes / 4), NULL));
  setup_raw(d0, d1);
  raw_copy(dst, src, bytes); /* warm-up, and checks */
  check_copied(dst, bytes, pattern, "raw");
  cuv_copy(dst, src, bytes);
  check_copied(dst, bytes, pattern, "cuv");
  double *t_raw = calloc((size_t)reps, sizeof *t_raw);
  double *t_cuv = calloc((size_t)reps, sizeof *t_cuv);
  if (!t_raw || !t_cuv)
    check("memory", CUV_ENOMEM);
  for (int r = 0; r < reps; r++) {
    t_raw[r] = raw_copy(dst, src, bytes);
    t_cuv[r] = cuv_copy(dst, src, bytes);
  }
  double raw_us = percentile(t_raw, reps, 0.5), cuv_us = percentile(t_cuv, reps, 0.5);
  double gb = (double)bytes / 1e9;
  printf("peer copy %d MiB device 0 -> 1, median of %d (%s)\n", mib, reps, cuv_driver_name());
  printf("  raw cuMemcpyPeerAsync  %10.1f us  %7.2f GB/s\n", raw_us, gb / (raw_us / 1e6));
  printf("  cuv_memcpy_peer        %10.1f us  %7.2f GB/s\n", cuv_us, gb / (cuv_us / 1e6));
  printf("  cuv / raw bandwidth    %10.3f\n", raw_us / cuv_us);
  free(t_raw);
  free(t_cuv);
  cuv_buffer_unref(src);
  cuv_buffer_unref(dst);
  cuv_device_unref(d0);
  cuv_device_unref(d1);
  return 0;
}
