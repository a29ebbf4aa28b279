/*
 * libgak's boundary under attack (issue 23), run by tests/tests/c_abi.rs:
 *
 *   ./boundary sizes          every entry point that takes a contract value
 *                             refuses an oversized one (1 MiB per string or
 *                             bytes, 10,000 items per list, 64 MiB in all;
 *                             build-plan: the total only) with invalid-input
 *                             BEFORE reading it, and takes one at the bound
 *   ./boundary retries URL    on PostgreSQL: a body that meets a conflict
 *                             (40001) and fails on attempt 1, then succeeds
 *                             on attempt 2, commits — the call answers its
 *                             last attempt (gak_sideeffect_write_fenced and
 *                             gak_kernel_with_downstream)
 *
 * "Before reading it": an oversized argument is given a length its memory
 * does not have — its bytes (or a list's items) end where a PROT_NONE page
 * begins — so a libgak that reads or copies before it checks dies of
 * SIGSEGV, and one that checks lengths first refuses. Each call runs in a
 * child process of its own, so one crash names its entry point and the
 * rest still run. Exit 0 when every check passed.
 */
#define _DEFAULT_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gak.h"

#define S(text) ((gak_str){(text), strlen(text)})
#define NONE ((gak_str){NULL, 0})
#define MIB ((size_t)1 << 20)

static int checks = 0, failures = 0;

#define CHECK(cond)                                                           \
  do {                                                                        \
    checks++;                                                                 \
    if (!(cond)) {                                                            \
      failures++;                                                             \
      fprintf(stderr, "boundary.c:%d: check failed: %s\n", __LINE__, #cond); \
    }                                                                         \
  } while (0)

static int ok(gak_error *e, int line) {
  checks++;
  if (e == NULL) return 1;
  failures++;
  fprintf(stderr, "boundary.c:%d: unexpected %s: %s\n", line, gak_error_code(e), gak_error_message(e));
  gak_error_free(e);
  return 0;
}
#define OK(call) ok((call), __LINE__)

/* ---- sizes ------------------------------------------------------------ */

static const gak_kernel *K;
/* `edge` is the first byte of a PROT_NONE page: whatever lies below it is
 * readable, nothing from it on. */
static char *edge;

/* A string of `len` bytes of which only the last 16 before the edge exist. */
static gak_str beyond(size_t len) { return (gak_str){edge - 16, len}; }
static gak_bytes beyond_bytes(size_t len) { return (gak_bytes){(const uint8_t *)edge - 16, len}; }

/* A list of `len` items of which only the last one before the edge exists
 * (a valid item: a short string, an empty record). */
static void *items_beyond(size_t item_size) { return edge - item_size; }
static const gak_str *strs_beyond(void) {
  gak_str *last = items_beyond(sizeof(gak_str));
  *last = (gak_str){"x", 1};
  return last;
}

static gak_action action(void) { return (gak_action){S("k"), S("r"), GAK_RETRY_SAFE, NONE}; }
static gak_lease lease(void) { return (gak_lease){S("k"), S("r"), 1, S("holder"), 1}; }
static gak_snapshot snapshot(void) { return (gak_snapshot){S("run"), 1, false, 0, S("running"), NULL, 0, NULL, 0}; }

typedef gak_error *(*call_fn)(void);

/* A child that died of a signal, or of a sanitizer's report of one (which
 * exits with its own code): anything but the 0 or 1 it exits with. */
static int crashed(int status) {
  return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) > 1);
}

/* Run `call` in a child: it must come back invalid-input, not die. */
static void refused_unread(const char *name, call_fn call) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    gak_error *e = call();
    int refused = e != NULL && strcmp(gak_error_code(e), "invalid-input") == 0;
    if (!refused)
      fprintf(stderr, "%s: answered %s%s%s instead of invalid-input\n", name, e ? gak_error_code(e) : "ok",
              e ? ": " : "", e ? gak_error_message(e) : "");
    gak_error_free(e);
    _exit(refused ? 0 : 1);
  }
  int status = 0;
  checks++;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    failures++;
    fprintf(stderr, "%s: cannot run the check in a child\n", name);
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    failures++;
    fprintf(stderr, "%s: did not answer within 30 s\n", name);
  } else if (crashed(status)) {
    failures++;
    fprintf(stderr, "%s: crashed: it read an oversized argument before checking its length\n", name);
  } else if (WEXITSTATUS(status) != 0) {
    failures++;
  }
}

