/* Entry-point table: cuGetProcAddress_v2 (the simulator's only exported driver symbol), call
 * counting and failure injection, shared by every entry point through SIM_ENTER. */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* Function pointers are stored as void (*)(void): ISO C has no function-to-object pointer cast,
 * and GCC does not warn about casts to this generic function type. */
typedef void (*sim_fn)(void);

_Static_assert(sizeof(sim_fn) == sizeof(void *), "function pointers must fit in void *");

struct sim_entry {
  const char *name;
  int version; /* the first CUDA version (1000 * major + 10 * minor) that resolves to fn */
  sim_fn fn;
};

/* Names whose function depends on the CUDA version asked for, as the real driver resolves them
 * (checked on the GPU with driver 580): at 13000, cuCtxSynchronize is the variant that takes the
 * context (cudaTypedefs.h's PFN_cuCtxSynchronize_v13000); cuGraphInstantiate is the legacy
 * five-argument function at every version, even though cuda.h 12+ #defines the name to
 * cuGraphInstantiateWithFlags, which is resolved under its own name. Looked up first. */
static const struct sim_entry versioned[] = {
    {"cuCtxSynchronize", 13000, (sim_fn)sim_cuCtxSynchronize_v2},
    {"cuGraphInstantiate", 0, (sim_fn)sim_cuGraphInstantiate_v2},
    {"cuGraphInstantiateWithFlags", 11040, (sim_fn)cuGraphInstantiateWithFlags},
};

/* Every entry point of internal/driver_funcs.h. #name is the base name (the string is not
 * macro-expanded) while the bare name expands through cuda.h's macros to the versioned symbol we
 * define: {"cuMemAlloc", cuMemAlloc_v2}. */
#define SIM__ENTRY(name) {#name, 0, (sim_fn)name},
static const struct sim_entry listed[] = {
    CUV__DRIVER_FUNCS(SIM__ENTRY){"cuGetProcAddress", 0, (sim_fn)cuGetProcAddress},
};
#undef SIM__ENTRY

/* The function `name` resolves to at cudaVersion, or NULL. */
static sim_fn entry_resolve(const char *name, int cudaVersion) {
  const struct sim_entry *best = NULL;
  for (size_t i = 0; i < sizeof versioned / sizeof versioned[0]; i++)
    if (strcmp(versioned[i].name, name) == 0 && versioned[i].version <= cudaVersion &&
        (!best || versioned[i].version > best->version))
      best = &versioned[i];
  for (size_t i = 0; !best && i < sizeof listed / sizeof listed[0]; i++)
    if (strcmp(listed[i].name, name) == 0)
      best = &listed[i];
  return best ? best->fn : NULL;
}

/* Entry ids by name, for cuv_sim_fail and cuv_sim_calls. */
static const char *const entry_names[SIM_ID_COUNT] = {
#define SIM__NAME(name) #name,
    SIM_ENTRY_POINTS(SIM__NAME)
#undef SIM__NAME
};

static int entry_find(const char *name) {
  for (int i = 0; i < SIM_ID_COUNT; i++)
    if (strcmp(entry_names[i], name) == 0)
      return i;
  return -1;
}

/* ---- Call counting and failure injection ----------------------------------------------------- */

/* A failure rule. Counting is relative to the rule: `start` is the entry's call count when the
 * rule was added, so nth = 1 fails the next call. */
struct sim_rule {
  enum sim_entry_id id;
  unsigned long start;
  unsigned nth; /* 0 = every call */
  CUresult result;
  struct sim_rule *next;
};

static atomic_ulong calls[SIM_ID_COUNT];
static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_rule *rules;
static struct sim_rule *rules_tail;
static atomic_uint nrules; /* lets the common no-rule path skip rules_lock */

/* The first rule (in the order added) matching call number n of id, or CUDA_SUCCESS. */
static CUresult rule_match(enum sim_entry_id id, unsigned long n) {
  CUresult result = CUDA_SUCCESS;
  pthread_mutex_lock(&rules_lock);
  for (struct sim_rule *r = rules; r; r = r->next) {
    if (r->id != id)
      continue;
    /* n <= start: the call was counted before the rule existed. */
    if (r->nth == 0 || (n > r->start && n - r->start == r->nth)) {
      result = r->result;
      break;
    }
  }
  pthread_mutex_unlock(&rules_lock);
  return result;
}

