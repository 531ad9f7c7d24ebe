/* The built-in ops (builtins.h). */
#include "arrays.h"
#include "builtins.h"
#include "device_buffer.h"
#include "errors.h"
#include "jobs.h"

#define BLOCK 256u

static cuv_dim3_t grid_for(size_t threads) {
  return CUV_DIM1((unsigned)((threads + BLOCK - 1) / BLOCK));
}

static int float_buffer(cuv_node_call_t *c, size_t i, const char *what, cuv_node_buffer_t **b) {
  int rc = cuv_node_buffer_arg(c, i, what, b);
  if (rc == 0 && (*b)->type != napi_float32_array)
    rc = cuv_node_bad(c, "%s must hold float32, not %s", what, cuv_node_type_name((*b)->type));
  return rc;
}

/* What saxpy's launch needs, its arguments checked (the buffers borrowed from their objects). */
typedef struct saxpy_args {
  cuv_kernel_t *kernel; /* the environment's (borrowed) */
  cuv_buffer_t *x, *y;
  unsigned n;
  float a;
} saxpy_args_t;

static int saxpy_args(cuv_node_call_t *c, saxpy_args_t *r) {
  double a_value;
  cuv_node_buffer_t *x, *y;
  int rc;
  if (napi_get_value_double(c->env, c->argv[0], &a_value) != napi_ok)
    return cuv_node_bad(c, "a must be a number");
  if ((rc = float_buffer(c, 1, "x", &x)) < 0 || (rc = float_buffer(c, 2, "y", &y)) < 0)
    return rc;
  if (x->length != y->length)
    return cuv_node_bad(c, "x and y differ in length (%zu and %zu)", x->length, y->length);
  if ((rc = cuv_node_builtin_kernel(c->addon, "saxpy", &r->kernel)) < 0)
    return rc;
  r->x = x->buf;
  r->y = y->buf;
  r->n = (unsigned)x->length;
  r->a = (float)a_value;
  return 0;
}

static cuv_op_t *saxpy_op(const saxpy_args_t *r) {
  const cuv_arg_t args[] = {CUV_ARG_VALUE(r->n), CUV_ARG_VALUE(r->a), CUV_ARG_READ(r->x),
                            CUV_ARG_RW(r->y)};
  return cuv_launch(r->kernel, grid_for(r->n), CUV_DIM1(BLOCK), 0, args, 4);
}

int cuv_node_build_saxpy(cuv_node_call_t *c, cuv_op_t **op) {
  saxpy_args_t r;
  int rc = saxpy_args(c, &r);
  if (rc == 0)
    *op = saxpy_op(&r);
  return rc;
}

/* The float32 DeviceBuffer at property `key` of layer i, or NULL. */
static cuv_node_buffer_t *layer_buffer(cuv_node_call_t *c, napi_value layer, const char *key) {
  napi_value value;
  if (napi_get_named_property(c->env, layer, key, &value) != napi_ok)
    return NULL;
  cuv_node_buffer_t *b = cuv_node_buffer_of(c->env, value);
  return b && b->buf && b->type == napi_float32_array ? b : NULL;
}

/* The mlp being built: its kernel, its rows, and the width of the layer's input. */
typedef struct mlp_build {
  cuv_kernel_t *dense;
  unsigned rows, in;
  uint32_t nlayers;
} mlp_build_t;

/* cuv_map's fn: a layer's output is a tuple (its input's buffer, its own); the next layer reads
 * its own only (a launch's op argument must output one buffer). The input's buffer goes: the
 * submission holds what its launches use until the GPU is done with them. */
static int keep_own_output(cuv_output_t *value, void *arg) {
  (void)arg;
  cuv_output_t *own = cuv_tuple_get(value, 1);
  if (own) {
    cuv_output_t kept = cuv_output_take(own);
    cuv_output_release(value);
    *value = kept;
  }
  return 0;
}

/* Layer i of mlp(x, rows, layers): y = act(w x + b), ReLU between layers. Its input is x for the
 * first layer, else the previous layer's launch as an op argument (it runs first, on the same
 * stream) whose output is cut to that layer's own buffer. Its output is allocated stream-ordered
 * by the launch itself (cuv_alloc as an op argument), so neither the allocation nor, at the end,
 * the free waits on the calling thread: a cuMemFree of the layers' outputs waits for the GPU. */
