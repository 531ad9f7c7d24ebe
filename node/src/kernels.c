/* Generic kernels from JavaScript (kernels.h). */
#include <stdlib.h>
#include <string.h>

#include "arrays.h"
#include "errors.h"
#include "jobs.h"
#include "kernel_args.h"
#include "kernels.h"
#include "objects.h"

#define NAME_MAX_BYTES 128 /* cuv's limit on a kernel's name, with its NUL */

typedef struct node_module {
  cuv_module_t *mod; /* NULL once disposed */
} node_module_t;

typedef struct node_kernel {
  cuv_kernel_t *kernel; /* NULL once disposed */
  size_t nargs;
  unsigned char *kinds;
  char name[NAME_MAX_BYTES];
} node_kernel_t;

static void module_dispose(napi_env env, void *native) {
  node_module_t *m = native;
  cuv_module_unref(m->mod);
  m->mod = NULL;
}

static void kernel_dispose(napi_env env, void *native) {
  node_kernel_t *k = native;
  cuv_kernel_unref(k->kernel);
  k->kernel = NULL;
}

static void module_finalize(napi_env env, void *data, void *hint) {
  module_dispose(env, data);
  free(data);
}

static void kernel_finalize(napi_env env, void *data, void *hint) {
  kernel_dispose(env, data);
  free(((node_kernel_t *)data)->kinds);
  free(data);
}

static const cuv_node_class_t module_class = {"Module",
                                              "cuv.loadModule",
                                              {0x6375765f6e6f6465ull, 0x4d6f64756c655f5full},
                                              module_finalize,
                                              module_dispose};
static const cuv_node_class_t kernel_class = {"Kernel",
                                              "module.kernel",
                                              {0x6375765f6e6f6465ull, 0x4b65726e656c5f5full},
                                              kernel_finalize,
                                              kernel_dispose};

/* ---- loading ------------------------------------------------------------------------------ */

/* The image argument: a string's UTF-8 bytes (malloc'd into *owned), or a TypedArray's. */
static int image_arg(cuv_node_call_t *c, const void **image, size_t *size, char **owned) {
  cuv_node_array_t array;
  size_t len = 0;
  *owned = NULL;
  if (cuv_node_array_get(c->env, c->argv[0], &array)) {
    *image = array.data;
    *size = array.bytes;
  } else if (napi_get_value_string_utf8(c->env, c->argv[0], NULL, 0, &len) == napi_ok) {
    if (!(*owned = malloc(len + 1)))
      return CUV_ENOMEM;
    napi_get_value_string_utf8(c->env, c->argv[0], *owned, len + 1, &len);
    *image = *owned;
    *size = len;
  } else {
    return cuv_node_bad(c, "the image must be PTX text or a Uint8Array");
  }
  return *size ? 0 : cuv_node_bad(c, "the image is empty");
}

napi_value cuv_node_js_load_module(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  const void *image = NULL;
  size_t size = 0;
  char *owned;
  node_module_t *m = NULL;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = image_arg(&c, &image, &size, &owned);
  if (rc == 0)
    rc = cuv_node_setup(c.addon);
  if (rc == 0)
    rc = (m = calloc(1, sizeof *m)) ? cuv_module_load_data(&m->mod, c.addon->dev, image, size)
                                    : CUV_ENOMEM;
  free(owned);
  napi_value obj = rc == 0 ? cuv_node_object_new(c.addon, c.addon->module_class, m) : NULL;
  if (!obj) {
    if (m)
      cuv_module_unref(m->mod);
    free(m);
    return cuv_node_throw(env, rc < 0 ? rc : CUV_ENOMEM, c.detail);
  }
  return obj;
}

/* ---- Module ------------------------------------------------------------------------------- */

/* `this` as a Module or Kernel (disposed or not); NULL, with the detail, when it is neither. */
static void *self_of(cuv_node_call_t *c, napi_callback_info info, const cuv_node_class_t *cls) {
  if (!cuv_node_call_get(c->env, info, c))
    return NULL;
  void *native = cuv_node_object_get(c->env, c->self, cls);
  if (!native)
    cuv_node_bad(c, "`this` is not a %s", cls->name);
  return native;
}

/* The kernel's parameter count must be the signature's, where the driver tells it. */
static int check_count(cuv_node_call_t *c, const node_kernel_t *k) {
  size_t count = 0;
  int rc = cuv_kernel_param_count(k->kernel, &count);
  if (rc == CUV_ENOTSUP || (rc == 0 && count == k->nargs))
    return 0;
  return rc < 0 ? rc
                : cuv_node_fail(c, CUV_EARGS, "%s has %zu parameters, the signature lists %zu",
                                k->name, count, k->nargs);
}

static int get_kernel(cuv_node_call_t *c, node_module_t *m, node_kernel_t *k) {
  size_t len = 0;
  if (napi_get_value_string_utf8(c->env, c->argv[0], k->name, sizeof k->name, &len) != napi_ok ||
      len == 0)
    return cuv_node_bad(c, "the kernel's name must be a non-empty string");
  if (len + 1 >= sizeof k->name)
    return cuv_node_bad(c, "the kernel's name is longer than %d bytes", NAME_MAX_BYTES - 1);
  int rc = cuv_node_signature_parse(c, 1, &k->kinds, &k->nargs);
  if (rc == 0 && !m->mod)
    rc = cuv_node_bad(c, "the Module was disposed");
  if (rc == 0 && (rc = cuv_kernel_get(&k->kernel, m->mod, k->name)) < 0)
    cuv_node_fail(c, rc, "%s", k->name);
  return rc < 0 ? rc : check_count(c, k);
}

