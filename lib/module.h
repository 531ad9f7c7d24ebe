#ifndef CUV_LIB_MODULE_H
#define CUV_LIB_MODULE_H

#define CUV__MAX_PARAMS 64

struct cuv_module_s {
  atomic_int refs;
  cuv_device_t *dev;
  CUmodule cu;
};

struct cuv_kernel_s {
  cuv_module_t *mod;
  CUfunction fn;
  char name[128];
  int nparams;  /* -1 when the driver cannot tell */
  size_t param_size[CUV__MAX_PARAMS];
  CUV__OWN_LINE atomic_int refs; /* one more and one less per launch (lines.h) */
};

cuv_module_t *cuv__module_ref(cuv_module_t *mod);
cuv_kernel_t *cuv__kernel_ref(cuv_kernel_t *k);
void cuv__kernel_unref(void *k);

#endif
