/* keystream.h: the byte the fileio sample XORs into the file at each offset, for the simulator's
 * twin of fio_xor (twins.c) and for the test's host reference (fileio-check.c). fileio.cu
 * computes the same on the GPU. */
#ifndef FILEIO_KEYSTREAM_H
#define FILEIO_KEYSTREAM_H

#include <stdint.h>

#define FILEIO_KEY 0x5eed1e55u

/* A 32-bit hash of the offset's word, one of its four bytes per offset: no two chunks share a
 * keystream, so a chunk written at the wrong offset shows. */
static inline uint8_t fileio_key_byte(uint64_t offset) {
  uint64_t word = offset >> 2;
  uint32_t x = (uint32_t)word ^ (uint32_t)(word >> 32) ^ FILEIO_KEY;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return (uint8_t)(x >> (8 * (offset & 3)));
}

#endif
