/* TypedArrays over pinned host memory (pinned.h). */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "pinned.h"

/* What the ArrayBuffer wraps to be recognized as cuv's: its host buffer, and the data pointer it
 * was made with. The backing store, not this record, holds the host buffer: an ArrayBuffer that
 * was transferred away (detached) reads a NULL data pointer, which no longer matches. */
typedef struct pinned_record {
  cuv_host_buffer_t *host;
  void *data;
} pinned_record_t;

static const napi_type_tag pinned_tag = {0x6375765f6e6f6465ull, 0x50696e6e65644162ull};

static void unref_host(napi_env env, void *data, void *hint) { cuv_host_buffer_unref(hint); }

static void free_record(napi_env env, void *data, void *hint) { free(data); }

/* An external ArrayBuffer over host's memory, tagged as cuv's; NULL when Node refuses it. */
static napi_value external(cuv_node_addon_t *a, cuv_host_buffer_t *host) {
  napi_value ab;
  pinned_record_t *record = malloc(sizeof *record);
  if (!record)
    return NULL;
  *record = (pinned_record_t){host, cuv_host_buffer_data(host)};
  if (a->no_external_buffers ||
      napi_create_external_arraybuffer(a->env, record->data, cuv_host_buffer_size(host), unref_host,
                                       host, &ab) != napi_ok) {
    free(record);
    return NULL;
  }
  /* From here the backing store owns the reference; a failure below only loses the fast path. */
  if (napi_type_tag_object(a->env, ab, &pinned_tag) != napi_ok ||
      napi_wrap(a->env, ab, record, free_record, NULL, NULL) != napi_ok)
    free(record);
  return ab;
}

/* The copying fallback: an ordinary ArrayBuffer holding a copy; drops the reference on host. */
static napi_value copied(cuv_node_addon_t *a, cuv_host_buffer_t *host) {
  napi_value ab;
  void *data;
  size_t bytes = cuv_host_buffer_size(host);
  bool made = napi_create_arraybuffer(a->env, bytes, &data, &ab) == napi_ok;
  if (made)
    memcpy(data, cuv_host_buffer_data(host), bytes);
  cuv_host_buffer_unref(host);
  return made ? ab : NULL;
}

napi_value cuv_node_pinned_array(cuv_node_addon_t *a, cuv_host_buffer_t *host,
                                 napi_typedarray_type type, size_t length) {
  napi_value ab = external(a, host);
  if (!ab)
    ab = copied(a, host);
  return ab ? cuv_node_array_new(a->env, type, length, ab) : NULL;
}

cuv_host_buffer_t *cuv_node_pinned_of(napi_env env, const cuv_node_array_t *array, size_t *offset) {
  bool tagged = false;
  void *wrapped = NULL, *data = NULL;
  size_t bytes = 0;
  if (napi_check_object_type_tag(env, array->arraybuffer, &pinned_tag, &tagged) != napi_ok ||
      !tagged || napi_unwrap(env, array->arraybuffer, &wrapped) != napi_ok ||
      napi_get_arraybuffer_info(env, array->arraybuffer, &data, &bytes) != napi_ok)
    return NULL;
  pinned_record_t *record = wrapped;
  if (!data || data != record->data)
    return NULL;
  *offset = array->byte_offset;
  return record->host;
}

napi_value cuv_node_js_pinned(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  napi_typedarray_type type;
  size_t length, bytes;
  cuv_host_buffer_t *host;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  int rc = cuv_node_alloc_args(&c, &type, &length, &bytes);
  if (rc == 0)
    rc = cuv_host_buffer_create(&host, c.addon->dev, bytes);
  if (rc < 0)
    return cuv_node_throw(env, rc, c.detail);
  memset(cuv_host_buffer_data(host), 0, bytes); /* pooled blocks hold earlier data */
  napi_value array = cuv_node_pinned_array(c.addon, host, type, length);
  return array ? array : cuv_node_throw(env, CUV_ENOMEM, NULL);
}

napi_value cuv_node_js_is_pinned(napi_env env, napi_callback_info info) {
  cuv_node_call_t c;
  cuv_node_array_t array;
  size_t offset;
  napi_value result = NULL;
  if (!cuv_node_call_get(env, info, &c))
    return NULL;
  bool pinned = cuv_node_array_get(env, c.argv[0], &array) &&
                cuv_node_pinned_of(env, &array, &offset) != NULL;
  napi_get_boolean(env, pinned, &result);
  return result;
}
