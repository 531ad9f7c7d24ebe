#ifndef CUV_UV_H
#define CUV_UV_H

/** @file
 * libcuv-uv: delivers cuv completions into a libuv loop.
 *
 * One bridge per loop. It owns three handles on the loop (a uv_async_t, a uv_idle_t and a
 * uv_check_t, whose data is the bridge) and one cuv queue. The thread that finishes GPU work (cuv's
 * reactor or the driver's callback thread) pushes the submission on the queue and wakes the loop,
 * which drains the queue and runs each `done` callback on the loop thread: at most 128 completions
 * per drain and two drains per loop iteration, so that a backlog of thousands leaves the loop's
 * timers and I/O their turns between slices. While work submitted on the loop thread is young
 * (cuv_queue_young: the spin budget, or longer when the loop's recent work took longer, up to
 * cuv_config_t's uv_poll_max_us, variable CUV_UV_POLL_MAX_US), the loop also polls for it itself
 * (the idle handle keeps the poll timeout at zero, so other I/O is still served and no callback
 * spins): a completion then reaches the callback without a cross-thread wake. So it does for work
 * another thread submitted on the loop's behalf with CUV_SUBMIT_POLLED, once the loop saw it in
 * flight (from its next callback: a completion's, or the end of an iteration). The submitting
 * thread never spins (cuv_uv_submit adds CUV_SUBMIT_NO_SPIN). Errors are cuv's, which are
 * libuv's where POSIX has the meaning: a libuv call that fails (uv_async_init in cuv_uv_open)
 * returns its code unchanged.
 *
 * Threads: cuv_uv_open and cuv_uv_close on the loop thread; cuv_uv_submit, cuv_uv_cancel,
 * cuv_uv_pending and cuv_uv_loop from any thread, until close_cb (see Closing). Callbacks always
 * run on the loop thread, in completion order (submissions of one stream whose completions took
 * different paths may come out of order).
 *
 * Lifetime: the bridge keeps the loop alive exactly while something is in flight (accepted and its
 * callback not yet run), so uv_run(UV_RUN_DEFAULT) returns once the last callback ran. libuv lets
 * only the loop thread reference a handle, so the loop thread decides, and it looks:
 *  - at once, for work submitted on the loop thread;
 *  - at the end of every loop iteration (a uv_check_t, after that iteration's I/O callbacks),
 *    for work submitted on other threads: a submission made before that point keeps the loop
 *    alive from there on, so one that happens before any callback of a running loop returns
 *    (a thread the loop joins, a uv_work_t's work_cb, a thread that then wakes the loop) is
 *    always delivered by that uv_run;
 *  - at the first iteration after cuv_uv_open: until then the bridge counts as busy, so work that
 *    other threads submitted before the first uv_run keeps that uv_run alive.
 * Work another thread submits after the loop's last look (uv_run returned, or is returning,
 * because it had nothing left; libuv gives other threads no way to keep such a loop alive) is not
 * lost: its callback runs in the next iteration any uv_run makes (one that has something else to
 * do, or after cuv_uv_close, which keeps the loop alive until every callback ran). To hand work
 * from other threads to a loop that may have run dry, keep the loop busy until they are done
 * submitting (the libuv way: a handle of your own), or close the bridge and run the loop:
 * "uv_run; cuv_uv_close; uv_run" never leaves a callback behind.
 *
 * Closing: cuv_uv_close refuses new submissions. Before it returns, the bridge's queue is
 * closed: from then on every cuv_uv_submit returns CUV_ECLOSED (its op consumed, no callback),
 * on the loop thread and on any thread that saw cuv_uv_close return or had a call refused; a
 * call another thread makes while cuv_uv_close runs is either refused or accepted, and then
 * delivered like the rest of the work in flight. That work still completes on the GPU and each
 * callback still runs once, with its own result (the close cancels nothing); then the handles
 * are closed and close_cb runs (always in a later loop callback, never inside cuv_uv_close),
 * after which the bridge is freed. Until close_cb returns, other threads may go on calling (and
 * are refused); from then on no thread may call cuv_uv_* with the bridge, and a call that began
 * earlier must have returned by the time close_cb returns. So a program that submits from other
 * threads stops them in close_cb, as a libuv program frees a handle's memory in its close
 * callback (tests/uv/uv-close-race.c: the submitter holds a lock around each call, and close_cb
 * takes it to mark the bridge gone). The loop keeps running (and serving other I/O) meanwhile.
 * A done callback may submit more work or close its own bridge. Like uv_close for a handle,
 * cuv_uv_close is needed exactly once, before uv_loop_close: while the bridge closes it holds a
 * uv_work_t (a threadpool thread waits for the work in flight), so uv_loop_close returns
 * UV_EBUSY until close_cb ran. A uv_walk does not replace it (see Walking the loop): libuv tells
 * the bridge nothing when a walk closes its handles, so uv_run and uv_loop_close may return with
 * work in flight; the loop thread's next cuv_uv_submit is refused and reports that on stderr
 * (or, if none comes, the process's exit does).
 *
 * Walking the loop: libuv's shutdown idiom, uv_walk with a callback that closes every handle not
 * closing, closes the bridge's three handles too. That is safe in any order with cuv_uv_close:
 *  - walk, then cuv_uv_close: the bridge closes none of its handles twice, delivers the work in
 *    flight and frees itself once libuv has run the walker's close callbacks for its handles;
 *  - cuv_uv_close, then walk: the close already holds the loop (its uv_work_t, which no walk
 *    closes) and finishes as above;
 *  - a walk, and cuv_uv_close only later: the walk ends the bridge's delivery, and uv_run may
 *    return with work still in flight. Submissions on the loop thread are refused from then on
 *    (CUV_ECLOSED), and other threads' once the loop thread has seen the walk (at its next
 *    cuv_uv_submit); nothing accepted is lost or cancelled: the uv_run after cuv_uv_close
 *    delivers it, each callback once with its own result.
 * A walker's close callback receives the bridge's handles: it must not free them.
 *
 * docs/libuv.md describes all of this with examples.
 *
 * Linking: C programs link libcuv-uv (pkg-config cuv-uv). A program that brings its own libuv (a
 * Node.js addon must use node's) compiles the adapter's installed source into itself instead,
 * against its own uv.h, and links libcuv only: `pkg-config --variable=adapter cuv-uv` names it
 * (node/, the Node package, compiles uv/bridge.c so). */

