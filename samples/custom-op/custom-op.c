/* custom-op: raw driver calls as a cuv op, on device memory cuv did not allocate.
 *
 *   custom-op [n]
 *
 * Allocates two arrays with cuMemAlloc itself and adopts them (cuv_buffer_adopt: cuv never frees
 * them; the release below does, once no reference and no work holds them). One chain uploads n
 * random words into src and runs a custom op whose execute enqueues, on the stream cuv picked,
 * cuMemcpyDtoDAsync (dst[0..n) = src) and cuMemsetD32Async (dst[n..2n) = a pattern), then
 * downloads dst; the result is checked against the same on the host. Runs on libcuda or, with
 * CUV_DRIVER=sim, on libcuv-sim; exits with 77 when there is no driver at all. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuv.h>

#define EXIT_NO_DRIVER 77

/* The entry points this program calls, with their C signatures (cuda.h is not needed). */
typedef struct CUstream_st *custream_t;
static struct {
  int (*mem_alloc)(cuv_deviceptr_t *ptr, size_t bytes);
  int (*mem_free)(cuv_deviceptr_t ptr);
  int (*copy_dtod)(cuv_deviceptr_t dst, cuv_deviceptr_t src, size_t bytes, custream_t stream);
  int (*set_d32)(cuv_deviceptr_t dst, unsigned value, size_t count, custream_t stream);
} cu;

/* The driver cuv loaded (already in the process), and the entry points through cuGetProcAddress,
 * at CUDA 12.0's signatures. */
static int resolve_driver(void) {
  const char *name = cuv_driver_name();
  const char *file = strcmp(name, "cuda") == 0 ? "libcuda.so.1"
                     : strcmp(name, "sim") == 0 ? CUV_SIM_SONAME
                                                 : name;
  void *lib = dlopen(file, RTLD_NOW | RTLD_NOLOAD);
  int (*get_proc)(const char *, void **, int, unsigned long long, int *) = NULL;
  if (lib)
    *(void **)&get_proc = dlsym(lib, "cuGetProcAddress_v2");
  return get_proc && get_proc("cuMemAlloc", (void **)&cu.mem_alloc, 12000, 0, NULL) == 0 &&
                 get_proc("cuMemFree", (void **)&cu.mem_free, 12000, 0, NULL) == 0 &&
                 get_proc("cuMemcpyDtoDAsync", (void **)&cu.copy_dtod, 12000, 0, NULL) == 0 &&
                 get_proc("cuMemsetD32Async", (void **)&cu.set_d32, 12000, 0, NULL) == 0
             ? 0
             : CUV_ENOTSUP;
}

/* A call that failed; while initialization has failed (every call then fails with its status),
 * also why: cuv_init_error names what cuv tried and the reason (the loader's, for a driver). */
static int fail(const char *what, int rc) {
  const char *why = cuv_init_error();
  fprintf(stderr, "custom-op: %s: %s (%s)%s%s\n", what, cuv_err_name(rc), cuv_strerror(rc),
          why ? ": " : "", why ? why : "");
  return EXIT_FAILURE;
}

/* An adopted allocation's release: cuv calls it once, with the device's context current. */
static unsigned releases;
static void raw_free(void *ptr) {
  cu.mem_free((cuv_deviceptr_t)(uintptr_t)ptr);
  releases++;
}

static int adopt(cuv_buffer_t **buf, cuv_device_t *dev, size_t bytes) {
  cuv_deviceptr_t ptr = 0;
  if (cu.mem_alloc(&ptr, bytes) != 0)
    return CUV_ENOMEM;
  int rc = cuv_buffer_adopt(buf, dev, ptr, bytes, raw_free, (void *)(uintptr_t)ptr);
  if (rc < 0)
    cu.mem_free(ptr);
  return rc;
}

/* The custom op's state: which buffers, how much, the pattern. */
typedef struct concat {
  cuv_buffer_t *dst, *src; /* held by the op's declared accesses while execute runs */
  size_t n;
  uint32_t pattern;
} concat_t;

/* dst = [src, pattern x n], enqueued on the op's stream. cuv holds and orders the declared
 * buffers; the state is retained so that it lives as long as the GPU work (as a library's
 * workspace would have to). */
static int concat_execute(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  concat_t *c = arg;
  int rc = cuv_custom_retain(ctx, c, free);
  if (rc < 0) {
    free(c);
    return rc;
  }
  custream_t stream = cuv_custom_cu_stream(ctx);
  cuv_deviceptr_t dst = cuv_buffer_ptr(c->dst);
  size_t bytes = c->n * sizeof(uint32_t);
  if (cu.copy_dtod(dst, cuv_buffer_ptr(c->src), bytes, stream) != 0 ||
      cu.set_d32(dst + bytes, c->pattern, c->n, stream) != 0)
    return CUV_EIO;
  return 0;
}

static cuv_op_t *concat(cuv_buffer_t *dst, cuv_buffer_t *src, size_t n, uint32_t pattern) {
  concat_t *c = malloc(sizeof *c);
  if (!c)
    return cuv_fail(CUV_ENOMEM);
  *c = (concat_t){dst, src, n, pattern};
  const cuv_access_t accesses[] = {CUV_ACCESS_READ(src), CUV_ACCESS_WRITE(dst)};
  return cuv_custom(concat_execute, c, free, accesses, 2);
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1u << 20;
  if (n == 0)
    n = 1;
  int rc = cuv_init();
  if (rc == CUV_ENODRIVER) {
    const char *why = cuv_init_error();
    fprintf(stderr, "custom-op: no CUDA driver: %s; CUV_DRIVER=sim runs it on the CPU simulator\n",
            why ? why : cuv_strerror(rc));
    return EXIT_NO_DRIVER;
  }
  cuv_device_t *dev = NULL;
  if (rc < 0 || (rc = cuv_device_open(&dev, 0)) < 0 || (rc = resolve_driver()) < 0 ||
      (rc = cuv_device_bind(dev)) < 0)
    return fail("start", rc);

  uint32_t *host = malloc(n * sizeof *host);
  if (!host)
    return fail("malloc", CUV_ENOMEM);
  srand((unsigned)time(NULL));
  for (size_t i = 0; i < n; i++)
    host[i] = (uint32_t)rand();
  uint32_t pattern = (uint32_t)rand() | 1u;

  cuv_buffer_t *src, *dst;
  if ((rc = adopt(&src, dev, n * sizeof *host)) < 0 ||
      (rc = adopt(&dst, dev, 2 * n * sizeof *host)) < 0)
    return fail("adopt", rc);
  cuv_op_t *op = cuv_seq(cuv_memcpy_htod(src, 0, host, n * sizeof *host, CUV_COPY_STAGE),
                         concat(dst, src, n, pattern));
  op = cuv_seq(op, cuv_download(dst, 0, 2 * n * sizeof *host));
  cuv_buffer_unref(src); /* the op holds what it needs */
  cuv_buffer_unref(dst);
  cuv_output_t out;
  if ((rc = cuv_sync(op, &out)) < 0)
    return fail("cuv_sync", rc);

  const uint32_t *got = out.data;
  size_t wrong = 0;
  for (size_t i = 0; i < 2 * n; i++)
    wrong += got[i] != (i < n ? host[i] : pattern);
  printf("custom-op n=%zu: %zu wrong words, %u of 2 allocations released %s\n", n, wrong, releases,
         wrong == 0 && releases == 2 ? "OK" : "FAILED");
  cuv_output_release(&out);
  cuv_device_unref(dev);
  free(host);
  return wrong == 0 && releases == 2 ? EXIT_SUCCESS : EXIT_FAILURE;
}
