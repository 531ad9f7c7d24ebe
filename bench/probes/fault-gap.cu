// fault-gap: does a device fault in one process stall another process's work on the same GPU?
// (bench/RESULTS.md, "tcp-infer --isolate": a fault's first answer from the spare.) A plain CUDA
// runtime program, outside the build, for the GPU machine:
//   nvcc -O2 -o /tmp/fault-gap bench/probes/fault-gap.cu && /tmp/fault-gap
// The parent runs a tiny kernel and a synchronize in a loop for 1.5 s and prints every gap of
// more than 2 ms between two completions (when it ended, how long); the child (forked before any
// CUDA call) launches a kernel writing through a bad pointer 300 ms in and prints how long its
// synchronize took to return the error, then exits; the parent prints when it reaped the child
// (its process ended: the driver's teardown of its context included).
#include <cstdio>
#include <ctime>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

static double now_ms() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

__global__ void tiny(int *p) { p[threadIdx.x] += 1; }
__global__ void bad(int *p) { p[threadIdx.x] = 1; }

static void child(double t0) {
  cudaFree(0);
  while (now_ms() - t0 < 300)
    usleep(1000);
  double launched = now_ms();
  bad<<<1, 32>>>((int *)0x10);
  cudaError_t e = cudaDeviceSynchronize();
  printf("child: fault launched at %.1f ms; the synchronize returned %s %.2f ms later\n",
         launched - t0, cudaGetErrorName(e), now_ms() - launched);
  fflush(stdout);
  _exit(3);
}

int main() {
  double t0 = now_ms();
  pid_t pid = fork();
  if (pid == 0)
    child(t0);
  int *buf;
  cudaStream_t s;
  cudaMalloc(&buf, 4096);
  cudaStreamCreate(&s);
  double last = now_ms(), reaped = 0;
  long n = 0;
  int status = 0;
  while (now_ms() - t0 < 1500) {
    tiny<<<1, 32, 0, s>>>(buf);
    cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
      printf("parent: %s\n", cudaGetErrorName(e));
      break;
    }
    double t = now_ms();
    if (t - last > 2)
      printf("parent: no completion for %.2f ms, until %.1f ms\n", t - last, t - t0);
    last = t;
    n++;
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid)
      reaped = t - t0;
  }
  if (!reaped && waitpid(pid, &status, 0) == pid)
    reaped = now_ms() - t0;
  printf("parent: %ld kernels in 1.5 s; the child (exit %d) reaped at %.1f ms\n", n,
         WEXITSTATUS(status), reaped);
  return 0;
}
