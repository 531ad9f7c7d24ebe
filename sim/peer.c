/* Peer access between the devices' primary contexts: which device may access which
 * (cuDeviceCanAccessPeer; every pair of distinct devices by default, cuv_sim_set_peer_access
 * changes it) and the access each context enabled to others (cuCtxEnablePeerAccess,
 * cuCtxDisablePeerAccess), with the driver's answers: unsupported pairs, access enabled twice or
 * never, the context itself as its peer, a bound on peers per context. Access is one-way, as on
 * the GPU. It changes nothing in what copies do (cuMemcpyPeerAsync works either way, as the
 * driver's does); cuv asks for it once per pair. */

#include "context.h"
#include "enter.h"
#include "peer.h"
#include "util.h"

/* Peers one context may have enabled at once (the driver's hardware bound on PCIe systems). */
#define SIM_MAX_PEERS 8

static bool denied[SIM_MAX_DEVICES][SIM_MAX_DEVICES]; /* lock held */

CUV_SIM_EXTERN void cuv_sim_set_peer_access(int dev, int peer_dev, int can_access) {
  if (dev < 0 || dev >= SIM_MAX_DEVICES || peer_dev < 0 || peer_dev >= SIM_MAX_DEVICES)
    return;
  sim_lock();
  denied[dev][peer_dev] = !can_access;
  sim_unlock();
}

static bool can_access(int dev, int peer_dev) {
  return dev != peer_dev && !denied[dev][peer_dev];
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
  SIM_ENTER_NOCTX(cuDeviceCanAccessPeer);
  if (!canAccessPeer)
    return CUDA_ERROR_INVALID_VALUE;
  if (!sim_device_valid(dev) || !sim_device_valid(peerDev))
    return CUDA_ERROR_INVALID_DEVICE;
  sim_lock();
  *canAccessPeer = can_access(dev, peerDev);
  sim_unlock();
  return CUDA_SUCCESS;
}

static unsigned peers_enabled(const struct sim_ctx *ctx) {
  unsigned n = 0;
  for (int i = 0; i < SIM_MAX_DEVICES; i++)
    n += ctx->peer[i];
  return n;
}

/* The current context and a valid, initialized peer context (lock held). The context itself is
 * a valid peer that cannot be enabled (unsupported, as the GPU's driver answers). */
static CUresult peer_pair(CUcontext peerContext, struct sim_ctx **self, struct sim_ctx **peer) {
  CUresult r = sim_ctx_require(self);
  if (r != CUDA_SUCCESS)
    return r == CUDA_ERROR_CONTEXT_IS_DESTROYED ? r : CUDA_ERROR_INVALID_CONTEXT;
  *peer = sim_ctx_from_handle(peerContext);
  if (!*peer || !atomic_load(&(*peer)->active))
    return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  SIM_ENTER(cuCtxEnablePeerAccess);
  if (Flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct sim_ctx *self, *peer;
  sim_lock();
  CUresult r = peer_pair(peerContext, &self, &peer);
  if (r == CUDA_SUCCESS && !can_access(self->device, peer->device))
    r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  else if (r == CUDA_SUCCESS && self->peer[peer->device])
    r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  else if (r == CUDA_SUCCESS && peers_enabled(self) >= SIM_MAX_PEERS)
    r = CUDA_ERROR_TOO_MANY_PEERS;
  if (r == CUDA_SUCCESS)
    self->peer[peer->device] = true;
  sim_unlock();
  return r;
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext) {
  SIM_ENTER(cuCtxDisablePeerAccess);
  struct sim_ctx *self, *peer;
  sim_lock();
  CUresult r = peer_pair(peerContext, &self, &peer);
  if (r == CUDA_SUCCESS && !self->peer[peer->device])
    r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  if (r == CUDA_SUCCESS)
    self->peer[peer->device] = false;
  sim_unlock();
  return r;
}

void sim_peer_reset_ctx(struct sim_ctx *ctx) {
  for (int i = 0; i < SIM_MAX_DEVICES; i++) {
    ctx->peer[i] = false;
    sim_ctx_of_device(i)->peer[ctx->device] = false;
  }
}
