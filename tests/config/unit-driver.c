/* The driver loader (lib/driver.c): which libraries it accepts and how it fails. Loads into a
 * private table with cuv__driver_load, so the process-wide one stays untouched. Run with the
 * argument "init" (and CUV_DRIVER pointing nowhere) it checks the public cuv_init instead, in its
 * own process because cuv_init caches its result. The fake drivers' paths come from meson. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "driver.h"

#ifndef CUVT_FAKE_DRIVER
#error "CUVT_FAKE_DRIVER (path of the fake driver with cuGetProcAddress_v2) must be defined"
#endif
#ifndef CUVT_FAKE_DRIVER_NO_PROC
#error "CUVT_FAKE_DRIVER_NO_PROC (path of the fake driver without it) must be defined"
#endif

#define N_ENTRIES_OF(name) +1
enum { N_ENTRIES = 0 CUV__DRIVER_FUNCS(N_ENTRIES_OF) };
#undef N_ENTRIES_OF

/* Entry points the table has, counted member by member. */
static int resolved_entries(const cuv__driver_t *t) {
  int n = 0;
#define COUNT_RESOLVED(name) n += t->name != NULL;
  CUV__DRIVER_FUNCS(COUNT_RESOLVED)
#undef COUNT_RESOLVED
  return n;
}

/* A failed load leaves nothing behind: no handle, no stale pointer. */
static void assert_table_empty(const cuv__driver_t *t) {
  assert_null(t->handle);
  assert_int_equal(resolved_entries(t), 0);
  assert_int_equal(t->is_sim, 0);
}

static void clear_fake_env(void) {
  unsetenv("CUVT_FAKE_ONLY");
  unsetenv("CUVT_FAKE_HIDE");
}

static void test_wrong_path_is_enodriver(void **state) {
  cuv__driver_t t;
  assert_int_equal(cuv__driver_load(&t, "/nonexistent/libcuda-none.so"), CUV_ENODRIVER);
  assert_table_empty(&t);
  assert_int_equal(cuv__driver_load(&t, "libcuv-no-such-driver.so.9"), CUV_ENODRIVER);
  assert_table_empty(&t);
}

static void test_sim_loads_every_entry_point(void **state) {
  cuv__driver_t t;
  assert_cuv_ok(cuv__driver_load(&t, "sim"));
  assert_non_null(t.handle);
  assert_int_equal(t.is_sim, 1);
  assert_string_equal(t.name, "sim");
#define ASSERT_RESOLVED(name)                                                                      \
  if (!t.name)                                                                                     \
    print_error("entry point %s not resolved\n", #name);                                           \
  assert_non_null(t.name);
  CUV__DRIVER_FUNCS(ASSERT_RESOLVED)
#undef ASSERT_RESOLVED
  /* The pointers are the simulator's own: its error names are the driver's. */
  const char *name = NULL;
  assert_int_equal(t.cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &name), CUDA_SUCCESS);
  assert_string_equal(name, "CUDA_ERROR_ILLEGAL_ADDRESS");
  cuv__driver_unload(&t);
  assert_table_empty(&t);
}

/* Where the driver resolves a name to another prototype than cuda.h declares under it, the table
 * must hold cuda.h's. The simulator resolves by version as the driver does (the GPU answered the
 * same), so its call counters tell which function a table member reached. */
static void test_entry_points_have_cuda_h_prototypes(void **state) {
  /* The headers' version for all but cuCtxSynchronize, which takes a context from 13000 on. */
  assert_int_equal(CUV__DRIVER_VERSION("cuLaunchKernel"), CUDA_VERSION);
  assert_true(CUV__DRIVER_VERSION("cuCtxSynchronize") <= 12000);
  cuv__driver_t t;
  assert_cuv_ok(cuv__driver_load(&t, "sim"));
  /* cuda.h's cuGraphInstantiate is cuGraphInstantiateWithFlags (three arguments), not the legacy
   * five-argument function the driver gives under the name "cuGraphInstantiate". */
  unsigned long with_flags = cuv_sim_calls("cuGraphInstantiateWithFlags");
  unsigned long legacy = cuv_sim_calls("cuGraphInstantiate");
  CUgraphExec exec = NULL;
  assert_int_not_equal(t.cuGraphInstantiate(&exec, NULL, 0), CUDA_SUCCESS); /* no graph given */
  assert_int_equal(cuv_sim_calls("cuGraphInstantiateWithFlags") - with_flags, 1);
  assert_int_equal(cuv_sim_calls("cuGraphInstantiate") - legacy, 0);
  cuv__driver_unload(&t);
}

/* A library named by path that turns out to be libcuv-sim is recognized as the simulator. */
static void test_sim_by_path_is_sim(void **state) {
  cuv__driver_t t;
  assert_cuv_ok(cuv__driver_load(&t, CUVT_SIM_PATH));
  assert_int_equal(t.is_sim, 1);
  assert_string_equal(t.name, CUVT_SIM_PATH);
  assert_int_equal(resolved_entries(&t), N_ENTRIES);
  assert_non_null(t.cuLaunchHostFunc_v2); /* the simulator is a CUDA 13.2 driver */
  cuv__driver_unload(&t);
}

