/*
 * The reference-runtime story (host/rust/cli/src/demo.rs) through gak.h alone:
 * the proof that a language with nothing but a C FFI can embed gak.
 *
 *   cargo build -p gak-c
 *   cc host/c/examples/demo.c -Ihost/c/include target/debug/libgak.a \
 *      -lgcc_s -lutil -lrt -lpthread -lm -ldl -o demo && ./demo [STORE_URL]
 *
 * A run of three steps is started, dies after two, and resumes on another
 * worker: the plan skips the finished steps and every effect body's call
 * counter proves nothing was replayed. Then a claim race and an uncertain
 * effect being reconciled. Six numbered lines; exit 1 if a promise broke.
 * Every error is freed and every answer cleared (the tests run this under
 * LeakSanitizer).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gak.h"

#define LEASE 30000
#define S(text) ((gak_str){(text), strlen(text)})

static int line_no = 0;

static void say(const char *text) { printf("%d. %s\n", ++line_no, text); }

/* Stop on an error that should not happen, naming the call. */
static void must(gak_error *e, const char *what) {
  if (e != NULL) {
    fprintf(stderr, "demo: %s: %s\n", what, gak_error_message(e));
    gak_error_free(e);
    exit(1);
  }
}

/* The error's code (and free it); "ok" for none. */
static const char *code_of(gak_error *e, char *buf, size_t n) {
  if (e == NULL) return "ok";
  snprintf(buf, n, "%s", gak_error_code(e));
  gak_error_free(e);
  return buf;
}

static const char *STEPS[3] = {"reserve-stock", "charge-card", "ship-parcel"};

typedef struct {
  int calls[4]; /* per step, and the refund */
} counters;

typedef struct {
  int *calls;
  const char *result;
  gak_body_status status;
} effect_body;

static gak_body_status run_body(void *user, gak_effect *effect) {
  effect_body *b = user;
  (*b->calls)++;
  if (b->status == GAK_BODY_OK) {
    must(gak_effect_set_result(effect, (gak_bytes){(const uint8_t *)b->result, strlen(b->result)}),
         "set result");
  } else {
    must(gak_effect_set_error(effect, S("connection reset after sending")), "set error");
  }
  return b->status;
}

/* A snapshot this program owns (the one a committer keeps). */
typedef struct {
  char run_id[64];
  uint64_t seq;
  uint64_t fence;
  int done_len;
  gak_str done[3];
} progress;

static void save(const gak_kernel *k, progress *p, const char *step) {
  p->seq++;
  for (int s = 0; s < 3; s++) {
    if (strcmp(STEPS[s], step) == 0) p->done[p->done_len++] = S(STEPS[s]);
  }
  gak_snapshot snap = {0};
  snap.run_id = S(p->run_id);
  snap.seq = p->seq;
  snap.has_fence = true;
  snap.fence = p->fence;
  snap.status = S("running");
  snap.done = p->done;
  snap.done_len = (size_t)p->done_len;
  must(gak_checkpoint_save_if_newer(k, &snap), "save");
}

/* Resume the committer from the persisted snapshot, as the owner of fence. */
static void resume(const gak_kernel *k, progress *p, uint64_t fence) {
  gak_snapshot loaded = {0};
  gak_error *e = gak_checkpoint_load(k, S(p->run_id), &loaded);
  char code[32];
  p->fence = fence;
  if (e != NULL) {
    if (strcmp(code_of(e, code, sizeof code), "not-found") != 0) exit(1);
    p->seq = 0;
    p->done_len = 0;
    return;
  }
  p->seq = loaded.seq;
  p->done_len = 0;
  for (size_t i = 0; i < loaded.done_len; i++) {
    for (int s = 0; s < 3; s++) {
      if (strcmp(loaded.done[i].ptr, STEPS[s]) == 0) p->done[p->done_len++] = S(STEPS[s]);
    }
  }
  gak_snapshot_clear(&loaded);
}

