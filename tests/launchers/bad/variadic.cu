// expect: 2: kernel log is variadic
extern "C" __global__ void log(const char *fmt, ...) {}
