/* tcp-infer-run: starts a server on an ephemeral port, runs clients against it, stops it.
 *
 *   tcp-infer-run [--tap] SERVER [ARGS...] -- CLIENT [ARGS...] [-- CLIENT [ARGS...]]...
 *
 * The server is started with "--port 0" added; its output goes to stderr. Once it printed
 * "listening on ADDR:PORT", each client runs in turn (stdout and stderr inherited), with
 * every "{port}" in its arguments replaced by the port, or "--port PORT" added when none has one,
 * and the server's process id in its environment as TCP_INFER_SERVER_PID (tools/cpu.sh reads it).
 * Then the server gets SIGTERM and must exit 0 (under ASan, a leak or error makes that fail).
 *
 * Exit status: 77 when the server reports no CUDA driver (77 before listening: a skipped test;
 * with --tap, for a client that speaks TAP, "1..0 # SKIP" and 0 instead, which Meson's TAP
 * parser reads as skipped), and with --skip-refused also when it refused its options (the gpu
 * suite's tests of more devices than a machine may have); 2 when the server refused its options
 * or the command line is wrong;
 * else the first failing client's status; else 1 when the server failed; else 0. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#define EXIT_SKIP 77

static void *forward(void *arg) {
  FILE *in = arg;
  char line[1024];
  while (fgets(line, sizeof line, in))
    fputs(line, stderr);
  return NULL;
}

static int status_of(int wstatus) {
  if (WIFEXITED(wstatus))
    return WEXITSTATUS(wstatus);
  return 128 + (WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
}

static pid_t spawn(char **argv, int stdout_fd) {
  pid_t parent = getpid(), pid = fork();
  if (pid == 0) {
    /* A runner killed (meson's timeout) takes its server and client along: a hung test leaves no
     * server behind to spin on the machine. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
      _exit(127);
    if (stdout_fd >= 0) {
      dup2(stdout_fd, STDOUT_FILENO);
      close(stdout_fd);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "tcp-infer-run: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

/* Runs argv[0..n) with {port} substituted (or --port added); returns its exit status. */
static int run_client(char **args, int n, const char *port) {
  char **argv = calloc((size_t)n + 3, sizeof *argv);
  char **owned = calloc((size_t)n + 1, sizeof *owned);
  if (!argv || !owned)
    return 1;
  int found = 0;
  for (int i = 0; i < n; i++) {
    const char *at = strstr(args[i], "{port}");
    if (!at) {
      argv[i] = args[i];
      continue;
    }
    size_t len = strlen(args[i]) - 6 + strlen(port) + 1;
    owned[i] = malloc(len);
    if (!owned[i])
      return 1;
    snprintf(owned[i], len, "%.*s%s%s", (int)(at - args[i]), args[i], port, at + 6);
    argv[i] = owned[i];
    found = 1;
  }
  if (!found) {
    argv[n] = "--port";
    argv[n + 1] = (char *)port;
  }
  fflush(stdout);
  pid_t pid = spawn(argv, -1);
  int wstatus = 0;
  int rc = pid < 0 || waitpid(pid, &wstatus, 0) < 0 ? 1 : status_of(wstatus);
  for (int i = 0; i < n; i++)
    free(owned[i]);
  free(owned);
  free(argv);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f, "usage: tcp-infer-run [--tap] [--skip-refused] SERVER [ARGS...] -- CLIENT [ARGS...]"
             " [-- CLIENT...]\n"
             "  starts SERVER with --port 0, runs each CLIENT with its port, stops the server;\n"
             "  --tap: a client speaking TAP (a skip then reads 1..0); --skip-refused: a server\n"
             "  that refuses its options is a skip; --help, --version\n");
}

typedef struct run_opts {
  int tap, skip_refused;
} run_opts_t;

static bool run_option(int ch, void *arg) {
  run_opts_t *o = arg;
  if (ch == 't')
    o->tap = 1;
  else if (ch == 's')
    o->skip_refused = 1;
  return ch == 't' || ch == 's';
}

