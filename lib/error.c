/* The error table: cuv's codes (CUV_ERRNO_MAP, include/cuv/errors.h) and libuv's, each with its
 * name and text. Driver failures (CUV_ECUDA(result)) are described with the driver's own words
 * when it is loaded; NCCL failures (CUV_ENCCL(result)) with nccl.h's names, whether NCCL is loaded
 * or not. cuv does not link libuv, so libuv's list is copied here. */
#include <stddef.h>

#include "internal.h"
#include "nccl_funcs.h"

/* libuv's codes and texts (uv.h's UV_ERRNO_MAP, as of libuv 1.51). On Linux a code is -errno
 * where errno.h has the name, and the rest have the fixed values uv/errno.h gives them;
 * tests/errors/errors-uv.c checks every value and text against the uv.h it is built with. */
#define CUV__UV_ERRNO_MAP(XX)                                                                     \
  XX(E2BIG, -E2BIG, "argument list too long")                                                     \
  XX(EACCES, -EACCES, "permission denied")                                                        \
  XX(EADDRINUSE, -EADDRINUSE, "address already in use")                                           \
  XX(EADDRNOTAVAIL, -EADDRNOTAVAIL, "address not available")                                      \
  XX(EAFNOSUPPORT, -EAFNOSUPPORT, "address family not supported")                                 \
  XX(EAGAIN, -EAGAIN, "resource temporarily unavailable")                                         \
  XX(EAI_ADDRFAMILY, -3000, "address family not supported")                                       \
  XX(EAI_AGAIN, -3001, "temporary failure")                                                       \
  XX(EAI_BADFLAGS, -3002, "bad ai_flags value")                                                   \
  XX(EAI_BADHINTS, -3013, "invalid value for hints")                                              \
  XX(EAI_CANCELED, -3003, "request canceled")                                                     \
  XX(EAI_FAIL, -3004, "permanent failure")                                                        \
  XX(EAI_FAMILY, -3005, "ai_family not supported")                                                \
  XX(EAI_MEMORY, -3006, "out of memory")                                                          \
  XX(EAI_NODATA, -3007, "no address")                                                             \
  XX(EAI_NONAME, -3008, "unknown node or service")                                                \
  XX(EAI_OVERFLOW, -3009, "argument buffer overflow")                                             \
  XX(EAI_PROTOCOL, -3014, "resolved protocol is unknown")                                         \
  XX(EAI_SERVICE, -3010, "service not available for socket type")                                 \
  XX(EAI_SOCKTYPE, -3011, "socket type not supported")                                            \
  XX(EALREADY, -EALREADY, "connection already in progress")                                       \
  XX(EBADF, -EBADF, "bad file descriptor")                                                        \
  XX(EBUSY, -EBUSY, "resource busy or locked")                                                    \
  XX(ECANCELED, -ECANCELED, "operation canceled")                                                 \
  XX(ECHARSET, -4080, "invalid Unicode character")                                                \
  XX(ECONNABORTED, -ECONNABORTED, "software caused connection abort")                             \
  XX(ECONNREFUSED, -ECONNREFUSED, "connection refused")                                           \
  XX(ECONNRESET, -ECONNRESET, "connection reset by peer")                                         \
  XX(EDESTADDRREQ, -EDESTADDRREQ, "destination address required")                                 \
  XX(EEXIST, -EEXIST, "file already exists")                                                      \
  XX(EFAULT, -EFAULT, "bad address in system call argument")                                      \
  XX(EFBIG, -EFBIG, "file too large")                                                             \
  XX(EHOSTUNREACH, -EHOSTUNREACH, "host is unreachable")                                          \
  XX(EINTR, -EINTR, "interrupted system call")                                                    \
  XX(EINVAL, -EINVAL, "invalid argument")                                                         \
  XX(EIO, -EIO, "i/o error")                                                                      \
  XX(EISCONN, -EISCONN, "socket is already connected")                                            \
  XX(EISDIR, -EISDIR, "illegal operation on a directory")                                         \
  XX(ELOOP, -ELOOP, "too many symbolic links encountered")                                        \
  XX(EMFILE, -EMFILE, "too many open files")                                                      \
  XX(EMSGSIZE, -EMSGSIZE, "message too long")                                                     \
  XX(ENAMETOOLONG, -ENAMETOOLONG, "name too long")                                                \
  XX(ENETDOWN, -ENETDOWN, "network is down")                                                      \
  XX(ENETUNREACH, -ENETUNREACH, "network is unreachable")                                         \
  XX(ENFILE, -ENFILE, "file table overflow")                                                      \
  XX(ENOBUFS, -ENOBUFS, "no buffer space available")                                              \
  XX(ENODEV, -ENODEV, "no such device")                                                           \
  XX(ENOENT, -ENOENT, "no such file or directory")                                                \
  XX(ENOMEM, -ENOMEM, "not enough memory")                                                        \
  XX(ENONET, -ENONET, "machine is not on the network")                                            \
  XX(ENOPROTOOPT, -ENOPROTOOPT, "protocol not available")                                         \
  XX(ENOSPC, -ENOSPC, "no space left on device")                                                  \
  XX(ENOSYS, -ENOSYS, "function not implemented")                                                 \
  XX(ENOTCONN, -ENOTCONN, "socket is not connected")                                              \
  XX(ENOTDIR, -ENOTDIR, "not a directory")                                                        \
  XX(ENOTEMPTY, -ENOTEMPTY, "directory not empty")                                                \
  XX(ENOTSOCK, -ENOTSOCK, "socket operation on non-socket")                                       \
  XX(ENOTSUP, -ENOTSUP, "operation not supported on socket")                                      \
  XX(EOVERFLOW, -EOVERFLOW, "value too large for defined data type")                              \
  XX(EPERM, -EPERM, "operation not permitted")                                                    \
  XX(EPIPE, -EPIPE, "broken pipe")                                                                \
  XX(EPROTO, -EPROTO, "protocol error")                                                           \
  XX(EPROTONOSUPPORT, -EPROTONOSUPPORT, "protocol not supported")                                 \
  XX(EPROTOTYPE, -EPROTOTYPE, "protocol wrong type for socket")                                   \
  XX(ERANGE, -ERANGE, "result too large")                                                         \
  XX(EROFS, -EROFS, "read-only file system")                                                      \
  XX(ESHUTDOWN, -ESHUTDOWN, "cannot send after transport endpoint shutdown")                      \
  XX(ESPIPE, -ESPIPE, "invalid seek")                                                             \
  XX(ESRCH, -ESRCH, "no such process")                                                            \
  XX(ETIMEDOUT, -ETIMEDOUT, "connection timed out")                                               \
  XX(ETXTBSY, -ETXTBSY, "text file is busy")                                                      \
  XX(EXDEV, -EXDEV, "cross-device link not permitted")                                            \
  XX(UNKNOWN, -4094, "unknown error")                                                             \
  XX(EOF, -4095, "end of file")                                                                   \
  XX(ENXIO, -ENXIO, "no such device or address")                                                  \
  XX(EMLINK, -EMLINK, "too many links")                                                           \
  XX(EHOSTDOWN, -EHOSTDOWN, "host is down")                                                       \
  XX(EREMOTEIO, -EREMOTEIO, "remote I/O error")                                                   \
  XX(ENOTTY, -ENOTTY, "inappropriate ioctl for device")                                           \
  XX(EFTYPE, -4028, "inappropriate file type or format")                                          \
  XX(EILSEQ, -EILSEQ, "illegal byte sequence")                                                    \
  XX(ESOCKTNOSUPPORT, -ESOCKTNOSUPPORT, "socket type not supported")                              \
  XX(ENODATA, -ENODATA, "no data available")                                                      \
  XX(EUNATCH, -EUNATCH, "protocol driver not attached")                                           \
  XX(ENOEXEC, -ENOEXEC, "exec format error")

