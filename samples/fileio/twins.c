/* Host twins of fileio.cu for libcuv-sim (include/cuv/sim.h): same names and parameters; each
 * runs the whole grid. Simulated device memory is host memory, so a device pointer is a host
 * address. Built without the simulator, registering does nothing. */
#include <stddef.h>

#ifdef FILEIO_WITH_SIM
#include <stdint.h>
#include <time.h>

#include <cuv.h>
#include <cuv/sim.h>

#include "keystream.h"

static int twin_xor(const cuv_sim_launch_t *launch, void **params) {
  unsigned n = *(unsigned *)params[0];
  unsigned long long base = *(unsigned long long *)params[1];
  uint8_t *data = (uint8_t *)(uintptr_t)(*(cuv_deviceptr_t *)params[2]);
  for (unsigned i = 0; i < n; i++)
    data[i] ^= fileio_key_byte(base + i);
  return 0;
}

static int twin_delay(const cuv_sim_launch_t *launch, void **params) {
  unsigned long long ns = *(unsigned long long *)params[0];
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0) {
  }
  return 0;
}
#endif

void fileio_register_twins(void);

void fileio_register_twins(void) {
#ifdef FILEIO_WITH_SIM
  const size_t xor_params[] = {sizeof(unsigned), 8, sizeof(cuv_deviceptr_t)}, delay[] = {8};
  cuv_sim_register_kernel("fio_xor", twin_xor, 3, xor_params);
  cuv_sim_register_kernel("fio_delay", twin_delay, 1, delay);
#endif
}
