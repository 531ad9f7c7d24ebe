/* A main for the fuzz targets where libFuzzer is not linked (every build but -Dfuzz=enabled): runs
 * LLVMFuzzerTestOneInput once on each file named, or on each file of each folder named, in name
 * order. A folder that does not exist is skipped (a target may have no regressions yet). Exit
 * status 0 when every input ran; a crash, a sanitizer report or a failed check ends it. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *data = malloc(cap);
  size_t n;
  while (data && (n = fread(data + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      uint8_t *grown = realloc(data, cap *= 2);
      if (!grown)
        free(data);
      data = grown;
    }
  }
  fclose(f);
  if (!data)
    return -1;
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
  LLVMFuzzerTestOneInput(data, len);
  free(data);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs every regular file of a folder; returns how many, or -1. */
static int replay_dir(const char *dir) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, by_name);
  if (n < 0)
    return errno == ENOENT ? 0 : -1;
  int ran = 0;
  for (int i = 0; i < n; i++) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
    if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
        strcmp(names[i]->d_name, "README.md") != 0) {
      if (replay_file(path) < 0)
        ran = -1;
      else if (ran >= 0)
        ran++;
    }
    free(names[i]);
  }
  free(names);
  return ran;
}

int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  int total = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    int ran = stat(argv[i], &st) == 0 && S_ISREG(st.st_mode) ? (replay_file(argv[i]) ? -1 : 1)
                                                             : replay_dir(argv[i]);
    if (ran < 0)
      return 1;
    total += ran;
  }
  printf("replayed %d inputs\n", total);
  return 0;
}
