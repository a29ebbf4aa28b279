/*
 * Every function of gak.h, called as the header says, with every answer
 * cleared and every error freed: run under LeakSanitizer by
 * tests/tests/c_abi.rs, so "who frees what" is checked, not just written.
 * Built with -DGAK_LEAK_ON_PURPOSE it forgets one gak_task_clear, and the
 * leak checker must catch it (the negative control).
 *
 *   ./abi SQLITE_PATH      exit 0 when every check passed
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gak.h"

#define S(text) ((gak_str){(text), strlen(text)})
#define NONE ((gak_str){NULL, 0})

static int checks = 0, failures = 0;

#define CHECK(cond)                                                      \
  do {                                                                   \
    checks++;                                                            \
    if (!(cond)) {                                                       \
      failures++;                                                        \
      fprintf(stderr, "abi.c:%d: check failed: %s\n", __LINE__, #cond); \
    }                                                                    \
  } while (0)

/* Succeeded (and nothing to free), or report the error and free it. */
static int ok(gak_error *e, int line) {
  checks++;
  if (e == NULL) return 1;
  failures++;
  fprintf(stderr, "abi.c:%d: unexpected %s: %s\n", line, gak_error_code(e), gak_error_message(e));
  gak_error_free(e);
  return 0;
}
#define OK(call) ok((call), __LINE__)

/* Refused with `code`; the error is freed. */
static int refused(gak_error *e, const char *code, int line) {
  checks++;
  if (e == NULL) {
    failures++;
    fprintf(stderr, "abi.c:%d: expected %s, got success\n", line, code);
    return 0;
  }
  int same = strcmp(gak_error_code(e), code) == 0 && strlen(gak_error_message(e)) > 0;
  if (!same) {
    failures++;
    fprintf(stderr, "abi.c:%d: expected %s, got %s: %s\n", line, code, gak_error_code(e), gak_error_message(e));
  }
  gak_error_free(e);
  return same;
}
#define REFUSED(call, code) refused((call), (code), __LINE__)

static int eq(gak_str s, const char *text) { return s.ptr != NULL && s.len == strlen(text) && memcmp(s.ptr, text, s.len) == 0; }

static const gak_kernel *KERNEL;

/* A sink body: appends "m" to the marker of the resource in `user`, and
 * checks that calling the same kernel from inside is refused. */
static int32_t append_body(void *user, gak_downstream *down) {
  const char *key = user;
  gak_str marker = {0};
  if (!OK(gak_downstream_get(down, S(key), &marker))) return 1;
  char next[64];
  snprintf(next, sizeof next, "%sm", marker.ptr ? marker.ptr : "");
  gak_str_clear(&marker);
  uint64_t seen = 0;
  REFUSED(gak_sideeffect_sink_seen(KERNEL, S(key), &seen), "invalid-input");
  return OK(gak_downstream_put(down, S(key), S(next))) ? 0 : 1;
}

static int32_t failing_body(void *user, gak_downstream *down) {
  (void)user;
  OK(gak_downstream_put(down, S("doomed"), S("x")));
  return 7;
}

static int32_t sql_body(void *user, gak_downstream *down) {
  (void)user;
  uint64_t changed = 0;
  gak_str params[2] = {S("o-1"), S("3")};
  if (!OK(gak_downstream_execute(down, S("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, qty INTEGER)"), NULL,
                                 0, NULL)))
    return 1;
  if (!OK(gak_downstream_execute(down, S("INSERT INTO orders VALUES (?1, ?2)"), params, 2, &changed))) return 1;
  CHECK(changed == 1);
  REFUSED(gak_downstream_execute(down, S("COMMIT"), NULL, 0, NULL), "invalid-input");
  gak_rows rows = {0};
  gak_str one = S("1");
  if (!OK(gak_downstream_query(down, S("SELECT id, qty, NULL FROM orders WHERE qty > ?1"), &one, 1, &rows))) return 1;
  CHECK(rows.rows == 1 && rows.columns == 3);
  CHECK(eq(rows.cells[0], "o-1") && eq(rows.cells[1], "3") && rows.cells[2].ptr == NULL);
  gak_rows_clear(&rows);
  gak_rows_clear(&rows);
  return 0;
}

static int32_t memory_sql_body(void *user, gak_downstream *down) {
  (void)user;
  REFUSED(gak_downstream_execute(down, S("SELECT 1"), NULL, 0, NULL), "invalid-input");
  return 0;
}

/* An effect body: checks its lease and heartbeat, sets its result. */
static gak_body_status effect_ok(void *user, gak_effect *effect) {
  int *calls = user;
  (*calls)++;
  gak_lease lease = {0};
  OK(gak_effect_lease(effect, &lease));
  CHECK(lease.key.len > 5 && memcmp(lease.key.ptr, "mail/", 5) == 0 && lease.fence >= 1 && lease.holder.len == 32);
  gak_lease_clear(&lease);
  OK(gak_effect_check(effect));
  CHECK(gak_effect_renewals(effect) == 0);
  CHECK(!gak_effect_wait(effect, 1));
  OK(gak_effect_set_result(effect, (gak_bytes){(const uint8_t *)"sent", 4}));
  return GAK_BODY_OK;
}

