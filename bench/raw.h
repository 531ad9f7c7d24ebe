/* The raw-driver baseline of the benches: the same driver cuv loaded (CUV_DRIVER: libcuda.so.1,
 * libcuv-sim, which the benches link for the kernels' host twins, or a path), opened again with
 * dlopen and resolved with cuGetProcAddress_v2, in the context cuv uses; and the measuring helpers
 * the benches share. Every failure here is fatal: a message naming the program, then exit(1). */
#ifndef CUV_BENCH_RAW_H
#define CUV_BENCH_RAW_H

#include <stdint.h>

#include <cuda.h>
#include <cuv.h>

/* Opens the driver behind cuv_driver_name() and makes dev's context current on the calling
 * thread. prog names the program in the messages of the functions below. */
void raw_open(const char *prog, cuv_device_t *dev);

/* Resolves the entry point `name` into *fn_ptr (the address of a function pointer of the type
 * cuda.h gives `name`), at the CUDA version cuv itself asks for (internal/driver_funcs.h). */
void raw_resolve(const char *name, void *fn_ptr);

/* A driver call that must succeed. */
void raw_check(const char *what, CUresult r);

/* Loads the PTX file at ptx_path again with raw calls and returns its kernel `name`. */
CUfunction raw_kernel(const char *ptx_path, const char *name);

/* cuv's side of every bench: cuv_init, device 0, and the kernel `name` of the PTX file at
 * ptx_path (the module stays loaded while the kernel holds it). 0 or the failing call's status. */
int bench_cuv_kernel(const char *ptx_path, const char *name, cuv_device_t **dev,
                     cuv_kernel_t **kernel);

/* CLOCK_MONOTONIC, in nanoseconds and in microseconds. */
uint64_t now_ns(void);
double now_us(void);

/* Sorts v[0..n) and returns the value at fraction p of it (0.5: the median, v[n / 2]). */
double percentile(double *v, int n, double p);

#endif
