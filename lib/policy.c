/* Scheduling policies: an interface (cuv_policy_ops_t) whose essential operation picks a stream
 * for an op, and those built in: round-robin over a pool, a single stream, least-loaded, and the
 * same two over a set of devices. */
#include "internal.h"
#include "policy.h"

CUV_EXTERN int cuv_policy_create(cuv_policy_t **out, const cuv_policy_ops_t *ops, void *state) {
  if (!out || !ops || !ops->next_stream || !ops->device)
    return CUV_EINVAL;
  cuv_policy_t *p = calloc(1, sizeof *p);
  if (!p)
    return CUV_ENOMEM;
  p->ops = *ops;
  p->state = state;
  *out = p;
  return 0;
}

CUV_EXTERN void cuv_policy_destroy(cuv_policy_t *p) {
  if (!p)
    return;
  if (p->ops.destroy)
    p->ops.destroy(p->state);
  free(p);
}

CUV_EXTERN int cuv_policy_next_stream(cuv_policy_t *p, const cuv_op_t *op, cuv_stream_t **out) {
  if (!p || !out)
    return CUV_EINVAL;
  return cuv__policy_next_stream(p, op, out);
}

CUV_EXTERN cuv_device_t *cuv_policy_device(cuv_policy_t *p) {
  return p ? p->ops.device(p->state) : NULL;
}

/* ---- a pool of streams: round-robin and least-loaded ---- */

typedef struct pool {
  cuv_device_t *dev;
  bool holds_device;
  atomic_uint next;
  unsigned n;
  cuv_stream_t *streams[];
} pool_t;

static void pool_destroy(void *state) {
  pool_t *pool = state;
  for (unsigned i = 0; i < pool->n; i++)
    cuv__stream_unref(pool->streams[i]);
  if (pool->holds_device)
    cuv__device_unref(pool->dev);
  free(pool);
}

static cuv_device_t *pool_device(void *state) { return ((pool_t *)state)->dev; }

static int round_robin_next(void *state, const cuv_op_t *op, cuv_stream_t **out) {
  pool_t *pool = state;
  *out = pool->streams[atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed) % pool->n];
  return 0;
}

static int least_loaded_next(void *state, const cuv_op_t *op, cuv_stream_t **out) {
  pool_t *pool = state;
  /* Start the scan where round-robin would, so ties spread over the pool. */
  unsigned start = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
  cuv_stream_t *best = NULL;
  unsigned best_load = ~0u;
  for (unsigned i = 0; i < pool->n; i++) {
    cuv_stream_t *s = pool->streams[(start + i) % pool->n];
    unsigned load = atomic_load_explicit(&s->in_flight, memory_order_relaxed);
    if (load < best_load) {
      best = s;
      best_load = load;
    }
  }
  *out = best;
  return 0;
}

static int pool_create(cuv_policy_t **out, cuv_device_t *dev, unsigned n, bool holds_device,
                       int (*next)(void *, const cuv_op_t *, cuv_stream_t **)) {
  if (!out || !dev || n > 1024)
    return CUV_EINVAL;
  n = n ? n : cuv__config.streams;
  pool_t *pool = calloc(1, sizeof *pool + n * sizeof pool->streams[0]);
  if (!pool)
    return CUV_ENOMEM;
  pool->dev = holds_device ? cuv__device_ref(dev) : dev;
  pool->holds_device = holds_device;
  int rc = 0;
  for (; rc == 0 && pool->n < n; pool->n++)
    if ((rc = cuv__stream_create(&pool->streams[pool->n], dev, holds_device)) < 0)
      break;
  cuv_policy_ops_t ops = {next, pool_device, pool_destroy};
  if (rc == 0)
    rc = cuv_policy_create(out, &ops, pool);
  if (rc < 0)
    pool_destroy(pool);
  return rc;
}

CUV_EXTERN int cuv_policy_round_robin(cuv_policy_t **out, cuv_device_t *dev, unsigned n) {
  return pool_create(out, dev, n, true, round_robin_next);
}

CUV_EXTERN int cuv_policy_least_loaded(cuv_policy_t **out, cuv_device_t *dev, unsigned n) {
  return pool_create(out, dev, n, true, least_loaded_next);
}

/* ---- a single stream ---- */

static int single_next(void *state, const cuv_op_t *op, cuv_stream_t **out) {
  *out = state;
  return 0;
}

static cuv_device_t *single_device(void *state) { return ((cuv_stream_t *)state)->dev; }

static void single_destroy(void *state) { cuv__stream_unref(state); }

CUV_EXTERN int cuv_policy_single(cuv_policy_t **out, cuv_stream_t *stream) {
  if (!out || !stream)
    return CUV_EINVAL;
  cuv_policy_ops_t ops = {single_next, single_device, single_destroy};
  int rc = cuv_policy_create(out, &ops, cuv__stream_ref(stream));
  if (rc < 0)
    cuv__stream_unref(stream);
  return rc;
}

/* ---- a set of devices ---- */

/* One pool policy per device. An op of a device of the set goes to that device's pool; an op of
 * no device to the next device in turn, or to the device whose pool has the fewest submissions
 * in flight (a device's load is its streams' sum: a device with one idle stream and three busy
 * ones is busier than one with four streams each running a little). */
typedef struct device_set {
  atomic_uint next;
  bool least_loaded;
  unsigned n;
  cuv_policy_t *member[];
} device_set_t;

