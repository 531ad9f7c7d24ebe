/* fuzz/api.c: random sequences of public API calls with random arguments, on the simulator.
 *
 * The input is a program: each step is an action byte and its argument bytes (missing bytes read
 * as 0). Objects live in small tables; an argument names a slot, and an empty slot passes NULL.
 * Actions build ops (NULLs, zero and huge sizes, offsets out of range, objects of the other
 * device: the simulator has two), combine them (also error ops and ops of two devices), execute
 * them through every executor (cuv_sync*, cuv_enqueue_on, cuv_submit into a queue then drained,
 * the libuv bridge, graph capture), release outputs, close and destroy things in any order, inject
 * driver failures (cuv_sim_fail).
 *
 * The oracle: every call returns 0 or a code cuv_err_name knows (never crashes, hangs or leaks,
 * under ASan, UBSan and LeakSanitizer); every constructor returns an op; every accepted
 * submission's callback runs exactly once and every value is released exactly once (the
 * sanitizers see a double release, LeakSanitizer a missing one); when everything is released,
 * nothing is in flight.
 *
 * The harness is a careful caller: it never uses an object after handing it over. An op handed to
 * a combinator or executor leaves its slot, also when the call fails, because the API consumes it
 * on every path: using it again would be a use-after-free that no API can detect (tests/README.md,
 * "Bad input"). It also respects the documented preconditions that only the caller can know:
 * host memory handed to a copy is as large as the copy, scalar arguments are as large as they
 * say, no allocation inside a graph capture, and a borrowed object (the device's default policy,
 * a graph's stream) is not used after its owner is gone. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>
#include <uv.h>

#include <cuv.h>
#include <cuv/sim.h>
#include <cuv/uv.h>

#include "fuzz.h"

#define NDEV 2
#define NBUF 6
#define NOPS 8
#define NSTREAM 3
#define NQUEUE 2
#define NPOLICY 3
#define NSHARED 2
#define NGRAPH 2
#define MAX_BUF 65536            /* buffers are small, or huge (the simulator refuses those) */
#define HUGE_MIN ((size_t)1 << 40) /* beyond the simulated device's 140 GiB */
#define MAX_STEPS 64
#define MAX_NESTED_SUBMITS 8

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "fuzz/api.c:%d: check failed: %s\n", __LINE__, #cond);                     \
      abort();                                                                                    \
    }                                                                                             \
  } while (0)

/* A status any call returns: 0, or a code with a name. */
#define CHECK_RC(rc)                                                                              \
  do {                                                                                            \
    int rc_ = (rc);                                                                               \
    CHECK(rc_ <= 0);                                                                              \
    CHECK(rc_ == 0 || strcmp(cuv_err_name(rc_), "CUV_EUNKNOWN") != 0);                            \
    CHECK(rc_ == 0 || !CUV_IS_ECUDA(rc_) ||                                                       \
          strcmp(cuv_err_name(rc_), "CUDA_ERROR_UNKNOWN_CODE") != 0);                             \
  } while (0)

/* CUV_FUZZ_TRACE=1: each action and its result on stderr, to read what an input does. */
static bool tracing;
#define TRACE(...)                                                                                \
  do {                                                                                            \
    if (tracing)                                                                                  \
      fprintf(stderr, __VA_ARGS__);                                                               \
  } while (0)

/* ---- the input ----
 * Every byte is read in statement order, never twice in one expression or argument list (their
 * order is unspecified in C): the same input must replay the same calls under gcc and clang. */

typedef struct input {
  const uint8_t *p;
  size_t n;
} input_t;

static uint8_t u8(input_t *in) {
  if (!in->n)
    return 0;
  in->n--;
  return *in->p++;
}

static uint32_t u32(input_t *in) {
  uint32_t v = u8(in);
  v |= (uint32_t)u8(in) << 8;
  v |= (uint32_t)u8(in) << 16;
  return v | (uint32_t)u8(in) << 24;
}

/* A size near `ref` (a buffer's size), small, or huge. */
static size_t pick_size(input_t *in, size_t ref) {
  switch (u8(in) % 12) {
  case 0: return 0;
  case 1: return 1;
  case 2: return 4;
  case 3: return ref;
  case 4: return ref ? ref - 1 : 0;
  case 5: return ref + 1;
  case 6: return (size_t)u8(in) * 4;
  case 7: return u32(in) % (MAX_BUF + 1);
  case 8: return SIZE_MAX;
  case 9: return SIZE_MAX - 3;
  case 10: return (size_t)1 << 63;
  default: return HUGE_MIN;
  }
}

/* A size for something the simulator allocates: small, or huge enough to be refused before any
 * host memory is asked for. */
static size_t alloc_size(input_t *in) {
  size_t bytes = pick_size(in, 256);
  return bytes > MAX_BUF && bytes < HUGE_MIN ? MAX_BUF : bytes;
}

/* ---- kernels: host twins that only touch memory the harness knows is there ---- */

typedef struct range {
  uintptr_t base;
  size_t size;
} range_t;

static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;
static range_t ranges[64];
static size_t nranges;

static void range_add(cuv_buffer_t *buf) {
  pthread_mutex_lock(&ranges_lock);
  if (nranges < sizeof ranges / sizeof ranges[0])
    ranges[nranges++] = (range_t){(uintptr_t)cuv_buffer_ptr(buf), cuv_buffer_size(buf)};
  pthread_mutex_unlock(&ranges_lock);
}

