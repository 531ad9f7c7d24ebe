#ifndef CUVT_TWINS_H
#define CUVT_TWINS_H
/* Registers the host twins of the test kernels with libcuv-sim (harmless on a real GPU). */
void cuvt_register_twins(void);
#endif
