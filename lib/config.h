#ifndef CUV_LIB_CONFIG_H
#define CUV_LIB_CONFIG_H

/* The configuration in force (include/cuv/config.h), at the ground of lib/: config.c reads the
 * environment and checks and holds a configuration, and calls nothing else of cuv's. The driver's
 * initialization (lib/driver.c) applies one, once, before any other part reads it. */

#include <stddef.h>

#include <cuv/config.h>

/* Read by every part of lib/ after initialization; written only by cuv__config_apply. */
extern cuv_config_t cuv__config;

/* 0, or CUV_EINVAL with a sentence in why[n] naming the field and its value. */
int cuv__config_check(const cuv_config_t *config, char *why, size_t n);
/* cuv_config_default, with a sentence in why[n] naming the variable when one is out of range. */
int cuv__config_from_env(cuv_config_t *config, char *why, size_t n);
/* Copies a checked configuration into cuv__config (the driver string included). */
void cuv__config_apply(const cuv_config_t *config);
/* Whether config differs from the one applied (the driver compared by name: NULL is "cuda"); then
 * a sentence in why[n] names the first field that differs and both its values. */
bool cuv__config_differs(const cuv_config_t *config, char *why, size_t n);

#endif
