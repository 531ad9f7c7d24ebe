#ifndef CUV_TENSOR_H
#define CUV_TENSOR_H

/** @file
 * Typed tensors: an element type, a shape and strides over a cuv buffer (docs/tensors.md).
 *
 * A tensor is a view: it holds a reference on its buffer, and the buffer's memory lives while any
 * tensor, buffer reference or submission holds it. Tensors are reference counted like buffers
 * (cuv_tensor_ref, cuv_tensor_unref) and immutable once made, so they may be shared between
 * threads. Strides are in elements, row-major by default (the last dimension is contiguous).
 *
 * The lazy constructors (cuv_tensor_zeros, cuv_tensor_ones, cuv_tensor_dup) are ops whose output
 * is a new tensor (cuv_output_tensor). A partition (cuv_partition_t) splits a tensor into tiles of
 * one shape; tensors and partitions are kernel arguments of cuv_tensor_launch with an access
 * mode, and two writable ones that share elements are refused there. Include it after or
 * instead of cuv.h (it includes cuv.h). */

#include <cuv.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The most dimensions a tensor has. */
#define CUV_TENSOR_MAX_DIMS 8

/** A tensor's element type. */
typedef enum cuv_dtype {
  CUV_DTYPE_F32,  /**< float */
  CUV_DTYPE_F64,  /**< double */
  CUV_DTYPE_F16,  /**< __half, by its bits (cuv_half_t) */
  CUV_DTYPE_BF16, /**< __nv_bfloat16, by its bits (cuv_bfloat16_t) */
  CUV_DTYPE_I8,   /**< int8_t */
  CUV_DTYPE_U8,   /**< uint8_t */
  CUV_DTYPE_I32,  /**< int32_t */
  CUV_DTYPE_U32,  /**< uint32_t */
  CUV_DTYPE_I64,  /**< int64_t */
  CUV_DTYPE_U64,  /**< uint64_t */
  CUV_DTYPE_COUNT /**< The number of element types (not a type). */
} cuv_dtype_t;

/** A typed view of a buffer: reference counted, immutable. */
typedef struct cuv_tensor_s cuv_tensor_t;

/** The size of one element of `dtype`, in bytes.
 *
 * @returns The size, or 0 when dtype is not a cuv_dtype_t.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_dtype_size(cuv_dtype_t dtype);

/** A contiguous row-major tensor of `shape` over buf, from `offset` bytes into it.
 *
 * @returns 0, and *out holds the caller's first reference.
 * @errors CUV_EINVAL: out, buf or shape is NULL, ndim is 0 or past CUV_TENSOR_MAX_DIMS, dtype is
 *         unknown, a dimension is 0, the element count overflows, or offset is not a multiple of
 *         the element size.
 *         CUV_ERANGE: the elements reach past the buffer's end.
 *         CUV_ENOMEM: no memory for the tensor.
 * @threads Any thread.
 * @notes The tensor holds a reference on buf until its last unref.
 */
CUV_EXTERN int cuv_tensor_create(cuv_tensor_t **out, cuv_buffer_t *buf, size_t offset,
                                 cuv_dtype_t dtype, const size_t *shape, size_t ndim);
/** A tensor over buf with explicit strides, in elements, from `offset` bytes into it.
 *
 * @returns 0, and *out holds the caller's first reference.
 * @errors The codes of cuv_tensor_create; also CUV_EINVAL when strides is NULL or a stride is 0.
 * @threads Any thread.
 * @notes Strides may make elements share storage (a broadcast); such a tensor is never writable
 *        in cuv_tensor_launch (CUV_EARGS).
 */
CUV_EXTERN int cuv_tensor_create_strided(cuv_tensor_t **out, cuv_buffer_t *buf, size_t offset,
                                         cuv_dtype_t dtype, const size_t *shape,
                                         const size_t *strides, size_t ndim);
/** Takes one more reference on t.
 *
 * @returns t, or NULL when t is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_tensor_t *cuv_tensor_ref(cuv_tensor_t *t);
/** Drops a reference; the last one drops the tensor's reference on its buffer. NULL is ignored.
 *
 * @threads Any thread.
 */