static void range_remove(cuv_buffer_t *buf) {
  uintptr_t base = (uintptr_t)cuv_buffer_ptr(buf);
  pthread_mutex_lock(&ranges_lock);
  for (size_t i = 0; i < nranges; i++) {
    if (ranges[i].base == base) {
      ranges[i] = ranges[--nranges];
      break;
    }
  }
  pthread_mutex_unlock(&ranges_lock);
}

/* Bytes writable at p: inside a buffer the harness holds, else 0. */
static size_t writable(uintptr_t p) {
  size_t n = 0;
  pthread_mutex_lock(&ranges_lock);
  for (size_t i = 0; i < nranges; i++)
    if (p >= ranges[i].base && p - ranges[i].base < ranges[i].size)
      n = ranges[i].size - (p - ranges[i].base);
  pthread_mutex_unlock(&ranges_lock);
  return n;
}

enum { K_EMPTY, K_FILL, K_SLOW, NKERN };
static const char *const kernel_names[NKERN] = {"fz_empty", "fz_fill", "fz_slow"};
/* The entries a module declares; fz_missing is declared but has no twin (CUV_ENOTFOUND). */
static const char module_ptx[] = ".visible .entry fz_empty(\n.visible .entry fz_fill(\n"
                                 ".visible .entry fz_slow(\n.visible .entry fz_missing(\n";

static int twin_empty(const cuv_sim_launch_t *l, void **params) { return 0; }

/* fz_fill(unsigned n, unsigned value, unsigned *out): out[0..n) = value, within its buffer. */
static int twin_fill(const cuv_sim_launch_t *l, void **params) {
  unsigned n = *(unsigned *)params[0], value = *(unsigned *)params[1];
  uintptr_t out = (uintptr_t)*(CUdeviceptr *)params[2];
  size_t room = writable(out) / sizeof value;
  for (size_t i = 0; i < n && i < room; i++)
    memcpy((void *)(out + i * sizeof value), &value, sizeof value);
  return 0;
}

/* fz_slow(unsigned usec): keeps its stream busy, so completions take every path. */
static int twin_slow(const cuv_sim_launch_t *l, void **params) {
  usleep(*(unsigned *)params[0] % 500);
  return 0;
}

/* ---- counted host values ---- */

static atomic_long values_live;

static void value_release(void *data) {
  atomic_fetch_sub(&values_live, 1);
  free(data);
}

static cuv_op_t *counted_value(void) {
  int *data = malloc(sizeof *data);
  CHECK(data);
  *data = 42;
  atomic_fetch_add(&values_live, 1);
  return cuv_value(data, value_release);
}

/* ---- the state: object tables ---- */

typedef enum { OUT_OTHER, OUT_BUFFER } out_kind_t;

typedef struct op_slot {
  cuv_op_t *op;
  out_kind_t kind;
  bool allocates; /* contains cuv_alloc or cuv_free: not for a graph capture */
} op_slot_t;

typedef struct policy_slot {
  cuv_policy_t *policy;
  bool borrowed; /* a device's default policy: never destroyed here */
} policy_slot_t;

typedef struct custom_policy {
  cuv_stream_t *stream;
  int mode; /* 0: its stream, 1: no stream, 2: an error */
} custom_policy_t;

static struct {
  cuv_device_t *dev[NDEV];
  cuv_kernel_t *kern[NDEV][NKERN];
  cuv_buffer_t *buf[NBUF];
  op_slot_t ops[NOPS];
  cuv_stream_t *stream[NSTREAM];
  cuv_queue_t *queue[NQUEUE];
  cuv_ticket_t ticket[NQUEUE];
  policy_slot_t policy[NPOLICY];
  cuv_shared_t *shared[NSHARED];
  cuv_graph_t *graph[NGRAPH];
  uv_loop_t loop;
  cuv_uv_t *bridge;
  bool bridge_closing;
  long accepted;  /* submissions accepted (queue or bridge) */
  long delivered; /* their callbacks that ran */
  long queue_in[NQUEUE]; /* per queue: accepted, minus the callbacks that started */
  int nested_submits;
  uint8_t host_src[MAX_BUF + 8];
  uint8_t host_dst[MAX_BUF + 8];
  cuv_host_buffer_t *hbuf_src, *hbuf_dst; /* pinned, MAX_BUF + 8 bytes each, on device 0 */
} S;

static int free_slot(void **slots, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!slots[i])
      return (int)i;
  return -1;
}

/* ---- buffers ---- */

/* A slot of a table of n, or NULL (one value in n + 1). */
#define PICK(in, table, n) pick_index((in), (void *const *)(table), (n))
static void *pick_index(input_t *in, void *const *table, size_t n) {
  size_t i = u8(in) % (n + 1);
  return i < n ? table[i] : NULL;
}

static cuv_buffer_t *pick_buf(input_t *in) { return PICK(in, S.buf, NBUF); }

static void buf_put(cuv_buffer_t *buf) {
  int i = free_slot((void **)S.buf, NBUF);
  if (i < 0) {
    cuv_buffer_unref(buf);
    return;
  }
  S.buf[i] = buf;
  range_add(buf);
}

static void buf_drop(int i) {
  if (!S.buf[i])
    return;
  range_remove(S.buf[i]);
  cuv_buffer_unref(S.buf[i]);
  S.buf[i] = NULL;
}

static cuv_device_t *pick_dev(input_t *in) {
  uint8_t v = u8(in) % 5;
  return v < 4 ? S.dev[v % NDEV] : NULL;
}

/* ---- ops ---- */

/* Takes the op out of slot i (NULL when empty): the caller consumes it. */
static cuv_op_t *op_take(int i, out_kind_t *kind, bool *allocates) {
  op_slot_t s = S.ops[i];
  S.ops[i] = (op_slot_t){0};
  if (kind)
    *kind = s.kind;
  if (allocates)
    *allocates = s.allocates;
  return s.op;
}

