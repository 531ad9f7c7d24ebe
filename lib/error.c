/* The error table: one X-macro, CUV_ERRNO_MAP, gives every code its name and text. Driver
 * failures (CUV_ECUDA(result)) are described with the driver's own words when it is loaded. */
#include "internal.h"

#define CUV__ERR_NAME(name, value, text) case CUV_##name: return "CUV_" #name;
#define CUV__ERR_TEXT(name, value, text) case CUV_##name: return text;

CUV_EXTERN int cuv_cuda_result(int status) {
  return CUV_IS_ECUDA(status) ? CUV_ECUDA_BASE - status : 0;
}

static const char *cuda_text(int status, int want_name) {
  CUresult result = (CUresult)cuv_cuda_result(status);
  const char *text = NULL;
  if (want_name && cuv__drv.cuGetErrorName)
    cuv__drv.cuGetErrorName(result, &text);
  if (!want_name && cuv__drv.cuGetErrorString)
    cuv__drv.cuGetErrorString(result, &text);
  if (text)
    return text;
  return want_name ? "CUDA_ERROR_UNKNOWN_CODE" : "CUDA driver call failed";
}

CUV_EXTERN const char *cuv_strerror(int status) {
  if (status == 0)
    return "success";
  if (CUV_IS_ECUDA(status))
    return cuda_text(status, 0);
  switch (status) {
    CUV_ERRNO_MAP(CUV__ERR_TEXT)
  default:
    return "unknown error";
  }
}

CUV_EXTERN const char *cuv_err_name(int status) {
  if (status == 0)
    return "CUV_OK";
  if (CUV_IS_ECUDA(status))
    return cuda_text(status, 1);
  switch (status) {
    CUV_ERRNO_MAP(CUV__ERR_NAME)
  default:
    return "CUV_EUNKNOWN";
  }
}

CUV_EXTERN const char *cuv_version_string(void) { return CUV_VERSION_STRING; }

/* The driver errors after which the context is dead (sticky): the work's resources cannot be
 * proven free, and nothing more runs in this context. */
CUV_EXTERN bool cuv_status_is_fault(int status) {
  switch (cuv_cuda_result(status)) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_ECC_UNCORRECTABLE:
  case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    return true;
  default:
    return false;
  }
}
