/* Moving data between TypedArrays and device memory (transfers.h). */
#include "arrays.h"
#include "device_buffer.h"
#include "errors.h"
#include "jobs.h"
#include "pinned.h"
#include "transfers.h"

/* The op copying array into dst at dst_offset: one DMA from a pinned array, else staged. */
static cuv_op_t *copy_in(napi_env env, cuv_buffer_t *dst, size_t dst_offset,
                         const cuv_node_array_t *array) {
  size_t offset;
  cuv_host_buffer_t *host = cuv_node_pinned_of(env, array, &offset);
  if (host)
    return cuv_upload(dst, dst_offset, host, offset, array->bytes);
  return cuv_memcpy_htod(dst, dst_offset, array->data, array->bytes, CUV_COPY_STAGE);
}

static int array_arg(cuv_node_call_t *c, size_t i, cuv_node_array_t *array) {
  if (!cuv_node_array_get(c->env, c->argv[i], array))
    return cuv_node_bad(c, "expected a TypedArray");
  return array->length ? 0 : cuv_node_bad(c, "the array is empty");
}

napi_value cuv_node_js_alloc(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  napi_typedarray_type type;
  size_t length, bytes;
  cuv_buffer_t *buf;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = cuv_node_alloc_args(&c, &type, &length, &bytes);
  if (rc == 0)
    rc = cuv_buffer_create(&buf, c.addon->dev, bytes);
  if (rc < 0)
    return cuv_node_throw(env, rc, c.detail);
  napi_value obj = cuv_node_buffer_new(c.addon, buf, type, length);
  return obj ? obj : cuv_node_throw(env, CUV_ENOMEM, NULL);
}

napi_value cuv_node_js_upload(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_node_array_t array;
  cuv_buffer_t *buf;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = array_arg(&c, 0, &array);
  if (rc == 0)
    rc = cuv_node_setup(c.addon);
  if (rc == 0)
    rc = cuv_buffer_create(&buf, c.addon->dev, array.bytes);
  if (rc < 0)
    return cuv_node_rejected(env, rc, c.detail);
  cuv_node_result_t result = {
      .kind = CUV_NODE_DEVICE, .device = buf, .type = array.type, .length = array.length};
  return cuv_node_submit(&c, copy_in(env, buf, 0, &array), c.argv[1], &result);
}

napi_value cuv_node_js_write(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_node_buffer_t *dst;
  cuv_node_array_t array;
  int64_t offset = 0;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = cuv_node_buffer_arg(&c, 0, "the buffer", &dst);
  if (rc == 0)
    rc = array_arg(&c, 1, &array);
  if (rc == 0 && !cuv_node_arg_absent(&c, 2) &&
      (napi_get_value_int64(env, c.argv[2], &offset) != napi_ok || offset < 0))
    rc = cuv_node_bad(&c, "byteOffset must be a non-negative integer");
  if (rc < 0)
    return cuv_node_rejected(env, rc, c.detail);
  /* cuv checks the range (CUV_ERANGE) when the op is built. */
  cuv_node_result_t result = {.kind = CUV_NODE_VALUE, .value = c.argv[0]};
  return cuv_node_submit(&c, copy_in(env, dst->buf, (size_t)offset, &array), c.argv[3], &result);
}

napi_value cuv_node_js_download(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_node_buffer_t *src;
  cuv_host_buffer_t *host;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = cuv_node_buffer_arg(&c, 0, "the argument", &src);
  size_t bytes = rc == 0 ? cuv_buffer_size(src->buf) : 0;
  if (rc == 0)
    rc = cuv_host_buffer_create(&host, cuv_buffer_device(src->buf), bytes);
  if (rc < 0)
    return cuv_node_rejected(env, rc, c.detail);
  cuv_node_result_t result = {.kind = CUV_NODE_HOST,
                              .host = cuv_host_buffer_ref(host),
                              .type = src->type,
                              .length = src->length};
  /* Into pinned memory: from the loop thread, a copy into pageable memory would wait for the
   * stream's earlier work (cuv_memcpy_dtoh in include/cuv.h). */
  cuv_op_t *op = cuv_download_into(host, 0, src->buf, 0, bytes);
  cuv_host_buffer_unref(host);
  return cuv_node_submit(&c, op, c.argv[1], &result);
}