CUV_EXTERN void cuv_tensor_unref(cuv_tensor_t *t);

/** The tensor's element type.
 *
 * @returns The type, or CUV_DTYPE_COUNT when t is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_dtype_t cuv_tensor_dtype(const cuv_tensor_t *t);
/** The tensor's number of dimensions.
 *
 * @returns The count, or 0 when t is NULL.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_tensor_ndim(const cuv_tensor_t *t);
/** The extent of dimension `dim`.
 *
 * @returns The extent, or 0 when t is NULL or dim is not below its ndim.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_tensor_shape(const cuv_tensor_t *t, size_t dim);
/** The stride of dimension `dim`, in elements.
 *
 * @returns The stride, or 0 when t is NULL or dim is not below its ndim.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_tensor_stride(const cuv_tensor_t *t, size_t dim);
/** The tensor's element count (the product of its shape).
 *
 * @returns The count, or 0 when t is NULL.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_tensor_numel(const cuv_tensor_t *t);
/** The tensor's size in bytes when contiguous: numel times the element size.
 *
 * @returns The size, or 0 when t is NULL.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_tensor_bytes(const cuv_tensor_t *t);
/** Whether the tensor is contiguous and row-major (no gaps, the last dimension's stride 1).
 *
 * @returns true or false; false when t is NULL.
 * @threads Any thread.
 */
CUV_EXTERN bool cuv_tensor_is_contiguous(const cuv_tensor_t *t);
/** The tensor's buffer.
 *
 * @returns The buffer (borrowed: it lives as long as the tensor), or NULL when t is NULL.
 * @threads Any thread.
 */
CUV_EXTERN cuv_buffer_t *cuv_tensor_buffer(const cuv_tensor_t *t);
/** Where the tensor's first element lies in its buffer, in bytes.
 *
 * @returns The offset, or 0 when t is NULL.
 * @threads Any thread.
 */
CUV_EXTERN size_t cuv_tensor_offset(const cuv_tensor_t *t);
/** The device address of the tensor's first element (its buffer's address plus offset).
 *
 * @returns The address, or 0 when t is NULL.
 * @threads Any thread.
 * @notes Valid while the tensor is referenced.
 */
CUV_EXTERN cuv_deviceptr_t cuv_tensor_ptr(const cuv_tensor_t *t);

/** The same elements in another shape: a new view sharing t's buffer, no GPU work.
 *
 * @returns 0, and *out holds the caller's first reference.
 * @errors CUV_EINVAL: out, t or shape is NULL, ndim is 0 or past CUV_TENSOR_MAX_DIMS, a
 *         dimension is 0, or the element count differs from t's.
 *         CUV_ENOTSUP: t is not contiguous (cuv_tensor_is_contiguous): copy it first
 *         (cuv_tensor_dup).
 *         CUV_ENOMEM: no memory for the tensor.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_tensor_reshape(cuv_tensor_t **out, const cuv_tensor_t *t, const size_t *shape,
                                  size_t ndim);
/** The sub-tensor of `shape` that starts at index `start` of t: the same strides, no copy.
 *
 * @returns 0, and *out holds the caller's first reference.
 * @errors CUV_EINVAL: out, t, start or shape is NULL, ndim differs from t's, or a dimension of
 *         shape is 0.
 *         CUV_ERANGE: start + shape passes t's extent in a dimension.
 *         CUV_ENOMEM: no memory for the tensor.
 * @threads Any thread.
 * @notes Sub-tensors of one tensor keep their place in it, so cuv_tensor_launch tells exactly
 *        whether two of them share elements.
 */
CUV_EXTERN int cuv_tensor_slice(cuv_tensor_t **out, const cuv_tensor_t *t, const size_t *start,
                                const size_t *shape, size_t ndim);

/* ---- lazy ops producing tensors ---------------------------------------------------------- */