static gak_body_status effect_fails(void *user, gak_effect *effect) {
  (*(int *)user)++;
  OK(gak_effect_set_error(effect, S("timed out after sending")));
  return GAK_BODY_FAILED;
}

static gak_body_status effect_not_applied(void *user, gak_effect *effect) {
  (void)effect;
  (*(int *)user)++;
  return GAK_BODY_NOT_APPLIED;
}

typedef struct {
  const gak_kernel *k;
  int claimed;
} worker;

static void *drain(void *arg) {
  worker *w = arg;
  for (;;) {
    gak_task t = {0};
    bool found = false;
    if (!OK(gak_taskboard_claim_next(w->k, S("drainer"), 60000, &t, &found)) || !found) return NULL;
    w->claimed++;
    OK(gak_taskboard_complete(w->k, t.id, t.token));
    gak_task_clear(&t);
  }
}

static void taskboard(const gak_kernel *k) {
  gak_str deps[1] = {S("a")};
  gak_task_seed seeds[3] = {
      {.id = S("a"), .title = S("Task A"), .deps = NULL, .deps_len = 0, .state = GAK_TASK_OPEN},
      {.id = S("b"), .title = NONE, .deps = deps, .deps_len = 1, .state = GAK_TASK_ANY},
      {.id = S("c"), .title = NONE, .deps = NULL, .deps_len = 0, .state = GAK_TASK_FAILED},
  };
  OK(gak_taskboard_seed(k, seeds, 3));
  gak_task_seed claimed = {.id = S("x"), .title = NONE, .deps = NULL, .deps_len = 0, .state = GAK_TASK_CLAIMED};
  REFUSED(gak_taskboard_seed(k, &claimed, 1), "invalid-input");
  gak_task_seed bogus = {.id = S("x"), .title = NONE, .deps = NULL, .deps_len = 0, .state = 99};
  REFUSED(gak_taskboard_seed(k, &bogus, 1), "invalid-input");

  gak_task_page page = {0};
  OK(gak_taskboard_list(k, GAK_TASK_ANY, NONE, 2, &page));
  CHECK(page.len == 2 && eq(page.items[0].id, "a") && eq(page.items[0].title, "Task A") && eq(page.next, "b"));
  CHECK(page.items[0].token.ptr == NULL && page.items[0].owner.ptr == NULL && !page.items[0].has_until);
  gak_str after = {page.next.ptr, page.next.len};
  gak_task_page rest = {0};
  OK(gak_taskboard_list(k, GAK_TASK_ANY, after, 2, &rest));
  CHECK(rest.len == 1 && eq(rest.items[0].id, "c") && rest.next.ptr == NULL && rest.items[0].state == GAK_TASK_FAILED);
  gak_task_page_clear(&rest);
  gak_task_page_clear(&page);
  gak_task_page_clear(&page);
  REFUSED(gak_taskboard_list(k, 42, NONE, 2, &page), "invalid-input");
  REFUSED(gak_taskboard_list(k, GAK_TASK_ANY, S(""), 2, &page), "invalid-input");

  gak_task t = {0};
  REFUSED(gak_taskboard_claim(k, S("b"), S("w1"), 1000, &t), "deps-pending");
  REFUSED(gak_taskboard_claim(k, S("nope"), S("w1"), 1000, &t), "not-found");
  REFUSED(gak_taskboard_claim(k, S("a"), S("w1"), 0, &t), "invalid-input");
  OK(gak_taskboard_claim(k, S("a"), S("w1"), 1000, &t));
  CHECK(t.fence == 1 && t.token.len == 32 && t.token.ptr[32] == '\0' && eq(t.owner, "w1") && t.has_until);
  CHECK(t.state == GAK_TASK_CLAIMED && t.until == 1000);
  gak_task again = {0};
  REFUSED(gak_taskboard_claim(k, S("a"), S("w2"), 1000, &again), "taken");
  gak_task renewed = {0};
  OK(gak_taskboard_renew(k, S("a"), t.token, 5000, &renewed));
  CHECK(renewed.until == 5000 && eq(renewed.token, t.token.ptr));
  gak_task_clear(&renewed);
  REFUSED(gak_taskboard_release(k, S("a"), S("forged")), "lease-lost");
  OK(gak_taskboard_release(k, S("a"), t.token));
  gak_task_clear(&t);
  OK(gak_taskboard_claim(k, S("a"), S("w1"), 1000, &t));
  CHECK(t.fence == 2);
  OK(gak_taskboard_complete(k, S("a"), t.token));
  OK(gak_taskboard_complete(k, S("a"), t.token));
  REFUSED(gak_taskboard_claim(k, S("a"), S("w3"), 1000, &again), "terminal");
  gak_task got = {0};
  OK(gak_taskboard_get(k, S("a"), &got));
  CHECK(got.state == GAK_TASK_DONE && got.token.ptr == NULL && got.fence == 2);
  gak_task_clear(&got);
#ifdef GAK_LEAK_ON_PURPOSE
  t = (gak_task){0}; /* the negative control: this task's strings are never freed */
#else
  gak_task_clear(&t);
#endif
  gak_task_clear(&t);

  /* claim-next from threads sharing the kernel: each task once. */
  gak_task_seed queue[20];
  char ids[20][8];
  for (int i = 0; i < 20; i++) {
    snprintf(ids[i], sizeof ids[i], "q%02d", i);
    queue[i] = (gak_task_seed){.id = S(ids[i]), .title = NONE, .deps = NULL, .deps_len = 0, .state = GAK_TASK_ANY};
  }
  OK(gak_taskboard_seed(k, queue, 20));
  worker workers[4];
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) {
    workers[i] = (worker){k, 0};
    pthread_create(&threads[i], NULL, drain, &workers[i]);
  }
  int total = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(threads[i], NULL);
    total += workers[i].claimed;
  }
  /* b (deps done now) and c (failed) are ready too. */
  CHECK(total == 22);
  bool found = true;
  OK(gak_taskboard_claim_next(k, S("late"), 1000, &t, &found));
  CHECK(!found);
}

