/* Built as C++11 against an installed cuv (pkg-config cuv) by check.sh and run on the simulator:
 * the C API links from C++ (cuv.h declares it extern "C"), and a tuple's items are read with
 * cuv_tuple_get, as C++ reads them (cuv.h has no flexible array member in C++). */
#include <cstdio>
#include <cstring>

#include <cuv.h>

static int fail(const char *what, int rc) {
  std::fprintf(stderr, "%s: %s (%s)\n", what, cuv_err_name(rc), cuv_strerror(rc));
  return 1;
}

int main() {
  if (std::strcmp(cuv_version_string(), CUV_VERSION_STRING) != 0)
    return fail("version", 0);
  int rc = cuv_init();
  cuv_device_t *dev = nullptr;
  if (rc != 0 || (rc = cuv_device_open(&dev, 0)) != 0)
    return fail("init", rc);
  static int one = 1, two = 2;
  cuv_op_t *ops[] = {cuv_value(&one, nullptr), cuv_value(&two, nullptr)};
  cuv_output_t out;
  if ((rc = cuv_sync(cuv_zip(ops, 2), &out)) != 0)
    return fail("cuv_sync", rc);
  const cuv_output_t *a = cuv_tuple_get(&out, 0), *b = cuv_tuple_get(&out, 1);
  bool right = a && b && a->data == &one && b->data == &two && !cuv_tuple_get(&out, 2);
  cuv_output_release(&out);
  cuv_device_unref(dev);
  std::printf("consumer (C++) %s\n", right ? "OK" : "got the wrong tuple");
  return right ? 0 : 1;
}
