/* tcp-infer: the model repository (--model-dir DIR, KServe's --model_dir), as Triton and KServe
 * lay one out: a folder per model, named as the model, holding
 *   config.json        {"layers": [64, 128, 16], "activation": "relu", "max_batch": 256}
 *   model.safetensors  per dense layer i, "layers.i.weight" [out, in] and "layers.i.bias" [out]
 * (tools/write-model.py writes one, numpy optional). "layers" are the widths, inputs first;
 * "activation" (relu, the default, or none) follows every layer but the last; "max_batch"
 * bounds a request's rows. Each model is checked whole (config.json, then safetensors.c's
 * checks of the weights against the config's shapes); one that fails is kept with the reason,
 * not ready and not served, and the others are. Without a repository the one model is the
 * seeded MLP (mlp.c), "mlp". */
#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mlp.h"
#include "repo.h"
#include "safetensors.h"

_Static_assert(sizeof(mlp_weights_t) ==
                   (MLP_HIDDEN * (MLP_IN + 1) + MLP_OUT * (MLP_HIDDEN + 1)) * sizeof(float),
               "mlp_weights_t is its four arrays back to back");
#define ACTIVATION_ELEMS_MAX (1u << 26) /* rows x width of one buffer: 256 MiB of floats */

__attribute__((format(printf, 2, 3))) static int refuse(model_t *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->why, sizeof m->why, fmt, ap);
  va_end(ap);
  return -1;
}

/* A name that goes in a URL path segment and a JSON string as it is. */
static bool name_ok(const char *name) {
  size_t len = strlen(name);
  if (len == 0 || len >= MODEL_NAME_MAX || name[0] == '.')
    return false;
  for (size_t i = 0; i < len; i++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", name[i]))
      return false;
  return true;
}

static int config_uint(model_t *m, const json_t *v, const char *what, unsigned max, unsigned *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
    return refuse(m, "config.json: %s must be an integer from 1 to %u", what, max);
  *out = (unsigned)json_integer_value(v);
  return 0;
}

static int config_layers(model_t *m, const json_t *layers) {
  size_t n = json_array_size(layers);
  if (!json_is_array(layers) || n < 2 || n > MODEL_MAX_LAYERS + 1)
    return refuse(m, "config.json: \"layers\" must be an array of 2 to %u widths, inputs first",
                  MODEL_MAX_LAYERS + 1);
  m->nlayers = (unsigned)n - 1;
  for (size_t i = 0; i < n; i++)
    if (config_uint(m, json_array_get(layers, i), "each of \"layers\"", MODEL_DIM_MAX,
                    &m->dims[i]) != 0)
      return -1;
  return 0;
}

static int config_activation(model_t *m, const json_t *act) {
  m->relu = true;
  if (!act)
    return 0;
  if (json_is_string(act) && !strcmp(json_string_value(act), "relu"))
    return 0;
  if (json_is_string(act) && !strcmp(json_string_value(act), "none"))
    return m->relu = false, 0;
  return refuse(m, "config.json: \"activation\" must be \"relu\" or \"none\"");
}

/* config.json: its keys known, its values in range, and rows x width bounded for the buffers. */
static int read_config(model_t *m, const char *path) {
  json_error_t err;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!root && err.line > 0)
    return refuse(m, "config.json: %s (line %d)", err.text, err.line);
  if (!root)
    return refuse(m, "config.json: %s", err.text);
  const char *key;
  json_t *v;
  int rc = json_is_object(root) ? 0 : refuse(m, "config.json: not a JSON object");
  json_object_foreach(root, key, v) {
    if (rc == 0 && strcmp(key, "layers") && strcmp(key, "activation") && strcmp(key, "max_batch"))
      rc = refuse(m, "config.json: unknown key \"%s\" (layers, activation, max_batch)", key);
  }
  if (rc == 0)
    rc = config_layers(m, json_object_get(root, "layers"));
  if (rc == 0)
    rc = config_activation(m, json_object_get(root, "activation"));
  if (rc == 0)
    rc = config_uint(m, json_object_get(root, "max_batch"), "\"max_batch\"", 65536, &m->max_batch);
  for (unsigned i = 0; rc == 0 && i <= m->nlayers; i++)
    if ((uint64_t)m->max_batch * m->dims[i] > ACTIVATION_ELEMS_MAX)
      rc = refuse(m, "config.json: max_batch %u x width %u is more than %u values", m->max_batch,
                  m->dims[i], ACTIVATION_ELEMS_MAX);
  json_decref(root);
  return rc;
}

/* Room for every layer's weight and bias, in one block. */
static int alloc_weights(model_t *m) {
  size_t total = 0;
  for (unsigned i = 0; i < m->nlayers; i++)
    total += (size_t)m->dims[i + 1] * (m->dims[i] + 1);
  if (!(m->data = malloc(total * sizeof(float))))
    return refuse(m, "out of memory");
  float *at = m->data;
  for (unsigned i = 0; i < m->nlayers; i++) {
    m->weight[i] = at;
    at += (size_t)m->dims[i + 1] * m->dims[i];
    m->bias[i] = at;
    at += m->dims[i + 1];
  }
  return 0;
}