/* The job queue (0.4.0): a batch claim in priority order with a group
 * limit, complete-batch's per-item answers, fail with back-off, death at
 * max-attempts, revive, and the group's limit removed. */
static void queue(const gak_kernel *k, gak_clock *clock) {
  uint64_t base = gak_clock_now(clock);
  OK(gak_taskboard_set_group_limit(k, S("g"), true, 1));
  REFUSED(gak_taskboard_set_group_limit(k, S("g"), true, 0), "invalid-input");
  gak_group_info info = {0};
  OK(gak_taskboard_get_group(k, S("g"), &info));
  CHECK(info.limit == 1 && info.live == 0);
  REFUSED(gak_taskboard_get_group(k, S("no-limit"), &info), "not-found");
  REFUSED(gak_taskboard_get_group(k, S("g"), NULL), "invalid-input");

  gak_task_seed seeds[4] = {
      {.id = S("j1"), .has_priority = true, .priority = 5, .has_max_attempts = true, .max_attempts = 2, .group = S("g")},
      {.id = S("j2"), .has_priority = true, .priority = 5, .group = S("g")},
      {.id = S("j3"), .has_priority = true, .priority = -1},
      {.id = S("j4"), .has_not_before = true, .not_before = base + 100000},
  };
  OK(gak_taskboard_seed(k, seeds, 4));

  /* j2 waits for the group's slot, j4 is not due. */
  gak_task_list batch = {0};
  REFUSED(gak_taskboard_claim_batch(k, S("w"), 1000, 0, &batch), "invalid-input");
  REFUSED(gak_taskboard_claim_batch(k, S("w"), 1000, 10, NULL), "invalid-input");
  OK(gak_taskboard_claim_batch(k, S("w"), 1000, 10, &batch));
  CHECK(batch.len == 2 && eq(batch.items[0].id, "j1") && eq(batch.items[1].id, "j3"));
  if (batch.len != 2) {
    gak_task_list_clear(&batch);
    return;
  }
  gak_task j1 = batch.items[0], j3 = batch.items[1];
  CHECK(j1.token.len == 32 && j1.attempts == 1 && j1.priority == 5 && eq(j1.group, "g") && j1.has_max_attempts && j1.max_attempts == 2);
  CHECK(j3.priority == -1 && j3.group.ptr == NULL && j3.last_error.ptr == NULL && eq(j3.owner, "w"));
  OK(gak_taskboard_get_group(k, S("g"), &info));
  CHECK(info.live == 1);
  gak_task refused_task = {0};
  REFUSED(gak_taskboard_claim(k, S("j2"), S("x"), 1000, &refused_task), "group-full");
  REFUSED(gak_taskboard_claim(k, S("j4"), S("x"), 1000, &refused_task), "not-due");

  /* The console's reads: the groups, the delayed tasks by due time. */
  gak_group_page groups = {0};
  REFUSED(gak_taskboard_list_groups(k, NONE, 0, &groups), "invalid-input");
  OK(gak_taskboard_list_groups(k, NONE, 10, &groups));
  CHECK(groups.len == 1 && eq(groups.items[0].name, "g") && groups.items[0].has_limit && groups.items[0].limit == 1 && groups.items[0].live == 1 && groups.next.ptr == NULL);
  CHECK(groups.len == 1 && groups.items[0].claimed == 1 && groups.items[0].open == 1 && groups.items[0].done == 0);
  if (groups.len == 1) {
    /* An entry taken out of the page is the caller's to clear. */
    gak_group_entry taken = groups.items[0];
    groups.items[0] = (gak_group_entry){0};
    gak_group_entry_clear(&taken);
    CHECK(taken.name.ptr == NULL);
  }
  gak_group_page_clear(&groups);
  gak_group_page_clear(&groups);
  CHECK(groups.items == NULL && groups.len == 0);
  gak_task_page delayed = {0};
  REFUSED(gak_taskboard_list_delayed(k, S("not-a-cursor"), 10, &delayed), "invalid-input");
  OK(gak_taskboard_list_delayed(k, NONE, 10, &delayed));
  CHECK(delayed.len == 1 && eq(delayed.items[0].id, "j4") && delayed.items[0].has_not_before && delayed.items[0].not_before == base + 100000 && delayed.next.ptr == NULL);
  gak_task_page_clear(&delayed);
  gak_task_page mine = {0};
  REFUSED(gak_taskboard_list_group(k, S(""), NONE, 10, &mine), "invalid-input");
  OK(gak_taskboard_list_group(k, S("g"), NONE, 1, &mine));
  CHECK(mine.len == 1 && eq(mine.items[0].id, "j1") && mine.items[0].token.ptr == NULL && eq(mine.next, "j1"));
  gak_task_page_clear(&mine);
  OK(gak_taskboard_list_group(k, S("g"), S("j1"), 10, &mine));
  CHECK(mine.len == 1 && eq(mine.items[0].id, "j2") && mine.next.ptr == NULL);
  gak_task_page_clear(&mine);
  /* The counts by state move with the completion below. */
  gak_task_counts before = {0}, after = {0};
  REFUSED(gak_taskboard_count(k, NULL), "invalid-input");
  OK(gak_taskboard_count(k, &before));
  CHECK(before.exact && before.claimed >= 2);

  gak_completion items[3] = {{j3.id, j3.token}, {S("j1"), S("forged")}, {S("nope"), S("forged")}};
  gak_completion_result_list answers = {0};
  REFUSED(gak_taskboard_complete_batch(k, NULL, 0, &answers), "invalid-input");
  REFUSED(gak_taskboard_complete_batch(k, NULL, 2, &answers), "invalid-input");
  OK(gak_taskboard_complete_batch(k, items, 3, &answers));
  CHECK(answers.len == 3 && eq(answers.items[0].id, "j3") && answers.items[0].answer == GAK_COMPLETION_ANSWER_COMPLETED);
  CHECK(answers.len == 3 && answers.items[1].answer == GAK_COMPLETION_ANSWER_LEASE_LOST && answers.items[2].answer == GAK_COMPLETION_ANSWER_NOT_FOUND);
  gak_completion_result_list_clear(&answers);
  gak_completion_result_list_clear(&answers);
  CHECK(answers.items == NULL && answers.len == 0);
  OK(gak_taskboard_count(k, &after));
  CHECK(after.claimed == before.claimed - 1 && after.done == before.done + 1 && after.open == before.open && after.exact);
  bool all = false;
  REFUSED(gak_taskboard_recount(k, 0, &all), "invalid-input");
  REFUSED(gak_taskboard_recount(k, 10, NULL), "invalid-input");
  OK(gak_taskboard_recount(k, 10, &all));
  CHECK(all);

  gak_task failed = {0};
  REFUSED(gak_taskboard_fail(k, S("j1"), S("forged"), S("boom"), true, 500, &failed), "lease-lost");
  OK(gak_taskboard_fail(k, S("j1"), j1.token, S("boom"), true, 500, &failed));
  CHECK(failed.state == GAK_TASK_FAILED && eq(failed.last_error, "boom") && failed.has_not_before && failed.not_before == base + 500);
  CHECK(failed.token.ptr == NULL && failed.owner.ptr == NULL && failed.attempts == 1);
  gak_task_clear(&failed);
  OK(gak_taskboard_fail(k, S("j1"), j1.token, S("boom"), true, 500, &failed)); /* idempotent */
  gak_task_clear(&failed);
  gak_task_list_clear(&batch);
  gak_task_list_clear(&batch);
  CHECK(batch.items == NULL && batch.len == 0);
  REFUSED(gak_taskboard_claim(k, S("j1"), S("x"), 1000, &refused_task), "not-due");

  /* Due again: the group's one slot goes to j1 (seeded first); its
   * second failure uses its attempts up. */
  gak_clock_advance(clock, 500);
  OK(gak_taskboard_claim_batch(k, S("w"), 1000, 10, &batch));
  CHECK(batch.len == 1 && eq(batch.items[0].id, "j1") && batch.items[0].attempts == 2 && eq(batch.items[0].last_error, "boom"));
  if (batch.len == 1) {
    OK(gak_taskboard_fail(k, S("j1"), batch.items[0].token, S("boom again"), false, 0, &failed));
    CHECK(failed.state == GAK_TASK_DEAD && eq(failed.last_error, "boom again") && failed.attempts == 2);
    gak_task_clear(&failed);
  }
  gak_task_list_clear(&batch);
  REFUSED(gak_taskboard_claim(k, S("j1"), S("x"), 1000, &refused_task), "terminal");
  gak_task revived = {0};
  REFUSED(gak_taskboard_revive(k, S("j3"), &revived), "not-dead");
  REFUSED(gak_taskboard_revive(k, S("nope"), &revived), "not-found");
  OK(gak_taskboard_revive(k, S("j1"), &revived));
  CHECK(revived.state == GAK_TASK_OPEN && revived.attempts == 0 && revived.last_error.ptr == NULL && !revived.has_not_before);
  gak_task_clear(&revived);

  /* Without a limit the group's tasks are claimed together. */
  OK(gak_taskboard_set_group_limit(k, S("g"), false, 0));
  REFUSED(gak_taskboard_get_group(k, S("g"), &info), "not-found");
  OK(gak_taskboard_claim_batch(k, S("w"), 1000, 10, &batch));
  CHECK(batch.len == 2 && eq(batch.items[0].id, "j1") && eq(batch.items[1].id, "j2"));
  if (batch.len == 2) {
    gak_completion both[2] = {{batch.items[0].id, batch.items[0].token}, {batch.items[1].id, batch.items[1].token}};
    OK(gak_taskboard_complete_batch(k, both, 2, &answers));
    CHECK(answers.len == 2 && answers.items[0].answer == GAK_COMPLETION_ANSWER_COMPLETED && answers.items[1].answer == GAK_COMPLETION_ANSWER_COMPLETED);
    gak_completion_result_list_clear(&answers);
  }
  gak_task_list_clear(&batch);
  /* Nothing ready: an empty list. */
  OK(gak_taskboard_claim_batch(k, S("w"), 1000, 10, &batch));
  CHECK(batch.len == 0 && batch.items == NULL);
  gak_task_list_clear(&batch);
  gak_task_list_clear(NULL);
  gak_completion_result_list_clear(NULL);
}