/* Each allocates a buffer on the executing stream (stream-ordered, as cuv_alloc), fills it there,
 * and outputs a contiguous tensor over it (cuv_output_tensor). Like cuv_alloc, not inside a graph
 * capture. Executed on a stream of another device: CUV_EDEVICE. */
/** A new tensor of `shape` whose elements are zero.
 *
 * @returns A new op, never NULL, whose output is the tensor; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dev or shape is NULL, ndim is 0 or past CUV_TENSOR_MAX_DIMS, dtype is
 *         unknown, a dimension is 0, or the byte count overflows.
 *         CUV_ENOMEM: no memory for the op, the buffer or the tensor.
 *         CUV_EDEVICE: executed on a stream of another device.
 *         A driver error when the allocation or the set fails.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_tensor_zeros(cuv_device_t *dev, cuv_dtype_t dtype, const size_t *shape,
                                      size_t ndim);
/** A new tensor of `shape` whose elements are one in their type (1.0 for the float types).
 *
 * @returns A new op, never NULL, whose output is the tensor; a failure is carried by the op
 *          (cuv_op_error).
 * @errors The codes of cuv_tensor_zeros.
 * @threads Any thread.
 * @notes 8-byte types are filled by a staged copy of host-built ones, the others by a memset.
 */
CUV_EXTERN cuv_op_t *cuv_tensor_ones(cuv_device_t *dev, cuv_dtype_t dtype, const size_t *shape,
                                     size_t ndim);
/** A new contiguous tensor holding a copy of t's elements, of t's shape.
 *
 * t is read on the executing stream, ordered after writers of its buffer on other streams.
 *
 * @returns A new op, never NULL, whose output is the tensor; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: t is NULL.
 *         CUV_ENOTSUP: t is not contiguous.
 *         CUV_ENOMEM: no memory for the op, the buffer or the tensor.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, or the driver's error.
 * @threads Any thread.
 * @notes The op holds a reference on t until the copy is proven complete.
 */
CUV_EXTERN cuv_op_t *cuv_tensor_dup(cuv_tensor_t *t);
/** Copies t's elements into new pinned host memory (cuv_download of its bytes).
 *
 * @returns A new op, never NULL, whose output is a pointer to cuv_tensor_bytes(t) bytes in
 *          row-major order (valid after completion), released with the output; a failure is
 *          carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: t is NULL.
 *         CUV_ENOTSUP: t is not contiguous.
 *         CUV_ENOMEM: no memory for the op, or no pinned memory at execution.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, or the driver's error.
 * @threads Any thread.
 */
CUV_EXTERN cuv_op_t *cuv_tensor_to_host(cuv_tensor_t *t);
/** Copies t's elements into the host memory at dst (cuv_memcpy_dtoh): `bytes` must be
 * cuv_tensor_bytes(t).
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: dst or t is NULL, or bytes differs from cuv_tensor_bytes(t).
 *         CUV_ENOTSUP: t is not contiguous.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: CUV_EDEVICE, CUV_ECONFLICT, or the driver's error.
 * @threads Any thread.
 * @notes dst is valid once the submission completed (cuv.h's ownership rule 5).
 */
CUV_EXTERN cuv_op_t *cuv_tensor_to_host_into(void *dst, size_t bytes, cuv_tensor_t *t);
/** The op's tensor output in another shape (cuv_tensor_reshape when it runs, on the host).
 *
 * @returns A new op, never NULL, whose output is the reshaped tensor; a failure is carried by the
 *          op (cuv_op_error).
 * @errors CUV_EINVAL: op or shape is NULL, or ndim is 0 or past CUV_TENSOR_MAX_DIMS.
 *         CUV_ECONSUMED: op is already held by another combinator.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: op's own error; CUV_EARGS when op's output is not a tensor; the codes
 *         of cuv_tensor_reshape.
 * @threads Any thread.
 * @notes Consumes op. The shape is copied.
 */