static void run_step(const gak_kernel *k, progress *p, counters *c, const char *step) {
  char key[128], fingerprint[64], result[64];
  snprintf(key, sizeof key, "%s/%s", p->run_id, step);
  snprintf(fingerprint, sizeof fingerprint, "%s:v1", step);
  snprintf(result, sizeof result, "%s ok", step);
  int s = 0;
  while (strcmp(STEPS[s], step) != 0) s++;
  effect_body body = {&c->calls[s], result, GAK_BODY_OK};
  gak_action action = {S(key), S(step), GAK_RETRY_SAFE, S(fingerprint)};
  gak_ran ran = {0};
  must(gak_run_effect(k, action, LEASE, run_body, &body, &ran), "run effect");
  if (ran.kind != GAK_RAN_APPLIED && ran.kind != GAK_RAN_REPLAYED) {
    fprintf(stderr, "demo: %s: unexpected run kind %u\n", step, ran.kind);
    exit(1);
  }
  gak_outcome outcome = {GAK_STATUS_SUCCEEDED, ran.result}, recorded = {0};
  must(gak_commitgate_commit(k, S(p->run_id), S(step), p->fence, outcome, &recorded), "commit step");
  gak_outcome_clear(&recorded);
  gak_ran_clear(&ran);
  save(k, p, step);
}

static const gak_step_def *steps(gak_str deps[2]) {
  static gak_step_def defs[3];
  deps[0] = S(STEPS[0]);
  deps[1] = S(STEPS[1]);
  defs[0] = (gak_step_def){S(STEPS[0]), NULL, 0};
  defs[1] = (gak_step_def){S(STEPS[1]), &deps[0], 1};
  defs[2] = (gak_step_def){S(STEPS[2]), &deps[1], 1};
  return defs;
}

static void join(char *out, size_t n, gak_str *items, size_t len) {
  out[0] = '\0';
  for (size_t i = 0; i < len; i++) {
    if (i > 0) strncat(out, ", ", n - strlen(out) - 1);
    strncat(out, items[i].ptr, n - strlen(out) - 1);
  }
}

typedef struct {
  const gak_kernel *k;
  const char *task;
  int index;
  pthread_barrier_t *start;
  int won;
  int taken;
  char owner[32];
} racer;