static int pick_op(input_t *in) { return u8(in) % NOPS; }

static void op_put(cuv_op_t *op, out_kind_t kind, bool allocates) {
  CHECK(op); /* constructors never return NULL: a failure is an op carrying its error */
  CHECK_RC(cuv_op_error(op));
  int ordinal;
  CHECK(cuv_op_device(op, &ordinal) == 0 && ordinal >= 0 && ordinal < NDEV);
  int i = 0;
  while (i < NOPS && S.ops[i].op)
    i++;
  if (i == NOPS) {
    cuv_op_destroy(op);
    return;
  }
  S.ops[i] = (op_slot_t){op, cuv_op_error(op) ? OUT_OTHER : kind, allocates};
  TRACE("  op slot %d: %s\n", i, cuv_err_name(cuv_op_error(op)));
}

/* An output from an executor: a buffer from cuv_alloc joins the table, anything else is looked
 * at (tuples) and released. */
static void take_output(cuv_output_t *out, out_kind_t kind, int rc) {
  if (rc < 0) {
    CHECK(!out->data && !out->release); /* a failed executor leaves no output */
    return;
  }
  if (kind == OUT_BUFFER && out->data) {
    cuv_output_t o = cuv_output_take(out);
    CHECK(!out->data);
    buf_put(o.data); /* the output's release is an unref: the table's unref does it */
    return;
  }
  for (size_t i = 0; i < 3; i++) {
    cuv_output_t *item = cuv_tuple_get(out, i);
    if (item)
      (void)item->data;
  }
  cuv_output_release(out);
  CHECK(!out->data && !out->release);
  cuv_output_release(out); /* safe on a cleared output */
}

/* then: what the callback does with its input. */
static cuv_op_t *then_fn(cuv_output_t *input, void *arg) {
  switch ((uintptr_t)arg % 5) {
  case 0: /* pass the input on when cuv_value can carry it (release_arg is its data) */
    if (input->release_arg == input->data) {
      cuv_output_t o = cuv_output_take(input);
      return cuv_value(o.data, o.release);
    }
    return cuv_value(NULL, NULL);
  case 1: return NULL;                                 /* executing fails with CUV_EINVAL */
  case 2: return cuv_memset8(NULL, 0, 0, 4);           /* an error op */
  case 3: {                                            /* executing inside: refused */
    int rc = cuv_sync(counted_value(), NULL);
    CHECK(rc == CUV_EREENTRANT || ((uintptr_t)arg & 8)); /* 8: then_unchecked */
    return counted_value();
  }
  default: return counted_value();
  }
}

static int map_fn(cuv_output_t *value, void *arg) {
  switch ((uintptr_t)arg % 4) {
  case 0: return 0;
  case 1: return CUV_ERANGE;
  case 2: {
    cuv_output_release(value);
    int *data = malloc(sizeof *data);
    CHECK(data);
    atomic_fetch_add(&values_live, 1);
    *value = (cuv_output_t){data, value_release, data};
    return 0;
  }
  default: return 7; /* positive: success */
  }
}

static cuv_op_t *context_fn(cuv_stream_t *stream, void *arg) {
  uintptr_t mode = arg ? *(uint8_t *)arg : 0;
  CHECK(stream);
  int ordinal = cuv_device_ordinal(cuv_stream_device(stream));
  CHECK(ordinal >= 0 && ordinal < NDEV);
  switch (mode % 5) {
  case 0: return counted_value();
  case 1: return NULL;
  case 2: return cuv_download(NULL, 0, 4);
  case 3:
    return cuv_launch(S.kern[ordinal][K_EMPTY], CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0);
  default:
    CHECK(cuv_sync_on(stream, counted_value(), NULL) == CUV_EREENTRANT);
    return cuv_value(NULL, NULL);
  }
}

