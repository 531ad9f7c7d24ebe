/* The one twin body test-twin-skeleton writes into the skeleton cuv-launchers --twins generated
 * from kinds.cu (force-included before it: CUV_TWIN_BODY_<kernel>, docs/simulator.md). k_xor's
 * body sees the locals the skeleton unpacked (n, in, key, out) and the launch; every other
 * kernel's body is left unwritten. */
#ifndef CUVT_TWIN_BODIES_H
#define CUVT_TWIN_BODIES_H

#define CUV_TWIN_BODY_k_xor                                                                       \
  size_t threads = (size_t)launch->grid[0] * launch->block[0];                                    \
  for (size_t t = 0; t < n && t < threads; t++)                                                   \
    ((unsigned *)out)[t] = ((const unsigned *)in)[t] ^ key;                                       \
  return 0;

#endif
