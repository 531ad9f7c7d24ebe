#ifndef CUVT_DRIVER_PROC_H
#define CUVT_DRIVER_PROC_H

/* The driver's entry points as an application resolves them, beside cuv (the scenarios that make
 * raw driver calls of their own: custom ops, capture modes). libcuda, or on the simulator
 * libcuv-sim (linked into the tests): both export only cuGetProcAddress, which gives every other
 * entry point. Header-only (static inline); asserts, so call it on the test thread. */

#include <cuda.h>
#include <dlfcn.h>

#include "common.h"

/* Entry point `name` at the headers' CUDA version into *fn (a pointer to a function pointer). */
static inline void cuvt_driver_proc(const char *name, void *fn) {
  void *lib = cuvt_is_sim() ? dlopen(NULL, RTLD_NOW) : dlopen("libcuda.so.1", RTLD_NOW);
  assert_non_null(lib);
  __typeof__(cuGetProcAddress) *get_proc;
  *(void **)&get_proc = dlsym(lib, "cuGetProcAddress_v2");
  assert_non_null(get_proc);
  assert_int_equal(get_proc(name, (void **)fn, CUDA_VERSION, 0, NULL), 0);
  assert_non_null(*(void **)fn);
}

#endif
