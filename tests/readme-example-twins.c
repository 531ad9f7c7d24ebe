/* The README's example (test readme-example) launches samples/saxpy/saxpy.cu's kernel. On the
 * simulator a kernel runs as the host twin registered under its name (include/cuv/sim.h): this
 * registers the test kernels' twins, saxpy's among them, before main runs, so that the example
 * stays exactly as the README shows it. On a GPU the registration is harmless. */
#include "twins.h"

__attribute__((constructor)) static void register_twins_early(void) { cuvt_register_twins(); }