/* Its own options, before SERVER (getopt_long stops at the first argument that is none); the
 * index of SERVER, or -CLI_USAGE after the message. */
static int own_options(int argc, char **argv, run_opts_t *o) {
  static const struct option longs[] = {{"tap", no_argument, NULL, 't'},
                                        {"skip-refused", no_argument, NULL, 's'},
                                        {"help", no_argument, NULL, 'h'},
                                        {"version", no_argument, NULL, 'V'},
                                        {NULL, 0, NULL, 0}};
  return cli_parse(argc, argv, "+", longs, run_option, usage, o) ? -CLI_USAGE : optind;
}

int main(int argc, char **argv) {
  run_opts_t opts = {0, 0};
  int first = own_options(argc, argv, &opts), tap = opts.tap;
  if (first < 0)
    return -first;
  argv += first - 1; /* argv[1] is SERVER from here on */
  argc -= first - 1;
  int sep = 1;
  while (sep < argc && strcmp(argv[sep], "--"))
    sep++;
  if (sep == 1 || sep >= argc - 1)
    return cli_usage_error("a SERVER, then -- and at least one CLIENT");
  signal(SIGPIPE, SIG_IGN);

  char **server = calloc((size_t)sep + 2, sizeof *server);
  if (!server)
    return 1;
  memcpy(server, argv + 1, (size_t)(sep - 1) * sizeof *server);
  server[sep - 1] = "--port";
  server[sep] = "0";
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  pid_t spid = spawn(server, fds[1]);
  close(fds[1]);
  if (spid < 0)
    return 1;
  FILE *out = fdopen(fds[0], "r");
  char line[1024], port[16] = "";
  while (!port[0] && out && fgets(line, sizeof line, out)) {
    fputs(line, stderr);
    unsigned p;
    const char *colon = strrchr(line, ':'); /* "listening on ADDR:PORT", [v6]:PORT too */
    if (!strncmp(line, "listening on ", 13) && colon && sscanf(colon + 1, "%u", &p) == 1)
      snprintf(port, sizeof port, "%u", p);
  }
  if (!port[0]) { /* the server ended before listening */
    int wstatus = 0;
    waitpid(spid, &wstatus, 0);
    if (out)
      fclose(out);
    free(server);
    int rc = status_of(wstatus);
    fprintf(stderr, "tcp-infer-run: the server exited with status %d before listening\n", rc);
    if (rc == CLI_USAGE && opts.skip_refused)
      rc = EXIT_SKIP;
    if (rc == EXIT_SKIP && tap) {
      printf("1..0 # SKIP no CUDA driver, or options this machine cannot serve\n");
      return 0;
    }
    return rc == EXIT_SKIP || rc == CLI_USAGE ? rc : 1; /* a usage error stays one */
  }
  pthread_t fwd;
  int forwarding = pthread_create(&fwd, NULL, forward, out) == 0;
  char spid_text[24];
  snprintf(spid_text, sizeof spid_text, "%ld", (long)spid);
  setenv("TCP_INFER_SERVER_PID", spid_text, 1);

  int result = 0;
  for (int i = sep + 1; i < argc;) {
    int end = i;
    while (end < argc && strcmp(argv[end], "--"))
      end++;
    if (end > i) {
      int rc = run_client(argv + i, end - i, port);
      if (rc != 0) {
        fprintf(stderr, "tcp-infer-run: %s exited with status %d\n", argv[i], rc);
        if (result == 0)
          result = rc;
      }
    }
    i = end + 1;
  }

  kill(spid, SIGTERM);
  int wstatus = 0;
  waitpid(spid, &wstatus, 0);
  if (forwarding)
    pthread_join(fwd, NULL);
  fclose(out);
  free(server);
  int src = status_of(wstatus);
  if (src != 0) {
    fprintf(stderr, "tcp-infer-run: the server exited with status %d\n", src);
    if (result == 0)
      result = 1;
  }
  return result;
}