static void *race(void *arg) {
  racer *r = arg;
  char agent[32];
  snprintf(agent, sizeof agent, "racer-%d", r->index);
  pthread_barrier_wait(r->start);
  gak_task t = {0};
  gak_error *e = gak_taskboard_claim(r->k, S(r->task), S(agent), LEASE, &t);
  if (e == NULL) {
    r->won = 1;
    snprintf(r->owner, sizeof r->owner, "%s", t.owner.ptr);
    gak_task_clear(&t);
  } else {
    r->taken = strcmp(gak_error_code(e), "taken") == 0;
    gak_error_free(e);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *url = argc > 1 ? argv[1] : "memory:";
  gak_clock *clock = gak_clock_manual(1700000000000ULL);
  gak_options options = {0};
  options.store = S(url);
  options.clock = clock;
  gak_kernel *k = NULL;
  must(gak_kernel_open_with(options, &k), "open");
  counters c = {{0}};
  progress p = {0};
  snprintf(p.run_id, sizeof p.run_id, "order-7-%" PRIx64, gak_clock_now(clock));
  char text[1024], code[32];

  /* 1. The run, on the board. */
  gak_task_seed seed = {.id = S(p.run_id), .title = S("order #7"), .deps = NULL, .deps_len = 0, .state = GAK_TASK_OPEN};
  must(gak_taskboard_seed(k, &seed, 1), "seed");
  snprintf(text, sizeof text,
           "run %s created: reserve-stock -> charge-card -> ship-parcel (each depends on the one before)",
           p.run_id);
  say(text);

  /* 2. Worker A claims the run and gets through two steps. */
  gak_task claim_a = {0};
  must(gak_taskboard_claim(k, S(p.run_id), S("worker-a"), LEASE, &claim_a), "claim a");
  resume(k, &p, claim_a.fence);
  gak_str deps[2];
  gak_plan plan = {0};
  must(gak_checkpoint_build_plan(k, steps(deps), 3, NULL, &plan), "plan");
  for (size_t i = 0; i < 2 && i < plan.run_len; i++) run_step(k, &p, &c, plan.run[i].ptr);
  gak_plan_clear(&plan);
  snprintf(text, sizeof text,
           "worker-a (fence %" PRIu64 ") ran reserve-stock and charge-card: 2 snapshots saved (seq %" PRIu64
           "), 2 step outcomes committed",
           claim_a.fence, p.seq);
  say(text);

  /* 3. Worker A dies: no release, no further snapshot. */
  say("worker-a died before ship-parcel started (its claim is never released)");

  /* 4. Worker B takes the run over once A's claim expires, and resumes. */
  gak_task early = {0};
  if (strcmp(code_of(gak_taskboard_claim(k, S(p.run_id), S("worker-b"), LEASE, &early), code, sizeof code),
             "taken") != 0) {
    fprintf(stderr, "demo: a live claim was taken over (%s)\n", code);
    return 1;
  }
  gak_clock_advance(clock, LEASE);
  gak_task claim_b = {0};
  must(gak_taskboard_claim(k, S(p.run_id), S("worker-b"), LEASE, &claim_b), "claim b");
  resume(k, &p, claim_b.fence);
  gak_snapshot from = {0};
  must(gak_checkpoint_load(k, S(p.run_id), &from), "load");
  must(gak_checkpoint_build_plan(k, steps(deps), 3, &from, &plan), "resume plan");
  gak_snapshot_clear(&from);
  char skipped[256], resumed[256];
  join(skipped, sizeof skipped, plan.skip, plan.skip_len);
  join(resumed, sizeof resumed, plan.run, plan.run_len);
  for (size_t i = 0; i < plan.run_len; i++) run_step(k, &p, &c, plan.run[i].ptr);
  /* The zombie: A wakes up and tries to write the run again. */
  gak_snapshot zombie = {0};
  zombie.run_id = S(p.run_id);
  zombie.seq = p.seq + 1;
  zombie.has_fence = true;
  zombie.fence = claim_a.fence;
  zombie.status = S("running");
  zombie.done = p.done;
  zombie.done_len = (size_t)p.done_len;
  char zombie_code[32];
  code_of(gak_checkpoint_save_if_newer(k, &zombie), zombie_code, sizeof zombie_code);
  gak_outcome shipped = {GAK_STATUS_SUCCEEDED, {(const uint8_t *)"shipped", 7}}, recorded = {0};
  must(gak_commitgate_commit(k, S(p.run_id), (gak_str){NULL, 0}, claim_b.fence, shipped, &recorded), "commit");
  gak_outcome_clear(&recorded);
  must(gak_taskboard_complete(k, S(p.run_id), claim_b.token), "complete");
  snprintf(text, sizeof text,
           "worker-b took over (fence %" PRIu64
           "): plan skipped [%s], ran only [%s]; body calls charge-card=%d reserve-stock=%d ship-parcel=%d — "
           "nothing replayed; zombie worker-a's save refused: %s",
           claim_b.fence, skipped, resumed, c.calls[1], c.calls[0], c.calls[2], zombie_code);
  say(text);
  gak_plan_clear(&plan);
  gak_task_clear(&claim_a);
  gak_task_clear(&claim_b);

  /* 5. Eight workers race to claim one open task. */
  char race_task[96];
  snprintf(race_task, sizeof race_task, "%s-race", p.run_id);
  gak_task_seed race_seed = {.id = S(race_task), .title = {NULL, 0}, .deps = NULL, .deps_len = 0, .state = GAK_TASK_ANY};
  must(gak_taskboard_seed(k, &race_seed, 1), "seed race");
  enum { CLAIMERS = 8 };
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, CLAIMERS);
  pthread_t threads[CLAIMERS];
  racer racers[CLAIMERS];
  for (int i = 0; i < CLAIMERS; i++) {
    racers[i] = (racer){k, race_task, i, &start, 0, 0, ""};
    pthread_create(&threads[i], NULL, race, &racers[i]);
  }
  int winners = 0, taken = 0;
  const char *winner = "nobody";
  for (int i = 0; i < CLAIMERS; i++) {
    pthread_join(threads[i], NULL);
    winners += racers[i].won;
    taken += racers[i].taken;
    if (racers[i].won) winner = racers[i].owner;
  }
  pthread_barrier_destroy(&start);
  snprintf(text, sizeof text, "%d workers raced to claim one open task: %d winner (%s), %d refused as taken",
           CLAIMERS, winners, winner, taken);
  say(text);

  /* 6. An effect that failed after sending, reconciled. */
  char refund_key[96];
  snprintf(refund_key, sizeof refund_key, "%s/refund", p.run_id);
  gak_action refund = {S(refund_key), S("payments"), GAK_RETRY_UNSAFE, {NULL, 0}};
  effect_body failing = {&c.calls[3], NULL, GAK_BODY_FAILED};
  effect_body twice = {&c.calls[3], "refund twice", GAK_BODY_OK};
  gak_ran first = {0}, second = {0}, third = {0};
  must(gak_run_effect(k, refund, LEASE, run_body, &failing, &first), "refund");
  must(gak_run_effect(k, refund, LEASE, run_body, &twice, &second), "refund again");
  int retry_refused = first.kind == GAK_RAN_BODY_FAILED && second.kind == GAK_RAN_UNCERTAIN;
  gak_reconcile_claim claim = {0};
  must(gak_sideeffect_begin_reconcile(k, refund, LEASE, &claim), "begin reconcile");
  /* The reconciler asks the payment provider by idempotency key: it did happen. */
  const char *settled = "refund r-81 settled";
  gak_resolution verdict = {true, {(const uint8_t *)settled, strlen(settled)}, false,
                            (gak_str){claim.claim.ptr, claim.claim.len}};
  gak_resolved resolved = {0};
  must(gak_sideeffect_resolve_uncertain(k, refund, verdict, &resolved), "resolve");
  must(gak_run_effect(k, refund, LEASE, run_body, &twice, &third), "refund after the verdict");
  int replayed = third.kind == GAK_RAN_REPLAYED && third.result.len == strlen(settled) &&
                 memcmp(third.result.ptr, settled, third.result.len) == 0;
  gak_acquired after = {0};
  must(gak_sideeffect_acquire(k, refund, LEASE, &after), "acquire");
  snprintf(text, sizeof text,
           "refund body failed -> uncertain; retry refused without calling the body (%s); a reconciler claimed "
           "it (until +%" PRIu64 " ms) and resolved it applied; the key now only replays (%s); refund body calls = %d",
           retry_refused ? "yes" : "NO", claim.until - gak_clock_now(clock),
           after.kind == GAK_ACQUIRED_REPLAYED ? (const char *)after.result.ptr : "NOT REPLAYED", c.calls[3]);
  say(text);
  gak_ran_clear(&first);
  gak_ran_clear(&second);
  gak_ran_clear(&third);
  gak_reconcile_claim_clear(&claim);
  gak_resolved_clear(&resolved);
  gak_acquired_clear(&after);
  gak_kernel_free(k);
  gak_clock_free(clock);

  int ok = c.calls[0] == 1 && c.calls[1] == 1 && c.calls[2] == 1 && c.calls[3] == 1 && winners == 1 &&
           taken == CLAIMERS - 1 && retry_refused && replayed && strcmp(zombie_code, "fence-stale") == 0;
  if (!ok) {
    fprintf(stderr, "demo: a promise broke (see the lines above)\n");
    return 1;
  }
  return 0;
}