/* Builds one op from the input. */
static void build(input_t *in) {
  uint8_t what = u8(in) % 16;
  TRACE("build %u\n", what);
  cuv_buffer_t *a = pick_buf(in), *b = pick_buf(in);
  size_t size = a ? cuv_buffer_size(a) : 64;
  switch (what) {
  case 0: op_put(u8(in) & 1 ? counted_value() : cuv_value(NULL, NULL), OUT_OTHER, false); break;
  case 1: {
    cuv_device_t *dev = pick_dev(in);
    op_put(cuv_alloc(dev, alloc_size(in)), OUT_BUFFER, true);
    break;
  }
  case 2: { /* cuv_free consumes the caller's reference: the slot gives it up */
    int i = u8(in) % (NBUF + 1);
    cuv_buffer_t *buf = i < NBUF ? S.buf[i] : NULL;
    if (buf) {
      range_remove(buf);
      S.buf[i] = NULL;
    }
    op_put(cuv_free(buf), OUT_OTHER, true);
    break;
  }
  case 3: {
    size_t off = pick_size(in, size), bytes = pick_size(in, size);
    unsigned flags = u8(in) % 3;
    if (flags == 2 && u8(in) % 2) { /* from a host buffer (or none): range-checked on both sides */
      cuv_host_buffer_t *hb = u8(in) % 4 ? S.hbuf_src : NULL;
      op_put(cuv_upload(a, off, hb, pick_size(in, MAX_BUF + 8), bytes), OUT_OTHER, false);
      break;
    }
    const void *src = u8(in) % 4 ? S.host_src : NULL;
    /* A copy reads `bytes` of src: never more than the harness has (it would be the caller's
     * overflow, not cuv's); the op is refused anyway when bytes exceed the buffer. */
    if (bytes > MAX_BUF && src)
      bytes = MAX_BUF + 1;
    op_put(cuv_memcpy_htod(a, off, src, bytes, flags), OUT_OTHER, false);
    break;
  }
  case 4: {
    size_t off = pick_size(in, size), bytes = pick_size(in, size);
    if (u8(in) % 3 == 0) { /* into a host buffer (or none) */
      cuv_host_buffer_t *hb = u8(in) % 4 ? S.hbuf_dst : NULL;
      op_put(cuv_download_into(hb, pick_size(in, MAX_BUF + 8), a, off, bytes), OUT_OTHER, false);
      break;
    }
    void *dst = u8(in) % 4 ? S.host_dst : NULL;
    if (bytes > MAX_BUF && dst)
      bytes = MAX_BUF + 1;
    op_put(cuv_memcpy_dtoh(dst, a, off, bytes), OUT_OTHER, false);
    break;
  }
  case 5: {
    size_t dst_off = pick_size(in, size), src_off = pick_size(in, size);
    size_t bytes = pick_size(in, size);
    op_put(cuv_memcpy_dtod(a, dst_off, b, src_off, bytes), OUT_OTHER, false);
    break;
  }
  case 6: {
    size_t off = pick_size(in, size);
    uint8_t value = u8(in);
    op_put(cuv_memset8(a, off, value, pick_size(in, size)), OUT_OTHER, false);
    break;
  }
  case 7: {
    size_t off = pick_size(in, size);
    uint32_t value = u32(in);
    op_put(cuv_memset32(a, off, value, pick_size(in, size / 4)), OUT_OTHER, false);
    break;
  }
  case 8: {
    size_t off = pick_size(in, size);
    op_put(cuv_download(a, off, pick_size(in, size)), OUT_OTHER, false);
    break;
  }
  case 9: { /* a launch with made-up arguments */
    uint8_t k = u8(in);
    cuv_kernel_t *kernel = k % 8 < NKERN ? S.kern[(k >> 3) % NDEV][k % 8] : NULL;
    static unsigned scalars[4];
    scalars[0] = u32(in);
    scalars[1] = u32(in);
    cuv_arg_t args[5];
    size_t nargs = u8(in) % 6;
    for (size_t i = 0; i < nargs; i++) {
      uint8_t kind = u8(in);
      args[i] = (cuv_arg_t){.kind = (enum cuv_arg_kind)(kind % 5), .buffer = pick_buf(in)};
      if (kind & 0x10)
        args[i].offset = pick_size(in, args[i].buffer ? cuv_buffer_size(args[i].buffer) : 0);
      static const size_t scalar_sizes[] = {4, 4, 8, 0, 1, 16};
      args[i].scalar = kind & 0x20 ? NULL : scalars;
      args[i].size = scalar_sizes[(kind >> 6) % 6];
    }
    cuv_dim3_t grid = CUV_DIM3(u8(in) % 4, 1, 1), block = CUV_DIM3(u8(in) % 4, 1, 1);
    if (u8(in) % 8 == 0) {
      grid.x = u32(in);
      grid.y = u32(in);
      grid.z = u32(in);
      block.x = u32(in);
    }
    unsigned shared = u8(in) % 8 == 0 ? u32(in) : 0;
    op_put(cuv_launch(kernel, grid, block, shared, u8(in) % 8 ? args : NULL, nargs), OUT_OTHER,
           false);
    break;
  }
  case 10: { /* the typical launch: fz_fill over a buffer, fz_slow */
    uint8_t d = u8(in) % NDEV;
    unsigned n = u8(in), value = u32(in);
    if (u8(in) & 1) {
      cuv_arg_t args[] = {CUV_ARG_VALUE(n), CUV_ARG_VALUE(value), CUV_ARG_WRITE(a)};
      op_put(cuv_launch(S.kern[d][K_FILL], CUV_DIM1(1), CUV_DIM1(1), 0, args, 3), OUT_OTHER,
             false);
    } else {
      unsigned usec = n * 8;
      cuv_arg_t args[] = {CUV_ARG_VALUE(usec)};
      op_put(cuv_launch(S.kern[d][K_SLOW], CUV_DIM1(1), CUV_DIM1(1), 0, args, 1), OUT_OTHER,
             false);
    }
    break;
  }
  case 11: {
    uint8_t mode = u8(in);
    uint8_t *arg = NULL;
    if (mode & 0x80) {
      arg = malloc(1);
      CHECK(arg);
      *arg = mode;
    }
    op_put(cuv_with_context(mode & 0x40 ? context_fn : NULL, arg, arg ? free : NULL), OUT_OTHER,
           false);
    break;
  }
  case 12: op_put(cuv_shared_clone(PICK(in, S.shared, NSHARED)), OUT_OTHER, false); break;
  case 13: op_put(cuv_graph_launch(PICK(in, S.graph, NGRAPH)), OUT_OTHER, false); break;
  case 14: { /* a buffer of its own, or refused */
    cuv_buffer_t *buf = NULL, **out = u8(in) % 8 ? &buf : NULL;
    cuv_device_t *dev = pick_dev(in);
    int rc = cuv_buffer_create(out, dev, alloc_size(in));
    CHECK_RC(rc);
    CHECK((rc == 0) == (buf != NULL));
    if (buf)
      buf_put(buf);
    break;
  }
  default: { /* a second reference in another slot, or hazard modes */
    if (a && u8(in) & 1) {
      buf_put(cuv_buffer_ref(a));
    } else {
      int mode = (int)(u8(in) % 5) - 1;
      int rc = cuv_buffer_set_hazard_mode(a, mode);
      CHECK(rc == (a && mode >= 0 && mode <= 2 ? 0 : CUV_EINVAL));
    }
    break;
  }
  }
}

