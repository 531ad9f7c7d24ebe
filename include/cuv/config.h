#ifndef CUV_CONFIG_H
#define CUV_CONFIG_H

/** @file
 * How cuv runs, as one struct read once per process (dav1d's settings pattern):
 *
 * @code
 *   cuv_config_t cfg;
 *   cuv_config_default(&cfg);          defaults, then the environment (CUV_* names, below)
 *   cfg.spin_budget_us = 0;            whatever the program decides
 *   int rc = cuv_init_with(&cfg);      validated and applied; the driver is loaded
 * @endcode
 *
 * A program that calls neither gets cuv_init()'s: the first call that needs the driver (opening a
 * device, running an op) initializes with the defaults and the environment, as cuv_init() does.
 * Initialization happens once: it applies one configuration for the life of the process, and a
 * second cuv_init_with with a different one is refused with CUV_EBUSY. Every setting has a CUV_*
 * environment variable; the older CUDA_ASYNC_* names are aliases, read when the CUV_* name is
 * unset or empty. An empty variable counts as unset.
 *
 * Queries initialize nothing, so a program may look before it configures: cuv_config_get,
 * cuv_driver_name, cuv_driver_is_sim and cuv_init_error (include/cuv.h).
 * Only cuv_driver_version, which must ask the driver, initializes as cuv_init() does. */

#include <stdbool.h>

#include <cuv/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** How a submission's completion reaches cuv (docs/completion.md). */
typedef enum cuv_host_sync {
  CUV_HOST_SYNC_OFF = 0, /**< stream timelines and the reactor, host functions as their fallback */
  /** always a host function (CU_HOST_TASK_SPINWAIT where the driver has cuLaunchHostFunc_v2:
   * cuv_driver_has_host_task_modes); a blocking executor spins on its mark */
  CUV_HOST_SYNC_SPIN,
  /** always a host function (CU_HOST_TASK_BLOCKING where the driver has cuLaunchHostFunc_v2);
   * a blocking executor sleeps until it ran */
  CUV_HOST_SYNC_BLOCK
} cuv_host_sync_t;

/** Who makes an asynchronous submission's driver calls (docs/engine.md). */
typedef enum cuv_submit_inline {
  CUV_SUBMIT_INLINE_IDLE = 0, /**< the submitting thread, when the engine and the device are idle */
  CUV_SUBMIT_INLINE_NEVER,    /**< always a submitter thread (a full ring still runs inline) */
  CUV_SUBMIT_INLINE_ALWAYS    /**< always the submitting thread (as without an engine) */
} cuv_submit_inline_t;

/** Every setting of cuv, with its environment variable; cuv_config_default fills it. */
typedef struct cuv_config {
  /** CUV_DRIVER: "cuda" (the default; NULL means the same) loads the NVIDIA driver,
   * libcuda.so.1; "sim" loads libcuv-sim, the CPU simulator; anything else is the path of a
   * library to load as the driver, and must contain a '/' (so that a misspelt "sim" is an error,
   * not a library search). Copied by init: the string need not outlive the call. */
  const char *driver;
  /** CUV_SPIN_BUDGET_US (alias CUDA_ASYNC_SPIN_BUDGET_US): microseconds a submitting thread spins
   * on young work before handing it to the reactor; 0 disables the inline spin. 0 to 1000000,
   * default 20. */
  unsigned spin_budget_us;
  /** CUV_HOST_SYNC (alias CUDA_ASYNC_HOST_SYNC): "off" (the default), "spin" (or cuda-async's
   * "spinwait") or "block" (or "blocking"); anything else is refused. */
  cuv_host_sync_t host_sync;
  /** CUV_STRICT_HAZARDS ("0" or "1"): true makes every new buffer strict: a conflicting access
   * to a buffer in flight on another stream fails with CUV_ECONFLICT instead of being ordered
   * with an event wait. Default false. */
  bool strict_hazards;
  /** CUV_UV_POLL_MAX_US: the libuv bridge (include/cuv/uv.h) polls its loop for the work it
   * submitted for the spin budget, or for 1.5 times its recent work's submit-to-callback time
   * when that is at most this bound; 0 keeps the polling to the spin budget. 0 to 1000000,
   * default 1000. */
  unsigned uv_poll_max_us;
  /** CUV_SUBMIT_THREADS: submitter threads per device (named cuv-submit-N), started at the first
   * submission that uses them; they spin briefly when the ring empties, then park (no CPU while
   * idle). 0 turns the engine off: every executor makes its driver calls on its own thread.
   * 0 to 64, default 4. */
  unsigned submit_threads;
  /** CUV_SUBMIT_INLINE: "idle" (the default), "never" or "always" (cuv_submit_inline_t). */
  cuv_submit_inline_t submit_inline;
  /** CUV_SUBMIT_RING: capacity of a device's submission ring, a power of two from 2 to 65536,
   * default 1024. A push that finds it full runs the oldest queued work on the pushing thread
   * instead of waiting (docs/engine.md). */
  unsigned submit_ring;
  /** CUV_NCCL: the NCCL library collectives use (include/cuv/collective.h), opened at their first
   * use. NULL (the default, also "") is libnccl.so.2, or with the driver "sim" the simulator's own
   * collectives; "sim" asks for the simulator's; anything else is the path of a library to load,
   * and must contain a '/'. Copied by init. */
  const char *nccl;
  /** CUV_STREAMS: the streams of a device's default policy (round-robin; the ops submitted with
   * neither a stream nor a policy run on it) and of a pool policy asked for 0 streams. Only ops
   * on different streams overlap on the GPU, so a program that keeps many independent ops in
   * flight at once (a Node.js server's Promises) may want more than the default. 1 to 1024,
   * default 4. */
  unsigned streams;
} cuv_config_t;

