// The fileio sample's kernels, compiled to PTX by nvcc at build time. Their host twins for the
// simulator are in twins.c (same names, same parameters); keystream.h is the host's copy of
// key_byte.

__device__ unsigned char key_byte(unsigned long long offset) {
  unsigned long long word = offset >> 2;
  unsigned x = (unsigned)word ^ (unsigned)(word >> 32) ^ 0x5eed1e55u;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return (unsigned char)(x >> (8 * (offset & 3)));
}

// data[i] ^= key_byte(base + i): the chunk that starts at file offset `base`, in place.
extern "C" __global__ void fio_xor(unsigned n, unsigned long long base, unsigned char *data) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] ^= key_byte(base + i);
}

// Keeps its stream busy for `ns` nanoseconds (one thread reading the global timer), so that a
// chunk's GPU work lasts long enough on any GPU for the loop's timer to tick while it runs.
extern "C" __global__ void fio_delay(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
