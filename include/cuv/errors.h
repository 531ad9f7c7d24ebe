#ifndef CUV_ERRORS_H
#define CUV_ERRORS_H

/** @file
 * Every cuv function that can fail returns 0 or a negative code, and the codes are libuv's: a
 * program that already handles libuv's errors handles cuv's, and libuv's errors pass through cuv
 * unchanged. One table, CUV_ERRNO_MAP, generates the enum, cuv_strerror and cuv_err_name: it is
 * the one place to add a code. Three ranges that never overlap:
 *
 *  - a code with a POSIX meaning is libuv's (negative errno, as uv.h defines them on Linux):
 *    CUV_EINVAL == UV_EINVAL == -EINVAL. Its text is libuv's (cuv_strerror(UV_EPIPE) is
 *    uv_strerror's "broken pipe"), and cuv_strerror names libuv's other codes too (UV_EOF ...);
 *  - cuv's own codes, those with no POSIX meaning, are -9001 to -9099: below every libuv code
 *    (libuv's lowest is UV_EOF, -4095) and above the NCCL and CUDA ranges;
 *  - a failure of a NCCL call (include/cuv/collective.h) keeps its ncclResult_t: the status is
 *    CUV_ENCCL(result), from -9101 to -9199; cuv_nccl_result() gives the ncclResult_t back, and
 *    cuv_err_name names it as nccl.h does (ncclRemoteError, ...);
 *  - a failure of a CUDA driver call keeps its CUresult: the status is CUV_ECUDA(result), a value
 *    at or below CUV_ECUDA_BASE. cuv_cuda_result() gives the CUresult back, and cuv_strerror /
 *    cuv_err_name describe it with the driver's own words (CUDA_ERROR_ILLEGAL_ADDRESS, ...).
 *
 * The codes of CUV_ERRNO_MAP, each CUV_<name> in cuv_errno_t (keep this table in step):
 *
 * | Code           | Value      | Meaning (cuv_strerror gives the full text)                   |
 * |----------------|------------|--------------------------------------------------------------|
 * | CUV_EINVAL     | -EINVAL    | invalid argument: a bad argument or configuration            |
 * | CUV_ENOMEM     | -ENOMEM    | not enough memory: host memory                               |
 * | CUV_ENODEV     | -ENODEV    | no such device: a device ordinal out of range                |
 * | CUV_ECANCELED  | -ECANCELED | operation canceled: cuv_cancel, a close                      |
 * | CUV_EBUSY      | -EBUSY     | resource busy or locked: work in flight; init done           |
 * | CUV_ERANGE     | -ERANGE    | result too large: offset or size outside a buffer            |
 * | CUV_ENOTSUP    | -ENOTSUP   | operation not supported on socket: not by this driver       |
 * | CUV_EIO        | -EIO       | i/o error: a file cannot be read                             |
 * | CUV_ENOENT     | -ENOENT    | no such file or directory: an unknown or finished ticket     |
 * | CUV_ETIMEDOUT  | -ETIMEDOUT | connection timed out: a collective outlived its timeout      |
 * | CUV_ENODRIVER  | -9001      | no CUDA driver could be loaded (cuv_init_error says why)     |
 * | CUV_EDRIVER    | -9002      | the CUDA driver lacks an entry point cuv needs (too old?)    |
 * | CUV_ECONSUMED  | -9003      | operation already consumed by a combinator or executor       |
 * | CUV_EREENTRANT | -9004      | an op executed inside a then callback (execution lock)       |
 * | CUV_ECONFLICT  | -9005      | conflicting access to a buffer in flight elsewhere (strict)  |
 * | CUV_ECLOSED    | -9006      | queue or bridge is closed                                    |
 * | CUV_ENOTFOUND  | -9007      | no such kernel in the module                                 |
 * | CUV_EARGS      | -9008      | kernel arguments do not match the kernel's parameters        |
 * | CUV_EDEVICE    | -9009      | objects of different devices used together                   |
 * | CUV_ETHREAD    | -9010      | cannot start a thread                                        |
 * | CUV_ENONCCL    | -9011      | no usable NCCL library (collectives need NCCL 2.19 or later) |
 * | CUV_EOVERLAP   | -9012      | an op's written bytes overlap another of its accesses        |
 */

