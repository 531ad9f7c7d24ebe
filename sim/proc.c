/* Entry-point table: cuGetProcAddress_v2, the simulator's only exported driver symbol. The top
 * of sim/: the table names every entry point of every file. */

#include <string.h>

#include "context_api.h"
#include "driver_funcs.h"
#include "enter.h"
#include "graph_api.h"

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
    {"cuLaunchHostFunc_v2", CUV__LAUNCH_HOST_FUNC_V2_VERSION, (sim_fn)cuLaunchHostFunc_v2},
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

/* Whether `name` is one of `versioned` that only a later CUDA version than asked resolves. */
static bool entry_needs_later_version(const char *name) {
  for (size_t i = 0; i < sizeof versioned / sizeof versioned[0]; i++)
    if (strcmp(versioned[i].name, name) == 0)
      return true;
  return false;
}

/* ---- cuGetProcAddress ------------------------------------------------------------------------ */

/* Like the real driver, works before cuInit, and an unknown name is not an error: CUDA_SUCCESS
 * with *pfn NULL and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND (as cuda.h documents and the driver
 * does). Apart from the names in `versioned`, a name resolves to the version cuda.h 13.0 maps it
 * to whatever cudaVersion (<= SIM_DRIVER_VERSION) asks; older ABI variants are not simulated. */
CUV_SIM_EXTERN CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                                 cuuint64_t flags,
                                                 CUdriverProcAddressQueryResult *symbolStatus) {
  SIM_ENTER_NOINIT(cuGetProcAddress);
  if (!symbol || !pfn)
    return CUDA_ERROR_INVALID_VALUE;
  *pfn = NULL;
  if (cudaVersion > SIM_DRIVER_VERSION ||
      (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  sim_fn fn = sim_entry_hidden(symbol) ? NULL : entry_resolve(symbol, cudaVersion);
  if (!fn) {
    /* A name the driver has, asked for at a version before it (as cuda.h documents). */
    bool later = !sim_entry_hidden(symbol) && entry_needs_later_version(symbol);
    if (symbolStatus)
      *symbolStatus = later ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                            : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  memcpy(pfn, &fn, sizeof *pfn);
  if (symbolStatus)
    *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
