/* saxpy: y = a*x + y on the GPU through cuv, checked against the host.
 *
 *   saxpy [n] [ptx-file]
 *
 * The kernel launches through saxpy_launch, the typed launcher that cuv-launchers generated from
 * saxpy.cu (saxpy_launchers.h), and is loaded from the PTX embedded in the program, or from
 * ptx-file when one is given.
 *
 * Runs on whatever driver cuv loads: the real one (libcuda) by default, libcuv-sim with
 * CUV_DRIVER=sim. Without any CUDA driver it says so and exits with status 77 (the gpu suite's
 * test then counts as skipped). A driver that loads but fails is an error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuv.h>
#ifdef SAXPY_WITH_SIM
#include <cuv/sim.h>
#endif

#include "saxpy_launchers.h"

#define EXIT_NO_DRIVER 77 /* the usual 'skipped' status: the gpu suite's test skips */

#ifdef SAXPY_WITH_SIM
/* The kernel's host twin, for libcuv-sim: same name and parameters as saxpy.cu. It runs the whole
 * grid at once; params[i] points to parameter i. Registering it needs libcuv-sim linked in, which
 * only the simulator uses: on a GPU the registration is harmless and the PTX runs. */
static int saxpy_twin(const cuv_sim_launch_t *launch, void **params) {
  unsigned n = *(unsigned *)params[0];
  float a = *(float *)params[1];
  cuv_deviceptr_t px = *(cuv_deviceptr_t *)params[2], py = *(cuv_deviceptr_t *)params[3];
  const float *x = (const float *)(uintptr_t)px; /* simulated device memory is host memory */
  float *y = (float *)(uintptr_t)py;
  size_t threads = (size_t)launch->grid[0] * launch->block[0];
  for (size_t i = 0; i < n && i < threads; i++)
    y[i] = a * x[i] + y[i];
  return 0;
}

static void register_twin(void) {
  static const size_t sizes[] = {sizeof(unsigned), sizeof(float), sizeof(cuv_deviceptr_t),
                                 sizeof(cuv_deviceptr_t)};
  cuv_sim_register_kernel("saxpy", saxpy_twin, 4, sizes);
}
#else
static void register_twin(void) {}
#endif

/* A call that failed; while initialization has failed (every call then fails with its status),
 * also why: cuv_init_error names what cuv tried and the reason (the loader's, for a driver). */
static int fail(const char *what, int rc) {
  const char *why = cuv_init_error();
  fprintf(stderr, "saxpy: %s: %s (%s)%s%s\n", what, cuv_err_name(rc), cuv_strerror(rc),
          why ? ": " : "", why ? why : "");
  return EXIT_FAILURE;
}

static void random_floats(float *out, size_t n, unsigned *seed) {
  for (size_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u; /* an LCG is plenty for test data */
    out[i] = (float)(*seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
  }
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1u << 20;
  const char *ptx = argc > 2 ? argv[2] : NULL;
  const float a = 2.5f;
  if (n == 0)
    n = 1;

  register_twin();
  int rc = cuv_init();
  if (rc == CUV_ENODRIVER) {
    const char *why = cuv_init_error();
    fprintf(stderr, "saxpy: no CUDA driver: %s; CUV_DRIVER=sim runs it on the CPU simulator\n",
            why ? why : cuv_strerror(rc));
    return EXIT_NO_DRIVER;
  }
  if (rc != 0)
    return fail("cuv_init", rc); /* a driver that loaded but lacks or fails, a bad variable */
  printf("driver: %s\n", cuv_driver_is_sim() ? "sim" : "cuda");

  cuv_device_t *dev;
  if ((rc = cuv_device_open(&dev, 0)) != 0)
    return fail("cuv_device_open", rc);
  printf("device: %s\n", cuv_device_name(dev));

  saxpy_module_t kernels;
  rc = ptx ? saxpy_module_load_file(&kernels, dev, ptx) : saxpy_module_load(&kernels, dev);
  if (rc != 0) {
    fprintf(stderr, "saxpy: cannot load %s\n", ptx ? ptx : "the embedded PTX");
    return fail("saxpy_module_load", rc);
  }

  size_t bytes = (size_t)n * sizeof(float);
  float *x = malloc(bytes), *y = malloc(bytes);
  if (!x || !y)
    return fail("malloc", CUV_ENOMEM);
  unsigned seed = (unsigned)time(NULL);
  random_floats(x, n, &seed);
  random_floats(y, n, &seed);

  cuv_buffer_t *dx, *dy;
  if ((rc = cuv_buffer_create(&dx, dev, bytes)) != 0 ||
      (rc = cuv_buffer_create(&dy, dev, bytes)) != 0)
    return fail("cuv_buffer_create", rc);

  /* One chain, built lazily and run once: upload x and y, launch, download y. Constructors that
   * fail return an op carrying the error, so the chain is checked once, by cuv_sync. */
  cuv_op_t *uploads[] = {cuv_memcpy_htod(dx, 0, x, bytes, CUV_COPY_STAGE),
                         cuv_memcpy_htod(dy, 0, y, bytes, CUV_COPY_STAGE)};
  cuv_op_t *op =
      cuv_seq(cuv_zip(uploads, 2), saxpy_launch(&kernels, cuv_for_num_elems(n), n, a, dx, dy));
  op = cuv_seq(op, cuv_download(dy, 0, bytes));

  cuv_output_t out;
  if ((rc = cuv_sync(op, &out)) != 0)
    return fail("cuv_sync", rc);
  const float *result = out.data; /* the download's host copy, valid now that cuv_sync returned */

  double max_error = 0.0;
  for (unsigned i = 0; i < n; i++) {
    double error = fabs((double)result[i] - ((double)a * x[i] + y[i]));
    if (error > max_error)
      max_error = error;
  }
  int ok = max_error <= 1e-5;
  printf("saxpy n=%u a=%g max error %.3g %s\n", n, (double)a, max_error, ok ? "OK" : "FAILED");

  cuv_output_release(&out);
  cuv_buffer_unref(dx);
  cuv_buffer_unref(dy);
  saxpy_module_destroy(&kernels);
  cuv_device_unref(dev);
  free(x);
  free(y);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
