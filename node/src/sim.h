/* libcuv-sim from JavaScript. The package builds the simulator as a library of its own beside
 * the addon (binding.gyp); cuv loads it when CUV_DRIVER=sim, and only then does the addon reach
 * its API, through the loaded library (dlsym), so the addon itself never links it:
 *   sim.kernelDuration(name, usec)    every launch of `name` takes at least usec
 *   sim.fail(entry, nth, result)      the nth call (0: every call) of a driver entry point
 *                                     returns the CUresult `result`; sim.clearFailures()
 *   sim.calls(entry)                  calls made so far to a driver entry point
 * Each throws CUV_ENOTSUP when the driver is not the simulator. */
#ifndef CUV_NODE_SIM_H
#define CUV_NODE_SIM_H

#include <node_api.h>

/* When cuv runs on libcuv-sim, registers the twins of the package's kernels with it (once per
 * process); nothing otherwise. After a successful cuv_init. */
void cuv_node_sim_attach(void);
/* The `sim` object of the exports. */
napi_value cuv_node_sim_exports(napi_env env);

#endif