/* Combines ops of the table (consumed, also on failure). */
static void combine(input_t *in) {
  uint8_t what = u8(in) % 6;
  TRACE("combine %u\n", what);
  out_kind_t kind;
  bool allocates;
  cuv_op_t *first = op_take(pick_op(in), &kind, &allocates);
  switch (what) {
  case 0: {
    uintptr_t variant = u8(in);
    bool unchecked = variant & 8;
    cuv_then_fn fn = variant & 0x80 ? NULL : then_fn;
    cuv_op_t *op = unchecked ? cuv_then_unchecked(first, fn, (void *)variant)
                             : cuv_then(first, fn, (void *)variant);
    op_put(op, variant % 5 == 0 ? kind : OUT_OTHER, allocates);
    break;
  }
  case 1: {
    uintptr_t variant = u8(in);
    op_put(cuv_map(first, variant & 0x80 ? NULL : map_fn, (void *)variant),
           variant % 4 == 2 ? OUT_OTHER : kind, allocates);
    break;
  }
  case 2: {
    out_kind_t kind2;
    bool allocates2;
    cuv_op_t *second = op_take(pick_op(in), &kind2, &allocates2);
    op_put(cuv_seq(first, second), kind2, allocates || allocates2);
    break;
  }
  case 3:
  case 4: {
    cuv_op_t *ops[4] = {first};
    size_t n = u8(in) % 5;
    for (size_t i = 1; i < n; i++) {
      bool al;
      ops[i] = op_take(pick_op(in), NULL, &al);
      allocates = allocates || al;
    }
    bool no_array = u8(in) % 8 == 0;
    cuv_op_t *op = what == 3 ? cuv_zip(no_array ? NULL : ops, n)
                             : cuv_fork(no_array ? NULL : ops, n);
    /* Without an array, or with n == 0, there is nothing to consume: the harness drops them. */
    for (size_t i = 0; (no_array || n == 0) && i < (n ? n : 1); i++)
      cuv_op_destroy(ops[i]);
    op_put(op, OUT_OTHER, allocates);
    break;
  }
  default: { /* shared */
    int i = free_slot((void **)S.shared, NSHARED);
    cuv_shared_t *sh = cuv_shared(first);
    CHECK(sh != NULL); /* never NULL: without an op its clones carry CUV_EINVAL */
    if (!first) {
      cuv_op_t *clone = cuv_shared_clone(sh);
      CHECK(cuv_op_error(clone) == CUV_EINVAL);
      cuv_op_destroy(clone);
    }
    if (i >= 0)
      S.shared[i] = sh;
    else
      cuv_shared_unref(sh);
    break;
  }
  }
}

/* ---- executing ---- */

typedef struct call {
  int queue; /* -1: the bridge */
  bool close_bridge, submit_more, take_output;
} call_t;

static void done(int status, cuv_output_t *output, void *arg);

static int submit_bridge(cuv_op_t *op, uint8_t flags) {
  call_t *c = malloc(sizeof *c);
  CHECK(c);
  *c = (call_t){-1, flags & 1, flags & 2, flags & 4};
  int rc = cuv_uv_submit(S.bridge, op, done, c, NULL);
  CHECK_RC(rc);
  if (rc == 0)
    S.accepted++;
  else
    free(c);
  CHECK(rc == 0 || !S.bridge || S.bridge_closing || rc != CUV_ECLOSED);
  return rc;
}

static void on_bridge_closed(cuv_uv_t *bridge, void *arg) {
  CHECK(bridge == S.bridge);
  S.bridge = NULL;
  S.bridge_closing = false;
}

static void done(int status, cuv_output_t *output, void *arg) {
  call_t *c = arg;
  CHECK_RC(status);
  CHECK(output);
  if (status < 0)
    CHECK(!output->data);
  S.delivered++;
  if (c->queue >= 0) {
    cuv_queue_t *q = S.queue[c->queue];
    CHECK(q);
    /* Counted out as it starts: the queue's count is what is still to come, plus cancelled
     * submissions called back before their work finished (they count until it retires). */
    CHECK(cuv_queue_pending(q) >= (unsigned)--S.queue_in[c->queue]);
  } else {
    CHECK(S.bridge);
    if (c->submit_more && S.nested_submits < MAX_NESTED_SUBMITS) {
      S.nested_submits++;
      int rc = submit_bridge(counted_value(), 0);
      CHECK(!S.bridge_closing || rc == CUV_ECLOSED);
    }
    if (c->close_bridge) {
      int rc = cuv_uv_close(S.bridge, on_bridge_closed, NULL);
      CHECK(rc == (S.bridge_closing ? CUV_ECLOSED : 0));
      S.bridge_closing = true;
    }
  }
  if (c->take_output) { /* moved out of the callback, then released */
    cuv_output_t o = cuv_output_take(output);
    CHECK(!output->data && !output->release);
    cuv_output_release(&o);
  }
  free(c);
}

static void notify(cuv_queue_t *queue, void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }
static atomic_int notified;

static cuv_stream_t *pick_stream(input_t *in) { return PICK(in, S.stream, NSTREAM); }

static cuv_policy_t *pick_policy(input_t *in) {
  size_t i = u8(in) % (NPOLICY + 1);
  return i < NPOLICY ? S.policy[i].policy : NULL;
}

