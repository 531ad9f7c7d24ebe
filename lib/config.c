/* Configuration: the defaults, the environment (CUV_* names first, the older CUDA_ASYNC_* names
 * as aliases), the checks, and the one configuration in force. It is applied once, when the
 * driver is initialized (lib/driver.c), so the completion path of a process never changes under
 * its feet. Nothing here calls another part of cuv. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define SPIN_BUDGET_MAX_US 1000000u
#define UV_POLL_MAX_US 1000000u
#define SUBMIT_THREADS_MAX 64u
#define SUBMIT_RING_MAX 65536u
#define STREAMS_MAX 1024u /* as many as a pool policy takes */

#define DEFAULTS                                                                                  \
  {.driver = "cuda",                                                                              \
   .spin_budget_us = 20,                                                                          \
   .host_sync = CUV_HOST_SYNC_OFF,                                                                \
   .strict_hazards = false,                                                                       \
   .uv_poll_max_us = 1000,                                                                        \
   .submit_threads = 4,                                                                           \
   .submit_inline = CUV_SUBMIT_INLINE_IDLE,                                                       \
   .submit_ring = 1024,                                                                           \
   .nccl = NULL,                                                                                  \
   .streams = 4}

static const cuv_config_t defaults = DEFAULTS;
static char driver_copy[PATH_MAX];
static char nccl_copy[PATH_MAX];
cuv_config_t cuv__config = DEFAULTS;

/* The value of a setting's variable: its CUV_* name, else its alias; NULL when both are unset or
 * empty. *used gets the name read, for messages. */
static const char *env_value(const char *name, const char *alias, const char **used) {
  const char *text = getenv(name);
  *used = name;
  if ((!text || !*text) && alias) {
    text = getenv(alias);
    *used = alias;
  }
  return text && *text ? text : NULL;
}

/* A decimal number in [min, max] (no sign, no trailing characters). */
static bool parse_unsigned(const char *text, unsigned min, unsigned max, unsigned *out) {
  if (*text < '0' || *text > '9')
    return false;
  char *end;
  unsigned long value = strtoul(text, &end, 10);
  if (*end != '\0' || value < min || value > max)
    return false;
  *out = (unsigned)value;
  return true;
}

/* The index of text among three names (an enum's values in order), or -1. */
static int parse_name3(const char *text, const char *a, const char *b, const char *c) {
  const char *const names[] = {a, b, c};
  for (int i = 0; i < 3; i++)
    if (strcmp(text, names[i]) == 0)
      return i;
  return -1;
}

/* The seed's spellings too: spin or spinwait, block or blocking. */
static bool parse_host_sync(const char *text, cuv_host_sync_t *out) {
  int i = parse_name3(text, "off", "spin", "block");
  if (i < 0)
    i = parse_name3(text, "off", "spinwait", "blocking");
  if (i >= 0)
    *out = (cuv_host_sync_t)i;
  return i >= 0;
}

static bool parse_submit_inline(const char *text, cuv_submit_inline_t *out) {
  int i = parse_name3(text, "idle", "never", "always");
  if (i >= 0)
    *out = (cuv_submit_inline_t)i;
  return i >= 0;
}

static bool power_of_two(unsigned v) { return v && (v & (v - 1)) == 0; }

static bool parse_bool(const char *text, bool *out) {
  if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0)
    return false;
  *out = text[0] == '1';
  return true;
}

/* Records the first bad variable in why; the field keeps its default. */
static int refuse_env(const char *name, const char *text, const char *range, char *why,
                      size_t n) {
  if (why && n && !*why)
    snprintf(why, n, "%s=%s: expected %s", name, text, range);
  return CUV_EINVAL;
}

/* "cuda", "sim", or a path: a name with a '/' that fits a path buffer. */
static bool driver_valid(const char *driver) {
  if (!driver || strcmp(driver, "cuda") == 0 || strcmp(driver, "sim") == 0)
    return true;
  return strchr(driver, '/') && strlen(driver) < sizeof driver_copy;
}

