/* Modules and kernels. A kernel holds its module, and a launch holds its kernel in the
 * submission, so a module is unloaded only once no launch can still run its code. */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "module.h"

/* PTX is text and must reach the driver NUL-terminated; cubin and fatbin carry their size. */
static size_t image_bytes(const void *image, size_t size) {
  if (size)
    return size;
  return strlen(image) + 1;
}

CUV_EXTERN int cuv_module_load_data(cuv_module_t **out, cuv_device_t *dev, const void *image,
                                    size_t size) {
  if (!out || !dev || !image)
    return CUV_EINVAL;
  cuv_module_t *mod = calloc(1, sizeof *mod);
  size_t bytes = image_bytes(image, size);
  char *copy = mod ? malloc(bytes + 1) : NULL;
  if (!copy) {
    free(mod);
    return CUV_ENOMEM;
  }
  memcpy(copy, image, bytes);
  copy[bytes] = '\0'; /* a PTX image given with its length but no NUL */
  int rc = cuv__bind(dev);
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuModuleLoadData(&mod->cu, copy));
  free(copy);
  if (rc < 0) {
    free(mod);
    return rc;
  }
  atomic_init(&mod->refs, 1);
  mod->dev = cuv__device_ref(dev);
  *out = mod;
  return 0;
}

/* Reads a whole file, NUL-terminated (PTX must be). */
static int read_file(const char *path, char **data, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return CUV_EIO;
  int rc = CUV_EIO;
  long len;
  if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    *data = malloc((size_t)len + 1);
    rc = *data ? 0 : CUV_ENOMEM;
    if (rc == 0 && fread(*data, 1, (size_t)len, f) != (size_t)len) {
      free(*data);
      rc = CUV_EIO;
    }
    if (rc == 0) {
      (*data)[len] = '\0';
      *size = (size_t)len;
    }
  }
  fclose(f);
  return rc;
}

CUV_EXTERN int cuv_module_load_file(cuv_module_t **out, cuv_device_t *dev, const char *path) {
  if (!out || !dev || !path)
    return CUV_EINVAL;
  char *data;
  size_t size;
  int rc = read_file(path, &data, &size);
  if (rc < 0)
    return rc;
  rc = cuv_module_load_data(out, dev, data, size + 1);
  free(data);
  return rc;
}

cuv_module_t *cuv__module_ref(cuv_module_t *mod) {
  atomic_fetch_add(&mod->refs, 1);
  return mod;
}

CUV_EXTERN cuv_module_t *cuv_module_ref(cuv_module_t *mod) {
  return mod ? cuv__module_ref(mod) : NULL;
}

CUV_EXTERN void cuv_module_unref(cuv_module_t *mod) {
  if (!mod || atomic_fetch_sub(&mod->refs, 1) != 1)
    return;
  if (cuv__bind(mod->dev) == 0)
    cuv__drv.cuModuleUnload(mod->cu);
  cuv__device_unref(mod->dev);
  free(mod);
}

static int lookup(cuv_kernel_t *k) {
  CUresult r = cuv__drv.cuModuleGetFunction(&k->fn, k->mod->cu, k->name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return CUV_ENOTFOUND;
  return cuv__cu(r);
}

/* Parameter sizes as the driver reports them (CUDA 12.4+), for argument checking. */
static void query_params(cuv_kernel_t *k) {
  k->nparams = -1;
  if (!cuv__drv.cuFuncGetParamInfo)
    return;
  size_t n = 0, offset, size;
  CUresult r = CUDA_SUCCESS;
  while (n < CUV__MAX_PARAMS &&
         (r = cuv__drv.cuFuncGetParamInfo(k->fn, n, &offset, &size)) == CUDA_SUCCESS)
    k->param_size[n++] = size;
  /* CUDA_ERROR_INVALID_VALUE ends the list; any other failure leaves the count unknown (no
   * checking) rather than a wrong one that would refuse every launch. */
  k->nparams = r == CUDA_SUCCESS || r == CUDA_ERROR_INVALID_VALUE ? (int)n : -1;
}

CUV_EXTERN int cuv_kernel_get(cuv_kernel_t **out, cuv_module_t *mod, const char *name) {
  if (!out || !mod || !name || strlen(name) >= sizeof((cuv_kernel_t *)0)->name)
    return CUV_EINVAL;
  cuv_kernel_t *k = cuv__lines_zalloc(sizeof *k);
  if (!k)
    return CUV_ENOMEM;
  snprintf(k->name, sizeof k->name, "%s", name);
  k->mod = mod;
  int rc = cuv__bind(mod->dev);
  if (rc == 0)
    rc = lookup(k);
  if (rc < 0) {
    free(k);
    return rc;
  }
  atomic_init(&k->refs, 1);
  cuv__module_ref(mod);
  query_params(k);
  *out = k;
  return 0;
}

CUV_EXTERN cuv_kernel_t *cuv_kernel_ref(cuv_kernel_t *k) { return k ? cuv__kernel_ref(k) : NULL; }

void cuv__kernel_free(cuv_kernel_t *k) {
  cuv_module_unref(k->mod);
  free(k);
}

CUV_EXTERN void cuv_kernel_unref(cuv_kernel_t *k) {
  if (k)
    cuv__kernel_drop(k);
}

void cuv__kernel_unref(void *k) { cuv_kernel_unref(k); }

CUV_EXTERN int cuv_kernel_param_count(const cuv_kernel_t *k, size_t *count) {
  if (!k || !count)
    return CUV_EINVAL;
  if (k->nparams < 0)
    return CUV_ENOTSUP;
  *count = (size_t)k->nparams;
  return 0;
}