static void runs(const gak_kernel *k) {
  gak_str done[2] = {S("a"), S("zombie-step")};
  gak_field fields[2] = {{S("k1"), S("v1")}, {S("k2"), S("")}};
  gak_snapshot snap = {S("run-1"), 1, true, 3, S("running"), done, 2, fields, 2};
  OK(gak_checkpoint_save_if_newer(k, &snap));
  REFUSED(gak_checkpoint_save_if_newer(k, &snap), "stale-seq");
  REFUSED(gak_checkpoint_save_if_newer(k, NULL), "invalid-input");
  gak_snapshot loaded = {0};
  OK(gak_checkpoint_load(k, S("run-1"), &loaded));
  CHECK(loaded.seq == 1 && loaded.has_fence && loaded.fence == 3 && loaded.done_len == 2 && loaded.fields_len == 2);
  CHECK(eq(loaded.fields[1].key, "k2") && eq(loaded.fields[1].value, "") && eq(loaded.status, "running"));
  gak_str a = S("a");
  gak_step_def steps[2] = {{S("a"), NULL, 0}, {S("b"), &a, 1}};
  gak_plan plan = {0};
  OK(gak_checkpoint_build_plan(k, steps, 2, &loaded, &plan));
  CHECK(plan.skip_len == 1 && eq(plan.skip[0], "a") && plan.run_len == 1 && eq(plan.run[0], "b"));
  CHECK(plan.untrusted_len == 1 && eq(plan.untrusted[0], "zombie-step"));
  gak_plan_clear(&plan);
  gak_snapshot_clear(&loaded);
  gak_snapshot_clear(&loaded);
  gak_str missing = S("missing");
  gak_step_def bad[1] = {{S("x"), &missing, 1}};
  REFUSED(gak_checkpoint_build_plan(k, bad, 1, NULL, &plan), "invalid-plan");
  REFUSED(gak_checkpoint_load(k, S("never-ran"), &loaded), "not-found");

  gak_outcome outcome = {GAK_STATUS_SUCCEEDED, {(const uint8_t *)"ok", 2}}, got = {0};
  OK(gak_commitgate_commit(k, S("run-1"), S("a"), 3, outcome, &got));
  CHECK(got.status == GAK_STATUS_SUCCEEDED && got.result.len == 2);
  gak_outcome_clear(&got);
  REFUSED(gak_commitgate_commit(k, S("run-1"), S("a"), 2, outcome, &got), "fence-stale");
  gak_outcome failed = {GAK_STATUS_FAILED, {NULL, 0}};
  REFUSED(gak_commitgate_commit(k, S("run-1"), S("a"), 3, failed, &got), "already-committed");
  gak_outcome bogus = {9, {NULL, 0}};
  REFUSED(gak_commitgate_commit(k, S("run-1"), S("b"), 3, bogus, &got), "invalid-input");
  gak_outcome unset = {GAK_STATUS_NONE, {NULL, 0}}; /* a required status has no default */
  REFUSED(gak_commitgate_commit(k, S("run-1"), S("b"), 3, unset, &got), "invalid-input");
  OK(gak_commitgate_read(k, S("run-1"), S("a"), &got));
  gak_outcome_clear(&got);
  REFUSED(gak_commitgate_read(k, S("run-1"), NONE, &got), "not-found");
  OK(gak_commitgate_commit(k, S("run-1"), NONE, 3, failed, &got));
  CHECK(got.status == GAK_STATUS_FAILED && got.result.ptr != NULL && got.result.len == 0);
  gak_outcome_clear(&got);
  snap.seq = 2;
  REFUSED(gak_checkpoint_save_if_newer(k, &snap), "terminal");

  gak_pruned pruned = {0};
  OK(gak_retention_prune_dry_run(k, 1000000, 1000, &pruned));
  CHECK(pruned.removed_runs == 1 && !pruned.more);
  OK(gak_retention_prune(k, 1000000, 1000, &pruned));
  CHECK(pruned.removed_runs == 1);
  OK(gak_retention_prune(k, 1000000, 1000, &pruned));
  CHECK(pruned.removed_runs == 0);
  REFUSED(gak_retention_prune(k, 1000000, 0, &pruned), "invalid-input");
}

