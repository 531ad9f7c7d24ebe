/* Kernels: the registry of host twins (cuv_sim_register_kernel), modules (PTX entry names are
 * remembered, any other image is accepted as is), function handles, parameter layout and
 * cuLaunchKernel. A launch copies its parameter values at call time, as the real driver does,
 * and the twin runs when the stream reaches the launch.
 *
 * A module unloaded while a launch of one of its functions is queued or running is a caller's
 * bug (on a GPU the code may be gone under the launch): cuModuleUnload counts it
 * (cuv_sim_unloads_with_pending_launches) and succeeds, its handles die at once, and the module
 * itself lives on until the last launch command naming it is gone, so the pending launch still
 * runs its twin. */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "cmd.h"
#include "context.h"
#include "enter.h"
#include "handle.h"
#include "module.h"
#include "stream.h"
#include "submit.h"
#include "util.h"

/* ---- Kernel registry ------------------------------------------------------------------------- */

/* Entries live as long as the process: function handles point to them. */
struct sim_kernel {
  char *name;
  cuv_sim_kernel_fn fn; /* NULL while only a duration was set */
  size_t nparams;
  size_t *sizes;  /* nparams sizes, then nparams alignments (one allocation) */
  size_t *aligns;
  size_t max_align;
  unsigned usec;
  struct sim_kernel *next;
};

static struct sim_kernel *kernels;

static struct sim_kernel *kernel_find(const char *name) {
  for (struct sim_kernel *k = kernels; k; k = k->next)
    if (strcmp(k->name, name) == 0)
      return k;
  return NULL;
}

static struct sim_kernel *kernel_get_or_add(const char *name) {
  struct sim_kernel *k = kernel_find(name);
  if (k)
    return k;
  k = calloc(1, sizeof *k);
  if (!k || !(k->name = strdup(name))) {
    free(k);
    return NULL;
  }
  k->next = kernels;
  kernels = k;
  return k;
}

/* A parameter's alignment when only its size is known: the largest power of two dividing the
 * size (a type's alignment always divides its size), capped at 16. Right for scalars, pointers
 * and the vector types (float4 at 16, as the driver reports), and for structs of those; a type
 * aligned otherwise (a struct of a double and a float: 16 bytes at 8; a struct __align__(32))
 * needs its alignment registered (cuv_sim_register_kernel_aligned). */
static size_t param_align(size_t size) {
  size_t a = 1;
  while (a < 16 && size % (a * 2) == 0)
    a *= 2;
  return a;
}

static bool layout_valid(size_t nparams, const size_t *sizes, const size_t *aligns) {
  if (nparams > 0 && !sizes)
    return false;
  for (size_t i = 0; i < nparams; i++) {
    size_t a = aligns ? aligns[i] : 1;
    if (sizes[i] == 0 || a == 0 || (a & (a - 1)) != 0 || sizes[i] % a != 0)
      return false;
  }
  return true;
}

CUV_SIM_EXTERN int cuv_sim_register_kernel_aligned(const char *name, cuv_sim_kernel_fn fn,
                                                   size_t nparams, const size_t *param_sizes,
                                                   const size_t *param_aligns) {
  if (!name || !fn || !layout_valid(nparams, param_sizes, param_aligns))
    return -EINVAL;
  size_t *sizes = NULL, max_align = 1;
  if (nparams > 0) {
    sizes = malloc(2 * nparams * sizeof *sizes);
    if (!sizes)
      return -ENOMEM;
    memcpy(sizes, param_sizes, nparams * sizeof *sizes);
    for (size_t i = 0; i < nparams; i++) {
      sizes[nparams + i] = param_aligns ? param_aligns[i] : param_align(param_sizes[i]);
      max_align = sizes[nparams + i] > max_align ? sizes[nparams + i] : max_align;
    }
  }
  sim_lock();
  struct sim_kernel *k = kernel_get_or_add(name);
  if (k) {
    free(k->sizes);
    k->fn = fn;
    k->nparams = nparams;
    k->sizes = sizes;
    k->aligns = sizes ? sizes + nparams : NULL;
    k->max_align = max_align;
  }
  sim_unlock();
  if (!k)
    free(sizes);
  return k ? 0 : -ENOMEM;
}

CUV_SIM_EXTERN int cuv_sim_register_kernel(const char *name, cuv_sim_kernel_fn fn, size_t nparams,
                                           const size_t *param_sizes) {
  return cuv_sim_register_kernel_aligned(name, fn, nparams, param_sizes, NULL);
}