static void execute(input_t *in) {
  uint8_t what = u8(in) % 8;
  out_kind_t kind;
  bool allocates;
  cuv_op_t *op = op_take(pick_op(in), &kind, &allocates);
  bool want_out = u8(in) % 4;
  cuv_output_t out = {(void *)1, NULL, NULL}; /* executors must clear it */
  int rc;
  switch (what) {
  case 0:
    rc = cuv_sync(op, want_out ? &out : NULL);
    break;
  case 1:
    rc = cuv_sync_on(pick_stream(in), op, want_out ? &out : NULL);
    break;
  case 2:
    rc = cuv_sync_policy(pick_policy(in), op, want_out ? &out : NULL);
    break;
  case 3:
    rc = cuv_enqueue_on(pick_stream(in), op, want_out ? &out : NULL);
    break;
  case 4:
  case 5: {
    int q = u8(in) % NQUEUE;
    call_t *c = malloc(sizeof *c);
    CHECK(c);
    uint8_t flags = u8(in);
    *c = (call_t){q, false, false, flags & 1};
    cuv_ticket_t ticket = 0;
    cuv_submit_opts_t opts = {.ticket = &ticket, .flags = flags >> 1 & 1};
    opts.policy = pick_policy(in);
    if (flags & 4)
      opts.stream = pick_stream(in);
    cuv_done_fn fn = flags & 0x70 ? done : NULL;
    rc = cuv_submit(S.queue[q], op, fn, c, flags & 0x80 ? NULL : &opts);
    if (rc == 0) {
      S.accepted++;
      S.queue_in[q]++;
      S.ticket[q] = ticket;
    } else {
      free(c);
    }
    want_out = false;
    break;
  }
  case 6:
    if (!S.bridge) {
      cuv_op_destroy(op);
      return;
    }
    rc = submit_bridge(op, u8(in));
    want_out = false;
    break;
  default: { /* graph capture */
    if (allocates) {
      cuv_op_destroy(op); /* documented: no allocation inside a capture */
      return;
    }
    int i = free_slot((void **)S.graph, NGRAPH);
    cuv_graph_t *g = NULL;
    rc = cuv_graph_capture(i >= 0 ? &g : NULL, op, pick_stream(in), want_out ? &out : NULL);
    CHECK((rc == 0) == (g != NULL));
    if (rc == 0)
      S.graph[i] = g;
    break;
  }
  }
  CHECK_RC(rc);
  TRACE("execute %u: %s\n", what, cuv_err_name(rc));
  if (want_out)
    take_output(&out, kind, rc);
}

/* ---- other objects ---- */

static int custom_next(void *state, const cuv_op_t *op, cuv_stream_t **stream) {
  custom_policy_t *p = state;
  if (p->mode == 2)
    return CUV_EBUSY;
  *stream = p->mode == 0 ? p->stream : NULL;
  return 0;
}

static cuv_device_t *custom_device(void *state) {
  return cuv_stream_device(((custom_policy_t *)state)->stream);
}

static void custom_destroy(void *state) {
  custom_policy_t *p = state;
  cuv_stream_destroy(p->stream);
  free(p);
}

static void policy_action(input_t *in) {
  int i = u8(in) % NPOLICY;
  policy_slot_t *slot = &S.policy[i];
  if (slot->policy) {
    if (!slot->borrowed)
      cuv_policy_destroy(slot->policy);
    *slot = (policy_slot_t){0};
    return;
  }
  cuv_policy_t *p = NULL;
  int rc;
  switch (u8(in) % 5) {
  case 0:
  case 1: {
    cuv_device_t *dev = pick_dev(in);
    uint8_t n = u8(in);
    unsigned nstreams = n & 0x80 ? 5000 : n % 5; /* 0: the default (4); more than 1024: refused */
    rc = n & 0x40 ? cuv_policy_round_robin(&p, dev, nstreams)
                  : cuv_policy_least_loaded(&p, dev, nstreams);
    break;
  }
  case 2: rc = cuv_policy_single(&p, pick_stream(in)); break;
  case 3: {
    cuv_device_t *dev = pick_dev(in);
    rc = cuv_device_policy(dev, &p);
    slot->borrowed = rc == 0;
    CHECK(dev || rc == CUV_EINVAL); /* with a device: 0, or cuStreamCreate failed */
    break;
  }
  default: {
    custom_policy_t *state = calloc(1, sizeof *state);
    CHECK(state);
    state->mode = u8(in) % 3;
    rc = cuv_stream_create(&state->stream, S.dev[u8(in) % NDEV]);
    if (rc == 0) {
      cuv_policy_ops_t ops = {custom_next, custom_device, custom_destroy};
      rc = cuv_policy_create(&p, u8(in) % 8 ? &ops : NULL, state);
      if (rc < 0)
        custom_destroy(state);
    } else {
      free(state);
    }
    break;
  }
  }
  CHECK_RC(rc);
  if (rc == 0) {
    CHECK(p && cuv_policy_device(p));
    slot->policy = p;
  }
}