/* One call per entry point, each with one argument over its bound. */
static gak_error *save_done(void) {
  gak_snapshot s = snapshot();
  s.done = (gak_str *)strs_beyond();
  s.done_len = 10001;
  return gak_checkpoint_save_if_newer(K, &s);
}
static gak_error *save_fields(void) {
  gak_field *last = items_beyond(sizeof(gak_field));
  *last = (gak_field){S("k"), S("v")};
  gak_snapshot s = snapshot();
  s.fields = last;
  s.fields_len = 10001;
  return gak_checkpoint_save_if_newer(K, &s);
}
static gak_error *save_run_id(void) {
  gak_snapshot s = snapshot();
  s.run_id = beyond(MIB + 1);
  return gak_checkpoint_save_if_newer(K, &s);
}
static gak_error *load(void) {
  gak_snapshot out = {0};
  return gak_checkpoint_load(K, beyond(MIB + 1), &out);
}
static gak_error *plan_total(void) {
  gak_step_def step = {beyond(65 * MIB), NULL, 0};
  gak_plan out = {0};
  return gak_checkpoint_build_plan(K, &step, 1, NULL, &out);
}
static gak_error *plan_snapshot_total(void) {
  gak_step_def step = {S("a"), NULL, 0};
  gak_snapshot s = snapshot();
  s.status = beyond(65 * MIB);
  gak_plan out = {0};
  return gak_checkpoint_build_plan(K, &step, 1, &s, &out);
}
static gak_error *commit(void) {
  gak_outcome o = {GAK_STATUS_SUCCEEDED, beyond_bytes(1024 * MIB)}, out = {0};
  return gak_commitgate_commit(K, S("run"), NONE, 1, o, &out);
}
static gak_error *commit_read(void) {
  gak_outcome out = {0};
  return gak_commitgate_read(K, S("run"), beyond(MIB + 1), &out);
}
static gak_error *acquire(void) {
  gak_action a = action();
  a.fingerprint = beyond(MIB + 1);
  gak_acquired out = {0};
  return gak_sideeffect_acquire(K, a, 1000, &out);
}
static gak_error *complete(void) {
  gak_bytes out = {0};
  return gak_sideeffect_complete(K, action(), lease(), beyond_bytes(MIB + 1), &out);
}
static gak_error *complete_lease(void) {
  gak_lease l = lease();
  l.key = beyond(MIB + 1);
  gak_bytes out = {0};
  return gak_sideeffect_complete(K, action(), l, (gak_bytes){NULL, 0}, &out);
}
static gak_error *release_(void) {
  gak_lease l = lease();
  l.holder = beyond(MIB + 1);
  return gak_sideeffect_release(K, action(), l);
}
static gak_error *abandon(void) { return gak_sideeffect_abandon(K, action(), lease(), beyond(MIB + 1)); }
static gak_error *renew(void) {
  gak_action a = action();
  a.key = beyond(MIB + 1);
  gak_lease out = {0};
  return gak_sideeffect_renew(K, a, lease(), 1000, &out);
}
static gak_error *mark_uncertain(void) { return gak_sideeffect_mark_uncertain(K, action(), lease(), beyond(MIB + 1)); }
static gak_error *begin_reconcile(void) {
  gak_action a = action();
  a.resource = beyond(MIB + 1);
  gak_reconcile_claim out = {0};
  return gak_sideeffect_begin_reconcile(K, a, 1000, &out);
}
static gak_error *resolve(void) {
  gak_resolution r = {true, beyond_bytes(MIB + 1), false, NONE};
  gak_resolved out = {0};
  return gak_sideeffect_resolve_uncertain(K, action(), r, &out);
}
static gak_error *resolve_claim(void) {
  gak_resolution r = {true, {NULL, 0}, false, beyond(MIB + 1)};
  gak_resolved out = {0};
  return gak_sideeffect_resolve_uncertain(K, action(), r, &out);
}
static gak_error *sink_seen(void) {
  uint64_t out = 0;
  return gak_sideeffect_sink_seen(K, beyond(MIB + 1), &out);
}
static gak_error *se_list(void) {
  gak_key_page out = {0};
  return gak_sideeffect_list(K, GAK_KEY_ANY, beyond(MIB + 1), 10, &out);
}
static gak_error *se_get(void) {
  gak_key_info out = {0};
  return gak_sideeffect_get(K, beyond(MIB + 1), &out);
}
static int32_t never_body(void *user, gak_downstream *down) {
  (void)user;
  (void)down;
  return 0;
}
static gak_error *write_fenced(void) { return gak_sideeffect_write_fenced(K, beyond(MIB + 1), 1, never_body, NULL); }
static gak_error *seed_count(void) {
  gak_task_seed *last = items_beyond(sizeof(gak_task_seed));
  *last = (gak_task_seed){.id = S("t"), .title = NONE, .deps = NULL, .deps_len = 0, .state = GAK_TASK_ANY};
  return gak_taskboard_seed(K, last, 10001);
}
static gak_error *seed_deps(void) {
  gak_task_seed seed = {.id = S("t"), .title = NONE, .deps = strs_beyond(), .deps_len = 10001, .state = GAK_TASK_ANY};
  return gak_taskboard_seed(K, &seed, 1);
}
static char *one_mib;
static gak_error *seed_total(void) {
  /* 64 titles of 1 MiB (real memory, one buffer), then one more byte. */
  gak_task_seed seeds[65];
  char ids[65][8];
  for (int i = 0; i < 65; i++) {
    snprintf(ids[i], sizeof ids[i], "t%d", i);
    seeds[i] = (gak_task_seed){.id = S(ids[i]), .title = {one_mib, MIB}, .deps = NULL, .deps_len = 0, .state = GAK_TASK_ANY};
  }
  seeds[64].title = beyond(16);
  seeds[63].title = beyond(MIB);
  return gak_taskboard_seed(K, seeds, 65);
}
static gak_error *tb_list(void) {
  gak_task_page out = {0};
  return gak_taskboard_list(K, GAK_TASK_ANY, beyond(MIB + 1), 10, &out);
}
static gak_error *tb_get(void) {
  gak_task out = {0};
  return gak_taskboard_get(K, beyond(MIB + 1), &out);
}
static gak_error *claim(void) {
  gak_task out = {0};
  return gak_taskboard_claim(K, S("t"), beyond(MIB + 1), 1000, &out);
}
static gak_error *claim_next(void) {
  gak_task out = {0};
  bool found = false;
  return gak_taskboard_claim_next(K, beyond(MIB + 1), 1000, &out, &found);
}
static gak_error *tb_release(void) { return gak_taskboard_release(K, S("t"), beyond(MIB + 1)); }
static gak_error *tb_complete(void) { return gak_taskboard_complete(K, beyond(MIB + 1), S("token")); }
static gak_error *tb_renew(void) {
  gak_task out = {0};
  return gak_taskboard_renew(K, S("t"), beyond(MIB + 1), 1000, &out);
}
static gak_body_status never_effect(void *user, gak_effect *effect) {
  (void)user;
  (void)effect;
  return GAK_BODY_OK;
}
static gak_error *run_effect(void) {
  gak_action a = action();
  a.key = beyond(MIB + 1);
  gak_ran out = {0};
  return gak_run_effect(K, a, 1000, never_effect, NULL, &out);
}