static int build_layer(cuv_node_call_t *c, mlp_build_t *m, uint32_t i, cuv_buffer_t *x,
                       cuv_op_t **op) {
  napi_value layer;
  napi_valuetype type;
  cuv_node_buffer_t *w = NULL, *b = NULL;
  if (napi_get_element(c->env, c->argv[2], i, &layer) != napi_ok ||
      napi_typeof(c->env, layer, &type) != napi_ok || type != napi_object ||
      !(w = layer_buffer(c, layer, "weights")) || !(b = layer_buffer(c, layer, "bias")))
    return cuv_node_bad(c, "layers[%u] must be {weights, bias} of float32 DeviceBuffers", i);
  size_t out = b->length;
  if (w->length != out * m->in)
    return cuv_node_bad(c,
                        "layers[%u].weights has %zu floats, expected %zu (%zu outputs x %u "
                        "inputs)",
                        i, w->length, out * m->in, out, m->in);
  unsigned outputs = (unsigned)out, relu = i + 1 < m->nlayers;
  cuv_arg_t input = i == 0 ? CUV_ARG_READ(x) : CUV_ARG_OP_READ(cuv_map(*op, keep_own_output, NULL));
  cuv_op_t *y = cuv_alloc(c->addon->dev, (size_t)m->rows * out * sizeof(float));
  const cuv_arg_t args[] = {
      CUV_ARG_VALUE(m->rows), CUV_ARG_VALUE(m->in), CUV_ARG_VALUE(outputs), input,
      CUV_ARG_READ(w->buf),   CUV_ARG_READ(b->buf), CUV_ARG_OP_WRITE(y),    CUV_ARG_VALUE(relu)};
  *op = cuv_launch(m->dense, grid_for((size_t)m->rows * out), CUV_DIM1(BLOCK), 0, args, 8);
  m->in = outputs;
  return 0;
}

/* The layers' launches, each the next one's op argument; the last one is the op. */
static int build_layers(cuv_node_call_t *c, mlp_build_t *m, cuv_node_buffer_t *x, cuv_op_t **op) {
  int rc = cuv_node_builtin_kernel(c->addon, "mlp_dense", &m->dense);
  cuv_op_t *chain = NULL;
  for (uint32_t i = 0; i < m->nlayers && rc == 0; i++)
    rc = build_layer(c, m, i, x->buf, &chain);
  if (rc < 0) {
    cuv_op_destroy(chain);
    return rc;
  }
  *op = chain;
  return 0;
}

/* The last layer's output in the op's output: a launch with op arguments outputs theirs, so one
 * layer's output is its buffer and each further layer's a tuple (the layers before, its own). */
cuv_buffer_t *cuv_node_mlp_result(const cuv_output_t *output) {
  const cuv_output_t *last = cuv_tuple_get(output, 1);
  return cuv_output_buffer(last ? last : output);
}

int cuv_node_build_mlp(cuv_node_call_t *c, cuv_op_t **op, size_t *result_length) {
  cuv_node_buffer_t *x;
  mlp_build_t m = {0};
  bool is_array = false;
  int rc;
  if ((rc = float_buffer(c, 0, "x", &x)) < 0)
    return rc;
  if (napi_get_value_uint32(c->env, c->argv[1], &m.rows) != napi_ok || m.rows == 0)
    return cuv_node_bad(c, "rows must be a positive integer");
  if (x->length % m.rows != 0)
    return cuv_node_bad(c, "x has %zu floats, not a multiple of %u rows", x->length, m.rows);
  if (napi_is_array(c->env, c->argv[2], &is_array) != napi_ok || !is_array ||
      napi_get_array_length(c->env, c->argv[2], &m.nlayers) != napi_ok || m.nlayers == 0)
    return cuv_node_bad(c, "layers must be a non-empty array");
  m.in = (unsigned)(x->length / m.rows);
  rc = build_layers(c, &m, x, op);
  if (rc == 0)
    *result_length = (size_t)m.rows * m.in; /* m.in is now the last layer's width */
  return rc;
}

/* saxpy(a, x, y, token, yObject): x and y as objects or numbers (handles.h); the Promise resolves
 * with yObject, else with argv[2]. */
napi_value cuv_node_js_saxpy(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  cuv_op_t *op = NULL;
  int rc = cuv_node_build_saxpy(&c, &op);
  if (rc < 0)
    return cuv_node_rejected(env, rc, c.detail);
  napi_value y = cuv_node_arg_absent(&c, 4) ? c.argv[2] : c.argv[4];
  cuv_node_result_t result = {.kind = CUV_NODE_VALUE, .value = y};
  return cuv_node_submit(&c, op, c.argv[3], &result);
}

napi_value cuv_node_js_mlp(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_op_t *op = NULL;
  size_t length = 0;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = cuv_node_build_mlp(&c, &op, &length);
  if (rc < 0)
    return cuv_node_rejected(env, rc, c.detail);
  cuv_node_result_t result = {.kind = CUV_NODE_OUTPUT,
                              .pick = cuv_node_mlp_result,
                              .type = napi_float32_array,
                              .length = length};
  return cuv_node_submit(&c, op, c.argv[3], &result);
}

napi_value cuv_node_js_nop(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = cuv_node_setup(c.addon);
  cuv_node_result_t result = {.kind = CUV_NODE_UNDEFINED};
  return rc < 0 ? cuv_node_rejected(env, rc, NULL)
                : cuv_node_submit(&c, cuv_value(NULL, NULL), c.argv[0], &result);
}
