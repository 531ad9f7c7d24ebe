/* The types accepted.cu's kernels take by value, for C and for the .cu. */
#ifndef CUVT_ACCEPTED_H
#define CUVT_ACCEPTED_H

struct tagged {
  int v;
};
union bits {
  float f;
  unsigned u;
};
enum mode { MODE_A, MODE_B };

#endif