CUV_EXTERN cuv_op_t *cuv_tensor_reshape_op(cuv_op_t *op, const size_t *shape, size_t ndim);
/** The op's tensor output, checked to have element type `dtype` when it runs: the generated
 * launchers (KERNEL_launch_tensors) pass each CUV_IN_OP argument through it, so an op producing a
 * tensor of another type fails the launch as a tensor of that type does (CUV_EARGS).
 *
 * @returns A new op, never NULL, whose output is op's tensor; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: op is NULL, or dtype is not a cuv_dtype_t.
 *         CUV_ECONSUMED: op is already held by another combinator.
 *         CUV_ENOMEM: no memory for the op.
 *         At execution: op's own error; CUV_EARGS when op's output is not a tensor or its element
 *         type is not dtype (op's output is then released).
 * @threads Any thread builds it; the check runs where cuv_map's fn runs.
 * @notes Consumes op, also when it fails.
 */
CUV_EXTERN cuv_op_t *cuv_tensor_typed_op(cuv_op_t *op, cuv_dtype_t dtype);
/** The tensor an output holds (of cuv_tensor_zeros, _ones, _dup, _reshape_op, or a cuv_value
 * made with cuv_tensor_output_release).
 *
 * @returns The tensor (borrowed: it lives as long as the output, or take a reference), or NULL
 *          when out is NULL or holds none.
 * @threads Any thread.
 */
CUV_EXTERN cuv_tensor_t *cuv_output_tensor(const cuv_output_t *out);
/** The release function of a tensor output: cuv_value(cuv_tensor_ref(t),
 * cuv_tensor_output_release) is an op whose output cuv_output_tensor recognises.
 *
 * @threads Any thread.
 */
CUV_EXTERN void cuv_tensor_output_release(void *tensor);

/* ---- partitions and launches -------------------------------------------------------------- */

/** A tensor split into tiles of one shape. Made by cuv_tensor_partition, which takes a reference
 * on the tensor; cuv_partition_release drops it. */
typedef struct cuv_partition {
  cuv_tensor_t *tensor;              /**< The tensor split (the partition's reference). */
  size_t tile[CUV_TENSOR_MAX_DIMS];  /**< The tile's extent in each dimension. */
  size_t tiles[CUV_TENSOR_MAX_DIMS]; /**< The number of tiles along each dimension. */
  cuv_launch_config_t config;        /**< What cuv_partition_launch_config returns. */
} cuv_partition_t;

/** Splits t into tiles of `tile` (one extent per dimension, each dividing t's).
 *
 * @returns 0, and *out holds a reference on t.
 * @errors CUV_EINVAL: out, t or tile is NULL, ndim differs from t's, an extent is 0 or does not
 *         divide t's extent in its dimension.
 * @threads Any thread.
 */
CUV_EXTERN int cuv_tensor_partition(cuv_partition_t *out, cuv_tensor_t *t, const size_t *tile,
                                    size_t ndim);
/** Drops the partition's reference on its tensor and clears it; NULL and a cleared partition are
 * ignored.
 *
 * @threads Any thread.
 */
CUV_EXTERN void cuv_partition_release(cuv_partition_t *part);
/** One block per tile, one thread per tile element: the grid counts the tiles and the block is
 * the tile, the last dimension in x, the one before in y, the product of the others in z.
 *
 * @returns The configuration; grid and block of 0 when part is NULL or cleared, or when a count
 *          passes what a grid or block dimension holds (a launch with it fails with CUV_EINVAL).
 * @threads Any thread; it only computes.
 */
CUV_EXTERN cuv_launch_config_t cuv_partition_launch_config(const cuv_partition_t *part);

/** What a cuv_tensor_launch argument is. */
enum cuv_targ_kind {
  CUV_TARG_SCALAR,    /**< A value, as CUV_ARG_SCALAR. */
  CUV_TARG_TENSOR,    /**< A tensor: the kernel receives its first element's address. */
  CUV_TARG_PARTITION, /**< A partition: the kernel receives its tensor's first element's address
                         and finds its tile from blockIdx (cuv_partition_launch_config). */
  CUV_TARG_LAZY,      /**< An op whose output is a tensor (cuv_output_tensor): it runs first, and
                         its tensor is the argument. */
};