/* The set_result check runs inside a body (the handle exists only there). */
static gak_error *set_result_answer;
static gak_body_status oversized_result(void *user, gak_effect *effect) {
  (void)user;
  set_result_answer = gak_effect_set_result(effect, beyond_bytes(MIB + 1));
  return GAK_BODY_NOT_APPLIED;
}
static gak_error *set_result(void) {
  gak_action a = {S("set-result"), S("set-result"), GAK_RETRY_SAFE, NONE};
  gak_ran out = {0};
  gak_error *e = gak_run_effect(K, a, 60000, oversized_result, NULL, &out);
  gak_ran_clear(&out);
  if (e != NULL) {
    gak_error_free(set_result_answer);
    return e;
  }
  return set_result_answer;
}

static int sizes(void) {
  long page = sysconf(_SC_PAGESIZE);
  char *pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED || mprotect(pages + page, page, PROT_NONE) != 0) {
    perror("mmap");
    return 2;
  }
  memset(pages, 'a', page);
  edge = pages + page;
  one_mib = malloc(MIB);
  memset(one_mib, 't', MIB);

  gak_kernel *k = NULL;
  if (!OK(gak_kernel_open(S("memory:"), &k))) return 1;
  K = k;
  /* The guard page itself: a read there must kill a child, or the checks
   * below would prove nothing. */
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (freopen("/dev/null", "w", stderr) == NULL) _exit(0);
    volatile char c = edge[0];
    (void)c;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(crashed(status));

  struct {
    const char *name;
    call_fn call;
  } calls[] = {
      {"gak_checkpoint_save_if_newer (10,001 done)", save_done},
      {"gak_checkpoint_save_if_newer (10,001 fields)", save_fields},
      {"gak_checkpoint_save_if_newer (run_id over 1 MiB)", save_run_id},
      {"gak_checkpoint_load", load},
      {"gak_checkpoint_build_plan (a step id of 65 MiB)", plan_total},
      {"gak_checkpoint_build_plan (a snapshot of 65 MiB)", plan_snapshot_total},
      {"gak_commitgate_commit (a 1 GiB result)", commit},
      {"gak_commitgate_read", commit_read},
      {"gak_sideeffect_acquire", acquire},
      {"gak_sideeffect_complete (result)", complete},
      {"gak_sideeffect_complete (lease)", complete_lease},
      {"gak_sideeffect_release", release_},
      {"gak_sideeffect_abandon", abandon},
      {"gak_sideeffect_renew", renew},
      {"gak_sideeffect_mark_uncertain", mark_uncertain},
      {"gak_sideeffect_begin_reconcile", begin_reconcile},
      {"gak_sideeffect_resolve_uncertain (result)", resolve},
      {"gak_sideeffect_resolve_uncertain (claim)", resolve_claim},
      {"gak_sideeffect_sink_seen", sink_seen},
      {"gak_sideeffect_list", se_list},
      {"gak_sideeffect_get", se_get},
      {"gak_sideeffect_write_fenced", write_fenced},
      {"gak_taskboard_seed (10,001 tasks)", seed_count},
      {"gak_taskboard_seed (10,001 deps)", seed_deps},
      {"gak_taskboard_seed (64 MiB and one byte in all)", seed_total},
      {"gak_taskboard_list", tb_list},
      {"gak_taskboard_get", tb_get},
      {"gak_taskboard_claim", claim},
      {"gak_taskboard_claim_next", claim_next},
      {"gak_taskboard_release", tb_release},
      {"gak_taskboard_complete", tb_complete},
      {"gak_taskboard_renew", tb_renew},
      {"gak_run_effect", run_effect},
      {"gak_effect_set_result", set_result},
  };
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) refused_unread(calls[i].name, calls[i].call);

  /* At the bound the value is the component's to judge: a 1 MiB result is
   * recorded; a 1 MiB step id is the component's invalid-plan. */
  gak_outcome o = {GAK_STATUS_SUCCEEDED, {(const uint8_t *)one_mib, MIB}}, out = {0};
  OK(gak_commitgate_commit(k, S("run"), NONE, 1, o, &out));
  CHECK(out.result.len == MIB);
  gak_outcome_clear(&out);
  gak_step_def long_id = {{one_mib, MIB + 0}, NULL, 0};
  gak_plan plan = {0};
  gak_error *e = gak_checkpoint_build_plan(k, &long_id, 1, NULL, &plan);
  CHECK(e != NULL && strcmp(gak_error_code(e), "invalid-plan") == 0);
  gak_error_free(e);
  gak_kernel_free(k);
  free(one_mib);
  munmap(pages, 2 * page);
  return 0;
}