static void set_destroy(void *state) {
  device_set_t *set = state;
  for (unsigned i = 0; i < set->n; i++)
    cuv_policy_destroy(set->member[i]);
  free(set);
}

static cuv_device_t *set_device(void *state) {
  return cuv_policy_device(((device_set_t *)state)->member[0]);
}

static cuv_policy_t *set_member(const device_set_t *set, int ordinal) {
  for (unsigned i = 0; i < set->n; i++)
    if (cuv_policy_device(set->member[i])->ordinal == ordinal)
      return set->member[i];
  return NULL;
}

static unsigned pool_load(const cuv_policy_t *member) {
  const pool_t *pool = member->state;
  unsigned load = 0;
  for (unsigned i = 0; i < pool->n; i++)
    load += atomic_load_explicit(&pool->streams[i]->in_flight, memory_order_relaxed);
  return load;
}

/* The device for an op of none; the scan starts where round-robin would, so ties spread. */
static cuv_policy_t *set_pick(device_set_t *set) {
  unsigned start = atomic_fetch_add_explicit(&set->next, 1, memory_order_relaxed);
  cuv_policy_t *best = set->member[start % set->n];
  unsigned best_load = ~0u;
  for (unsigned i = 0; set->least_loaded && i < set->n; i++) {
    cuv_policy_t *m = set->member[(start + i) % set->n];
    unsigned load = pool_load(m);
    if (load < best_load) {
      best = m;
      best_load = load;
    }
  }
  return best;
}

static int set_next(void *state, const cuv_op_t *op, cuv_stream_t **out) {
  device_set_t *set = state;
  cuv_policy_t *member = !op || op->device < 0 ? set_pick(set) : set_member(set, op->device);
  return member ? cuv_policy_next_stream(member, op, out) : CUV_EDEVICE;
}

static bool set_valid(cuv_device_t *const *devs, unsigned ndevs) {
  if (!devs || ndevs == 0 || ndevs > CUV__MAX_DEVICES)
    return false;
  for (unsigned i = 0; i < ndevs; i++) {
    if (!devs[i])
      return false;
    for (unsigned j = 0; j < i; j++)
      if (devs[j] == devs[i])
        return false;
  }
  return true;
}

static int set_create(cuv_policy_t **out, cuv_device_t *const *devs, unsigned ndevs,
                      unsigned nstreams, bool least_loaded) {
  if (!out || !set_valid(devs, ndevs) || nstreams > 1024)
    return CUV_EINVAL;
  device_set_t *set = calloc(1, sizeof *set + ndevs * sizeof set->member[0]);
  if (!set)
    return CUV_ENOMEM;
  set->least_loaded = least_loaded;
  int rc = 0;
  for (; rc == 0 && set->n < ndevs; set->n++)
    if ((rc = pool_create(&set->member[set->n], devs[set->n], nstreams, true,
                          least_loaded ? least_loaded_next : round_robin_next)) < 0)
      break;
  cuv_policy_ops_t ops = {set_next, set_device, set_destroy};
  if (rc == 0)
    rc = cuv_policy_create(out, &ops, set);
  if (rc < 0)
    set_destroy(set);
  return rc;
}

CUV_EXTERN int cuv_policy_round_robin_devices(cuv_policy_t **out, cuv_device_t *const *devs,
                                              unsigned ndevs, unsigned nstreams) {
  return set_create(out, devs, ndevs, nstreams, false);
}

CUV_EXTERN int cuv_policy_least_loaded_devices(cuv_policy_t **out, cuv_device_t *const *devs,
                                               unsigned ndevs, unsigned nstreams) {
  return set_create(out, devs, ndevs, nstreams, true);
}

/* ---- the device's default ---- */

/* Created once under the device's lock. The device owns its default policy, whose streams
 * therefore do not reference it. Out of line: cuv__device_policy (device.h), once per
 * submission, then saves no registers for it. */
__attribute__((cold)) int cuv__device_policy_create(cuv_device_t *dev, cuv_policy_t **out) {
  int rc = 0;
  pthread_mutex_lock(&dev->lock);
  cuv_policy_t *p = atomic_load(&dev->policy);
  if (!p && (rc = pool_create(&p, dev, 0, false, round_robin_next)) == 0)
    atomic_store_explicit(&dev->policy, p, memory_order_release);
  pthread_mutex_unlock(&dev->lock);
  *out = p;
  return rc;
}

/* Without the lock once created: the release store above publishes a complete policy, and a
 * policy read here is never freed before its device. */
CUV_EXTERN int cuv_device_policy(cuv_device_t *dev, cuv_policy_t **out) {
  if (!dev || !out)
    return CUV_EINVAL;
  return cuv__device_policy(dev, out);
}

int cuv__policy_stream_on(cuv_policy_t *p, cuv_device_t *dev, cuv_stream_t **out) {
  cuv_policy_t *serving = NULL;
  if (p && p->ops.next_stream == set_next)
    serving = set_member(p->state, dev->ordinal);
  else if (p && p->ops.device(p->state) == dev)
    serving = p;
  if (serving && cuv_policy_next_stream(serving, NULL, out) == 0 && (*out)->dev == dev)
    return 0;
  int rc = cuv_device_policy(dev, &serving);
  return rc < 0 ? rc : cuv_policy_next_stream(serving, NULL, out);
}