CUV_SIM_EXTERN void cuv_sim_set_kernel_duration(const char *name, unsigned usec) {
  if (!name)
    return;
  sim_lock();
  struct sim_kernel *k = kernel_get_or_add(name);
  if (k)
    k->usec = usec;
  sim_unlock();
}

/* Parameter i's offset in the device-side layout: each parameter at its alignment, capped at 16,
 * as cuFuncGetParamInfo reports it on the GPU (driver 580: a struct __align__(32) after a 1-byte
 * parameter sits at offset 16, tests/ops/args-aligned.c). */
static size_t params_layout(const struct sim_kernel *k, size_t *offsets) {
  size_t off = 0;
  for (size_t i = 0; i < k->nparams; i++) {
    size_t a = k->aligns[i] < 16 ? k->aligns[i] : 16;
    off = (off + a - 1) / a * a;
    if (offsets)
      offsets[i] = off;
    off += k->sizes[i];
  }
  return off;
}

/* ---- Modules --------------------------------------------------------------------------------- */

struct sim_function;

struct sim_module {
  struct sim_obj obj;
  int refs;         /* the handle (until unloaded) + every launch command naming the module */
  unsigned pending; /* launches enqueued on a stream and not yet executed or dropped */
  bool unloaded;
  bool ptx;       /* PTX text: only the entries it declares resolve */
  char **entries; /* .entry names of a PTX image */
  size_t nentries;
  struct sim_function *funcs;
};

struct sim_function {
  struct sim_obj obj;
  struct sim_module *mod;
  struct sim_kernel *kernel;
  struct sim_function *next;
};

/* Byte by byte, stopping at the first mismatch: no magic byte is 0, so a text image shorter than
 * the magic is never read past its terminating NUL (memcmp may read all 4 bytes). */
static bool has_magic(const unsigned char *p, const unsigned char magic[4]) {
  for (int i = 0; i < 4; i++)
    if (p[i] != magic[i])
      return false;
  return true;
}

static bool image_is_binary(const unsigned char *p) {
  static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
  static const unsigned char fatbin[4] = {0x50, 0xed, 0x55, 0xba};  /* 0xBA55ED50 */
  static const unsigned char wrapper[4] = {0xb1, 0x43, 0x62, 0x46}; /* 0x466243B1 */
  return has_magic(p, elf) || has_magic(p, fatbin) || has_magic(p, wrapper);
}

static bool ptx_ident_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '%';
}

/* Skips a comment starting at p, if any. */
static const char *skip_comment(const char *p) {
  if (p[0] == '/' && p[1] == '/') {
    const char *end = strchr(p, '\n');
    return end ? end : p + strlen(p);
  }
  if (p[0] == '/' && p[1] == '*') {
    const char *end = strstr(p + 2, "*/");
    return end ? end + 2 : p + strlen(p);
  }
  return p;
}

static bool entries_add(struct sim_module *m, const char *name, size_t len) {
  char **grown = realloc(m->entries, (m->nentries + 1) * sizeof *grown);
  if (!grown)
    return false;
  m->entries = grown;
  if (!(m->entries[m->nentries] = strndup(name, len)))
    return false;
  m->nentries++;
  return true;
}

/* Collects the names declared by `.entry NAME` (with or without .visible/.weak before it),
 * skipping comments. */
static bool ptx_parse(struct sim_module *m, const char *text) {
  const char *p = text;
  while (*p) {
    const char *q = skip_comment(p);
    if (q != p) {
      p = q;
      continue;
    }
    bool at_token = p == text || !ptx_ident_char(p[-1]);
    if (at_token && strncmp(p, ".entry", 6) == 0 && isspace((unsigned char)p[6])) {
      p += 6;
      while (isspace((unsigned char)*p))
        p++;
      const char *name = p;
      while (ptx_ident_char(*p))
        p++;
      if (p > name && !entries_add(m, name, (size_t)(p - name)))
        return false;
      continue;
    }
    p++;
  }
  return true;
}

static void function_free(struct sim_function *f) {
  sim_handle_remove(&f->obj);
  free(f);
}

static void module_free(struct sim_module *m) {
  while (m->funcs) {
    struct sim_function *next = m->funcs->next;
    function_free(m->funcs);
    m->funcs = next;
  }
  for (size_t i = 0; i < m->nentries; i++)
    free(m->entries[i]);
  free(m->entries);
  free(m);
}

static atomic_ulong unloads_pending;

