/* Memory: device allocations (immediate, stream-ordered, and graph allocations made by
 * cuMemAllocAsync during stream capture), pinned host allocations, and the stream-ordered copies
 * and memsets.
 *
 * Device memory is host memory: a CUdeviceptr is the host address. Every allocation is tracked in
 * an array sorted by address, so frees of unknown pointers fail with CUDA_ERROR_INVALID_VALUE and
 * copies, memsets and memory operations can check that their device range lies inside a live
 * allocation (as the real driver does through unified addressing). Pinned host memory is device
 * accessible too (unified addressing), at the same address. */

#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "cmd.h"
#include "context.h"
#include "enter.h"
#include "memory.h"
#include "stream.h"
#include "stream_api.h"
#include "submit.h"
#include "util.h"

/* Capacity reported by the GPU; allocations past it fail with OUT_OF_MEMORY before
 * asking the host allocator. */
#define SIM_DEVICE_MEMORY (140ull << 30)
#define SIM_DEVICE_ALIGN 256
#define SIM_HOST_ALIGN 64
#define ASYNC_GARBAGE 0xa5 /* the bytes of new stream-ordered memory */

enum alloc_kind { ALLOC_DEVICE, ALLOC_ASYNC, ALLOC_HOST, ALLOC_GRAPH };

struct sim_alloc {
  uintptr_t base;
  size_t size;
  struct sim_ctx *ctx;
  enum alloc_kind kind;
  bool freeing; /* a free is in progress or queued: a second free is invalid */
  /* ALLOC_GRAPH only. The memory belongs to the graph's memory nodes (and their copies in the
   * executable graph and in launched work) and is freed with the last of them. */
  int node_refs;
  int execs; /* executable graphs made from the graph: at most one */
  bool live; /* allocated by a launch and not freed since (in the graph or after it) */
};

static struct sim_alloc **allocs; /* sorted by base */
static size_t nallocs;
static size_t allocs_capacity;
static uint64_t device_bytes[SIM_MAX_DEVICES];

/* ---- The allocation table (lock held) -------------------------------------------------------- */