/* NULL or "" (the default), "sim", or a path: a name with a '/' that fits a path buffer. */
static bool nccl_valid(const char *nccl) {
  if (!nccl || !*nccl || strcmp(nccl, "sim") == 0)
    return true;
  return strchr(nccl, '/') && strlen(nccl) < sizeof nccl_copy;
}

/* The submission engine's variables. */
static int env_engine(cuv_config_t *c, char *why, size_t n, int rc) {
  const char *name, *text;
  if ((text = env_value("CUV_SUBMIT_THREADS", NULL, &name)) &&
      !parse_unsigned(text, 0, SUBMIT_THREADS_MAX, &c->submit_threads))
    rc = refuse_env(name, text, "threads from 0 to 64", why, n);
  if ((text = env_value("CUV_SUBMIT_INLINE", NULL, &name)) &&
      !parse_submit_inline(text, &c->submit_inline))
    rc = refuse_env(name, text, "idle, never or always", why, n);
  unsigned ring = 0;
  if ((text = env_value("CUV_SUBMIT_RING", NULL, &name))) {
    if (parse_unsigned(text, 2, SUBMIT_RING_MAX, &ring) && power_of_two(ring))
      c->submit_ring = ring;
    else
      rc = refuse_env(name, text, "a power of two from 2 to 65536", why, n);
  }
  return rc;
}

int cuv__config_from_env(cuv_config_t *c, char *why, size_t n) {
  if (why && n)
    why[0] = '\0';
  if (!c)
    return CUV_EINVAL;
  *c = defaults;
  int rc = 0;
  const char *name, *text;
  if ((text = env_value("CUV_DRIVER", NULL, &name))) {
    if (driver_valid(text))
      c->driver = text;
    else
      rc = refuse_env(name, text, "cuda, sim or the path of a library (with a '/')", why, n);
  }
  if ((text = env_value("CUV_SPIN_BUDGET_US", "CUDA_ASYNC_SPIN_BUDGET_US", &name)) &&
      !parse_unsigned(text, 0, SPIN_BUDGET_MAX_US, &c->spin_budget_us))
    rc = refuse_env(name, text, "microseconds from 0 to 1000000", why, n);
  if ((text = env_value("CUV_HOST_SYNC", "CUDA_ASYNC_HOST_SYNC", &name)) &&
      !parse_host_sync(text, &c->host_sync))
    rc = refuse_env(name, text, "off, spin or block", why, n);
  if ((text = env_value("CUV_STRICT_HAZARDS", NULL, &name)) &&
      !parse_bool(text, &c->strict_hazards))
    rc = refuse_env(name, text, "0 or 1", why, n);
  if ((text = env_value("CUV_UV_POLL_MAX_US", NULL, &name)) &&
      !parse_unsigned(text, 0, UV_POLL_MAX_US, &c->uv_poll_max_us))
    rc = refuse_env(name, text, "microseconds from 0 to 1000000", why, n);
  if ((text = env_value("CUV_STREAMS", NULL, &name)) &&
      !parse_unsigned(text, 1, STREAMS_MAX, &c->streams))
    rc = refuse_env(name, text, "streams from 1 to 1024", why, n);
  if ((text = env_value("CUV_NCCL", NULL, &name))) {
    if (nccl_valid(text))
      c->nccl = text;
    else
      rc = refuse_env(name, text, "sim or the path of a library (with a '/')", why, n);
  }
  return env_engine(c, why, n, rc);
}

CUV_EXTERN int cuv_config_default(cuv_config_t *config) {
  return cuv__config_from_env(config, NULL, 0);
}