static int read_weights(model_t *m, const char *path) {
  char names[2 * MODEL_MAX_LAYERS][32];
  st_want_t want[2 * MODEL_MAX_LAYERS];
  if (alloc_weights(m) != 0)
    return -1;
  for (unsigned i = 0; i < m->nlayers; i++) {
    snprintf(names[2 * i], sizeof names[0], "layers.%u.weight", i);
    snprintf(names[2 * i + 1], sizeof names[0], "layers.%u.bias", i);
    want[2 * i] = (st_want_t){.name = names[2 * i],
                              .ndim = 2,
                              .shape = {m->dims[i + 1], m->dims[i]},
                              .dst = m->weight[i]};
    want[2 * i + 1] = (st_want_t){
        .name = names[2 * i + 1], .ndim = 1, .shape = {m->dims[i + 1]}, .dst = m->bias[i]};
  }
  char why[sizeof m->why - 32];
  if (safetensors_load(path, want, 2 * m->nlayers, why, sizeof why) == 0)
    return 0;
  return refuse(m, "model.safetensors: %s", why);
}

/* One model folder; m->ready tells whether it loaded. */
static void load_model(model_t *m, const char *dir, const char *name) {
  char path[4096];
  snprintf(m->name, sizeof m->name, "%s", name);
  int rc = 0;
  snprintf(path, sizeof path, "%s/%s/config.json", dir, name);
  rc = read_config(m, path);
  snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, name);
  if (rc == 0)
    rc = read_weights(m, path);
  m->ready = rc == 0;
  if (m->ready)
    return;
  free(m->data);
  m->data = NULL;
  fprintf(stderr, "tcp-infer: model \"%s\" refused, not served: %s\n", m->name, m->why);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_dir(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The model folders' names, sorted (n of them, at most REPO_MAX_MODELS); -1 when dir cannot be
 * read. A name that cannot be a model's is skipped, and said. */
static int folder_names(const char *dir, char **names, unsigned *n) {
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  struct dirent *e;
  *n = 0;
  while ((e = readdir(d)) && *n < REPO_MAX_MODELS) {
    if (e->d_name[0] == '.' || !is_dir(dir, e->d_name))
      continue;
    if (!name_ok(e->d_name)) {
      fprintf(stderr,
              "tcp-infer: folder \"%s\" skipped: a model's name is 1 to %u of "
              "A-Z a-z 0-9 _ . - (not first)\n",
              e->d_name, MODEL_NAME_MAX - 1);
      continue;
    }
    if ((names[*n] = strdup(e->d_name)))
      (*n)++;
  }
  if (e)
    fprintf(stderr, "tcp-infer: %s: %u model folders read, the most served; any more skipped\n",
            dir, REPO_MAX_MODELS);
  closedir(d);
  qsort(names, *n, sizeof *names, by_name);
  return 0;
}

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, len, fmt, ap);
  va_end(ap);
  return -1;
}

int repo_load(const char *dir, model_t **models, unsigned *n, char *why, size_t why_len) {
  if (!dir || !models || !n || !why || !why_len)
    return -1;
  char *names[REPO_MAX_MODELS];
  unsigned count = 0;
  if (folder_names(dir, names, &count) != 0)
    return fail(why, why_len, "%s: cannot read the folder", dir);
  model_t *m = count ? calloc(count, sizeof *m) : NULL;
  for (unsigned i = 0; m && i < count; i++) {
    m[i].index = i;
    load_model(&m[i], dir, names[i]);
  }
  for (unsigned i = 0; i < count; i++)
    free(names[i]);
  if (!count)
    return fail(why, why_len,
                "%s: no model folder in it (one per model: config.json, "
                "model.safetensors)",
                dir);
  if (!m)
    return fail(why, why_len, "out of memory");
  *models = m;
  *n = count;
  return 0;
}

int repo_seeded(model_t **models, unsigned *n, uint64_t seed, unsigned max_batch) {
  if (!models || !n)
    return -1;
  model_t *m = calloc(1, sizeof *m);
  mlp_weights_t *w = malloc(sizeof *w);
  if (!m || !w || !(m->data = malloc(sizeof *w))) {
    free(m);
    free(w);
    return -1;
  }
  mlp_weights_init(w, seed);
  memcpy(m->data, w, sizeof *w); /* mlp_weights_t: w1, b1, w2, b2, floats without padding */
  free(w);
  *m = (model_t){.name = "mlp",
                 .ready = true,
                 .nlayers = 2,
                 .relu = true,
                 .dims = {MLP_IN, MLP_HIDDEN, MLP_OUT},
                 .max_batch = max_batch,
                 .data = m->data};
  m->weight[0] = m->data;
  m->bias[0] = m->weight[0] + MLP_HIDDEN * MLP_IN;
  m->weight[1] = m->bias[0] + MLP_HIDDEN;
  m->bias[1] = m->weight[1] + MLP_OUT * MLP_HIDDEN;
  *models = m;
  *n = 1;
  return 0;
}

void repo_free(model_t *models, unsigned n) {
  for (unsigned i = 0; models && i < n; i++)
    free(models[i].data);
  free(models);
}

const model_t *repo_find(const model_t *models, unsigned n, const char *name, size_t len) {
  for (unsigned i = 0; models && name && i < n; i++)
    if (strlen(models[i].name) == len && !memcmp(models[i].name, name, len))
      return &models[i];
  return NULL;
}

static unsigned max_of(unsigned a, unsigned b) { return a > b ? a : b; }

repo_bounds_t repo_bounds(const model_t *models, unsigned n) {
  repo_bounds_t b = {0};
  for (unsigned i = 0; models && i < n; i++) {
    const model_t *m = &models[i];
    if (!m->ready)
      continue;
    b.in = max_of(b.in, m->dims[0]);
    b.out = max_of(b.out, m->dims[m->nlayers]);
    b.rows = max_of(b.rows, m->max_batch);
    for (unsigned k = 1; k < m->nlayers; k++)
      b.hidden = max_of(b.hidden, m->dims[k]);
    b.two_hidden |= m->nlayers > 2;
  }
  return b;
}
