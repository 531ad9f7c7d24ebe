/* tcp-infer: the models a server serves (repo.c): a model repository's (--model-dir), or the
 * seeded MLP. */
#ifndef TCP_INFER_REPO_H
#define TCP_INFER_REPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_LAYERS 8  /* dense layers of a model at most */
#define MODEL_NAME_MAX 64   /* a name's bytes at most, its NUL included */
#define MODEL_DIM_MAX 65536 /* a layer's width at most */
#define REPO_MAX_MODELS 256

/* A model: dense layers dims[0] -> dims[1] -> ... -> dims[nlayers], the activation (ReLU or
 * none) after each layer but the last, each layer's weight ([out][in], row-major) and bias, as
 * mlp_dense (mlp.h) computes them. One that failed to load keeps its name and why, and is not
 * served (its ready is false, it has no weights). */
typedef struct model {
  char name[MODEL_NAME_MAX];
  unsigned index; /* in the server's models: its buffers on each device (model.c) */
  bool ready;
  char why[320]; /* what was refused, when not ready */
  unsigned nlayers, dims[MODEL_MAX_LAYERS + 1];
  bool relu;
  unsigned max_batch;                                       /* rows of one request at most */
  float *weight[MODEL_MAX_LAYERS], *bias[MODEL_MAX_LAYERS]; /* into data */
  float *data;
} model_t;

/* repo.c: the models of a repository, one per folder of dir (its name the folder's, in name
 * order), each from its config.json and model.safetensors, checked; a model that fails is kept,
 * not ready, with the reason (and the reason printed on stderr). 0 and *models (n of them, at
 * least one), or -1 and why (dir unreadable, no model folder in it, out of memory). */
int repo_load(const char *dir, model_t **models, unsigned *n, char *why, size_t why_len);
/* The seeded MLP as the one model, "mlp": mlp.h's sizes, weights mlp_weights_init(seed). */
int repo_seeded(model_t **models, unsigned *n, uint64_t seed, unsigned max_batch);
void repo_free(model_t *models, unsigned n);
/* The model named name[0, len); NULL: none of that name. */
const model_t *repo_find(const model_t *models, unsigned n, const char *name, size_t len);
/* The largest dims[0] (inputs), inner width and dims[nlayers] (outputs) over the ready models,
 * their largest max_batch, and whether one has more than one inner layer. */
typedef struct repo_bounds {
  unsigned in, hidden, out, rows;
  bool two_hidden;
} repo_bounds_t;
repo_bounds_t repo_bounds(const model_t *models, unsigned n);

#endif
