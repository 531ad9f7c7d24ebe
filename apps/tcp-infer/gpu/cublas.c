/* tcp-infer --cublas: the two layers as cublasSgemm, each a custom op (include/cuv/custom.h) on
 * the stream cuv picked, followed by the bias+activation kernel (mlp_bias_act).
 *
 * libcublas is loaded with dlopen at start-up, never linked: where it does not load (no CUDA
 * toolkit, or the simulator, whose streams are not CUDA streams), model_cublas_open fails and the
 * server silently keeps its own kernel. The few entry points are declared here (their C ABI), so
 * no cuBLAS header is needed either.
 *
 * What cuBLAS touches is declared to cuv: each gemm op reads x and the weights and writes y, so
 * cuv holds those buffers until the gemm is proven complete and orders it against work on other
 * streams, whatever the ops around it do. The handle, whose workspace the enqueued gemm uses, is
 * reference counted: each gemm retains it until its completion, so closing the model while
 * requests are in flight destroys the handle only after the last one. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cublas.h"
#include "server.h"

enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

typedef struct cublas {
  atomic_int refs; /* the server's, and one per gemm in flight */
  cuv_device_t *dev;
  void *lib;
  void *handle;
  pthread_mutex_t lock; /* one handle; --baseline enqueues from several pool threads */
  int (*create)(void **handle);
  int (*destroy)(void *handle);
  int (*set_stream)(void *handle, struct CUstream_st *stream);
  int (*sgemm)(void *handle, int transa, int transb, int m, int n, int k, const float *alpha,
               const float *a, int lda, const float *b, int ldb, const float *beta, float *c,
               int ldc);
} cublas_t;

static void *load_library(void) {
  static const char *const names[] = {
      "libcublas.so.13", "libcublas.so.12", "libcublas.so",
#ifdef TCP_INFER_CUDA_LIB_DIR
      TCP_INFER_CUDA_LIB_DIR "/libcublas.so.13", TCP_INFER_CUDA_LIB_DIR "/libcublas.so.12",
      TCP_INFER_CUDA_LIB_DIR "/libcublas.so",
#endif
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib)
      return lib;
  }
  return NULL;
}

int model_cublas_open(gpu_t *m) {
  if (cuv_driver_is_sim() || !m->bias_act)
    return CUV_ENOTSUP;
  cublas_t *cb = calloc(1, sizeof *cb);
  if (!cb)
    return CUV_ENOMEM;
  cb->lib = load_library();
  if (cb->lib) {
    *(void **)&cb->create = dlsym(cb->lib, "cublasCreate_v2");
    *(void **)&cb->destroy = dlsym(cb->lib, "cublasDestroy_v2");
    *(void **)&cb->set_stream = dlsym(cb->lib, "cublasSetStream_v2");
    *(void **)&cb->sgemm = dlsym(cb->lib, "cublasSgemm_v2");
  }
  /* cuBLAS works in the current context: the device's primary context, which cuv uses too. */
  if (!cb->create || !cb->destroy || !cb->set_stream || !cb->sgemm ||
      cuv_device_bind(m->dev) != 0 || cb->create(&cb->handle) != 0) {
    if (cb->lib)
      dlclose(cb->lib);
    free(cb);
    return CUV_ENOTSUP;
  }
  pthread_mutex_init(&cb->lock, NULL);
  atomic_init(&cb->refs, 1);
  cb->dev = cuv_device_ref(m->dev);
  m->cublas_ctx = cb;
  return 0;
}

static void cublas_unref(void *arg) {
  cublas_t *cb = arg;
  if (atomic_fetch_sub(&cb->refs, 1) != 1)
    return;
  cuv_device_bind(cb->dev); /* a gemm's retirement may run on any thread */
  cb->destroy(cb->handle);
  pthread_mutex_destroy(&cb->lock);
  cuv_device_unref(cb->dev);
  /* libcublas stays mapped: the CUDA runtime it loaded may still run exit-time handlers. */
  free(cb);
}