static void sideeffect(const gak_kernel *k, gak_clock *clock) {
  gak_action mail = {S("mail/1"), S("smtp"), GAK_RETRY_SAFE, S("v1")};
  gak_acquired acq = {0};
  OK(gak_sideeffect_acquire(k, mail, 1000, &acq));
  CHECK(acq.kind == GAK_ACQUIRED_GRANTED && acq.lease.fence == 1 && acq.lease.holder.len == 32);
  gak_lease lease = acq.lease; /* still owned by acq */
  gak_lease renewed = {0};
  OK(gak_sideeffect_renew(k, mail, lease, 2000, &renewed));
  CHECK(renewed.until == gak_clock_now(clock) + 2000);
  gak_lease_clear(&renewed);
  gak_lease forged = {lease.key, lease.resource, lease.fence, S("not-the-holder"), lease.until};
  gak_bytes unwritten = {0};
  REFUSED(gak_sideeffect_complete(k, mail, forged, (gak_bytes){NULL, 0}, &unwritten), "not-holder");
  CHECK(unwritten.ptr == NULL);
  gak_action other = {S("mail/1"), S("elsewhere"), GAK_RETRY_SAFE, NONE};
  REFUSED(gak_sideeffect_release(k, other, lease), "resource-mismatch");
  gak_action bad_safety = {S("mail/1"), S("smtp"), 5, NONE};
  REFUSED(gak_sideeffect_acquire(k, bad_safety, 1000, &acq), "invalid-input");
  gak_action reused = {S("mail/1"), S("smtp"), GAK_RETRY_SAFE, S("v2")};
  REFUSED(gak_sideeffect_acquire(k, reused, 1000, &acq), "key-reused");
  gak_bytes result = {0};
  OK(gak_sideeffect_complete(k, mail, lease, (gak_bytes){(const uint8_t *)"msg-1", 5}, &result));
  CHECK(result.len == 5 && memcmp(result.ptr, "msg-1", 5) == 0 && result.ptr[5] == 0);
  gak_bytes_clear(&result);
  gak_acquired_clear(&acq);
  OK(gak_sideeffect_acquire(k, mail, 1000, &acq));
  CHECK(acq.kind == GAK_ACQUIRED_REPLAYED && acq.result.len == 5);
  gak_acquired_clear(&acq);
  gak_acquired_clear(&acq);

  /* Abandon, mark uncertain, release, reconcile. */
  gak_action pay = {S("pay/1"), S("psp"), GAK_RETRY_UNSAFE, NONE};
  OK(gak_sideeffect_acquire(k, pay, 1000, &acq));
  OK(gak_sideeffect_abandon(k, pay, acq.lease, S("refused before sending")));
  gak_acquired_clear(&acq);
  OK(gak_sideeffect_acquire(k, pay, 1000, &acq));
  CHECK(acq.kind == GAK_ACQUIRED_GRANTED && acq.lease.fence == 2);
  gak_acquired busy = {0};
  gak_action pay2 = {S("pay/2"), S("psp"), GAK_RETRY_SAFE, NONE};
  OK(gak_sideeffect_acquire(k, pay2, 1000, &busy));
  CHECK(busy.kind == GAK_ACQUIRED_CONTENDED && busy.until == acq.lease.until);
  gak_acquired_clear(&busy);
  OK(gak_sideeffect_acquire(k, pay, 1000, &busy));
  CHECK(busy.kind == GAK_ACQUIRED_IN_FLIGHT);
  gak_acquired_clear(&busy);
  OK(gak_sideeffect_mark_uncertain(k, pay, acq.lease, S("timeout")));
  OK(gak_sideeffect_release(k, pay, acq.lease));
  gak_acquired_clear(&acq);
  OK(gak_sideeffect_acquire(k, pay, 1000, &acq));
  CHECK(acq.kind == GAK_ACQUIRED_UNCERTAIN && eq(acq.reason, "timeout"));
  gak_acquired_clear(&acq);
  gak_key_info info = {0};
  OK(gak_sideeffect_get(k, S("pay/1"), &info));
  CHECK(info.state == GAK_KEY_UNCERTAIN && info.retry_safety == GAK_RETRY_UNSAFE && eq(info.reason, "timeout"));
  CHECK(info.fingerprint.ptr == NULL && eq(info.resource, "psp"));
  gak_key_info_clear(&info);
  /* The keys by state, as the list shows them: one completed, one uncertain. */
  gak_key_counts kc = {0};
  REFUSED(gak_sideeffect_count(k, NULL), "invalid-input");
  OK(gak_sideeffect_count(k, &kc));
  CHECK(kc.completed == 1 && kc.uncertain == 1 && kc.in_flight == 0 && kc.cleared == 0);
  CHECK(kc.has_oldest_uncertain && kc.oldest_uncertain <= gak_clock_now(clock) && !kc.capped && kc.exact);
  bool keys_done = false;
  REFUSED(gak_sideeffect_recount(k, 0, &keys_done), "invalid-input");
  REFUSED(gak_sideeffect_recount(k, 10, NULL), "invalid-input");
  OK(gak_sideeffect_recount(k, 10, &keys_done));
  CHECK(keys_done);
  gak_reconcile_claim claim = {0};
  OK(gak_sideeffect_begin_reconcile(k, pay, 1000, &claim));
  gak_reconcile_claim second = {0};
  REFUSED(gak_sideeffect_begin_reconcile(k, pay, 1000, &second), "reconcile-taken");
  gak_resolved resolved = {0};
  gak_resolution not_applied = {false, {NULL, 0}, false, claim.claim};
  REFUSED(gak_sideeffect_resolve_uncertain(k, pay, not_applied, &resolved), "unsafe-not-retryable");
  not_applied.force_retryable = true;
  OK(gak_sideeffect_resolve_uncertain(k, pay, not_applied, &resolved));
  CHECK(resolved.kind == GAK_RESOLVED_CLEARED);
  gak_resolved_clear(&resolved);
  gak_reconcile_claim_clear(&claim);
  REFUSED(gak_sideeffect_begin_reconcile(k, pay, 1000, &claim), "not-uncertain");

  gak_key_page keys = {0};
  OK(gak_sideeffect_list(k, GAK_KEY_ANY, NONE, 10, &keys));
  CHECK(keys.len == 2 && eq(keys.items[0].key, "mail/1") && keys.items[0].state == GAK_KEY_COMPLETED);
  CHECK(keys.items[0].has_completed_at && eq(keys.items[0].fingerprint, "v1") && keys.next.ptr == NULL);
  gak_key_page_clear(&keys);
  OK(gak_sideeffect_list(k, GAK_KEY_COMPLETED, NONE, 1, &keys));
  CHECK(keys.len == 1);
  gak_key_page_clear(&keys);
  REFUSED(gak_sideeffect_list(k, 17, NONE, 1, &keys), "invalid-input");

  /* Fenced sinks and the downstream table. */
  KERNEL = k;
  OK(gak_sideeffect_write_fenced(k, S("ledger"), 2, append_body, "ledger"));
  OK(gak_sideeffect_write_fenced(k, S("ledger"), 2, append_body, "ledger"));
  REFUSED(gak_sideeffect_write_fenced(k, S("ledger"), 1, append_body, "ledger"), "fence-stale");
  REFUSED(gak_sideeffect_write_fenced(k, S("ledger"), 3, failing_body, NULL), "write-failed");
  REFUSED(gak_sideeffect_write_fenced(k, S("ledger"), 3, NULL, NULL), "invalid-input");
  uint64_t seen = 0;
  OK(gak_sideeffect_sink_seen(k, S("ledger"), &seen));
  CHECK(seen == 2);
  OK(gak_kernel_with_downstream(k, append_body, "ledger"));
  REFUSED(gak_kernel_with_downstream(k, failing_body, NULL), "write-failed");

  /* The runner. */
  int calls = 0;
  gak_ran ran = {0};
  gak_action effect = {S("mail/1"), S("smtp"), GAK_RETRY_SAFE, S("v1")};
  OK(gak_run_effect(k, effect, 30000, effect_ok, &calls, &ran));
  CHECK(ran.kind == GAK_RAN_REPLAYED && calls == 0);
  gak_ran_clear(&ran);
  gak_action fresh = {S("mail/5"), S("smtp-5"), GAK_RETRY_SAFE, NONE};
  OK(gak_run_effect(k, fresh, 30000, effect_ok, &calls, &ran));
  CHECK(ran.kind == GAK_RAN_APPLIED && calls == 1 && ran.result.len == 4 && memcmp(ran.result.ptr, "sent", 4) == 0);
  gak_ran_clear(&ran);
  OK(gak_run_effect(k, fresh, 30000, effect_ok, &calls, &ran));
  CHECK(ran.kind == GAK_RAN_REPLAYED && calls == 1);
  gak_ran_clear(&ran);
  gak_action mail3 = {S("mail/3"), S("smtp-3"), GAK_RETRY_SAFE, NONE};
  OK(gak_run_effect(k, mail3, 30000, effect_fails, &calls, &ran));
  CHECK(ran.kind == GAK_RAN_BODY_FAILED && eq(ran.reason, "timed out after sending") && calls == 2);
  gak_ran_clear(&ran);
  OK(gak_run_effect(k, mail3, 30000, effect_fails, &calls, &ran));
  CHECK(ran.kind == GAK_RAN_UNCERTAIN && calls == 2);
  gak_ran_clear(&ran);
  gak_action mail4 = {S("mail/4"), S("smtp-4"), GAK_RETRY_SAFE, NONE};
  OK(gak_run_effect(k, mail4, 30000, effect_not_applied, &calls, &ran));
  CHECK(ran.kind == GAK_RAN_NOT_APPLIED && calls == 3);
  gak_ran_clear(&ran);
  REFUSED(gak_run_effect(k, mail4, 30000, NULL, NULL, &ran), "invalid-input");

  /* 0 is none in every enum: a required retry-safety left 0 is safe. */
  gak_action defaulted = {S("zero/1"), S("zero-r"), GAK_RETRY_NONE, NONE};
  OK(gak_sideeffect_acquire(k, defaulted, 1000, &acq));
  CHECK(acq.kind == GAK_ACQUIRED_GRANTED);
  gak_acquired_clear(&acq);
  CHECK(acq.kind == GAK_ACQUIRED_NONE && acq.lease.holder.ptr == NULL);
  OK(gak_sideeffect_get(k, S("zero/1"), &info));
  CHECK(info.retry_safety == GAK_RETRY_SAFE);
  gak_key_info_clear(&info);
  gak_action unknown = {S("zero/2"), S("zero-r2"), 3, NONE};
  REFUSED(gak_sideeffect_acquire(k, unknown, 1000, &acq), "invalid-input");
}

