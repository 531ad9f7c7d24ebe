#ifndef CUV_LIB_POLICY_H
#define CUV_LIB_POLICY_H

/* policy.c: what the executors ask of a policy beyond the public calls. */

struct cuv_policy_s {
  cuv_policy_ops_t ops;
  void *state;
};

/* cuv_policy_next_stream for a policy that is not NULL: inline for the executors, which ask it
 * once per submission (a call through the PLT and its frame otherwise). */
static inline int cuv__policy_next_stream(cuv_policy_t *p, const cuv_op_t *op,
                                          cuv_stream_t **out) {
  *out = NULL;
  int rc = p->ops.next_stream(p->state, op, out);
  return rc < 0 ? rc : (*out ? 0 : CUV_EINVAL);
}

/* A stream of `dev` for a part of a tree that runs there (fork branches, ops of another device):
 * from `policy` when it serves dev (a policy of dev, or a device set holding it), else from dev's
 * default policy. */
int cuv__policy_stream_on(cuv_policy_t *policy, cuv_device_t *dev, cuv_stream_t **stream);
/* The device's default policy, made at its first use; what cuv_device_policy gives, for a
 * device that is not NULL, inline for the executors (once per submission). */
int cuv__device_policy_create(cuv_device_t *dev, cuv_policy_t **out);
static inline int cuv__device_policy(cuv_device_t *dev, cuv_policy_t **out) {
  *out = atomic_load_explicit(&dev->policy, memory_order_acquire);
  return *out ? 0 : cuv__device_policy_create(dev, out);
}

#endif
