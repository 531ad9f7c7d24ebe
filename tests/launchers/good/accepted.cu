// What cuv-launchers accepts, and the C it writes for it (check-errors.py looks for each
// "expect:" text in the header and for no "absent:" text; the header must also compile).
// expect: static inline cuv_op_t *mark_launch_at(
// expect: CUV_ARG_READ_AT(in, in_offset), CUV_ARG_WRITE_AT(out, out_offset)
// expect: CUV_ARG_WRITE_AT(tail, tail_offset), CUV_ARG_RW_AT(both, both_offset)
// expect: CUV_ARG_READ_AT(cin, cin_offset)
// expect: cuv_dim3_t grid, cuv_half2_t h2, cuv_bfloat16_t bf, uint32_t u
// expect: CUV_ARG_RW_AT(arr, arr_offset), CUV_ARG_READ_AT(carr, carr_offset)
// expect: CUV_ARG_RW_AT(fp, fp_offset)
// expect: CUV_ARG_RW_AT(constant_fp, constant_fp_offset), CUV_ARG_READ_AT(cfp, cfp_offset)
// expect: const accepted_module_t *module_, cuv_launch_config_t config_,
// expect: cuv_buffer_t *x, size_t x_offset_, size_t x_offset
// expect: cuv_launch(module_->names, config_.grid, config_.block, config_.shared_bytes, args_
// expect: static inline cuv_op_t *nothing_launch(const accepted_module_t *module,
// expect: cuv_launch(module->nothing, config.grid, config.block, config.shared_bytes, NULL, 0)
// expect: cuv_kernel_t *in_namespace;
// expect: cuv_kernel_t *after_strings;
// expect: struct tagged t, union bits b, enum mode m
// absent: cxx_kernel
// absent: nested_cxx
// absent: device_helper
// absent: template_kernel
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

#include <cuv/kernel.h>

#include "accepted.h"

typedef float *fptr;
typedef const float *cfptr;

__global__ void cxx_kernel(float *x) {}
template <typename T> __global__ void template_kernel(T *x) {}
__device__ float device_helper(float x) { return x; }

extern "C" {
__global__ void mark(CUV_IN float *in, float *CUV_OUT out, float *tail, // cuv:out
                     float *both, const float *cin) {}
__global__ void types(dim3 grid, __half2 h2, __nv_bfloat16 bf, std::uint32_t u, float arr[],
                      const float carr[][4], fptr fp) {}
// A const before a pointer typedef makes the pointer const, not the floats.
__global__ void typedefs(const fptr constant_fp, cfptr cfp) {}
__global__ void names(unsigned module, float config, int args, float *x, size_t x_offset) {}
__global__ void nothing(void) {}
__global__ void tags(struct tagged t, union bits b, enum mode m) {}
extern "C++" {
__global__ void nested_cxx(float *x) {}
}
namespace inner {
__global__ void in_namespace(float *x) {}
}
__device__ int lexer_food(int c) {
  const char *s = "}{ /* not a comment */ ";
  const char *r = R"x(}{ )" )x";
  return c == '}' ? s[0] : r[1] + '{';
}
__global__ void after_strings(float *x) {}
}
