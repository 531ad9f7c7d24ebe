#ifndef CUV_LIB_MODULE_H
#define CUV_LIB_MODULE_H

#define CUV__MAX_PARAMS 64

struct cuv_module_s {
  atomic_int refs;
  cuv_device_t *dev;
  pthread_mutex_t lock; /* guards cu and epoch across a reload */
  CUmodule cu;
  unsigned epoch;       /* the device epoch cu was loaded in */
  void *image;          /* kept, so a recovered device gets the module back */
  size_t image_size;
};

struct cuv_kernel_s {
  atomic_int refs;
  cuv_module_t *mod;
  CUfunction fn;
  unsigned epoch;       /* the device epoch fn belongs to */
  char name[128];
  int nparams;  /* -1 when the driver cannot tell */
  size_t param_size[CUV__MAX_PARAMS];
};

cuv_module_t *cuv__module_ref(cuv_module_t *mod);
cuv_kernel_t *cuv__kernel_ref(cuv_kernel_t *k);
void cuv__kernel_release(void *k);
/* The kernel's function in the device's current context: after a recovery the module is loaded
 * again from its image and the function looked up again. */
int cuv__kernel_function(cuv_kernel_t *k, CUfunction *fn);

#endif
