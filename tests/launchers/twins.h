/* Host twins of tests/launchers/kinds.cu for libcuv-sim. */
#ifndef CUVT_KINDS_TWINS_H
#define CUVT_KINDS_TWINS_H

void cuvt_register_kinds_twins(void);

#endif