/* ---- retries ---------------------------------------------------------- */

static const char *CONFLICT = "DO $$BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END$$";

typedef struct {
  const char *key;
  int attempts;
} retry;

/* Attempt 1 writes "1", meets a serialization failure and fails (7);
 * attempt 2 writes "2" and succeeds. */
static int32_t conflict_then_ok(void *user, gak_downstream *down) {
  retry *r = user;
  r->attempts++;
  char value[8];
  snprintf(value, sizeof value, "%d", r->attempts);
  if (!OK(gak_downstream_put(down, S(r->key), S(value)))) return 1;
  if (r->attempts > 1) return 0;
  gak_error *e = gak_downstream_execute(down, S(CONFLICT), NULL, 0, NULL);
  CHECK(e != NULL);
  gak_error_free(e);
  return 7;
}

typedef struct {
  const char *key;
  char value[8];
} lookup;

static int32_t read_back(void *user, gak_downstream *down) {
  lookup *l = user;
  gak_str v = {0};
  if (!OK(gak_downstream_get(down, S(l->key), &v))) return 1;
  snprintf(l->value, sizeof l->value, "%s", v.ptr ? v.ptr : "");
  gak_str_clear(&v);
  return 0;
}

static int retries(const char *url) {
  gak_kernel *k = NULL;
  if (!OK(gak_kernel_open(S(url), &k))) return 1;
  retry fenced = {"rt/fenced", 0};
  OK(gak_sideeffect_write_fenced(k, S("rt"), 1, conflict_then_ok, &fenced));
  CHECK(fenced.attempts == 2);
  uint64_t seen = 0;
  OK(gak_sideeffect_sink_seen(k, S("rt"), &seen));
  CHECK(seen == 1);
  retry plain = {"rt/downstream", 0};
  OK(gak_kernel_with_downstream(k, conflict_then_ok, &plain));
  CHECK(plain.attempts == 2);
  lookup a = {"rt/fenced", ""}, b = {"rt/downstream", ""};
  OK(gak_kernel_with_downstream(k, read_back, &a));
  OK(gak_kernel_with_downstream(k, read_back, &b));
  CHECK(strcmp(a.value, "2") == 0 && strcmp(b.value, "2") == 0);
  gak_kernel_free(k);
  return 0;
}

int main(int argc, char **argv) {
  int rc = 2;
  if (argc == 2 && strcmp(argv[1], "sizes") == 0) {
    rc = sizes();
  } else if (argc == 3 && strcmp(argv[1], "retries") == 0) {
    rc = retries(argv[2]);
  } else {
    fprintf(stderr, "usage: boundary sizes | boundary retries POSTGRES_URL\n");
    return 2;
  }
  printf("boundary %s: %d checks, %d failed\n", argv[1], checks, failures);
  return rc != 0 ? rc : failures == 0 ? 0 : 1;
}
