/* What every entry point does first (SIM_ENTER): the call is counted, may be failed by
 * cuv_sim_fail, and is checked against the driver's and the current context's state. Also
 * CUV_SIM_HIDE, the entry points whose lookups fail. */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "enter.h"

/* Entry ids by name, for cuv_sim_fail and cuv_sim_calls. */
static const char *const entry_names[SIM_ID_COUNT] = {
#define SIM__NAME(name) #name,
    SIM_ENTRY_POINTS(SIM__NAME)
#undef SIM__NAME
};

static int entry_find(const char *name) {
  for (int i = 0; i < SIM_ID_COUNT; i++)
    if (strcmp(entry_names[i], name) == 0)
      return i;
  return -1;
}

/* ---- Call counting and failure injection ----------------------------------------------------- */

/* A failure rule. Counting is relative to the rule: `start` is the entry's call count when the
 * rule was added, so nth = 1 fails the next call. */
struct sim_rule {
  enum sim_entry_id id;
  unsigned long start;
  unsigned nth; /* 0 = every call */
  CUresult result;
  struct sim_rule *next;
};

static atomic_ulong calls[SIM_ID_COUNT];
static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_rule *rules;
static struct sim_rule *rules_tail;
static atomic_uint nrules; /* lets the common no-rule path skip rules_lock */

/* The first rule (in the order added) matching call number n of id, or CUDA_SUCCESS. */
static CUresult rule_match(enum sim_entry_id id, unsigned long n) {
  CUresult result = CUDA_SUCCESS;
  pthread_mutex_lock(&rules_lock);
  for (struct sim_rule *r = rules; r; r = r->next) {
    if (r->id != id)
      continue;
    /* n <= start: the call was counted before the rule existed. */
    if (r->nth == 0 || (n > r->start && n - r->start == r->nth)) {
      result = r->result;
      break;
    }
  }
  pthread_mutex_unlock(&rules_lock);
  return result;
}

CUresult sim_enter(enum sim_entry_id id, enum sim_enter_checks checks) {
  unsigned long n = atomic_fetch_add_explicit(&calls[id], 1, memory_order_relaxed) + 1;
  if (atomic_load_explicit(&nrules, memory_order_acquire) != 0) {
    CUresult r = rule_match(id, n);
    if (r != CUDA_SUCCESS)
      return r;
  }
  if (checks >= SIM_CHECK_INIT && !sim_initialized())
    return CUDA_ERROR_NOT_INITIALIZED;
  return checks >= SIM_CHECK_CTX ? sim_ctx_entry_check(checks == SIM_CHECK_SYNC) : CUDA_SUCCESS;
}

CUV_SIM_EXTERN void cuv_sim_fail(const char *entry, unsigned nth, int result) {
  int id = entry ? entry_find(entry) : -1;
  if (id < 0) {
    fprintf(stderr, "cuv-sim: cuv_sim_fail: unknown entry point '%s' ignored\n",
            entry ? entry : "(null)");
    return;
  }
  struct sim_rule *r = calloc(1, sizeof *r);
  if (!r)
    return;
  r->id = (enum sim_entry_id)id;
  r->nth = nth;
  r->result = (CUresult)result;
  pthread_mutex_lock(&rules_lock);
  r->start = atomic_load_explicit(&calls[id], memory_order_relaxed);
  if (rules_tail)
    rules_tail->next = r;
  else
    rules = r;
  rules_tail = r;
  atomic_fetch_add_explicit(&nrules, 1, memory_order_release);
  pthread_mutex_unlock(&rules_lock);
}

CUV_SIM_EXTERN void cuv_sim_fail_clear(void) {
  pthread_mutex_lock(&rules_lock);
  struct sim_rule *r = rules;
  rules = rules_tail = NULL;
  atomic_store_explicit(&nrules, 0, memory_order_release);
  pthread_mutex_unlock(&rules_lock);
  while (r) {
    struct sim_rule *next = r->next;
    free(r);
    r = next;
  }
}

CUV_SIM_EXTERN unsigned long cuv_sim_calls(const char *entry) {
  int id = entry ? entry_find(entry) : -1;
  return id < 0 ? 0 : atomic_load_explicit(&calls[id], memory_order_relaxed);
}

/* ---- Hidden entry points --------------------------------------------------------------------- */

/* CUV_SIM_HIDE=name,name... makes lookups of those entry points fail as on an older driver that
 * lacks them (to test cuv's handling of optional entry points). Read at each lookup. */
bool sim_entry_hidden(const char *name) {
  const char *list = getenv("CUV_SIM_HIDE");
  size_t len = strlen(name);
  while (list && *list) {
    const char *end = strchr(list, ',');
    size_t n = end ? (size_t)(end - list) : strlen(list);
    if (n == len && strncmp(list, name, n) == 0)
      return true;
    list = end ? end + 1 : NULL;
  }
  return false;
}
