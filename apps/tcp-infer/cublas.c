/* tcp-infer --cublas: the two layers as cublasSgemm, enqueued through cuv_with_context on the
 * stream cuv picked, each followed by the bias+activation kernel (mlp_bias_act).
 *
 * libcublas is loaded with dlopen at start-up, never linked: where it does not load (no CUDA
 * toolkit, or the simulator, whose streams are not CUDA streams), model_cublas_open fails and the
 * server silently keeps its own kernel. The few entry points are declared here (their C ABI), so
 * no cuBLAS header is needed either.
 *
 * What cuv cannot see: the raw cuBLAS calls touch ws->in, ws->hidden, ws->out and the weights
 * without telling cuv. That is safe here only because the same submission's own ops (the upload
 * into ws->in, the bias kernels on hidden and out, the download) retain those buffers and order
 * them on the one stream, and the weights live until exit. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "server.h"

enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

typedef struct cublas {
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

int model_cublas_open(server_t *s) {
  if (cuv_driver_is_sim() || !s->bias_act)
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
      cuv_device_bind(s->dev) != 0 || cb->create(&cb->handle) != 0) {
    if (cb->lib)
      dlclose(cb->lib);
    free(cb);
    return CUV_ENOTSUP;
  }
  pthread_mutex_init(&cb->lock, NULL);
  s->cublas_ctx = cb;
  return 0;
}

void model_cublas_close(server_t *s) {
  cublas_t *cb = s->cublas_ctx;
  if (!cb)
    return;
  cb->destroy(cb->handle);
  pthread_mutex_destroy(&cb->lock);
  /* libcublas stays mapped: the CUDA runtime it loaded may still run exit-time handlers. */
  free(cb);
  s->cublas_ctx = NULL;
}

/* y[rows][out] = x[rows][in] W^T, with W [out][in] row-major: in cuBLAS's column-major terms,
 * y^T (out x rows) = op_T(W^T stored in x out) x^T (in x rows). */
typedef struct gemm {
  cublas_t *cb;
  int rows, in, out;
  cuv_deviceptr_t x, w, y;
} gemm_t;

static cuv_op_t *enqueue_gemm(cuv_stream_t *stream, void *arg) {
  const gemm_t *g = arg;
  const float one = 1.0f, zero = 0.0f;
  pthread_mutex_lock(&g->cb->lock);
  int st = g->cb->set_stream(g->cb->handle, cuv_stream_handle(stream));
  if (st == 0)
    st = g->cb->sgemm(g->cb->handle, CUBLAS_OP_T, CUBLAS_OP_N, g->out, g->rows, g->in, &one,
                      (const float *)(uintptr_t)g->w, g->in, (const float *)(uintptr_t)g->x,
                      g->in, &zero, (float *)(uintptr_t)g->y, g->out);
  pthread_mutex_unlock(&g->cb->lock);
  /* A failure can only be reported as NULL (CUV_EINVAL): cuv has no public "failed op". */
  return st == 0 ? cuv_value(NULL, NULL) : NULL;
}

static cuv_op_t *gemm(server_t *s, unsigned rows, unsigned in, unsigned out, cuv_buffer_t *x,
                      cuv_buffer_t *w, cuv_buffer_t *y) {
  gemm_t *g = malloc(sizeof *g);
  if (!g)
    return cuv_with_context(NULL, NULL, NULL); /* an op carrying CUV_EINVAL */
  *g = (gemm_t){s->cublas_ctx, (int)rows, (int)in, (int)out,
                cuv_buffer_ptr(x), cuv_buffer_ptr(w), cuv_buffer_ptr(y)};
  return cuv_with_context(enqueue_gemm, g, free);
}

static cuv_op_t *bias_act(server_t *s, unsigned rows, unsigned n, cuv_buffer_t *y,
                          cuv_buffer_t *b, unsigned relu) {
  const cuv_arg_t args[] = {CUV_ARG_VALUE(rows), CUV_ARG_VALUE(n), CUV_ARG_RW(y), CUV_ARG_READ(b),
                            CUV_ARG_VALUE(relu)};
  return cuv_launch(s->bias_act, CUV_DIM1((rows * n + 127) / 128), CUV_DIM1(128), 0, args, 5);
}

cuv_op_t *model_cublas_layers(server_t *s, workspace_t *ws, unsigned rows) {
  cuv_op_t *op = gemm(s, rows, MLP_IN, MLP_HIDDEN, ws->in, s->w1, ws->hidden);
  op = cuv_seq(op, bias_act(s, rows, MLP_HIDDEN, ws->hidden, s->b1, 1));
  op = cuv_seq(op, gemm(s, rows, MLP_HIDDEN, MLP_OUT, ws->hidden, s->w2, ws->out));
  return cuv_seq(op, bias_act(s, rows, MLP_OUT, ws->out, s->b2, 0));
}