void model_cublas_close(gpu_t *m) {
  if (m->cublas_ctx)
    cublas_unref(m->cublas_ctx);
  m->cublas_ctx = NULL;
}

/* y[rows][out] = x[rows][in] W^T, with W [out][in] row-major: in cuBLAS's column-major terms,
 * y^T (out x rows) = op_T(W^T stored in x out) x^T (in x rows). */
typedef struct gemm {
  cublas_t *cb;
  int rows, in, out;
  cuv_buffer_t *x, *w, *y; /* held by the op's declared accesses while it executes */
} gemm_t;

static int enqueue_gemm(cuv_custom_ctx_t *ctx, cuv_output_t *out, void *arg) {
  gemm_t *g = arg;
  cublas_t *cb = g->cb;
  const float one = 1.0f, zero = 0.0f; /* read by cuBLAS during the call (host pointer mode) */
  atomic_fetch_add(&cb->refs, 1);
  int rc = cuv_custom_retain(ctx, cb, cublas_unref); /* before the gemm is enqueued */
  if (rc < 0)
    cublas_unref(cb);
  int st = 0;
  if (rc == 0) {
    pthread_mutex_lock(&cb->lock);
    st = cb->set_stream(cb->handle, cuv_custom_cu_stream(ctx));
    if (st == 0)
      st = cb->sgemm(cb->handle, CUBLAS_OP_T, CUBLAS_OP_N, g->out, g->rows, g->in, &one,
                     (const float *)(uintptr_t)cuv_buffer_ptr(g->w), g->in,
                     (const float *)(uintptr_t)cuv_buffer_ptr(g->x), g->in, &zero,
                     (float *)(uintptr_t)cuv_buffer_ptr(g->y), g->out);
    pthread_mutex_unlock(&cb->lock);
  }
  free(g);
  return rc < 0 ? rc : st == 0 ? 0 : CUV_EIO; /* a cuBLAS status is not a cuv code */
}

static cuv_op_t *gemm(gpu_t *m, unsigned rows, unsigned in, unsigned out, cuv_buffer_t *x,
                      cuv_buffer_t *w, cuv_buffer_t *y) {
  gemm_t *g = malloc(sizeof *g);
  if (!g)
    return cuv_fail(CUV_ENOMEM);
  *g = (gemm_t){m->cublas_ctx, (int)rows, (int)in, (int)out, x, w, y};
  const cuv_access_t accesses[] = {CUV_ACCESS_READ(x), CUV_ACCESS_READ(w), CUV_ACCESS_WRITE(y)};
  return cuv_custom(enqueue_gemm, g, free, accesses, 3);
}

static cuv_op_t *bias_act(gpu_t *m, unsigned rows, unsigned n, cuv_buffer_t *y,
                          cuv_buffer_t *b, unsigned relu) {
  const cuv_arg_t args[] = {CUV_ARG_VALUE(rows), CUV_ARG_VALUE(n), CUV_ARG_RW(y), CUV_ARG_READ(b),
                            CUV_ARG_VALUE(relu)};
  return cuv_launch(m->bias_act, CUV_DIM1((rows * n + 127) / 128), CUV_DIM1(128), 0, args, 5);
}

cuv_op_t *model_cublas_layers(gpu_t *m, workspace_t *ws, unsigned rows) {
  cuv_op_t *op = gemm(m, rows, MLP_IN, MLP_HIDDEN, ws->in, m->w1, ws->hidden);
  op = cuv_seq(op, bias_act(m, rows, MLP_HIDDEN, ws->hidden, m->b1, 1));
  op = cuv_seq(op, gemm(m, rows, MLP_HIDDEN, MLP_OUT, ws->hidden, m->w2, ws->out));
  return cuv_seq(op, bias_act(m, rows, MLP_OUT, ws->out, m->b2, 0));
}
