#ifndef CUV_NCCL_FUNCS_H
#define CUV_NCCL_FUNCS_H

/* Every NCCL entry point cuv uses, in one list, with the part of NCCL's ABI those need. cuv builds
 * without NCCL's headers and opens the library at run time (lib/nccl.c), so the types are declared
 * here under cuv's own names, each identical to NCCL's (tests/collectives/nccl-abi.c compares them with the
 * nccl.h it finds); libcuv-sim implements every entry of the list (sim/nccl.c).
 *
 * The list starts at NCCL 2.19, which lib/nccl.c requires: a non-blocking communicator
 * (ncclConfig_t's blocking = 0, polled with ncclCommGetAsyncError) and ncclCommFinalize. */

#include <cuda.h>
#include <limits.h>
#include <stddef.h>

typedef struct cuv__nccl_comm *cuv__nccl_comm_t; /* ncclComm_t */
typedef int cuv__nccl_result_t;                  /* ncclResult_t, an int-sized enum */

/* ncclResult_t's values. */
enum {
  CUV__NCCL_SUCCESS = 0,
  CUV__NCCL_UNHANDLED_CUDA_ERROR = 1,
  CUV__NCCL_SYSTEM_ERROR = 2,
  CUV__NCCL_INTERNAL_ERROR = 3,
  CUV__NCCL_INVALID_ARGUMENT = 4,
  CUV__NCCL_INVALID_USAGE = 5,
  CUV__NCCL_REMOTE_ERROR = 6,
  CUV__NCCL_IN_PROGRESS = 7,
};

/* ncclUniqueId: 128 opaque bytes, passed by value. */
typedef struct cuv__nccl_id {
  char internal[128];
} cuv__nccl_id_t;

/* ncclConfig_t as NCCL 2.19 lays it out. NCCL reads `size` bytes of it and takes its defaults for
 * the fields of later versions, so this prefix stays valid with newer libraries. */
typedef struct cuv__nccl_config {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
} cuv__nccl_config_t;

#define CUV__NCCL_CONFIG_MAGIC 0xcafebeefu
#define CUV__NCCL_CONFIG_VERSION 21900 /* NCCL_VERSION(2, 19, 0) */
#define CUV__NCCL_UNDEF_INT INT_MIN    /* NCCL_CONFIG_UNDEF_INT: NCCL's default */

/* A NCCL version code as ncclGetVersion gives it (NCCL_VERSION(X, Y, Z) for 2.9 and later). */
#define CUV__NCCL_VERSION(x, y, z) ((x) * 10000 + (y) * 100 + (z))
#define CUV__NCCL_VERSION_MIN CUV__NCCL_VERSION(2, 19, 0)

/* X(name, parameters): each returns a cuv__nccl_result_t. Data types and reductions travel as the
 * int values of NCCL's enums (cuv_nccl_type_t and cuv_nccl_redop_t, include/cuv/collective.h);
 * a cudaStream_t is a CUstream. */
#define CUV__NCCL_FUNCS(X)                                                                        \
  X(ncclGetVersion, (int *version))                                                               \
  X(ncclGetUniqueId, (cuv__nccl_id_t * id))                                                       \
  X(ncclCommInitRankConfig, (cuv__nccl_comm_t * comm, int nranks, cuv__nccl_id_t id, int rank,   \
                             cuv__nccl_config_t *config))                                         \
  X(ncclCommGetAsyncError, (cuv__nccl_comm_t comm, cuv__nccl_result_t * error))                   \
  X(ncclCommFinalize, (cuv__nccl_comm_t comm))                                                    \
  X(ncclCommDestroy, (cuv__nccl_comm_t comm))                                                     \
  X(ncclCommAbort, (cuv__nccl_comm_t comm))                                                       \
  X(ncclGroupStart, (void))                                                                       \
  X(ncclGroupEnd, (void))                                                                         \
  X(ncclAllReduce, (const void *send, void *recv, size_t count, int type, int op,                 \
                    cuv__nccl_comm_t comm, CUstream stream))                                      \
  X(ncclBroadcast, (const void *send, void *recv, size_t count, int type, int root,               \
                    cuv__nccl_comm_t comm, CUstream stream))                                      \
  X(ncclReduce, (const void *send, void *recv, size_t count, int type, int op, int root,          \
                 cuv__nccl_comm_t comm, CUstream stream))                                         \
  X(ncclAllGather, (const void *send, void *recv, size_t send_count, int type,                    \
                    cuv__nccl_comm_t comm, CUstream stream))                                      \
  X(ncclReduceScatter, (const void *send, void *recv, size_t recv_count, int type, int op,        \
                        cuv__nccl_comm_t comm, CUstream stream))                                  \
  X(ncclSend, (const void *send, size_t count, int type, int peer, cuv__nccl_comm_t comm,         \
               CUstream stream))                                                                  \
  X(ncclRecv, (void *recv, size_t count, int type, int peer, cuv__nccl_comm_t comm,               \
               CUstream stream))

/* Entry points of later versions, which cuv uses where the library has them (NULL in the table
 * where it does not): ncclCommShrink (2.27) makes the communicator of a group's survivors,
 * ncclCommRevoke (2.28) stops a communicator's work in flight and keeps it usable for a shrink. */
#define CUV__NCCL_OPTIONAL_FUNCS(X)                                                               \
  X(ncclCommShrink, (cuv__nccl_comm_t comm, int *exclude, int exclude_count,                      \
                     cuv__nccl_comm_t *newcomm, cuv__nccl_config_t *config, int flags))           \
  X(ncclCommRevoke, (cuv__nccl_comm_t comm, int flags))

/* ncclCommShrink's flags: the parent is healthy, or its work in flight is ended first. */
#define CUV__NCCL_SHRINK_DEFAULT 0
#define CUV__NCCL_SHRINK_ABORT 1
#define CUV__NCCL_REVOKE_DEFAULT 0

/* The table of entry points (lib/nccl.c fills one; the simulator hands out its functions). */
typedef struct cuv__nccl_funcs {
#define CUV__NCCL_MEMBER(name, params) cuv__nccl_result_t(*name) params;
  CUV__NCCL_FUNCS(CUV__NCCL_MEMBER)
  CUV__NCCL_OPTIONAL_FUNCS(CUV__NCCL_MEMBER)
#undef CUV__NCCL_MEMBER
} cuv__nccl_funcs_t;

#endif
