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

/** Opens a bridge on `loop`: its three handles and its queue.
 *
 * @returns 0, and *bridge holds the new bridge.
 * @errors CUV_EINVAL: bridge or loop is NULL.
 *         cuv_init's error, when cuv cannot be initialised.
 *         CUV_ENOMEM: no memory for the bridge or its queue.
 *         libuv's code as it is, when uv_async_init fails.
 * @threads The loop thread.
 * @notes Close it with cuv_uv_close, exactly once, before uv_loop_close.
 */
CUV_EXTERN int cuv_uv_open(cuv_uv_t **bridge, uv_loop_t *loop);
/** As cuv_submit, with done run on the bridge's loop thread, in completion order (for submission
 * order give the submissions one stream: docs/libuv.md).
 *
 * @returns 0 when accepted (done will run once); a negative code when refused (done will not run).
 * @errors CUV_EINVAL: bridge or done is NULL.
 *         CUV_ECLOSED: the bridge is closing (cuv_uv_close), or a uv_walk closed its handles.
 *         cuv_submit's codes otherwise.
 * @threads Any thread, until close_cb. done runs on the loop thread.
 * @notes op is consumed either way. CUV_SUBMIT_NO_SPIN is added to opts' flags.
 */
CUV_EXTERN int cuv_uv_submit(cuv_uv_t *bridge, cuv_op_t *op, cuv_done_fn done, void *arg,
                             const cuv_submit_opts_t *opts);
/** How the bridge spends a loop turn on callbacks (cuv_uv_set_turn). */
typedef struct cuv_uv_turn_s {
  /** Time for callbacks per loop turn, in ns; what is left waits for the next turn. 0: 100 000. */
  uint64_t budget_ns;
  /** Runs on the loop thread after the last callback of each turn that ran any, before the loop
   * goes on (a binding closes there what its callbacks opened: Node's callback scope). NULL:
   * nothing runs. */
  void (*after)(cuv_uv_t *bridge, void *arg);
  /** What `after` is given. */
  void *arg;
} cuv_uv_turn_t;
/** Sets the bridge's turn: its callbacks' time budget, and what runs after them.
 *
 * @returns 0.
 * @errors CUV_EINVAL: bridge or turn is NULL.
 * @threads The loop thread.
 * @notes *turn is copied. It holds until the next call, and for the callbacks of cuv_uv_close.
 */
CUV_EXTERN int cuv_uv_set_turn(cuv_uv_t *bridge, const cuv_uv_turn_t *turn);
/** Cancels a submission of this bridge, as cuv_cancel: its callback runs once with CUV_ECANCELED
 * in the loop's next iteration.
 *
 * @returns 0 when it was cancelled.
 * @errors CUV_EINVAL: bridge is NULL.
 *         CUV_ENOENT: once it ran or was cancelled (or the ticket is unknown).
 * @threads Any thread, until close_cb. The callback runs on the loop thread.
 */
CUV_EXTERN int cuv_uv_cancel(cuv_uv_t *bridge, cuv_ticket_t ticket);
/** Submissions whose callback has not run (nor a cancelled one's work retired).
 *
 * @returns That count; 0 when bridge is NULL.
 * @threads Any thread, until close_cb.
 */
CUV_EXTERN unsigned cuv_uv_pending(const cuv_uv_t *bridge);
/** The loop the bridge was opened on.
 *
 * @returns The loop; NULL when bridge is NULL.
 * @threads Any thread, until close_cb.
 */
CUV_EXTERN uv_loop_t *cuv_uv_loop(const cuv_uv_t *bridge);
/** Refuses new work, delivers what is in flight, then runs close_cb (may be NULL) and frees the
 * bridge.
 *
 * @returns 0 when closing started.
 * @errors CUV_EINVAL: bridge is NULL.
 *         CUV_ECLOSED: calling it twice.
 *         libuv's code as it is, when uv_queue_work fails.
 * @threads The loop thread. close_cb runs on the loop thread, in a later loop callback.
 * @notes No thread may use the bridge after close_cb returns.
 */
CUV_EXTERN int cuv_uv_close(cuv_uv_t *bridge, cuv_uv_close_cb close_cb, void *arg);

#ifdef __cplusplus
}
#endif

#endif