typedef struct err_entry {
  int code;
  const char *name, *text;
} err_entry_t;

#define CUV__ERR_ENTRY(name, value, text) {CUV_##name, "CUV_" #name, text},
static const err_entry_t cuv_codes[] = {CUV_ERRNO_MAP(CUV__ERR_ENTRY)};
#undef CUV__ERR_ENTRY
#define CUV__UV_ENTRY(name, value, text) {value, "UV_" #name, text},
static const err_entry_t uv_codes[] = {CUV__UV_ERRNO_MAP(CUV__UV_ENTRY)};
#undef CUV__UV_ENTRY

/* cuv's name where cuv has one (CUV_EINVAL, not UV_EINVAL), else libuv's; NULL when unknown. */
static const err_entry_t *find_code(int status) {
  for (size_t i = 0; i < CUV__COUNT_OF(cuv_codes); i++)
    if (cuv_codes[i].code == status)
      return &cuv_codes[i];
  for (size_t i = 0; i < CUV__COUNT_OF(uv_codes); i++)
    if (uv_codes[i].code == status)
      return &uv_codes[i];
  return NULL;
}

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

CUV_EXTERN int cuv_nccl_result(int status) {
  return CUV_IS_ENCCL(status) ? CUV_ENCCL_BASE - status : 0;
}

/* ncclResult_t's names (nccl.h's) and what each means, by value (internal/nccl_funcs.h). */
static const err_entry_t nccl_codes[] = {
    {CUV__NCCL_UNHANDLED_CUDA_ERROR, "ncclUnhandledCudaError", "NCCL: a CUDA call failed"},
    {CUV__NCCL_SYSTEM_ERROR, "ncclSystemError", "NCCL: a system or network call failed"},
    {CUV__NCCL_INTERNAL_ERROR, "ncclInternalError", "NCCL: internal error"},
    {CUV__NCCL_INVALID_ARGUMENT, "ncclInvalidArgument", "NCCL: invalid argument"},
    {CUV__NCCL_INVALID_USAGE, "ncclInvalidUsage", "NCCL: invalid usage"},
    {CUV__NCCL_REMOTE_ERROR, "ncclRemoteError", "NCCL: a remote rank failed or left"},
    {CUV__NCCL_IN_PROGRESS, "ncclInProgress", "NCCL: operation still in progress"},
};

static const char *nccl_text(int status, int want_name) {
  int result = cuv_nccl_result(status);
  for (size_t i = 0; i < CUV__COUNT_OF(nccl_codes); i++)
    if (nccl_codes[i].code == result)
      return want_name ? nccl_codes[i].name : nccl_codes[i].text;
  return want_name ? "ncclUnknownResult" : "NCCL call failed";
}

CUV_EXTERN const char *cuv_strerror(int status) {
  if (status == 0)
    return "success";
  if (CUV_IS_ECUDA(status))
    return cuda_text(status, 0);
  if (CUV_IS_ENCCL(status))
    return nccl_text(status, 0);
  const err_entry_t *e = find_code(status);
  return e ? e->text : "unknown error";
}

CUV_EXTERN const char *cuv_err_name(int status) {
  if (status == 0)
    return "CUV_OK";
  if (CUV_IS_ECUDA(status))
    return cuda_text(status, 1);
  if (CUV_IS_ENCCL(status))
    return nccl_text(status, 1);
  const err_entry_t *e = find_code(status);
  return e ? e->name : "CUV_EUNKNOWN";
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
