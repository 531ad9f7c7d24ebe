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
/* A reference more, and less (a launch's, once each per submission: inline, as the device's in
 * device.h). cuv__kernel_drop is cuv_kernel_unref for a kernel that is not NULL. */
static inline cuv_kernel_t *cuv__kernel_ref(cuv_kernel_t *k) {
  atomic_fetch_add(&k->refs, 1);
  return k;
}
void cuv__kernel_free(cuv_kernel_t *k); /* after the last drop */
static inline void cuv__kernel_drop(cuv_kernel_t *k) {
  if (atomic_fetch_sub(&k->refs, 1) == 1)
    cuv__kernel_free(k);
}
void cuv__kernel_unref(void *k);

#endif
