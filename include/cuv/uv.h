#ifndef CUV_UV_H
#define CUV_UV_H

/** @file
 * libcuv-uv: cuv completions delivered into a libuv loop, one bridge per loop (three handles and
 * a cuv queue; the loop's whole contract with cuv is cuv_queue_poll). Callbacks run on the loop
 * thread, in completion order; the bridge keeps the loop alive exactly while work is in flight;
 * close it once with cuv_uv_close before uv_loop_close (a uv_walk does not replace it). Threads,
 * lifetime, closing, walking the loop and linking (the Node package compiles uv/bridge.c into
 * itself against node's libuv): docs/libuv.md. Errors are cuv's, libuv's code unchanged where a
 * libuv call fails. */

#include <uv.h>

#include <cuv.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A bridge: the completions of one cuv queue, delivered into one libuv loop. */
typedef struct cuv_uv_s cuv_uv_t;
/** Runs once on the loop thread, in a later loop callback, just before the bridge is freed. */
typedef void (*cuv_uv_close_cb)(cuv_uv_t *bridge, void *arg);

/** Opens a bridge on `loop`, on the loop thread. @returns 0; CUV_EINVAL (a NULL argument),
 * cuv_init's error, CUV_ENOMEM, or uv_async_init's code. */
CUV_EXTERN int cuv_uv_open(cuv_uv_t **bridge, uv_loop_t *loop);
/** As cuv_submit (op consumed either way, CUV_SUBMIT_NO_SPIN added), from any thread until
 * close_cb; done runs once on the loop thread. @returns 0; CUV_EINVAL (bridge or done NULL),
 * CUV_ECLOSED (closing, or walked), or cuv_submit's codes. */
CUV_EXTERN int cuv_uv_submit(cuv_uv_t *bridge, cuv_op_t *op, cuv_done_fn done, void *arg,
                             const cuv_submit_opts_t *opts);
/** As cuv_cancel: its callback runs with CUV_ECANCELED in the loop's next iteration. @returns 0;
 * CUV_EINVAL (bridge NULL) or CUV_ENOENT (it ran, was cancelled, or is unknown). */
CUV_EXTERN int cuv_uv_cancel(cuv_uv_t *bridge, cuv_ticket_t ticket);
/** @returns Submissions whose callback has not run (nor a cancelled one's work retired); 0 for
 * NULL. */
CUV_EXTERN unsigned cuv_uv_pending(const cuv_uv_t *bridge);
/** @returns The loop the bridge was opened on; NULL for NULL. */
CUV_EXTERN uv_loop_t *cuv_uv_loop(const cuv_uv_t *bridge);
/** Refuses new work, delivers what is in flight, then runs close_cb (may be NULL) and frees the
 * bridge; loop thread. @returns 0; CUV_EINVAL, CUV_ECLOSED (twice), or uv_queue_work's code. */
CUV_EXTERN int cuv_uv_close(cuv_uv_t *bridge, cuv_uv_close_cb close_cb, void *arg);

#ifdef __cplusplus
}
#endif

#endif