static void stream_action(input_t *in) {
  int i = u8(in) % NSTREAM;
  uint8_t what = u8(in) % 4;
  if (S.stream[i]) {
    if (what == 0) {
      CHECK_RC(cuv_stream_synchronize(S.stream[i]));
      return;
    }
    if (what == 1) {
      (void)cuv_stream_in_flight(S.stream[i]);
      return;
    }
    /* A policy may hold it; cuv keeps it alive for them (reference counted). */
    cuv_stream_destroy(S.stream[i]);
    S.stream[i] = NULL;
    return;
  }
  cuv_device_t *dev = pick_dev(in);
  int rc;
  if (what < 2) {
    rc = cuv_stream_create(u8(in) % 8 ? &S.stream[i] : NULL, dev);
  } else { /* the simulator's NULL stream stands for an application stream */
    static struct CUstream_st *const raws[] = {NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
    rc = cuv_stream_wrap(&S.stream[i], dev, raws[u8(in) % 3]);
  }
  CHECK_RC(rc);
  CHECK(rc == 0 || !S.stream[i]);
  if (rc == 0)
    CHECK(cuv_stream_device(S.stream[i]) == dev);
}

static void queue_action(input_t *in) {
  int i = u8(in) % NQUEUE;
  cuv_queue_t *q = S.queue[i];
  uint8_t what = u8(in) % 6;
  if (!q) {
    CHECK(cuv_queue_create(&S.queue[i], what & 1 ? notify : NULL, &notified) == 0);
    return;
  }
  switch (what) {
  case 0: CHECK(cuv_queue_drain(q) >= 0); break;
  case 1: CHECK_RC(cuv_queue_wait(q, u8(in) % 2)); break;
  case 2: cuv_queue_close(q); break;
  case 3: {
    cuv_ticket_t t = u8(in) % 2 ? S.ticket[i] : u32(in);
    int rc = cuv_cancel(q, t);
    CHECK(rc == 0 || rc == CUV_ENOENT);
    break;
  }
  default: {
    int rc = cuv_queue_destroy(q);
    CHECK(rc == 0 || rc == CUV_EBUSY);
    if (rc == 0)
      S.queue[i] = NULL;
    break;
  }
  }
}

static void graph_action(input_t *in) {
  int i = u8(in) % NGRAPH;
  cuv_graph_t *g = S.graph[i];
  uint8_t what = u8(in) % 3;
  if (what == 0) {
    bool allocates;
    cuv_op_t *op = op_take(pick_op(in), NULL, &allocates);
    CHECK_RC(cuv_graph_update(g, op));
  } else if (what == 1 && g) {
    /* The graph's stream is borrowed: used while the graph is alive. */
    bool allocates;
    cuv_op_t *op = op_take(pick_op(in), NULL, &allocates);
    CHECK_RC(cuv_sync_on(cuv_graph_stream(g), op, NULL));
  } else if (g) {
    cuv_graph_unref(g);
    S.graph[i] = NULL;
  }
}

static void module_action(input_t *in) {
  cuv_device_t *dev = pick_dev(in);
  size_t len = u8(in) % 48;
  char *image = malloc(len + 1);
  CHECK(image);
  for (size_t i = 0; i < len; i++)
    image[i] = (char)u8(in);
  image[len] = '\0';
  cuv_module_t *mod = NULL;
  uint8_t how = u8(in);
  int rc = cuv_module_load_data(&mod, dev, how % 8 ? image : NULL, how & 8 ? len : 0);
  CHECK_RC(rc);
  free(image); /* cuv keeps its own copy */
  if (rc < 0)
    return;
  static const char *const names[] = {"fz_fill", "fz_missing", "nope", ""};
  char long_name[300];
  memset(long_name, 'k', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  uint8_t n = u8(in) % 6;
  cuv_kernel_t *k = NULL;
  rc = cuv_kernel_get(&k, mod, n < 4 ? names[n] : n == 4 ? long_name : NULL);
  CHECK_RC(rc);
  cuv_module_unref(mod); /* the kernel holds it */
  if (rc == 0) {
    size_t count;
    CHECK_RC(cuv_kernel_param_count(k, &count));
    cuv_kernel_unref(k);
  }
}

static void device_action(input_t *in) {
  cuv_device_t *dev = S.dev[u8(in) % NDEV], *other = NULL;
  switch (u8(in) % 4) {
  case 0: {
    int rc = cuv_device_open(&other, (int)(u8(in) % 5) - 1);
    CHECK_RC(rc);
    if (rc == 0)
      cuv_device_unref(other);
    break;
  }
  case 1: {
    int value;
    CHECK_RC(cuv_device_attribute(dev, (int)u8(in), &value));
    break;
  }
  case 2: CHECK_RC(cuv_device_bind(dev)); break; /* cuCtxSetCurrent may be failing */
  default: { /* injected driver failures, cleared at the end of the input. Not cuStreamEndCapture:
             * an injected failure leaves the simulated stream capturing for good, which no
             * driver does (a failed end still ends the capture). Indexes stay put (regressions) */
    static const char *const entries[] = {
        "cuMemAlloc",           "cuMemAllocAsync",
        "cuMemHostAlloc",       "cuMemcpyHtoDAsync",
        "cuMemcpyDtoHAsync",    "cuMemcpyDtoDAsync",
        "cuMemsetD8Async",      "cuMemsetD32Async",
        "cuLaunchKernel",       "cuEventCreate",
        "cuEventRecord",        "cuStreamWaitEvent",
        "cuStreamCreate",       "cuStreamWriteValue32",
        "cuLaunchHostFunc",     "cuStreamBeginCapture",
        "cuMemHostGetDevicePointer", "cuGraphInstantiateWithFlags",
        "cuGraphUpload",        "cuGraphLaunch",
        "cuModuleLoadData",     "cuModuleGetFunction",
        "cuFuncGetParamInfo",   "cuCtxSetCurrent",
    };
    static const int results[] = {CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
                                  CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_SUPPORTED,
                                  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES};
    const char *entry = entries[u8(in) % (sizeof entries / sizeof entries[0])];
    unsigned nth = 1 + u8(in) % 4;
    cuv_sim_fail(entry, nth, results[u8(in) % 5]);
    break;
  }
  }
}

static void bridge_action(input_t *in) {
  uint8_t what = u8(in) % 4;
  if (!S.bridge) {
    CHECK(cuv_uv_open(&S.bridge, &S.loop) == 0);
    return;
  }
  if (what == 0) {
    int rc = cuv_uv_close(S.bridge, on_bridge_closed, NULL);
    CHECK(rc == (S.bridge_closing ? CUV_ECLOSED : 0));
    S.bridge_closing = true;
    return;
  }
  CHECK(uv_run(&S.loop, UV_RUN_NOWAIT) >= 0);
}

/* ---- the target ---- */

/* Drains everything, closes and releases every object, then checks nothing is left. */
static void cleanup(void) {
  for (int i = 0; i < NOPS; i++)
    cuv_op_destroy(op_take(i, NULL, NULL));
  if (S.bridge) {
    if (!S.bridge_closing)
      CHECK(cuv_uv_close(S.bridge, on_bridge_closed, NULL) == 0);
    S.bridge_closing = true;
    uv_run(&S.loop, UV_RUN_DEFAULT);
    CHECK(!S.bridge);
  }
  CHECK(uv_run(&S.loop, UV_RUN_NOWAIT) == 0);
  for (int i = 0; i < NQUEUE; i++) {
    if (!S.queue[i])
      continue;
    for (int waited = 0; cuv_queue_pending(S.queue[i]) > 0; waited++) {
      CHECK(waited < 20000); /* 20 s: a submission that never completes is a hang */
      cuv_queue_wait(S.queue[i], 1);
      cuv_queue_drain(S.queue[i]);
    }
    CHECK(cuv_queue_destroy(S.queue[i]) == 0);
    S.queue[i] = NULL;
  }
  CHECK(S.accepted == S.delivered);
  for (int i = 0; i < NSHARED; i++) {
    cuv_shared_unref(S.shared[i]);
    S.shared[i] = NULL;
  }
  for (int i = 0; i < NGRAPH; i++) {
    cuv_graph_unref(S.graph[i]);
    S.graph[i] = NULL;
  }
  for (int i = 0; i < NPOLICY; i++) {
    if (S.policy[i].policy && !S.policy[i].borrowed)
      cuv_policy_destroy(S.policy[i].policy);
    S.policy[i] = (policy_slot_t){0};
  }
  for (int i = 0; i < NSTREAM; i++) {
    cuv_stream_destroy(S.stream[i]); /* waits for cuv_enqueue_on work left on it */
    S.stream[i] = NULL;
  }
  for (int i = 0; i < NBUF; i++)
    buf_drop(i);
  cuv_sim_fail_clear();
  /* cuv_graph_update's work on a default policy's stream is reaped by the stream's next use. */
  for (int d = 0; d < NDEV; d++) {
    cuv_policy_t *p;
    CHECK(cuv_device_policy(S.dev[d], &p) == 0);
    for (int k = 0; k < 4; k++) {
      cuv_stream_t *s;
      CHECK(cuv_policy_next_stream(p, NULL, &s) == 0);
      CHECK(cuv_stream_synchronize(s) == 0);
    }
  }
  cuv_stats_t st;
  cuv_stats(&st);
  CHECK(st.in_flight == 0);
  CHECK(st.leaked == 0);
  CHECK(atomic_load(&values_live) == 0);
  S.accepted = S.delivered = 0;
  memset(S.queue_in, 0, sizeof S.queue_in);
  S.nested_submits = 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  setenv("CUV_DRIVER", "sim", 1);
  tracing = getenv("CUV_FUZZ_TRACE") != NULL;
  cuv_sim_set_device_count(NDEV);
  static const size_t fill_params[] = {4, 4, 8}, slow_params[] = {4};
  cuv_sim_register_kernel("fz_empty", twin_empty, 0, fill_params);
  cuv_sim_register_kernel("fz_fill", twin_fill, 3, fill_params);
  cuv_sim_register_kernel("fz_slow", twin_slow, 1, slow_params);
  CHECK(cuv_init() == 0);
  for (int d = 0; d < NDEV; d++) {
    CHECK(cuv_device_open(&S.dev[d], d) == 0);
    cuv_module_t *mod;
    CHECK(cuv_module_load_data(&mod, S.dev[d], module_ptx, 0) == 0);
    for (int k = 0; k < NKERN; k++)
      CHECK(cuv_kernel_get(&S.kern[d][k], mod, kernel_names[k]) == 0);
    cuv_module_unref(mod);
  }
  for (size_t i = 0; i < sizeof S.host_src; i++)
    S.host_src[i] = (uint8_t)(i * 7);
  CHECK(cuv_host_buffer_create(&S.hbuf_src, S.dev[0], MAX_BUF + 8) == 0);
  CHECK(cuv_host_buffer_create(&S.hbuf_dst, S.dev[0], MAX_BUF + 8) == 0);
  CHECK(uv_loop_init(&S.loop) == 0);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  for (int step = 0; step < MAX_STEPS && in.n; step++) {
    uint8_t action = u8(&in) % 12;
    if (action >= 7)
      TRACE("action %u\n", action);
    switch (action) {
    case 0:
    case 1:
    case 2: build(&in); break;
    case 3:
    case 4: combine(&in); break;
    case 5:
    case 6: execute(&in); break;
    case 7: policy_action(&in); break;
    case 8: stream_action(&in); break;
    case 9: queue_action(&in); break;
    case 10: graph_action(&in); break;
    default:
      switch (u8(&in) % 3) {
      case 0: module_action(&in); break;
      case 1: device_action(&in); break;
      default: bridge_action(&in); break;
      }
      break;
    }
  }
  cleanup();
  return 0;
}
