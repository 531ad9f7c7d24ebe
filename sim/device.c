/* Driver initialization (cuInit, with the device count it fixes), the driver's version, and
 * the devices and their attributes. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "enter.h"
#include "util.h"

static atomic_int device_count_setting = -1; /* -1: not set, CUV_SIM_DEVICES or 1 */

CUV_SIM_EXTERN void cuv_sim_set_device_count(int count) {
  atomic_store(&device_count_setting, count < 0 ? 0 : count > SIM_MAX_DEVICES ? SIM_MAX_DEVICES
                                                                               : count);
}

/* The device count cuInit fixes: cuv_sim_set_device_count's, else CUV_SIM_DEVICES (a count from 0
 * to SIM_MAX_DEVICES), else 1. -1 for a variable that is not such a count. */
static int device_count_wanted(void) {
  int set = atomic_load(&device_count_setting);
  const char *env = getenv("CUV_SIM_DEVICES");
  if (set >= 0 || !env || !*env)
    return set >= 0 ? set : 1;
  char *end;
  long n = strtol(env, &end, 10);
  if (*end || n < 0 || n > SIM_MAX_DEVICES) {
    fprintf(stderr, "cuv-sim: CUV_SIM_DEVICES=%s is not a device count from 0 to %d\n", env,
            SIM_MAX_DEVICES);
    return -1;
  }
  return (int)n;
}

CUresult CUDAAPI cuInit(unsigned int Flags) {
  SIM_ENTER_NOINIT(cuInit);
  if (Flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  sim_lock();
  /* The variable is read (and a bad value reported) until an initialization succeeded. */
  CUresult r = sim_ctx_init_devices(sim_initialized() ? 0 : device_count_wanted());
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion) {
  SIM_ENTER_NOINIT(cuDriverGetVersion);
  if (!driverVersion)
    return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = SIM_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  SIM_ENTER_NOCTX(cuDeviceGetCount);
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = sim_device_count();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  SIM_ENTER_NOCTX(cuDeviceGet);
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_device_valid(ordinal))
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  SIM_ENTER_NOCTX(cuDeviceGetName);
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  static const char device_name[] = "cuv-sim CPU device";
  size_t n = strlen(device_name);
  if (n >= (size_t)len)
    n = (size_t)len - 1;
  memcpy(name, device_name, n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

/* Values of the GPU (compute capability 9.0; those that vary were read from one with driver 580);
 * attributes not listed are 0. */
static int attribute_value(CUdevice_attribute attrib, CUdevice dev) {
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
  case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return dev;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 3201000;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 60 * 1024 * 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
  case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
  case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
  case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 1;
  case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
  default: return 0;
  }
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  SIM_ENTER_NOCTX(cuDeviceGetAttribute);
  if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_device_valid(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  *pi = attribute_value(attrib, dev);
  return CUDA_SUCCESS;
}
