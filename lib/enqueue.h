#ifndef CUV_LIB_ENQUEUE_H
#define CUV_LIB_ENQUEUE_H

/* enqueue.c: retires cuv_enqueue_on submissions of this stream whose events have completed (or
 * faulted). Also installed as the stream's reap hook. */
void cuv__enqueue_reap(cuv_stream_t *stream);

#endif
