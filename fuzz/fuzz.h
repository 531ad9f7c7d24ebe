#ifndef CUV_FUZZ_H
#define CUV_FUZZ_H

/* The libFuzzer entry points every target defines. replay.c calls them from a plain main in
 * builds without libFuzzer (README.md). */

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