/** Fills *config with the defaults, then with the environment variables above.
 *
 * It reads the environment only.
 * It starts nothing.
 *
 * @returns 0, and *config holds the defaults and the environment's values.
 * @errors CUV_EINVAL: config is NULL.
 *         CUV_EINVAL: a variable holds a value out of its range; that field keeps its default,
 *         and the others are filled.
 * @threads Any thread. */
CUV_EXTERN int cuv_config_default(cuv_config_t *config);

/** Validates config, applies it and loads the driver (cuInit), once per process.
 *
 * @returns 0 once the configuration is applied and the driver loaded.
 *          An identical configuration, once initialized, returns that initialization's status.
 * @errors CUV_EINVAL: config is NULL or holds a value out of range (an unknown host_sync, a
 *         driver that is none of "cuda", "sim" or a path). This is checked first, also after
 *         initialization. Nothing is initialized or changed, init may be tried again, and
 *         cuv_init_error() names the field.
 *         CUV_EBUSY: the process is initialized already, with another configuration, which
 *         stays. cuv_init_error() names the first field that differs and both its values.
 *         The status of loading the driver (CUV_ENODRIVER, CUV_EDRIVER, a CUV_ECUDA code from
 *         cuInit): the configuration is applied, the failure stays the process's answer to
 *         every later call, and cuv_init_error() says what failed.
 * @threads Any thread; it is thread-safe. */
CUV_EXTERN int cuv_init_with(const cuv_config_t *config);

/** Initializes with cuv_config_default's configuration, unless the process is initialized already.
 *
 * Every call that needs the driver does it implicitly.
 *
 * @returns The initialization's status: 0 when it succeeded.
 * @errors CUV_EINVAL: an environment variable is out of range; cuv_init_error() names it.
 *         The status of loading the driver (CUV_ENODRIVER, CUV_EDRIVER, a CUV_ECUDA code from
 *         cuInit), as for cuv_init_with.
 * @threads Any thread; it is thread-safe. */
CUV_EXTERN int cuv_init(void);

/** The configuration in force, for the library's parts and for programs.
 *
 * The libuv bridge reads its poll bound here.
 * Before initialization, it gives the configuration cuv_init() would apply now
 * (cuv_config_default's, its default nccl spelled "" as in force), with the environment's strings.
 * A query initializes nothing, and a later cuv_init_with may still apply another.
 *
 * @returns 0, and *config holds the configuration.
 * @errors CUV_EINVAL: config is NULL.
 *         CUV_EINVAL: before initialization, a variable is out of range (cuv_init() would refuse
 *         it); that field holds its default.
 * @threads Any thread.
 * @notes Once initialized, config->driver and config->nccl point to cuv's copies, valid for the
 *        life of the process. */
CUV_EXTERN int cuv_config_get(cuv_config_t *config);

/** Why the last initialization call failed, in a sentence that names what it tried. The calls are
 * cuv_init, cuv_init_with, and, while the process is not initialized, a call that initializes it
 * implicitly (opening a device, running an op, cuv_driver_version); once it is, those only return
 * its status, and queries never touch the text. By status:
 * - CUV_EINVAL: the field and what it must hold, or the variable and its value
 *   ("CUV_SPIN_BUDGET_US=2x: expected ..."), also for a cuv_init_with refused after
 *   initialization;
 * - CUV_EBUSY: the field in which the configuration differs from the one in force, both values;
 * - a driver that failed: its path and the loader's reason ("cannot load the driver
 *   \"/opt/typo/libcuda.so\": ... No such file or directory"), again after every later call that
 *   returns that failure (cuv_init, an identical cuv_init_with).
 *
 * @returns The text, or NULL when no initialization call ran or the last one succeeded (cuv_init
 *          or an identical cuv_init_with once initialized).
 * @threads Any thread. There is one text per process, not per thread: with several threads
 *          initializing, it is the last call's.
 * @notes The text stays until the next initialization call. */
CUV_EXTERN const char *cuv_init_error(void);

#ifdef __cplusplus
}
#endif

#endif
