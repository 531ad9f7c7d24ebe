/* NCCL's ABI as cuv declares it (internal/nccl_funcs.h, include/cuv/collective.h), checked at
 * compile time against the nccl.h this build found: cuv is built without NCCL's headers, so its
 * own copies of the enums and structures must stay the same as NCCL's. Built only where nccl.h is
 * found (tests/meson.build). */
#include <stddef.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h declares `f()` in places */
#include <nccl.h>
#pragma GCC diagnostic pop

#include "common.h"
#include "nccl_funcs.h"

#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " != " #b)

SAME(CUV__NCCL_SUCCESS, ncclSuccess);
SAME(CUV__NCCL_UNHANDLED_CUDA_ERROR, ncclUnhandledCudaError);
SAME(CUV__NCCL_SYSTEM_ERROR, ncclSystemError);
SAME(CUV__NCCL_INTERNAL_ERROR, ncclInternalError);
SAME(CUV__NCCL_INVALID_ARGUMENT, ncclInvalidArgument);
SAME(CUV__NCCL_INVALID_USAGE, ncclInvalidUsage);
SAME(CUV__NCCL_REMOTE_ERROR, ncclRemoteError);
SAME(CUV__NCCL_IN_PROGRESS, ncclInProgress);
SAME(sizeof(cuv__nccl_result_t), sizeof(ncclResult_t));

SAME(CUV_NCCL_INT8, ncclInt8);
SAME(CUV_NCCL_UINT8, ncclUint8);
SAME(CUV_NCCL_INT32, ncclInt32);
SAME(CUV_NCCL_UINT32, ncclUint32);
SAME(CUV_NCCL_INT64, ncclInt64);
SAME(CUV_NCCL_UINT64, ncclUint64);
SAME(CUV_NCCL_FLOAT16, ncclFloat16);
SAME(CUV_NCCL_FLOAT32, ncclFloat32);
SAME(CUV_NCCL_FLOAT64, ncclFloat64);
SAME(CUV_NCCL_BFLOAT16, ncclBfloat16);
SAME(CUV_NCCL_FLOAT8E4M3, ncclFloat8e4m3);
SAME(CUV_NCCL_FLOAT8E5M2, ncclFloat8e5m2);
SAME(sizeof(int), sizeof(ncclDataType_t)); /* passed as int */

SAME(CUV_NCCL_SUM, ncclSum);
SAME(CUV_NCCL_PROD, ncclProd);
SAME(CUV_NCCL_MAX, ncclMax);
SAME(CUV_NCCL_MIN, ncclMin);
SAME(CUV_NCCL_AVG, ncclAvg);
SAME(sizeof(int), sizeof(ncclRedOp_t));

SAME(sizeof(cuv__nccl_id_t), sizeof(ncclUniqueId));
SAME(sizeof(cuv_nccl_id_t), sizeof(ncclUniqueId));
SAME(_Alignof(cuv__nccl_id_t), _Alignof(ncclUniqueId)); /* passed by value */

/* the 2.19 prefix of ncclConfig_t */
#define SAME_FIELD(f)                                                                             \
  SAME(offsetof(cuv__nccl_config_t, f), offsetof(ncclConfig_t, f));                               \
  SAME(sizeof(((cuv__nccl_config_t *)0)->f), sizeof(((ncclConfig_t *)0)->f))
SAME_FIELD(size);
SAME_FIELD(magic);
SAME_FIELD(version);
SAME_FIELD(blocking);
SAME_FIELD(cgaClusterSize);
SAME_FIELD(minCTAs);
SAME_FIELD(maxCTAs);
SAME_FIELD(netName);
SAME_FIELD(splitShare);
SAME(CUV__NCCL_UNDEF_INT, NCCL_CONFIG_UNDEF_INT);
#ifdef NCCL_SHRINK_ABORT /* 2.27 and later */
SAME(CUV__NCCL_SHRINK_DEFAULT, NCCL_SHRINK_DEFAULT);
SAME(CUV__NCCL_SHRINK_ABORT, NCCL_SHRINK_ABORT);
#endif
#ifdef NCCL_REVOKE_DEFAULT /* 2.28 and later */
SAME(CUV__NCCL_REVOKE_DEFAULT, NCCL_REVOKE_DEFAULT);
#endif
SAME(CUV__NCCL_VERSION(2, 19, 0), NCCL_VERSION(2, 19, 0));
SAME(CUV__NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_VERSION_CODE);

static void test_abi(void **state) {
  (void)state;
  ncclConfig_t real = NCCL_CONFIG_INITIALIZER;
  assert_int_equal(real.magic, CUV__NCCL_CONFIG_MAGIC);
  assert_true(real.version >= CUV__NCCL_CONFIG_VERSION);
  print_message("# nccl.h %d.%d.%d\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_abi)};
  return cmocka_run_group_tests_name("unit", tests, NULL, NULL);
}