static void test_fake_with_every_entry_point_loads(void **state) {
  clear_fake_env();
  /* Hold the library open ourselves, so its lookup counter survives the loader's dlclose. */
  void *fake = dlopen(CUVT_FAKE_DRIVER, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(fake);
  const unsigned *lookups = dlsym(fake, "cuvt_fake_lookups");
  const unsigned *wrong_versions = dlsym(fake, "cuvt_fake_wrong_versions");
  assert_non_null(lookups);
  assert_non_null(wrong_versions);
  unsigned before = *lookups, wrong_before = *wrong_versions;
  cuv__driver_t t;
  assert_cuv_ok(cuv__driver_load(&t, CUVT_FAKE_DRIVER));
  assert_int_equal(t.is_sim, 0);
  assert_string_equal(t.name, CUVT_FAKE_DRIVER);
  assert_int_equal(resolved_entries(&t), N_ENTRIES);
  /* Every entry point was asked for once, at the version that gives it cuda.h's prototype, and
   * the optional cuLaunchHostFunc_v2 once at CUDA 13.2's (this driver lacks it). */
  assert_int_equal(*lookups - before, N_ENTRIES + 1);
  assert_null(t.cuLaunchHostFunc_v2);
  assert_int_equal(*wrong_versions - wrong_before, 0);
  cuv__driver_unload(&t);
  dlclose(fake);
}

static void test_fake_with_few_names_is_edriver(void **state) {
  clear_fake_env();
  setenv("CUVT_FAKE_ONLY", "cuInit,cuDriverGetVersion,cuGetErrorName,cuGetErrorString", 1);
  cuv__driver_t t;
  assert_int_equal(cuv__driver_load(&t, CUVT_FAKE_DRIVER), CUV_EDRIVER);
  assert_table_empty(&t);
  clear_fake_env();
}

/* One required entry point missing, whichever it is, fails the load: try the last of the list
 * (the loader must not stop early) and a random one. */
static void test_fake_missing_one_entry_is_edriver(void **state) {
#define NAME_OF(name) #name,
  static const char *const names[] = {CUV__DRIVER_FUNCS(NAME_OF)};
#undef NAME_OF
  const char *missing[2] = {names[N_ENTRIES - 1], NULL};
  do
    missing[1] = names[cuvt_random_u32() % N_ENTRIES];
  while (CUV__DRIVER_OPTIONAL(missing[1]));
  for (size_t i = 0; i < 2; i++) {
    clear_fake_env();
    setenv("CUVT_FAKE_HIDE", missing[i], 1);
    cuv__driver_t t;
    int rc = cuv__driver_load(&t, CUVT_FAKE_DRIVER);
    if (rc != CUV_EDRIVER)
      print_error("driver without %s: %s\n", missing[i], cuv_err_name(rc));
    assert_int_equal(rc, CUV_EDRIVER);
    assert_table_empty(&t);
  }
  clear_fake_env();
}

/* cuFuncGetParamInfo is optional (CUDA 12.4+): a driver without it loads, member left NULL. */
static void test_fake_missing_optional_entry_loads(void **state) {
  clear_fake_env();
  setenv("CUVT_FAKE_HIDE", "cuFuncGetParamInfo", 1);
  cuv__driver_t t;
  assert_cuv_ok(cuv__driver_load(&t, CUVT_FAKE_DRIVER));
  assert_null(t.cuFuncGetParamInfo);
  assert_int_equal(resolved_entries(&t), N_ENTRIES - 1);
  cuv__driver_unload(&t);
  clear_fake_env();
}

static void test_library_without_get_proc_address_is_edriver(void **state) {
  void *probe = dlopen(CUVT_FAKE_DRIVER_NO_PROC, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(probe); /* it does load: the failure below is about the missing symbol */
  assert_null(dlsym(probe, "cuGetProcAddress_v2"));
  dlclose(probe);
  cuv__driver_t t;
  assert_int_equal(cuv__driver_load(&t, CUVT_FAKE_DRIVER_NO_PROC), CUV_EDRIVER);
  assert_table_empty(&t);
}

/* Run as `test-unit-driver init` with CUV_DRIVER naming a library that does not exist. */
static void test_init_without_driver(void **state) {
  const char *driver = getenv("CUV_DRIVER");
  assert_non_null(driver); /* the test's environment, not a default, must select the driver */
  assert_null(strstr(driver, "sim"));
  int rc = cuv_init();
  assert_int_equal(rc, CUV_ENODRIVER);
  assert_non_null(strstr(cuv_strerror(rc), "CUV_DRIVER=sim"));
  assert_non_null(cuv_init_error()); /* names the path it tried */
  assert_non_null(strstr(cuv_init_error(), driver));
  assert_int_equal(cuv_init(), CUV_ENODRIVER); /* cached, and still the same answer */
  assert_null(cuv_driver_name());
  assert_int_equal(cuv_driver_is_sim(), 0);
  int version = -1, count = -1;
  assert_int_equal(cuv_driver_version(&version), CUV_ENODRIVER);
  assert_int_equal(version, -1);
  assert_int_equal(cuv_device_count(&count), CUV_ENODRIVER);
  cuv_device_t *dev = NULL;
  assert_int_equal(cuv_device_open(&dev, 0), CUV_ENODRIVER);
  assert_null(dev);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "init") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_init_without_driver)};
    return cmocka_run_group_tests_name("unit-driver-init", tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wrong_path_is_enodriver),
      cmocka_unit_test(test_sim_loads_every_entry_point),
      cmocka_unit_test(test_sim_by_path_is_sim),
      cmocka_unit_test(test_entry_points_have_cuda_h_prototypes),
      cmocka_unit_test(test_fake_with_every_entry_point_loads),
      cmocka_unit_test(test_fake_with_few_names_is_edriver),
      cmocka_unit_test(test_fake_missing_one_entry_is_edriver),
      cmocka_unit_test(test_fake_missing_optional_entry_loads),
      cmocka_unit_test(test_library_without_get_proc_address_is_edriver),
  };
  return cmocka_run_group_tests_name("unit-driver", tests, NULL, NULL);
}