/* Index of the first allocation whose base is > addr. */
static size_t upper_bound(uintptr_t addr) {
  size_t lo = 0, hi = nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (allocs[mid]->base <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static struct sim_alloc *alloc_containing(uintptr_t addr) {
  size_t i = upper_bound(addr);
  if (i == 0)
    return NULL;
  struct sim_alloc *a = allocs[i - 1];
  return addr - a->base < a->size ? a : NULL;
}

static struct sim_alloc *alloc_at(uintptr_t addr) {
  struct sim_alloc *a = alloc_containing(addr);
  return a && a->base == addr ? a : NULL;
}

bool sim_mem_valid(uintptr_t addr, size_t n) {
  struct sim_alloc *a = alloc_containing(addr);
  return a && n <= a->size - (addr - a->base);
}

bool sim_mem_valid_device(const struct sim_ctx *ctx, uintptr_t addr, size_t n) {
  struct sim_alloc *a = alloc_containing(addr);
  return a && a->ctx == ctx && a->kind != ALLOC_HOST && n <= a->size - (addr - a->base);
}

static CUresult alloc_new(struct sim_ctx *ctx, size_t size, enum alloc_kind kind, void **out) {
  uint64_t *accounted = &device_bytes[ctx->device];
  if (kind != ALLOC_HOST && size > SIM_DEVICE_MEMORY - *accounted)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (nallocs == allocs_capacity) {
    size_t cap = allocs_capacity ? allocs_capacity * 2 : 64;
    struct sim_alloc **grown = realloc(allocs, cap * sizeof *grown);
    if (!grown)
      return CUDA_ERROR_OUT_OF_MEMORY;
    allocs = grown;
    allocs_capacity = cap;
  }
  struct sim_alloc *a = calloc(1, sizeof *a);
  void *p = NULL;
  if (!a || posix_memalign(&p, kind == ALLOC_HOST ? SIM_HOST_ALIGN : SIM_DEVICE_ALIGN, size)) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->base = (uintptr_t)p;
  a->size = size;
  a->ctx = ctx;
  a->kind = kind;
  size_t i = upper_bound(a->base);
  memmove(&allocs[i + 1], &allocs[i], (nallocs - i) * sizeof *allocs);
  allocs[i] = a;
  nallocs++;
  if (kind != ALLOC_HOST)
    *accounted += size;
  *out = p;
  return CUDA_SUCCESS;
}

static void alloc_free(struct sim_alloc *a) {
  size_t i = upper_bound(a->base) - 1;
  memmove(&allocs[i], &allocs[i + 1], (nallocs - i - 1) * sizeof *allocs);
  nallocs--;
  if (a->kind != ALLOC_HOST)
    device_bytes[a->ctx->device] -= a->size;
  free((void *)a->base);
  free(a);
}

/* Graph allocations are left to their nodes, which the reset has already destroyed. */
void sim_mem_reset_ctx(struct sim_ctx *ctx) {
  for (size_t i = nallocs; i-- > 0;)
    if (allocs[i]->ctx == ctx && (allocs[i]->kind != ALLOC_GRAPH || allocs[i]->node_refs == 0))
      alloc_free(allocs[i]);
}

/* ---- Allocation entry points ----------------------------------------------------------------- */

/* Current context, healthy: the preamble of the allocating calls (lock held). */
static CUresult ctx_live(struct sim_ctx **ctx) {
  CUresult r = sim_ctx_require(ctx);
  return r != CUDA_SUCCESS ? r : sim_ctx_fault(*ctx);
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  SIM_ENTER(cuMemAlloc);
  if (!dptr || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *ctx;
  void *p;
  sim_lock();
  CUresult r = ctx_live(&ctx);
  if (r == CUDA_SUCCESS)
    r = sim_capture_check_unsafe();
  if (r == CUDA_SUCCESS)
    r = alloc_new(ctx, bytesize, ALLOC_DEVICE, &p);
  if (r == CUDA_SUCCESS)
    *dptr = (CUdeviceptr)(uintptr_t)p;
  sim_unlock();
  return r;
}

/* A graph allocation freed outside its graph: the memory stays with the graph (its next launch
 * allocates it again at the same address); only a live allocation may be freed. Lock held. */
static CUresult graph_alloc_free(struct sim_alloc *a) {
  if (!a->live)
    return CUDA_ERROR_INVALID_VALUE;
  a->live = false;
  return CUDA_SUCCESS;
}

/* Frees a cuMemAlloc or cuMemHostAlloc allocation after the implicit synchronization the real
 * driver may do: work already submitted to the context completes first, so it never touches
 * freed memory. After a sticky fault it frees nothing and returns the fault (as the driver).
 * Lock held. */
static CUresult free_synchronized(struct sim_alloc *a) {
  CUresult r = sim_ctx_fault(a->ctx);
  if (r == CUDA_SUCCESS)
    r = sim_capture_check_unsafe();
  if (r != CUDA_SUCCESS)
    return r;
  if (a->kind == ALLOC_GRAPH)
    return graph_alloc_free(a);
  a->freeing = true;
  if (a->kind == ALLOC_ASYNC) { /* "no implicit synchronization" for stream-ordered memory */
    alloc_free(a);
    return CUDA_SUCCESS;
  }
  uintptr_t base = a->base;
  sim_stream_drain_ctx(a->ctx); /* releases the lock while waiting: look the allocation up again */
  a = alloc_at(base);
  if (a && a->freeing)
    alloc_free(a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  SIM_ENTER(cuMemFree);
  if (!dptr)
    return CUDA_SUCCESS; /* as free(NULL) */
  sim_lock();
  struct sim_alloc *a = alloc_at((uintptr_t)dptr);
  CUresult r = !a || a->freeing || a->kind == ALLOC_HOST ? CUDA_ERROR_INVALID_VALUE
                                                          : free_synchronized(a);
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  SIM_ENTER(cuMemHostAlloc);
  unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                   CU_MEMHOSTALLOC_WRITECOMBINED;
  if (!pp || (Flags & ~known) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *ctx;
  sim_lock();
  CUresult r = ctx_live(&ctx);
  if (r == CUDA_SUCCESS)
    r = sim_capture_check_unsafe();
  if (r == CUDA_SUCCESS && bytesize == 0)
    *pp = NULL; /* the driver accepts a zero size */
  else if (r == CUDA_SUCCESS)
    r = alloc_new(ctx, bytesize, ALLOC_HOST, pp);
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuMemFreeHost(void *p) {
  SIM_ENTER(cuMemFreeHost);
  if (!p)
    return CUDA_SUCCESS;
  sim_lock();
  struct sim_alloc *a = alloc_at((uintptr_t)p);
  CUresult r = !a || a->freeing || a->kind != ALLOC_HOST ? CUDA_ERROR_INVALID_VALUE
                                                          : free_synchronized(a);
  sim_unlock();
  return r;
}

/* Same address (unified addressing), also for an address inside the allocation. */
CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int Flags) {
  SIM_ENTER(cuMemHostGetDevicePointer);
  if (!pdptr || Flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *ctx;
  sim_lock();
  CUresult r = sim_ctx_require(&ctx);
  struct sim_alloc *a = r == CUDA_SUCCESS ? alloc_containing((uintptr_t)p) : NULL;
  if (r == CUDA_SUCCESS && (!a || a->kind != ALLOC_HOST))
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS)
    *pdptr = (CUdeviceptr)(uintptr_t)p;
  sim_unlock();
  return r;
}

/* ---- Stream-ordered allocation --------------------------------------------------------------- */

/* ---- Graph memory nodes ---------------------------------------------------------------------- */

/* cuMemAllocAsync / cuMemFreeAsync captured into a graph. The allocation is made at capture time
 * and keeps its address for the graph's life (as a graph allocation's virtual address does); the
 * nodes only track whether a launch allocated it and nothing freed it since, to refuse what the
 * driver refuses: a second instantiation (CUDA_ERROR_NOT_SUPPORTED), and a launch while the
 * previous launch's allocation is still live (CUDA_ERROR_INVALID_VALUE). Both take effect at the
 * launch call (stream order guarantees the rest). */
struct gmem_cmd {
  struct sim_cmd base;
  struct sim_alloc *alloc;
  bool is_free;
};

static void gmem_run(struct sim_cmd *cmd, struct sim_stream *s) {}

static void gmem_bind(struct sim_cmd *cmd) {
  struct gmem_cmd *c = (struct gmem_cmd *)cmd;
  c->alloc->live = !c->is_free;
}

static bool gmem_dup(struct sim_cmd *copy) {
  ((struct gmem_cmd *)copy)->alloc->node_refs++;
  return true;
}

static void gmem_release(struct sim_cmd *cmd) {
  struct sim_alloc *a = ((struct gmem_cmd *)cmd)->alloc;
  if (--a->node_refs == 0)
    alloc_free(a);
}

static CUresult gmem_instantiated(struct sim_cmd *cmd, int delta) {
  struct gmem_cmd *c = (struct gmem_cmd *)cmd;
  if (c->is_free)
    return CUDA_SUCCESS;
  if (delta > 0 && c->alloc->execs > 0)
    return CUDA_ERROR_NOT_SUPPORTED; /* a graph with allocations is instantiated once */
  c->alloc->execs += delta;
  return CUDA_SUCCESS;
}

static CUresult gmem_launch_check(const struct sim_cmd *cmd) {
  const struct gmem_cmd *c = (const struct gmem_cmd *)cmd;
  return !c->is_free && c->alloc->live ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static const struct sim_cmd_ops gmem_ops = {.run = gmem_run,
                                            .bind = gmem_bind,
                                            .dup = gmem_dup,
                                            .release = gmem_release,
                                            .instantiated = gmem_instantiated,
                                            .launch_check = gmem_launch_check};

/* Appends a memory node for a (lock held). */
static CUresult gmem_capture(struct sim_stream *s, struct sim_alloc *a, bool is_free) {
  struct gmem_cmd *c = sim_cmd_new(&gmem_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->alloc = a;
  c->is_free = is_free;
  a->node_refs++;
  return sim_capture_append(s, &c->base);
}

/* ---- Stream-ordered allocation --------------------------------------------------------------- */

static CUresult alloc_captured(struct sim_stream *s, size_t bytesize, void **out) {
  if (s->cap->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  CUresult r = alloc_new(s->obj.ctx, bytesize, ALLOC_GRAPH, out);
  if (r == CUDA_SUCCESS)
    r = gmem_capture(s, alloc_at((uintptr_t)*out), false);
  return r;
}

/* The memory is allocated at call time, so it is usable by everything ordered after the call.
 * During capture it becomes a graph allocation. On a stream that is not capturing, this is a
 * "potentially unsafe" call while other captures run. The driver serves these from a pool that
 * hands out what earlier frees left there, so new memory is filled with ASYNC_GARBAGE: code that
 * reads it before writing sees that, not the zeros a fresh host page would show. */
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  SIM_ENTER(cuMemAllocAsync);
  if (!dptr || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_stream *s;
  void *p;
  sim_lock();
  CUresult r = sim_stream_get_live(hStream, &s);
  if (r == CUDA_SUCCESS && s->cap)
    r = alloc_captured(s, bytesize, &p);
  else if (r == CUDA_SUCCESS && (r = sim_capture_check_unsafe()) == CUDA_SUCCESS &&
           (r = alloc_new(s->obj.ctx, bytesize, ALLOC_ASYNC, &p)) == CUDA_SUCCESS)
    memset(p, ASYNC_GARBAGE, bytesize); /* nothing can reach it before *dptr is set */
  if (r == CUDA_SUCCESS)
    *dptr = (CUdeviceptr)(uintptr_t)p;
  sim_unlock();
  return r;
}

struct free_cmd {
  struct sim_cmd base;
  uintptr_t addr;
};

static void free_run(struct sim_cmd *cmd, struct sim_stream *s) {
  sim_lock();
  struct sim_alloc *a = alloc_at(((struct free_cmd *)cmd)->addr);
  if (a && a->freeing)
    alloc_free(a);
  sim_unlock();
}

static const struct sim_cmd_ops free_ops = {.run = free_run};

/* Stream-ordered free outside capture (lock held): the memory is released when the stream
 * reaches the free. */
static CUresult free_async(struct sim_stream *s, struct sim_alloc *a) {
  CUresult r = sim_capture_check_unsafe();
  if (r != CUDA_SUCCESS)
    return r;
  if (a->kind == ALLOC_GRAPH)
    return graph_alloc_free(a);
  struct free_cmd *c = sim_cmd_new(&free_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->addr = a->base;
  a->freeing = true;
  return sim_stream_submit(s, &c->base);
}

/* During capture only graph allocations may be freed (a free node); anything else is refused
 * without invalidating the capture, as the driver does. */
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  SIM_ENTER(cuMemFreeAsync);
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(hStream, &s);
  struct sim_alloc *a = r == CUDA_SUCCESS ? alloc_at((uintptr_t)dptr) : NULL;
  if (r == CUDA_SUCCESS && (!a || a->freeing || a->kind == ALLOC_HOST))
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && s->cap)
    r = a->kind != ALLOC_GRAPH     ? CUDA_ERROR_INVALID_VALUE
        : s->cap->invalidated      ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                   : gmem_capture(s, a, true);
  else if (r == CUDA_SUCCESS)
    r = free_async(s, a);
  sim_unlock();
  return r;
}

/* ---- Copies and memsets ---------------------------------------------------------------------- */

struct copy_cmd {
  struct sim_cmd base;
  void *dst;
  const void *src;
  size_t n;
};

static void copy_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct copy_cmd *c = (struct copy_cmd *)cmd;
  memmove(c->dst, c->src, c->n);
}

static const struct sim_cmd_ops copy_ops = {.run = copy_run};

struct memset_cmd {
  struct sim_cmd base;
  void *dst;
  uint32_t value;
  size_t count;
  unsigned width; /* bytes per element: 1, 2 or 4 */
};

static void memset_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct memset_cmd *c = (struct memset_cmd *)cmd;
  if (c->width == 1) {
    memset(c->dst, (int)(c->value & 0xff), c->count);
  } else if (c->width == 2) {
    uint16_t *p = c->dst;
    for (size_t i = 0; i < c->count; i++)
      p[i] = (uint16_t)c->value;
  } else {
    uint32_t *p = c->dst;
    for (size_t i = 0; i < c->count; i++)
      p[i] = c->value;
  }
}

static const struct sim_cmd_ops memset_ops = {.run = memset_run};

/* Validates the device ranges and submits cmd (or, for zero bytes, only validates the stream:
 * nothing is enqueued). Frees cmd unless it was submitted. */
static CUresult submit_mem(CUstream h, struct sim_cmd *cmd, size_t n, uintptr_t dev1,
                           uintptr_t dev2) {
  struct sim_stream *s;
  sim_lock();
  CUresult r = sim_stream_get_live(h, &s);
  if (r == CUDA_SUCCESS && n > 0 &&
      ((dev1 && !sim_mem_valid(dev1, n)) || (dev2 && !sim_mem_valid(dev2, n))))
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && n > 0) {
    r = sim_stream_submit(s, cmd); /* frees cmd itself on failure */
    cmd = NULL;
  }
  if (cmd)
    sim_cmd_free(cmd);
  sim_unlock();
  return r;
}

static CUresult copy_async(CUstream h, void *dst, const void *src, size_t n, bool dst_dev,
                           bool src_dev) {
  if (n > 0 && (!dst || !src))
    return CUDA_ERROR_INVALID_VALUE;
  struct copy_cmd *c = sim_cmd_new(&copy_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->dst = dst;
  c->src = src;
  c->n = n;
  return submit_mem(h, &c->base, n, dst_dev ? (uintptr_t)dst : 0, src_dev ? (uintptr_t)src : 0);
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream) {
  SIM_ENTER(cuMemcpyHtoDAsync);
  return copy_async(hStream, (void *)(uintptr_t)dstDevice, srcHost, ByteCount, true, false);
}

/* Whether host memory at p came from cuMemHostAlloc (pinned). */
static bool host_pinned(const void *p) {
  sim_lock();
  struct sim_alloc *a = alloc_containing((uintptr_t)p);
  bool pinned = a && a->kind == ALLOC_HOST;
  sim_unlock();
  return pinned;
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream) {
  SIM_ENTER(cuMemcpyDtoHAsync);
  CUresult r =
      copy_async(hStream, dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, false, true);
  /* Into pageable memory the real driver returns only once the copy has run: the calling thread
   * waits for all the stream's earlier work, and for what that waits on in other streams (seen
   * on the GPU: tests/engine/stats.c's gated reader held its cuv_submit until the gate's
   * bound). */
  if (r == CUDA_SUCCESS && ByteCount > 0 && !host_pinned(dstHost))
    r = sim_stream_wait_copy(hStream);
  return r;
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream) {
  SIM_ENTER(cuMemcpyDtoDAsync);
  return copy_async(hStream, (void *)(uintptr_t)dstDevice, (const void *)(uintptr_t)srcDevice,
                    ByteCount, true, true);
}

/* A context given to cuMemcpyPeerAsync: valid, initialized, healthy (lock held). */
static CUresult peer_ctx(CUcontext h, struct sim_ctx **out) {
  *out = sim_ctx_from_handle(h);
  if (!*out || !atomic_load(&(*out)->active))
    return CUDA_ERROR_INVALID_CONTEXT;
  return sim_ctx_fault(*out);
}

/* Each side must lie in a device allocation of its own context. The copy is the same with or
 * without peer access, as the driver's (which stages it itself where the devices cannot reach
 * each other). Zero bytes enqueue nothing. */
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                                   CUstream hStream) {
  SIM_ENTER(cuMemcpyPeerAsync);
  struct sim_ctx *dst_ctx, *src_ctx;
  struct sim_stream *s;
  sim_lock();
  CUresult r = peer_ctx(dstContext, &dst_ctx);
  if (r == CUDA_SUCCESS)
    r = peer_ctx(srcContext, &src_ctx);
  if (r == CUDA_SUCCESS)
    r = sim_stream_get_live(hStream, &s);
  if (r == CUDA_SUCCESS && ByteCount > 0 &&
      (!sim_mem_valid_device(dst_ctx, (uintptr_t)dstDevice, ByteCount) ||
       !sim_mem_valid_device(src_ctx, (uintptr_t)srcDevice, ByteCount)))
    r = CUDA_ERROR_INVALID_VALUE;
  struct copy_cmd *c = NULL;
  if (r == CUDA_SUCCESS && ByteCount > 0 && !(c = sim_cmd_new(&copy_ops, sizeof *c)))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (c) {
    c->dst = (void *)(uintptr_t)dstDevice;
    c->src = (const void *)(uintptr_t)srcDevice;
    c->n = ByteCount;
    r = sim_stream_submit(s, &c->base); /* frees the command itself on failure */
  }
  sim_unlock();
  return r;
}

static CUresult memset_async(CUstream h, CUdeviceptr dst, uint32_t value, size_t count,
                             unsigned width) {
  /* As the driver: each element at its own alignment. */
  if (dst % width != 0 || count > SIZE_MAX / width)
    return CUDA_ERROR_INVALID_VALUE;
  struct memset_cmd *c = sim_cmd_new(&memset_ops, sizeof *c);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->dst = (void *)(uintptr_t)dst;
  c->value = value;
  c->count = count;
  c->width = width;
  return submit_mem(h, &c->base, count * width, (uintptr_t)dst, 0);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream) {
  SIM_ENTER(cuMemsetD8Async);
  return memset_async(hStream, dstDevice, uc, N, 1);
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                  CUstream hStream) {
  SIM_ENTER(cuMemsetD16Async);
  return memset_async(hStream, dstDevice, us, N, 2);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                  CUstream hStream) {
  SIM_ENTER(cuMemsetD32Async);
  return memset_async(hStream, dstDevice, ui, N, 4);
}
