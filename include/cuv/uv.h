#ifndef CUV_UV_H
#define CUV_UV_H

/* libcuv-uv: delivers cuv completions into a libuv loop.
 *
 * One bridge per loop. It owns one uv_async_t; the thread that finishes GPU work (cuv's reactor
 * or the driver's callback thread) pushes the submission on the bridge's queue and wakes the loop,
 * which drains the whole queue per wake and runs each `done` callback on the loop thread.
 * While young work is in flight, the loop also polls for it itself (a uv_idle_t keeps the poll
 * timeout at zero, so other I/O is still served) for up to CUDA_ASYNC_SPIN_BUDGET_US: a
 * completion then reaches the callback without a cross-thread wake.
 *
 * Threads: cuv_uv_open and cuv_uv_close on the loop thread; cuv_uv_submit from any thread.
 * Lifetime: the bridge's handles are unreferenced while nothing is in flight, so uv_run returns
 * when the last callback ran. cuv_uv_close refuses new submissions (CUV_ECLOSED); work already in
 * flight still completes on the GPU and its callbacks still run once, with their own result;
 * then the handles are closed and close_cb runs, after which the bridge is freed. */

#include <uv.h>

#include <cuv.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuv_uv_s cuv_uv_t;
typedef void (*cuv_uv_close_cb)(cuv_uv_t *bridge, void *arg);

CUV_EXTERN int cuv_uv_open(cuv_uv_t **bridge, uv_loop_t *loop);
/* As cuv_submit, with done run on the bridge's loop thread. 0 when accepted (done will run once);
 * a negative code when refused (done will not run). op is consumed either way. */
CUV_EXTERN int cuv_uv_submit(cuv_uv_t *bridge, cuv_op_t *op, cuv_done_fn done, void *arg,
                             const cuv_submit_opts_t *opts);
/* Submissions accepted and whose callback has not run yet. */
CUV_EXTERN unsigned cuv_uv_pending(const cuv_uv_t *bridge);
CUV_EXTERN uv_loop_t *cuv_uv_loop(const cuv_uv_t *bridge);
/* Starts closing (see above); close_cb may be NULL. Calling it twice is CUV_ECLOSED. */
CUV_EXTERN int cuv_uv_close(cuv_uv_t *bridge, cuv_uv_close_cb close_cb, void *arg);

#ifdef __cplusplus
}
#endif

#endif