#include <errno.h>

/** The table of codes, XX(name, value, text): it generates the enum, cuv_strerror and
 * cuv_err_name. The comment after a libuv code says what it means from cuv. */
#define CUV_ERRNO_MAP(XX)                                                                        \
  XX(EINVAL, -EINVAL, "invalid argument")                 /* a bad argument or configuration */ \
  XX(ENOMEM, -ENOMEM, "not enough memory")                /* host memory */                     \
  XX(ENODEV, -ENODEV, "no such device")                   /* a device ordinal out of range */   \
  XX(ECANCELED, -ECANCELED, "operation canceled")         /* cuv_cancel, a close */             \
  XX(EBUSY, -EBUSY, "resource busy or locked")            /* work in flight; init done */       \
  XX(ERANGE, -ERANGE, "result too large")                 /* offset or size outside a buffer */ \
  XX(ENOTSUP, -ENOTSUP, "operation not supported on socket") /* not by this driver */           \
  XX(EIO, -EIO, "i/o error")                              /* a file cannot be read */           \
  XX(ENOENT, -ENOENT, "no such file or directory")        /* an unknown or finished ticket */   \
  XX(ETIMEDOUT, -ETIMEDOUT, "connection timed out")       /* cuv_comm_set_timeout */            \
  XX(ENODRIVER, -9001, "no CUDA driver could be loaded (cuv_init_error says which and why): is "  \
                       "there a GPU? set CUV_DRIVER=sim to run on the CPU simulator")            \
  XX(EDRIVER, -9002, "the CUDA driver lacks an entry point cuv needs (driver too old?)")         \
  XX(ECONSUMED, -9003, "operation already consumed by a combinator or executor")                 \
  XX(EREENTRANT, -9004, "cannot execute an operation from inside a then callback (execution "     \
                        "lock)")                                                                 \
  XX(ECONFLICT, -9005, "conflicting access to a buffer in flight on another stream (strict "     \
                       "mode)")                                                                  \
  XX(ECLOSED, -9006, "queue or bridge is closed")                                                \
  XX(ENOTFOUND, -9007, "no such kernel in the module")                                           \
  XX(EARGS, -9008, "kernel arguments do not match the kernel's parameters")                      \
  XX(EDEVICE, -9009, "objects of different devices used together")                              \
  XX(ETHREAD, -9010, "cannot start a thread")                                                    \
  XX(ENONCCL, -9011, "no usable NCCL library (cuv_nccl_error says which and why): collectives "  \
                     "need NCCL 2.19 or later")                                                  \
  XX(EOVERLAP, -9012, "the bytes an op writes overlap another of its accesses (unique storage: "  \
                      "a copy's source and destination, a custom op's declared accesses)")

/** The error codes: 0 or a negative value, see this file's description for the ranges. */
typedef enum {
/** @cond INTERNAL */
#define CUV__ERR_ENUM(name, value, text) CUV_##name = (value),
/** @endcond */
  CUV_ERRNO_MAP(CUV__ERR_ENUM)
#undef CUV__ERR_ENUM
  /** Base of the NCCL range: CUV_ENCCL(result) is CUV_ENCCL_BASE - result. */
  CUV_ENCCL_BASE = -9100,
  /** Base of the CUDA range: CUV_ECUDA(result) is CUV_ECUDA_BASE - result. */
  CUV_ECUDA_BASE = -10000
} cuv_errno_t;

/** A CUDA driver failure: CUV_ECUDA(CUDA_ERROR_ILLEGAL_ADDRESS) == -10700. */
#define CUV_ECUDA(cu_result) (CUV_ECUDA_BASE - (int)(cu_result))
/** Nonzero when status is a CUDA driver failure (CUV_ECUDA). */
#define CUV_IS_ECUDA(status) ((status) <= CUV_ECUDA_BASE)

/** A NCCL failure: CUV_ENCCL(ncclRemoteError) == -9106. */
#define CUV_ENCCL(nccl_result) (CUV_ENCCL_BASE - (int)(nccl_result))
/** Nonzero when status is a NCCL failure (CUV_ENCCL). */
#define CUV_IS_ENCCL(status) ((status) < CUV_ENCCL_BASE && (status) > CUV_ENCCL_BASE - 100)

#endif