CUV_SIM_EXTERN unsigned long cuv_sim_unloads_with_pending_launches(void) {
  return atomic_load(&unloads_pending);
}

static void module_unref(struct sim_module *m) {
  if (--m->refs == 0)
    module_free(m);
}

/* The handle and its functions' handles go now; the memory with the last launch naming it. */
static void module_unload(struct sim_module *m) {
  if (m->pending > 0)
    atomic_fetch_add(&unloads_pending, 1);
  sim_handle_remove(&m->obj);
  for (struct sim_function *f = m->funcs; f; f = f->next)
    sim_handle_remove(&f->obj);
  m->unloaded = true;
  module_unref(m);
}

void sim_module_reset_ctx(struct sim_ctx *ctx) {
  size_t n;
  struct sim_obj **mods = sim_handle_take_all(ctx, SIM_OBJ_MODULE, &n);
  for (size_t i = 0; i < n; i++)
    module_unload((struct sim_module *)mods[i]);
  free(mods);
}

static bool module_declares(const struct sim_module *m, const char *name) {
  if (!m->ptx)
    return true;
  for (size_t i = 0; i < m->nentries; i++)
    if (strcmp(m->entries[i], name) == 0)
      return true;
  return false;
}

/* ---- Lookup errors --------------------------------------------------------------------------- */

/* Why this thread's last cuModuleGetFunction found no kernel ("" after one that did): a name
 * resolves only with both a host twin and, in a PTX module, its `.entry`, and CUDA_ERROR_NOT_FOUND
 * alone does not say which one a program forgot. */
static __thread char lookup_error[256];

static CUresult lookup_not_found(const char *name, bool twin, bool entry) {
  snprintf(lookup_error, sizeof lookup_error, "kernel \"%.128s\": %s%s%s", name,
           twin ? "" : "no host twin registered (cuv_sim_register_kernel)",
           !twin && !entry ? ", and " : "",
           entry ? "" : "the module's PTX declares no .entry of that name");
  return CUDA_ERROR_NOT_FOUND;
}

CUV_SIM_EXTERN const char *cuv_sim_lookup_error(void) {
  return lookup_error[0] ? lookup_error : NULL;
}

/* ---- Module entry points --------------------------------------------------------------------- */

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
  SIM_ENTER(cuModuleLoadData);
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_module *m = calloc(1, sizeof *m);
  if (!m)
    return CUDA_ERROR_OUT_OF_MEMORY;
  /* Text images (PTX must be NUL-terminated) are parsed; binaries are accepted unread. */
  m->ptx = !image_is_binary(image);
  if (m->ptx && !ptx_parse(m, image)) {
    module_free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  struct sim_ctx *ctx;
  sim_lock();
  CUresult r = sim_ctx_require(&ctx);
  if (r == CUDA_SUCCESS)
    r = sim_ctx_fault(ctx);
  if (r == CUDA_SUCCESS) {
    m->obj.type = SIM_OBJ_MODULE;
    m->obj.ctx = ctx;
    m->refs = 1;
    if (!sim_handle_add(&m->obj))
      r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r == CUDA_SUCCESS)
    *module = (CUmodule)m;
  else
    module_free(m);
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  SIM_ENTER(cuModuleUnload);
  sim_lock();
  struct sim_module *m = (struct sim_module *)sim_handle_get(hmod, SIM_OBJ_MODULE);
  CUresult r = m ? sim_ctx_fault(m->obj.ctx) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS)
    r = sim_capture_check_unsafe();
  if (r == CUDA_SUCCESS)
    module_unload(m);
  sim_unlock();
  return r;
}

/* Resolves against the kernel registry; a PTX module must also declare the entry. The same
 * handle is returned for repeated lookups of one name in one module. */
CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  SIM_ENTER(cuModuleGetFunction);
  lookup_error[0] = '\0';
  if (!hfunc || !name)
    return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  struct sim_module *m = (struct sim_module *)sim_handle_get(hmod, SIM_OBJ_MODULE);
  CUresult r = m ? sim_ctx_fault(m->obj.ctx) : CUDA_ERROR_INVALID_HANDLE;
  struct sim_kernel *k = r == CUDA_SUCCESS ? kernel_find(name) : NULL;
  bool twin = k && k->fn, entry = m && module_declares(m, name);
  if (r == CUDA_SUCCESS && (!twin || !entry))
    r = lookup_not_found(name, twin, entry);
  struct sim_function *f = NULL;
  if (r == CUDA_SUCCESS) {
    for (f = m->funcs; f && f->kernel != k;)
      f = f->next;
  }
  if (r == CUDA_SUCCESS && !f) {
    f = calloc(1, sizeof *f);
    if (f) {
      f->obj.type = SIM_OBJ_FUNCTION;
      f->obj.ctx = m->obj.ctx;
      f->mod = m;
      f->kernel = k;
    }
    if (!f || !sim_handle_add(&f->obj)) {
      free(f);
      f = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      f->next = m->funcs;
      m->funcs = f;
    }
  }
  if (r == CUDA_SUCCESS)
    *hfunc = (CUfunction)f;
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                    size_t *paramSize) {
  SIM_ENTER(cuFuncGetParamInfo);
  if (!paramOffset)
    return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  struct sim_function *f = (struct sim_function *)sim_handle_get(func, SIM_OBJ_FUNCTION);
  CUresult r = f ? sim_ctx_fault(f->obj.ctx) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && paramIndex >= f->kernel->nparams)
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    size_t *offsets = malloc(f->kernel->nparams * sizeof *offsets);
    if (!offsets) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      params_layout(f->kernel, offsets);
      *paramOffset = offsets[paramIndex];
      if (paramSize)
        *paramSize = f->kernel->sizes[paramIndex];
      free(offsets);
    }
  }
  sim_unlock();
  return r;
}

/* ---- Launch ---------------------------------------------------------------------------------- */

/* A launch with its parameter values copied: payload holds nparams offsets, then the values at
 * those offsets. Self-contained, so cloning for graph launches is a plain memberwise copy. */
struct kernel_cmd {
  struct sim_cmd base;
  struct sim_module *mod; /* referenced by every copy of the command */
  bool bound;             /* enqueued on a stream: counted in mod->pending */
  cuv_sim_kernel_fn fn;
  cuv_sim_launch_t launch;
  unsigned usec;
  size_t nparams;
  size_t data_offset; /* of the values in payload */
  size_t data_size;
  size_t max_align;   /* of the parameters: above 16, the values are realigned when run */
  _Alignas(16) unsigned char payload[];
};

/* Sleeps until `until` (ns), in slices, giving up early when the stream is stopped or the
 * context faults (a faulted GPU abandons its kernels). */
static void sleep_until(uint64_t until, struct sim_stream *s) {
  for (uint64_t now = sim_now_ns();
       now < until && !atomic_load(&s->stop) && !sim_ctx_fault(s->obj.ctx); now = sim_now_ns()) {
    uint64_t left = until - now;
    sim_sleep_ns(left < 1000000 ? left : 1000000);
  }
}

/* The parameter values at the kernel's alignment: in the command, or (a parameter aligned to more
 * than the command's memory is) in *scratch, a copy the caller frees. NULL when out of memory. */
static unsigned char *aligned_values(struct kernel_cmd *c, unsigned char **scratch) {
  unsigned char *values = c->payload + c->data_offset;
  *scratch = NULL;
  if ((uintptr_t)values % c->max_align == 0)
    return values;
  size_t bytes = (c->data_size + c->max_align - 1) / c->max_align * c->max_align;
  *scratch = aligned_alloc(c->max_align, bytes ? bytes : c->max_align);
  if (*scratch)
    memcpy(*scratch, values, c->data_size);
  return *scratch;
}

static void kernel_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct kernel_cmd *c = (struct kernel_cmd *)cmd;
  void *stack_params[16];
  void **params = c->nparams <= 16 ? stack_params : malloc(c->nparams * sizeof *params);
  unsigned char *scratch, *values = aligned_values(c, &scratch);
  cuv_sim_launch_t launch = c->launch;
  launch.shared = launch.shared_bytes ? malloc(launch.shared_bytes) : NULL;
  int rc;
  uint64_t start = sim_now_ns();
  if (!params || !values || (launch.shared_bytes && !launch.shared)) {
    rc = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  } else {
    const size_t *offsets = (const size_t *)(void *)c->payload;
    for (size_t i = 0; i < c->nparams; i++)
      params[i] = values + offsets[i];
    rc = c->fn(&launch, params);
  }
  free(scratch);
  if (rc != 0) {
    sim_lock();
    sim_ctx_set_fault(s->obj.ctx, (CUresult)rc, s);
    sim_unlock();
  } else if (c->usec) {
    sleep_until(start + (uint64_t)c->usec * 1000u, s);
  }
  free(launch.shared);
  if (params != stack_params)
    free(params);
}

