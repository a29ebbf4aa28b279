/*
 * Per-operation latency through libgak's C ABI, on each binding: the C
 * column of host/latency.py (the same calls as examples/latency.rs).
 *
 *   cargo build --release -p gak-c
 *   cc -O2 host/c/bench/latency.c -Ihost/c/include target/release/libgak.a \
 *      -lgcc_s -lutil -lrt -lpthread -lm -ldl -o latency && ./latency [N]
 *
 * PostgreSQL is measured when GAK_PG_DSN (default the local server) answers.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gak.h"

#define S(text) ((gak_str){(text), strlen(text)})

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void must(gak_error *e, const char *what) {
  if (e != NULL) {
    fprintf(stderr, "latency: %s: %s\n", what, gak_error_message(e));
    gak_error_free(e);
    exit(1);
  }
}

static void report(const char *label, double seconds, unsigned n) {
  double per = seconds / n;
  printf("%-44s %9.1f µs/op %9.0f ops/s\n", label, per * 1e6, 1.0 / per);
}

typedef void (*op)(const gak_kernel *k, unsigned i);

static const char *prefix = "";

static void claim(const gak_kernel *k, unsigned i) {
  char id[32];
  snprintf(id, sizeof id, "%st%u", prefix, i);
  gak_task t = {0};
  must(gak_taskboard_claim(k, S(id), S("w"), 60000, &t), "claim");
  gak_task_clear(&t);
}

static void acquire(const gak_kernel *k, unsigned i) {
  char key[32], res[32];
  snprintf(key, sizeof key, "%sk%u", prefix, i);
  snprintf(res, sizeof res, "%sr%u", prefix, i);
  gak_action a = {S(key), S(res), GAK_RETRY_SAFE, {NULL, 0}};
  gak_acquired out = {0};
  must(gak_sideeffect_acquire(k, a, 60000, &out), "acquire");
  gak_acquired_clear(&out);
}

static void replay(const gak_kernel *k, unsigned i) {
  (void)i;
  gak_action a = {S("done-key"), S("r-done"), GAK_RETRY_SAFE, {NULL, 0}};
  gak_acquired out = {0};
  must(gak_sideeffect_acquire(k, a, 60000, &out), "acquire");
  if (out.kind == GAK_ACQUIRED_GRANTED) {
    gak_bytes r = {0};
    must(gak_sideeffect_complete(k, a, out.lease, (gak_bytes){(const uint8_t *)"ok", 2}, &r), "complete");
    gak_bytes_clear(&r);
  }
  gak_acquired_clear(&out);
}

static void plan(const gak_kernel *k, unsigned i) {
  (void)i;
  gak_str a = S("a"), b = S("b");
  gak_step_def steps[3] = {{S("a"), NULL, 0}, {S("b"), &a, 1}, {S("c"), &b, 1}};
  gak_plan p = {0};
  must(gak_checkpoint_build_plan(k, steps, 3, NULL, &p), "plan");
  gak_plan_clear(&p);
}

static void measure(const gak_kernel *k, const char *label, unsigned n, op f) {
  for (unsigned i = 0; i < n / 10; i++) f(k, i); /* warm-up */
  double start = now_s();
  for (unsigned i = n / 10; i < n / 10 + n; i++) f(k, i);
  report(label, now_s() - start, n);
}

static void seed(const gak_kernel *k, unsigned n) {
  gak_task_seed *seeds = calloc(n, sizeof *seeds);
  char (*ids)[32] = calloc(n, sizeof *ids);
  for (unsigned i = 0; i < n; i++) {
    snprintf(ids[i], sizeof ids[i], "%st%u", prefix, i);
    seeds[i].id = S(ids[i]);
  }
  for (unsigned from = 0; from < n; from += 10000) {
    unsigned len = n - from < 10000 ? n - from : 10000;
    must(gak_taskboard_seed(k, seeds + from, len), "seed");
  }
  free(ids);
  free(seeds);
}

static void run(const char *url, unsigned n) {
  gak_kernel *k = NULL;
  must(gak_kernel_open(S(url), &k), "open");
  printf("-- %s\n", url);
  prefix = "";
  seed(k, n + n / 10);
  measure(k, "taskboard.claim (fresh task)", n, claim);
  measure(k, "sideeffect.acquire (fresh key)", n, acquire);
  measure(k, "sideeffect.acquire (replayed key)", n, replay);
  measure(k, "checkpoint.build-plan (3 steps, pure)", n, plan);
  gak_kernel_free(k);
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 5000;
  if (n < 10) n = 10;
  char dir[] = "/tmp/gak-latency-c-XXXXXX";
  if (mkdtemp(dir) == NULL) return 1;
  char full[256], normal[256];
  snprintf(full, sizeof full, "sqlite:%s/full.db", dir);
  snprintf(normal, sizeof normal, "sqlite:%s/normal.db?synchronous=normal", dir);
  run("memory:", n);
  run(full, n);
  run(normal, n);
  const char *files[] = {"full.db", "full.db-wal", "full.db-shm", "normal.db", "normal.db-wal", "normal.db-shm"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[320];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
  const char *dsn = getenv("GAK_PG_DSN");
  char url[512];
  snprintf(url, sizeof url, "%s?schema=gak_latency_c_%d&sslmode=disable",
           dsn ? dsn : "postgres://postgres@127.0.0.1:5432/test", (int)getpid());
  gak_kernel *probe = NULL;
  gak_error *e = gak_kernel_open(S(url), &probe);
  if (e != NULL) {
    printf("-- postgres: not reachable, skipped (%s)\n", gak_error_message(e));
    gak_error_free(e);
    return 0;
  }
  gak_kernel_free(probe);
  run(url, n / 5);
  must(gak_postgres_drop_schema(S(url)), "drop schema");
  return 0;
}