/* The same story's corner: what a body may do on SQLite. */
static void sqlite_sinks(const char *path) {
  char url[512];
  snprintf(url, sizeof url, "sqlite:%s", path);
  gak_kernel *k = NULL;
  if (!OK(gak_kernel_open(S(url), &k))) return;
  KERNEL = k;
  OK(gak_sideeffect_write_fenced(k, S("orders"), 1, sql_body, NULL));
  OK(gak_sideeffect_write_fenced(k, S("ledger"), 1, append_body, "ledger"));
  gak_task_seed one = {.id = S("t"), .title = NONE, .deps = NULL, .deps_len = 0, .state = GAK_TASK_ANY};
  OK(gak_taskboard_seed(k, &one, 1));
  gak_kernel_free(k);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: abi SQLITE_PATH\n");
    return 2;
  }
  CHECK(strcmp(gak_version(), "0.4.0") == 0);
  /* The library is the one this program was compiled for. */
  CHECK(gak_abi_version() == GAK_ABI_VERSION && gak_abi_layout() == GAK_ABI_LAYOUT);
  /* One numbering for every enum and kind: 0 is none, cases from 1. */
  CHECK(GAK_TASK_ANY == 0 && GAK_TASK_OPEN == 1 && GAK_TASK_FAILED == 4 && GAK_KEY_ANY == 0 && GAK_KEY_CLEARED == 1);
  CHECK(GAK_RETRY_NONE == 0 && GAK_RETRY_SAFE == 1 && GAK_RETRY_UNSAFE == 2);
  CHECK(GAK_STATUS_NONE == 0 && GAK_STATUS_SUCCEEDED == 1 && GAK_ACQUIRED_NONE == 0 && GAK_ACQUIRED_GRANTED == 1);
  CHECK(GAK_RESOLVED_NONE == 0 && GAK_RESOLVED_REPLAYED == 1);
  CHECK(GAK_TASK_DEAD == 5 && GAK_COMPLETION_ANSWER_NONE == 0 && GAK_COMPLETION_ANSWER_COMPLETED == 1);
  gak_bytes component = {0};
  gak_component(&component);
  CHECK(component.len > 1000 && memcmp(component.ptr, "\0asm", 4) == 0);
  CHECK(gak_error_code(NULL) == NULL && gak_error_message(NULL) == NULL);
  gak_error_free(NULL);
  gak_kernel_free(NULL);

  gak_kernel *k = NULL;
  REFUSED(gak_kernel_open(S("nosuch://alice:pw@db/x"), &k), "invalid-input");
  REFUSED(gak_kernel_open(S("memory:"), NULL), "invalid-input");
  const char not_utf8[] = {(char)0xff, 'x'};
  REFUSED(gak_kernel_open((gak_str){not_utf8, 2}, &k), "invalid-input");
  REFUSED(gak_kernel_open((gak_str){NULL, 5}, &k), "invalid-input");
  gak_error *secret = gak_kernel_open(S("postgres://alice:s3cr3t@127.0.0.1:1/x?connect_timeout=1"), &k);
  CHECK(secret != NULL && strstr(gak_error_message(secret), "s3cr3t") == NULL);
  gak_error_free(secret);

  gak_clock *clock = gak_clock_manual(0);
  OK(gak_clock_set(clock, 0));
  gak_options options = {0};
  options.store = S("memory:");
  options.clock = clock;
  options.max_connections = 4;
  options.connection_wait_ms = 2000;
  options.retry_attempts = 3;
  if (!OK(gak_kernel_open_with(options, &k))) return 1;
  gak_task nothing = {0};
  REFUSED(gak_taskboard_get(NULL, S("a"), &nothing), "invalid-input");
  REFUSED(gak_taskboard_get(k, (gak_str){not_utf8, 2}, &nothing), "invalid-input");
  taskboard(k);
  runs(k);
  sideeffect(k, clock);
  KERNEL = k;
  OK(gak_kernel_with_downstream(k, memory_sql_body, NULL));
  gak_clock_advance(clock, 500);
  CHECK(gak_clock_now(clock) == 500);
  OK(gak_clock_set(clock, 600));
  REFUSED(gak_clock_set(clock, 10), "invalid-input");
  REFUSED(gak_clock_set(NULL, 10), "invalid-input");
  queue(k, clock);
  gak_kernel_free(k);
  gak_clock_free(clock);
  REFUSED(gak_postgres_drop_schema(S("memory:")), "invalid-input");
  sqlite_sinks(argv[1]);

  /* Clearing a zeroed answer is harmless. */
  gak_task zero_task = {0};
  gak_task_clear(&zero_task);
  gak_task_clear(NULL);
  gak_str zero_str = {0};
  gak_str_clear(&zero_str);
  gak_ran zero_ran = {0};
  gak_ran_clear(&zero_ran);
  gak_completion_result zero_result = {0};
  gak_completion_result_clear(&zero_result);
  gak_task_list zero_list = {0};
  gak_task_list_clear(&zero_list);

  printf("abi: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