static napi_value module_kernel(napi_env env, napi_callback_info info) {
  cuv_node_call_t c = {.env = env};
  node_module_t *m = self_of(&c, info, &module_class);
  node_kernel_t *k = m ? calloc(1, sizeof *k) : NULL;
  if (!m)
    return cuv_node_throw(env, CUV_EINVAL, c.detail);
  int rc = k ? get_kernel(&c, m, k) : CUV_ENOMEM;
  napi_value obj = rc == 0 ? cuv_node_object_new(c.addon, c.addon->kernel_class, k) : NULL;
  if (!obj) {
    if (k)
      kernel_finalize(env, k, NULL);
    return cuv_node_throw(env, rc < 0 ? rc : CUV_ENOMEM, c.detail);
  }
  return obj;
}

static napi_value kernel_name(napi_env env, napi_callback_info info) {
  cuv_node_call_t c = {.env = env};
  napi_value name = NULL;
  node_kernel_t *k = self_of(&c, info, &kernel_class);
  if (!k)
    return cuv_node_throw(env, CUV_EINVAL, c.detail);
  napi_create_string_utf8(env, k->name, NAPI_AUTO_LENGTH, &name);
  return name;
}

napi_value cuv_node_module_class(napi_env env, cuv_node_addon_t *a) {
  const napi_property_descriptor props[] = {
      {"kernel", NULL, module_kernel, NULL, NULL, NULL, napi_default_method, NULL},
      CUV_NODE_DISPOSE_PROPERTY(&module_class),
  };
  return cuv_node_class_define(env, &module_class, props, 2, &a->module_class);
}

napi_value cuv_node_kernel_class(napi_env env, cuv_node_addon_t *a) {
  const napi_property_descriptor props[] = {
      CUV_NODE_DISPOSE_PROPERTY(&kernel_class),
      {"name", NULL, NULL, kernel_name, NULL, NULL, napi_configurable, NULL},
  };
  return cuv_node_class_define(env, &kernel_class, props, 2, &a->kernel_class);
}

/* ---- launching ---------------------------------------------------------------------------- */

/* argv[i] as launch dimensions: a positive integer, or an array of one to three. */
static int dims_arg(cuv_node_call_t *c, size_t i, const char *what, cuv_dim3_t *dims) {
  unsigned v[3] = {1, 1, 1};
  uint32_t n = 1;
  bool is_array = false;
  napi_is_array(c->env, c->argv[i], &is_array);
  if (is_array && (napi_get_array_length(c->env, c->argv[i], &n) != napi_ok || n < 1 || n > 3))
    return cuv_node_bad(c, "%s must be a positive integer or an array of one to three", what);
  for (uint32_t d = 0; d < n; d++) {
    napi_value item = c->argv[i];
    double x = 0;
    if ((is_array && napi_get_element(c->env, c->argv[i], d, &item) != napi_ok) ||
        napi_get_value_double(c->env, item, &x) != napi_ok || !(x >= 1 && x <= UINT32_MAX) ||
        x != (double)(unsigned)x)
      return cuv_node_bad(c, "%s must be a positive integer or an array of one to three", what);
    v[d] = (unsigned)x;
  }
  *dims = CUV_DIM3(v[0], v[1], v[2]);
  return 0;
}

int cuv_node_build_launch(cuv_node_call_t *c, cuv_op_t **op) {
  node_kernel_t *k = cuv_node_object_get(c->env, c->argv[0], &kernel_class);
  cuv_dim3_t grid, block;
  double shared = 0;
  if (!k || !k->kernel)
    return cuv_node_bad(c, k ? "the Kernel was disposed" : "the kernel must be a Kernel");
  int rc = dims_arg(c, 1, "grid", &grid);
  if (rc == 0)
    rc = dims_arg(c, 2, "block", &block);
  /* As a double: napi_get_value_uint32 would take -1 for 4294967295, and 1.5 for 1. */
  if (rc == 0 && !cuv_node_arg_absent(c, 4) &&
      (napi_get_value_double(c->env, c->argv[4], &shared) != napi_ok ||
       !(shared >= 0 && shared <= UINT32_MAX) || shared != (double)(uint32_t)shared))
    rc = cuv_node_bad(c, "sharedBytes must be a non-negative integer");
  cuv_arg_t *args = calloc(k->nargs + 1, sizeof *args);
  cuv_node_scalar_t *values = calloc(k->nargs + 1, sizeof *values);
  if (rc == 0 && (!args || !values))
    rc = CUV_ENOMEM;
  if (rc == 0)
    rc = cuv_node_args_convert(c, 3, k->kinds, k->nargs, args, values);
  if (rc == 0) /* the launch copies the scalars and takes its own references */
    *op = cuv_launch(k->kernel, grid, block, (uint32_t)shared, args, k->nargs);
  free(args);
  free(values);
  return rc;
}

napi_value cuv_node_js_launch(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_op_t *op = NULL;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = cuv_node_build_launch(&c, &op);
  cuv_node_result_t result = {.kind = CUV_NODE_UNDEFINED};
  return rc < 0 ? cuv_node_rejected(env, rc, c.detail)
                : cuv_node_submit(&c, op, c.argv[5], &result);
}
