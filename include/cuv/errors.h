#ifndef CUV_ERRORS_H
#define CUV_ERRORS_H

/* Every cuv function that can fail returns 0 or a negative code. One table, CUV_ERRNO_MAP,
 * generates the enum, cuv_strerror and cuv_err_name: it is the one place to add a code.
 *
 * A failure of a CUDA driver call keeps its CUresult: the status is CUV_ECUDA(result), a value at
 * or below CUV_ECUDA_BASE. cuv_cuda_result() gives the CUresult back, and cuv_strerror /
 * cuv_err_name describe it with the driver's own words (CUDA_ERROR_ILLEGAL_ADDRESS, ...). */

#define CUV_ERRNO_MAP(XX)                                                                        \
  XX(EINVAL, -1, "invalid argument")                                                             \
  XX(ENOMEM, -2, "out of memory")                                                                \
  XX(ENODRIVER, -3, "no CUDA driver could be loaded: is there a GPU? set CUV_DRIVER=sim to run "  \
                    "on the CPU simulator")                                                      \
  XX(EDRIVER, -4, "the CUDA driver lacks an entry point cuv needs (driver too old?)")            \
  XX(ENODEV, -5, "no such device")                                                               \
  XX(ECONSUMED, -6, "operation already consumed by a combinator or executor")                   \
  XX(EREENTRANT, -7, "cannot execute an operation from inside a then callback (execution lock)") \
  XX(ECONFLICT, -8, "conflicting access to a buffer in flight on another stream (strict mode)")  \
  XX(ECANCELED, -9, "operation canceled")                                                        \
  XX(ECLOSED, -10, "queue or bridge is closed")                                                  \
  XX(EBUSY, -11, "object still has work in flight")                                              \
  XX(ENOTFOUND, -12, "no such kernel in the module")                                             \
  XX(EARGS, -13, "kernel arguments do not match the kernel's parameters")                         \
  XX(ERANGE, -14, "offset or size outside the buffer")                                           \
  XX(EDEVICE, -15, "objects of different devices used together")                                \
  XX(ENOTSUP, -16, "not supported by this driver")                                               \
  XX(ELOST, -17, "object belongs to a device context that was reset")                            \
  XX(EIO, -18, "cannot read file")                                                               \
  XX(ETHREAD, -19, "cannot start a thread")                                                      \
  XX(ENOENT, -20, "no such submission: unknown ticket, or its callback already ran")

typedef enum {
#define CUV__ERR_ENUM(name, value, text) CUV_##name = (value),
  CUV_ERRNO_MAP(CUV__ERR_ENUM)
#undef CUV__ERR_ENUM
  CUV_ECUDA_BASE = -10000
} cuv_errno_t;

/* A CUDA driver failure: CUV_ECUDA(CUDA_ERROR_ILLEGAL_ADDRESS) == -10700. */
#define CUV_ECUDA(cu_result) (CUV_ECUDA_BASE - (int)(cu_result))
#define CUV_IS_ECUDA(status) ((status) <= CUV_ECUDA_BASE)

#endif
