/* tcp-infer-nvml: GET /metrics' GPU metrics (gpu/nvml.c) on a stand-in NVML (fake-nvml.c, its
 * path in argv[1]): absent when the library does not load, lacks NVML's functions or its init
 * fails (nothing written, not zeros); Triton's four nv_gpu_* gauges of each device otherwise, in
 * Prometheus text that parses, with the readings converted to Triton's units (a ratio, bytes,
 * watts) and a failed reading left out. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"
#include "prom.h"

static const char *fake_path;

/* What nvml_render writes for n (malloc'd; "" when nothing). */
static char *render(const nvml_t *n, size_t *len) {
  char *text = NULL;
  FILE *f = open_memstream(&text, len);
  assert_non_null(f);
  nvml_render(n, f);
  assert_int_equal(fclose(f), 0);
  return text;
}

static void test_absent(void **state) {
  assert_null(nvml_open(NULL));
  assert_null(nvml_open("libnvidia-ml-no-such.so.1"));
  assert_null(nvml_open("libm.so.6")); /* loads, but is no NVML */
  setenv("FAKE_NVML_INIT_FAILS", "1", 1);
  assert_null(nvml_open(fake_path)); /* NVML without a driver */
  unsetenv("FAKE_NVML_INIT_FAILS");
  size_t len;
  char *text = render(NULL, &len);
  assert_int_equal(len, 0);
  free(text);
  nvml_close(NULL);
}

static double value(const prom_t *p, const char *name, const char *uuid) {
  char labels[64];
  snprintf(labels, sizeof labels, "gpu_uuid=\"%s\"", uuid);
  const prom_sample_t *s = prom_find(p, name, labels);
  if (!s)
    fail_msg("%s{%s} missing", name, labels);
  return s->value;
}

static void test_present(void **state) {
  nvml_t *n = nvml_open(fake_path);
  assert_non_null(n);
  size_t len;
  char *text = render(n, &len);
  prom_t p;
  if (prom_parse(&p, text, len) != 0)
    fail_msg("%s:\n%s", p.error, text);
  assert_true(value(&p, "nv_gpu_utilization", "GPU-fake-0") == 0.37);
  assert_true(value(&p, "nv_gpu_utilization", "GPU-fake-1") == 1.0);
  assert_true(value(&p, "nv_gpu_memory_total_bytes", "GPU-fake-0") == 85899345920.0);
  assert_true(value(&p, "nv_gpu_memory_used_bytes", "GPU-fake-0") == 1073741824.0);
  assert_true(value(&p, "nv_gpu_memory_total_bytes", "GPU-fake-1") == 150323855360.0);
  assert_true(value(&p, "nv_gpu_memory_used_bytes", "GPU-fake-1") == 150000000000.0);
  assert_true(value(&p, "nv_gpu_power_usage", "GPU-fake-0") == 71.5);
  assert_null(prom_find(&p, "nv_gpu_power_usage", "gpu_uuid=\"GPU-fake-1\""));
  assert_int_equal(p.n, 7);
  assert_non_null(strstr(text, "# TYPE nv_gpu_power_usage gauge\n"));
  prom_free(&p);
  free(text);
  nvml_close(n);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: tcp-infer-nvml-test PATH/fake-nvml.so\n");
    return 2;
  }
  fake_path = argv[1];
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_absent),
                                     cmocka_unit_test(test_present)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
