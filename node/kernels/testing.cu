// The package's own testing kernels, compiled to PTX at install and embedded (cuv.ptx.testing).
// Each has a host twin in src/twins.c with the same name and parameters, for libcuv-sim.
//
// cuv_node_gate: one thread waits until *flag is non-zero, or timeout_ns of the GPU's global timer
// passed, and adds 1 (opened) or 2 (timed out) to *state. Work that reads or writes `state` is
// ordered behind it by cuv's hazard tracking, whatever its stream, so a test holds work in flight
// for as long as it likes and lets it go by writing the flag (a buffer with hazard mode "none",
// written from another stream).
extern "C" __global__ void cuv_node_gate(unsigned long long timeout_ns, const unsigned *flag,
                                         unsigned *state) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const volatile unsigned *f = flag;
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    if (*f != 0u) {
      *state += 1u;
      return;
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < timeout_ns);
  *state += 2u;
}

// cuv_node_bump: *state += 4, then *trace = *state (one thread): work queued behind a gate,
// counted in `state` when it ran; `trace` is memory only it uses (a test drops its own reference
// and watches when the memory is freed).
extern "C" __global__ void cuv_node_bump(unsigned *state, unsigned *trace) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  *state += 4u;
  *trace = *state;
}

// cuv_node_echo: each scalar argument as 64 bits into out[0..9]: integers sign- or zero-extended,
// floats as their bit patterns (the f32 in the low half), so JavaScript can check every type's
// marshalling exactly.
extern "C" __global__ void cuv_node_echo(signed char i8, unsigned char u8, short i16,
                                         unsigned short u16, int i32, unsigned u32, long long i64,
                                         unsigned long long u64, float f32, double f64,
                                         unsigned long long *out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  out[0] = (unsigned long long)(long long)i8;
  out[1] = u8;
  out[2] = (unsigned long long)(long long)i16;
  out[3] = u16;
  out[4] = (unsigned long long)(long long)i32;
  out[5] = u32;
  out[6] = (unsigned long long)i64;
  out[7] = u64;
  out[8] = __float_as_uint(f32);
  out[9] = (unsigned long long)__double_as_longlong(f64);
}