CUresult sim_enter(enum sim_entry_id id, enum sim_enter_checks checks) {
  unsigned long n = atomic_fetch_add_explicit(&calls[id], 1, memory_order_relaxed) + 1;
  if (atomic_load_explicit(&nrules, memory_order_acquire) != 0) {
    CUresult r = rule_match(id, n);
    if (r != CUDA_SUCCESS)
      return r;
  }
  if (checks >= SIM_CHECK_INIT && !sim_initialized())
    return CUDA_ERROR_NOT_INITIALIZED;
  return checks >= SIM_CHECK_CTX ? sim_ctx_entry_check(checks == SIM_CHECK_SYNC) : CUDA_SUCCESS;
}

CUV_SIM_EXTERN void cuv_sim_fail(const char *entry, unsigned nth, int result) {
  int id = entry ? entry_find(entry) : -1;
  if (id < 0) {
    fprintf(stderr, "cuv-sim: cuv_sim_fail: unknown entry point '%s' ignored\n",
            entry ? entry : "(null)");
    return;
  }
  struct sim_rule *r = calloc(1, sizeof *r);
  if (!r)
    return;
  r->id = (enum sim_entry_id)id;
  r->nth = nth;
  r->result = (CUresult)result;
  pthread_mutex_lock(&rules_lock);
  r->start = atomic_load_explicit(&calls[id], memory_order_relaxed);
  if (rules_tail)
    rules_tail->next = r;
  else
    rules = r;
  rules_tail = r;
  atomic_fetch_add_explicit(&nrules, 1, memory_order_release);
  pthread_mutex_unlock(&rules_lock);
}

CUV_SIM_EXTERN void cuv_sim_fail_clear(void) {
  pthread_mutex_lock(&rules_lock);
  struct sim_rule *r = rules;
  rules = rules_tail = NULL;
  atomic_store_explicit(&nrules, 0, memory_order_release);
  pthread_mutex_unlock(&rules_lock);
  while (r) {
    struct sim_rule *next = r->next;
    free(r);
    r = next;
  }
}

CUV_SIM_EXTERN unsigned long cuv_sim_calls(const char *entry) {
  int id = entry ? entry_find(entry) : -1;
  return id < 0 ? 0 : atomic_load_explicit(&calls[id], memory_order_relaxed);
}

/* ---- cuGetProcAddress ------------------------------------------------------------------------ */

/* CUV_SIM_HIDE=name,name... makes lookups of those entry points fail as on an older driver that
 * lacks them (to test cuv's handling of optional entry points). Read at each lookup. */
bool sim_entry_hidden(const char *name) {
  const char *list = getenv("CUV_SIM_HIDE");
  size_t len = strlen(name);
  while (list && *list) {
    const char *end = strchr(list, ',');
    size_t n = end ? (size_t)(end - list) : strlen(list);
    if (n == len && strncmp(list, name, n) == 0)
      return true;
    list = end ? end + 1 : NULL;
  }
  return false;
}

/* Like the real driver, works before cuInit, and an unknown name is not an error: CUDA_SUCCESS
 * with *pfn NULL and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND (as cuda.h documents and the driver
 * does). Apart from the names in `versioned`, a name resolves to the version cuda.h 13.0 maps it
 * to whatever cudaVersion (<= 13000) asks; older ABI variants are not simulated. */
CUV_SIM_EXTERN CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                                 cuuint64_t flags,
                                                 CUdriverProcAddressQueryResult *symbolStatus) {
  SIM_ENTER_NOINIT(cuGetProcAddress);
  if (!symbol || !pfn)
    return CUDA_ERROR_INVALID_VALUE;
  *pfn = NULL;
  if (cudaVersion > CUDA_VERSION ||
      (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  sim_fn fn = sim_entry_hidden(symbol) ? NULL : entry_resolve(symbol, cudaVersion);
  if (!fn) {
    if (symbolStatus)
      *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  memcpy(pfn, &fn, sizeof *pfn);
  if (symbolStatus)
    *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
