/* A fake CUDA driver for the loader's tests (unit-driver.c). It is not a driver: its entry points
 * do nothing and are never called. Built twice:
 *  - with cuGetProcAddress_v2, which resolves the names of CUV__DRIVER_FUNCS except those the test
 *    hides through the environment (read at each lookup, so one process can try several drivers):
 *      CUVT_FAKE_ONLY=a,b,c   only these names resolve
 *      CUVT_FAKE_HIDE=a,b     these names do not resolve
 *  - with -DCUVT_FAKE_NO_PROC: a library that exports no cuGetProcAddress_v2 at all. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "driver_funcs.h"

/* Something to export in both variants, so the library is a plausible driver by its symbols. */
__attribute__((visibility("default"))) CUresult CUDAAPI cuInit(unsigned int flags) {
  (void)flags;
  return CUDA_SUCCESS;
}

#ifndef CUVT_FAKE_NO_PROC

static void fake_entry(void) {}

/* #name keeps the base name: cuda.h's renaming macros do not expand inside the string. */
#define FAKE_NAME(name) #name,
static const char *const known[] = {CUV__DRIVER_FUNCS(FAKE_NAME)};
#undef FAKE_NAME

/* Lookups made, and those not made at the version driver_funcs.h gives the name (the one whose
 * driver prototype is cuda.h's), read by the test through dlsym. */
__attribute__((visibility("default"))) unsigned cuvt_fake_lookups;
__attribute__((visibility("default"))) unsigned cuvt_fake_wrong_versions;

static bool listed(const char *env, const char *name) {
  const char *list = getenv(env);
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

static bool resolves(const char *name) {
  bool is_known = false;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    is_known = is_known || strcmp(known[i], name) == 0;
  if (getenv("CUVT_FAKE_ONLY") && !listed("CUVT_FAKE_ONLY", name))
    return false;
  return is_known && !listed("CUVT_FAKE_HIDE", name);
}

/* The name expands to cuGetProcAddress_v2, the symbol lib/driver.c looks up. */
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                 CUdriverProcAddressQueryResult *symbolStatus) {
  (void)flags;
  cuvt_fake_lookups++;
  int version = strcmp(symbol, "cuLaunchHostFunc_v2") == 0 ? CUV__LAUNCH_HOST_FUNC_V2_VERSION
                                                            : CUV__DRIVER_VERSION(symbol);
  if (cudaVersion != version)
    cuvt_fake_wrong_versions++;
  *pfn = NULL;
  if (!resolves(symbol)) {
    if (symbolStatus)
      *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  void (*entry)(void) = fake_entry;
  memcpy(pfn, &entry, sizeof *pfn); /* ISO C has no cast from function to object pointer */
  if (symbolStatus)
    *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

#endif