/** One argument of cuv_tensor_launch; build it with the CUV_TARG_* macros. */
typedef struct cuv_targ {
  enum cuv_targ_kind kind;          /**< Scalar, tensor or partition. */
  enum cuv_arg_kind access;         /**< Tensors and partitions: READ, WRITE or RW. */
  const cuv_tensor_t *tensor;       /**< CUV_TARG_TENSOR: the tensor. */
  const cuv_partition_t *partition; /**< CUV_TARG_PARTITION: the partition. */
  const void *scalar;               /**< CUV_TARG_SCALAR: the value, `size` bytes. */
  size_t size;                      /**< CUV_TARG_SCALAR: the value's size. */
  cuv_op_t *op;                     /**< CUV_TARG_LAZY: the op, consumed by cuv_tensor_launch. */
} cuv_targ_t;

/** A tensor the kernel reads. */
#define CUV_TARG_READ(t)                                                                           \
  ((cuv_targ_t){CUV_TARG_TENSOR, CUV_ARG_KIND_READ, (t), NULL, NULL, 0, NULL})
/** A tensor the kernel writes. */
#define CUV_TARG_WRITE(t)                                                                          \
  ((cuv_targ_t){CUV_TARG_TENSOR, CUV_ARG_KIND_WRITE, (t), NULL, NULL, 0, NULL})
/** A tensor the kernel reads and writes. */
#define CUV_TARG_RW(t) ((cuv_targ_t){CUV_TARG_TENSOR, CUV_ARG_KIND_RW, (t), NULL, NULL, 0, NULL})
/** A partition the kernel accesses as `access` (CUV_ARG_KIND_READ, _WRITE or _RW). */
#define CUV_TARG_PART(p, access)                                                                   \
  ((cuv_targ_t){CUV_TARG_PARTITION, (access), NULL, (p), NULL, 0, NULL})
/** An op producing a tensor, as an argument the kernel accesses as `access`: the launch runs it
 * first, in argument order, on the launch's stream (see cuv_tensor_launch). */
#define CUV_TARG_OP(op, access) ((cuv_targ_t){CUV_TARG_LAZY, (access), NULL, NULL, NULL, 0, (op)})
/** A scalar: the value of `lvalue`, sizeof(lvalue) bytes, copied when the launch is built. */
#define CUV_TARG_VALUE(lvalue)                                                                     \
  ((cuv_targ_t){CUV_TARG_SCALAR, CUV_ARG_KIND_SCALAR, NULL, NULL, &(lvalue), sizeof(lvalue), NULL})

/** A tensor parameter of a launcher that cuv-launchers writes (KERNEL_launch_tensors): a tensor,
 * or an op producing one (consumed by the launcher). */
typedef struct cuv_tensor_in {
  const cuv_tensor_t *tensor; /**< The tensor, or NULL for an op. */
  cuv_op_t *op;               /**< The op whose output is the tensor, or NULL. */
} cuv_tensor_in_t;
/** A tensor as a generated launcher's tensor parameter. */
#define CUV_IN(t) ((cuv_tensor_in_t){(t), NULL})
/** An op producing a tensor as a generated launcher's tensor parameter (CUV_TARG_OP). */
#define CUV_IN_OP(op) ((cuv_tensor_in_t){NULL, (op)})

