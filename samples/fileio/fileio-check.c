/* fileio-check: the fileio sample's test. Fresh random input of an odd size (the last chunk is
 * short) goes through the sample; its output must match the host reference byte for byte
 * (keystream.h), and the loop's timer must have ticked while GPU work was in flight.
 *
 *   fileio-check [bytes] [chunk-bytes] [slots] [stage-us]
 *
 * Exit status: 0 when both hold, 77 when the sample finds no CUDA driver, 1 otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "keystream.h"

static int write_file(const char *path, const uint8_t *data, size_t bytes) {
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(data, 1, bytes, f) == bytes;
  return (f && fclose(f) == 0 && ok) ? 0 : -1;
}

/* The whole file, or NULL; its size in *bytes. */
static uint8_t *read_file(const char *path, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  uint8_t *data = NULL;
  long size;
  if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (data = malloc((size_t)size + 1)) && fread(data, 1, (size_t)size, f) == (size_t)size)
    *bytes = (size_t)size;
  else
    free(data), data = NULL;
  if (f)
    fclose(f);
  return data;
}

/* Runs the sample, echoes its output and reads from it how often the timer ticked while GPU
 * work was in flight (-1 when it does not say). Returns the sample's exit status. */
static int run_sample(const char *in, const char *out, char **argv, int argc, long *ticks) {
  char cmd[4096], line[1024];
  snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' %s %s %s 2>&1", FILEIO_PATH, in, out,
           argc > 2 ? argv[2] : "65536", argc > 3 ? argv[3] : "4", argc > 4 ? argv[4] : "2000");
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  *ticks = -1;
  while (fgets(line, sizeof line, p)) {
    fputs(line, stdout);
    const char *at = strstr(line, "the loop ticked ");
    if (at)
      *ticks = strtol(at + strlen("the loop ticked "), NULL, 10);
  }
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The first byte where out differs from in XORed with the keystream, or -1. */
static long first_difference(const uint8_t *in, const uint8_t *out, size_t bytes) {
  for (size_t i = 0; i < bytes; i++)
    if (out[i] != (uint8_t)(in[i] ^ fileio_key_byte(i)))
      return (long)i;
  return -1;
}

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 10) : (1u << 20) + 4321;
  unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
  char dir[] = "/tmp/fileio-check.XXXXXX", in[64], out[64];
  uint8_t *data = malloc(bytes + 1);
  if (!data || !mkdtemp(dir))
    return EXIT_FAILURE;
  snprintf(in, sizeof in, "%s/in", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  printf("fileio-check: %zu random bytes, seed %u\n", bytes, seed);
  for (size_t i = 0; i < bytes; i++) {
    seed = seed * 1664525u + 1013904223u;
    data[i] = (uint8_t)(seed >> 24);
  }

  long ticks;
  size_t got = 0;
  int status = write_file(in, data, bytes) == 0 ? run_sample(in, out, argv, argc, &ticks) : -1;
  uint8_t *result = status == 0 ? read_file(out, &got) : NULL;
  long diff = result && got == bytes ? first_difference(data, result, bytes) : -1;
  int ok = status == 0 && result && got == bytes && diff < 0 && ticks > 0;
  if (status == 0 && (!result || got != bytes))
    printf("fileio-check: the output has %zu bytes, not %zu\n", got, bytes);
  if (diff >= 0)
    printf("fileio-check: byte %ld differs from the host reference\n", diff);
  if (status == 0 && ticks <= 0)
    printf("fileio-check: the timer never ticked while GPU work was in flight\n");
  unlink(in);
  unlink(out);
  rmdir(dir);
  free(data);
  free(result);
  if (status == 77)
    return 77;
  printf("fileio-check: %s\n", ok ? "OK" : "FAILED");
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
