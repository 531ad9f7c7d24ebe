/* Built against an installed cuv (pkg-config cuv) by check.sh and run on the simulator: proves
 * that the installed headers, library and cuv.pc are enough for a program of one's own. With
 * WITH_SIM (pkg-config cuv-sim) it also registers a kernel twin and launches it, and reads why a
 * kernel that has neither twin nor .entry is not found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuv.h>
#ifdef WITH_SIM
#include <cuv/sim.h>
#endif

#define CHECK(expr)                                                                               \
  do {                                                                                            \
    int rc_ = (expr);                                                                             \
    if (rc_ != 0) {                                                                               \
      fprintf(stderr, "%s: %s (%s)\n", #expr, cuv_err_name(rc_), cuv_strerror(rc_));             \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

#ifdef WITH_SIM
static int add_one(const cuv_sim_launch_t *launch, void **params) {
  unsigned n = *(unsigned *)params[0];
  cuv_deviceptr_t ptr = *(cuv_deviceptr_t *)params[1];
  unsigned *x = (unsigned *)(uintptr_t)ptr; /* simulated device memory is host memory */
  for (unsigned i = 0; i < n; i++)
    x[i] += 1;
  return 0;
}
#endif

int main(void) {
  printf("cuv %s (header %s)\n", cuv_version_string(), CUV_VERSION_STRING);
  if (strcmp(cuv_version_string(), CUV_VERSION_STRING) != 0)
    return 1;
#ifdef WITH_SIM
  static const size_t sizes[] = {sizeof(unsigned), sizeof(cuv_deviceptr_t)};
  if (cuv_sim_register_kernel("add_one", add_one, 2, sizes) != 0)
    return 1;
#endif
  CHECK(cuv_init());
  printf("driver: %s\n", cuv_driver_name());

  enum { N = 1024 };
  cuv_device_t *dev;
  cuv_buffer_t *buf;
  CHECK(cuv_device_open(&dev, 0));
  CHECK(cuv_buffer_create(&buf, dev, N * sizeof(unsigned)));
  cuv_op_t *op = cuv_memset32(buf, 0, 41, N);
#ifdef WITH_SIM
  static const char ptx[] = ".visible .entry add_one(\n";
  cuv_module_t *mod;
  cuv_kernel_t *kernel;
  CHECK(cuv_module_load_data(&mod, dev, ptx, sizeof ptx));
  CHECK(cuv_kernel_get(&kernel, mod, "add_one"));
  /* A name the simulator cannot resolve: cuv says not found, the simulator says why. */
  cuv_kernel_t *missing;
  if (cuv_kernel_get(&missing, mod, "add_two") != CUV_ENOTFOUND || !cuv_sim_lookup_error() ||
      !strstr(cuv_sim_lookup_error(), "\"add_two\": no host twin registered"))
    return 1;
  printf("lookup error: %s\n", cuv_sim_lookup_error());
  unsigned n = N;
  const cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_RW(buf)};
  op = cuv_seq(op, cuv_launch(kernel, CUV_DIM1(4), CUV_DIM1(256), 0, args, 2));
  unsigned expect = 42;
#else
  unsigned expect = 41;
#endif
  cuv_output_t out;
  CHECK(cuv_sync(cuv_seq(op, cuv_download(buf, 0, N * sizeof(unsigned))), &out));
  const unsigned *host = out.data;
  for (unsigned i = 0; i < N; i++)
    if (host[i] != expect) {
      fprintf(stderr, "word %u: %u, expected %u\n", i, host[i], expect);
      return 1;
    }
  cuv_output_release(&out);
  cuv_buffer_unref(buf);
#ifdef WITH_SIM
  cuv_kernel_unref(kernel);
  cuv_module_unref(mod);
#endif
  cuv_device_unref(dev);
  printf("consumer OK\n");
  return 0;
}
