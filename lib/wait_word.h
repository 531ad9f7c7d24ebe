#ifndef CUV_LIB_WAIT_WORD_H
#define CUV_LIB_WAIT_WORD_H

/* wait_word.c: 32-bit words a stream waits on (cuStreamWaitValue32) until the host sets them. */

typedef struct cuv__wait_word {
  uint32_t *host; /* set with a release store */
  CUdeviceptr dev;
} cuv__wait_word_t;

/* A word, zeroed. `dev` is the device whose context the pool grows in, if it must. */
int cuv__wait_word_get(cuv_device_t *dev, cuv__wait_word_t *word);
/* Gives it back, once no stream may still wait on it. */
void cuv__wait_word_put(const cuv__wait_word_t *word);

#endif