#include <uv.h>

#include <cuv.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A bridge: delivers the completions of one cuv queue into one libuv loop (see the file's
 * description). */
typedef struct cuv_uv_s cuv_uv_t;
/** The callback of cuv_uv_close: runs once on the loop thread, in a later loop callback, when the
 * bridge is about to be freed. */
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
/** As cuv_submit, with done run on the bridge's loop thread.
 *
 * Callbacks come in completion order: submissions spread over several streams (the default
 * policy's four) come back out of submission order; for order, give them one stream
 * (opts->stream) or number them (docs/libuv.md: completion order).
 *
 * @returns 0 when accepted (done will run once); a negative code when refused (done will not
 *          run).
 * @errors CUV_EINVAL: bridge or done is NULL.
 *         CUV_ECLOSED: the bridge is closing (cuv_uv_close), or a uv_walk closed its handles.
 *         The codes of cuv_submit otherwise (CUV_ENOMEM, CUV_ECONSUMED, CUV_EREENTRANT,
 *         CUV_EDEVICE, op's own error, a driver error).
 * @threads Any thread, until close_cb (see Closing). done runs on the loop thread.
 * @notes op is consumed either way. CUV_SUBMIT_NO_SPIN is added to opts' flags.
 */
CUV_EXTERN int cuv_uv_submit(cuv_uv_t *bridge, cuv_op_t *op, cuv_done_fn done, void *arg,
                             const cuv_submit_opts_t *opts);
/** Cancels a submission made through this bridge (its ticket from opts->ticket), as cuv_cancel.
 *
 * Its callback runs once, on the loop thread, with CUV_ECANCELED, in the loop's next iteration
 * (not when the GPU finishes; the loop stays alive until the work retires).
 *
 * @returns 0 when it was cancelled.
 * @errors CUV_EINVAL: bridge is NULL.
 *         CUV_ENOENT: once it ran or was cancelled (or the ticket is unknown).
 * @threads Any thread, until close_cb (see Closing). The callback runs on the loop thread.
 */
CUV_EXTERN int cuv_uv_cancel(cuv_uv_t *bridge, cuv_ticket_t ticket);
/** Submissions accepted whose callback has not run yet (inside a callback, not counting it), and
 * cancelled ones whose work has not retired yet.
 *
 * @returns That count; 0 when bridge is NULL.
 * @threads Any thread, until close_cb (see Closing).
 */
CUV_EXTERN unsigned cuv_uv_pending(const cuv_uv_t *bridge);
/** The loop the bridge was opened on.
 *
 * @returns The loop; NULL when bridge is NULL.
 * @threads Any thread, until close_cb (see Closing).
 */
CUV_EXTERN uv_loop_t *cuv_uv_loop(const cuv_uv_t *bridge);
/** Starts closing (see above).
 *
 * close_cb may be NULL where no other thread may still be calling (nothing then tells them when
 * the bridge is freed). The bridge must be closed (and the loop run until close_cb) before
 * uv_loop_close.
 *
 * @returns 0 when closing started.
 * @errors CUV_EINVAL: bridge is NULL.
 *         CUV_ECLOSED: calling it twice.
 *         libuv's code as it is, when uv_queue_work fails.
 * @threads The loop thread. close_cb runs on the loop thread, in a later loop callback.
 * @notes The bridge is freed after close_cb returns; no thread may use it from then on.
 */
CUV_EXTERN int cuv_uv_close(cuv_uv_t *bridge, cuv_uv_close_cb close_cb, void *arg);

#ifdef __cplusplus
}
#endif

#endif