int cuv__config_check(const cuv_config_t *c, char *why, size_t n) {
  const char *bad = NULL;
  if (!c)
    bad = "no configuration (NULL)";
  else if (!driver_valid(c->driver))
    bad = "driver: neither \"cuda\", \"sim\" nor the path of a library (with a '/')";
  else if (c->spin_budget_us > SPIN_BUDGET_MAX_US)
    bad = "spin_budget_us: more than 1000000";
  else if (c->host_sync != CUV_HOST_SYNC_OFF && c->host_sync != CUV_HOST_SYNC_SPIN &&
           c->host_sync != CUV_HOST_SYNC_BLOCK)
    bad = "host_sync: not a cuv_host_sync_t";
  else if (c->uv_poll_max_us > UV_POLL_MAX_US)
    bad = "uv_poll_max_us: more than 1000000";
  else if (c->submit_threads > SUBMIT_THREADS_MAX)
    bad = "submit_threads: more than 64";
  else if (c->submit_inline != CUV_SUBMIT_INLINE_IDLE &&
           c->submit_inline != CUV_SUBMIT_INLINE_NEVER &&
           c->submit_inline != CUV_SUBMIT_INLINE_ALWAYS)
    bad = "submit_inline: not a cuv_submit_inline_t";
  else if (c->submit_ring < 2 || c->submit_ring > SUBMIT_RING_MAX || !power_of_two(c->submit_ring))
    bad = "submit_ring: not a power of two from 2 to 65536";
  else if (c->streams < 1 || c->streams > STREAMS_MAX)
    bad = "streams: not from 1 to 1024";
  else if (!nccl_valid(c->nccl))
    bad = "nccl: neither \"sim\" nor the path of a library (with a '/')";
  if (!bad)
    return 0;
  if (why && n) {
    if (c && c->driver && strstr(bad, "driver") == bad)
      snprintf(why, n, "invalid configuration: %s: \"%s\"", bad, c->driver);
    else
      snprintf(why, n, "invalid configuration: %s", bad);
  }
  return CUV_EINVAL;
}

static const char *driver_name(const char *driver) { return driver ? driver : "cuda"; }

/* The NCCL setting with its default spelled "" (NULL and "" mean the same). */
static const char *nccl_name(const char *nccl) { return nccl ? nccl : ""; }

void cuv__config_apply(const cuv_config_t *c) {
  cuv__config = *c;
  snprintf(driver_copy, sizeof driver_copy, "%s", driver_name(c->driver));
  cuv__config.driver = driver_copy;
  snprintf(nccl_copy, sizeof nccl_copy, "%s", nccl_name(c->nccl));
  cuv__config.nccl = nccl_copy;
}

/* The sentence of a field that differs, its value in force first. */
static bool differs_text(char *why, size_t n, const char *field, const char *held,
                         const char *asked) {
  if (why && n)
    snprintf(why, n, "a configuration is in force already: its %s is \"%s\", not \"%s\"", field,
             held, asked);
  return true;
}

static bool differs_number(char *why, size_t n, const char *field, unsigned held, unsigned asked) {
  if (why && n)
    snprintf(why, n, "a configuration is in force already: its %s is %u, not %u", field, held,
             asked);
  return true;
}

bool cuv__config_differs(const cuv_config_t *c, char *why, size_t n) {
  const cuv_config_t *a = &cuv__config;
  if (strcmp(driver_name(c->driver), a->driver) != 0)
    return differs_text(why, n, "driver", a->driver, driver_name(c->driver));
#define CUV__DIFFERS(f)                                                                           \
  if ((unsigned)c->f != (unsigned)a->f)                                                           \
    return differs_number(why, n, #f, (unsigned)a->f, (unsigned)c->f);
  CUV__DIFFERS(spin_budget_us)
  CUV__DIFFERS(host_sync)
  CUV__DIFFERS(strict_hazards)
  CUV__DIFFERS(uv_poll_max_us)
  CUV__DIFFERS(submit_threads)
  CUV__DIFFERS(submit_inline)
  CUV__DIFFERS(submit_ring)
  CUV__DIFFERS(streams)
#undef CUV__DIFFERS
  if (strcmp(nccl_name(c->nccl), a->nccl) != 0)
    return differs_text(why, n, "nccl", a->nccl, nccl_name(c->nccl));
  return false;
}