static void kernel_bind(struct sim_cmd *cmd) {
  struct kernel_cmd *c = (struct kernel_cmd *)cmd;
  c->bound = true;
  c->mod->pending++;
}

static bool kernel_dup(struct sim_cmd *copy) {
  struct kernel_cmd *c = (struct kernel_cmd *)copy;
  c->bound = false;
  c->mod->refs++;
  return true;
}

static void kernel_release(struct sim_cmd *cmd) {
  struct kernel_cmd *c = (struct kernel_cmd *)cmd;
  if (c->bound)
    c->mod->pending--;
  module_unref(c->mod);
}

static const struct sim_cmd_ops kernel_ops = {
    .run = kernel_run, .bind = kernel_bind, .dup = kernel_dup, .release = kernel_release};

static CUresult launch_validate(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared) {
  if (!gx || !gy || !gz || !bx || !by || !bz)
    return CUDA_ERROR_INVALID_VALUE;
  if (gx > INT_MAX || gy > 65535 || gz > 65535)
    return CUDA_ERROR_INVALID_VALUE;
  if (bx > 1024 || by > 1024 || bz > 64 || (uint64_t)bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (shared > 49152) /* above the default limit without the opt-in attribute */
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

/* The packed parameter buffer passed through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER and
 * CU_LAUNCH_PARAM_BUFFER_SIZE, up to CU_LAUNCH_PARAM_END), NULL when extra gives none. */
static CUresult extra_buffer(void **extra, const void **buf, size_t *size) {
  *buf = NULL;
  *size = 0;
  for (size_t i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      *buf = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
      *size = *(const size_t *)extra[i + 1];
    else
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

/* Builds the command, copying each parameter value from kernelParams, or from the packed buffer
 * of `extra` laid out as cuFuncGetParamInfo reports (lock held: the kernel's sizes are read). */
static CUresult kernel_cmd_new(struct sim_module *mod, const struct sim_kernel *k,
                               void **kernelParams, void **extra, struct kernel_cmd **out) {
  const void *buf;
  size_t buf_size;
  size_t data_offset = (k->nparams * sizeof(size_t) + 15) / 16 * 16;
  size_t data_size = params_layout(k, NULL);
  CUresult r = extra_buffer(extra, &buf, &buf_size);
  if (r != CUDA_SUCCESS || (buf && (kernelParams || buf_size < data_size)))
    return CUDA_ERROR_INVALID_VALUE;
  if (k->nparams > 0 && !kernelParams && !buf)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; kernelParams && i < k->nparams; i++)
    if (!kernelParams[i])
      return CUDA_ERROR_INVALID_VALUE;
  struct kernel_cmd *c = sim_cmd_new(&kernel_ops, sizeof *c + data_offset + data_size);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  size_t *offsets = (size_t *)(void *)c->payload;
  params_layout(k, offsets);
  if (buf)
    memcpy(c->payload + data_offset, buf, data_size);
  for (size_t i = 0; !buf && i < k->nparams; i++)
    memcpy(c->payload + data_offset + offsets[i], kernelParams[i], k->sizes[i]);
  c->mod = mod;
  mod->refs++;
  c->fn = k->fn;
  c->usec = k->usec;
  c->nparams = k->nparams;
  c->data_offset = data_offset;
  c->data_size = data_size;
  c->max_align = k->max_align ? k->max_align : 1;
  *out = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                                void **extra) {
  SIM_ENTER(cuLaunchKernel);
  struct sim_stream *s;
  struct kernel_cmd *c = NULL;
  sim_lock();
  struct sim_function *fn = (struct sim_function *)sim_handle_get(f, SIM_OBJ_FUNCTION);
  CUresult r = fn ? sim_stream_get_live(hStream, &s) : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && s->obj.ctx != fn->obj.ctx)
    r = CUDA_ERROR_INVALID_HANDLE; /* a stream of another context than the function's */
  if (r == CUDA_SUCCESS)
    r = launch_validate(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                        sharedMemBytes);
  if (r == CUDA_SUCCESS)
    r = kernel_cmd_new(fn->mod, fn->kernel, kernelParams, extra, &c);
  if (r == CUDA_SUCCESS) {
    c->launch = (cuv_sim_launch_t){.grid = {gridDimX, gridDimY, gridDimZ},
                                   .block = {blockDimX, blockDimY, blockDimZ},
                                   .shared_bytes = sharedMemBytes};
    r = sim_stream_submit(s, &c->base);
  }
  sim_unlock();
  return r;
}