/** A kernel launch over tensors, partitions and scalars: cuv_launch with each tensor or partition
 * passed as its first element's address, after checking unique storage element by element.
 *
 * Two writable arguments (WRITE or RW) may not share an element: sub-tensors of one tensor
 * (cuv_tensor_slice) are compared by their index ranges, so disjoint tiles, rows or halves are
 * accepted however their bytes interleave; other views of one buffer are compared by the bytes
 * they span. A writable tensor whose strides let elements share storage is refused too. A read
 * may overlap a write, as in cuv_launch.
 *
 * Op arguments (CUV_TARG_OP): the ops run first, in argument order, on the launch's stream, and
 * the launch is built once they have run, from the tensors they output; scalars are copied and
 * tensors and partitions held until then. The launch's output is then the op's tensor (one op
 * argument) or a tuple of the tensors in argument order (several), as the seed's launchers give
 * back what they were given; the other checks happen then too, and fail the op.
 *
 * @returns A new op, never NULL, whose output is unit, or with op arguments their tensors; a
 *          failure is carried by the op (cuv_op_error).
 * @errors CUV_EINVAL: kernel is NULL, args is NULL with nargs > 0, an argument's kind or access
 *         is unknown, a tensor, partition or op argument has none, or a scalar has no value or
 *         size 0; and cuv_launch's own (a grid or block dimension 0).
 *         CUV_EARGS: also when an op argument's output is not a tensor (when it runs).
 *         CUV_EARGS: two writable arguments share an element, a writable tensor shares storage
 *         between its elements, or cuv_launch's checks against the kernel's parameters fail.
 *         CUV_ENOMEM: no memory for the argument list or the op.
 *         The other codes of cuv_launch (CUV_EDEVICE, a driver error).
 * @threads Any thread builds it; it executes as cuv_launch's op.
 * @notes Consumes every op argument, also when it fails. The op holds the tensors' buffers with
 *        their access until its submission retires, so the tensors and partitions may be
 *        released once it returns.
 */
CUV_EXTERN cuv_op_t *cuv_tensor_launch(cuv_kernel_t *kernel, cuv_launch_config_t config,
                                       const cuv_targ_t *args, size_t nargs);

/** Where cuv_tensor_launch_args puts one tensor: the index of its slot in args, the kernel's
 * access, and the element type the tensor must have. */
typedef struct cuv_tensor_slot {
  size_t index;             /**< The slot's index in args. */
  enum cuv_arg_kind access; /**< CUV_ARG_KIND_READ, _WRITE or _RW. */
  cuv_dtype_t dtype;        /**< The element type the tensor must have (CUV_EARGS otherwise). */
} cuv_tensor_slot_t;

/** cuv_tensor_launch with the cuv_arg_t array written by the caller, as the generated launchers
 * (KERNEL_launch_tensors) do: no cuv_targ_t array is built and lowered, only the tensors are.
 *
 * Tensor tensors[j] is written into args[slots[j].index] (what the caller left there is
 * overwritten) as an argument of access slots[j].access, after checking its element type is
 * slots[j].dtype. The other arguments are passed on as they are (scalars, which cuv_launch
 * checks). The checks are cuv_tensor_launch's: unique storage element by element between the
 * writable tensors, then cuv_launch's. No partitions (pass a partition's tensor with its
 * configuration, cuv_partition_launch_config) and no op arguments.
 *
 * @returns A new op, never NULL, whose output is unit; a failure is carried by the op
 *          (cuv_op_error).
 * @errors CUV_EINVAL: kernel is NULL, args is NULL with nargs > 0, tensors or slots is NULL with
 *         ntensors > 0, a slot's index is not below nargs or its access is CUV_ARG_KIND_SCALAR, or
 *         a tensor is NULL; and cuv_launch's own (an access that is no kind).
 *         CUV_EARGS: a tensor's element type is not its slot's; and as cuv_tensor_launch (shared
 *         elements, a writable tensor sharing storage, cuv_launch's checks against the kernel's
 *         parameters).
 *         CUV_ENOMEM: no memory for the op.
 * @threads Any thread builds it; it executes as cuv_launch's op.
 * @notes Writes the tensor slots of args. The op holds the tensors' buffers with their access
 *        until its submission retires.
 */
CUV_EXTERN cuv_op_t *cuv_tensor_launch_args(cuv_kernel_t *kernel, cuv_launch_config_t config,
                                            cuv_arg_t *args, size_t nargs,
                                            const cuv_tensor_t *const *tensors,
                                            const cuv_tensor_slot_t *slots, size_t ntensors);

#ifdef __cplusplus
}
#endif

#endif
