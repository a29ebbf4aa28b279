//! The command line: every command with its one-line contract.
use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

use super::time::parse_duration;

const STORES: &str = "\
Store URLs (--store URL; tasks, groups, effects, runs and prune also read GAK_STORE):
  memory:                               an in-process map, empty at every start (tests)
  sqlite:PATH[?synchronous=normal]      an embedded SQLite database file (also: PATH.db)
  postgres://USER[:PASSWORD]@HOST:PORT/DB[?schema=NAME&clock=db]
                                        PostgreSQL: one schema per kernel (default gak);
                                        clock=db judges expiry by the server's clock
  A password in a URL is never printed.";

const AFTER_HELP: &str = "\
Exit codes: 0 done; 1 refused by the contract (its kebab-case code is printed) or a
check failed; 2 usage (bad arguments, unknown store URL, unparsable input file);
3 storage (the store or the component could not be used).

Output: aligned tables for people; --json prints one JSON document for scripts (fields
in the README, \"Operating gak\"). Tokens and claims are printed only by the command that
minted them (tasks claim, tasks claim-next, effects reconcile). Errors go to stderr.
Durations: 500ms, 30s, 15m, 12h, 7d. Logs: GAK_LOG (or RUST_LOG), e.g. GAK_LOG=debug,
to stderr; off by default.";

/// gak: a crash-safe coordination kernel. Operate its task board,
/// side-effect keys and runs; replay its conformance vectors; export its
/// component.
#[derive(Parser, Debug)]
#[command(
    name = "gak",
    version,
    about = "gak: a crash-safe coordination kernel. Operate its task board, side-effect keys and runs \
             on memory:, sqlite:PATH or postgres:// stores.",
    after_help = format!("{STORES}\n\n{AFTER_HELP}"),
    arg_required_else_help = true,
    propagate_version = true
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// The task board: list, show, seed; claim, release, complete and renew by token; revive dead tasks.
    #[command(subcommand)]
    Tasks(Tasks),
    /// Groups: at most N live claims per group; show a group, set or remove its limit.
    #[command(subcommand)]
    Groups(Groups),
    /// Side-effect keys: find uncertain ones, take the reconcile claim, record the verdict.
    #[command(subcommand)]
    Effects(Effects),
    /// Runs: the saved snapshot and terminal outcome, and the resume plan.
    #[command(subcommand)]
    Runs(Runs),
    /// Remove finished records older than a duration, in bounded batches (retries of pruned keys run again).
    #[command(long_about = PRUNE_HELP)]
    Prune(PruneArgs),
    /// Tell the reference-runtime story step by step (default store sqlite:gak-demo.db).
    Demo(DemoArgs),
    /// Replay conformance vector files on fresh stores; the closing line is `N passed, M failed`.
    Conformance(ConformanceArgs),
    /// Write the kernel component (.wasm) this binary runs, and its WIT package, for other hosts.
    Component(ComponentArgs),
    /// Measure the kernel against native code, hand-written SQL and the database's own ceiling.
    #[command(long_about = BENCH_HELP)]
    Bench(BenchArgs),
    /// Drain N trivial jobs with W threads and print jobs/s: gak's rows in bench/peers/run.mjs.
    #[command(hide = true)]
    Drain(DrainArgs),
    /// The operator console in a browser: the board, dead tasks, groups, keys, runs and retention, with their actions.
    #[command(long_about = SERVE_HELP)]
    Serve(ServeArgs),
}

/// The store an operator command acts on, and how to print.
#[derive(Args, Debug)]
pub struct Target {
    /// The store: memory:, sqlite:PATH, postgres://USER@HOST:PORT/DB?schema=NAME.
    #[arg(long, env = "GAK_STORE", hide_env_values = true, value_name = "URL")]
    pub store: String,
    /// Print one JSON document (stable kebab-case fields) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A duration argument: `500ms`, `30s`, `15m`, `12h`, `7d`.
fn duration(text: &str) -> Result<u64, String> {
    parse_duration(text)
}

/// A task's state.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum TaskStateArg {
    /// Claimable.
    Open,
    /// Held by a claim (live or expired).
    Claimed,
    /// Finished.
    Done,
    /// Failed; claimable again (once due).
    Failed,
    /// Out of attempts, or failed for good: never claimed until revived.
    Dead,
}

/// A side-effect key's state.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum KeyStateArg {
    /// No attempt in flight: may be granted.
    Cleared,
    /// An attempt holds a live intent.
    InFlight,
    /// Marked uncertain, or its intent expired with no verdict: reconcile it.
    Uncertain,
    /// Applied; retries replay its first result.
    Completed,
}

/// Task board commands.
#[derive(Subcommand, Debug)]
pub enum Tasks {
    /// One page of tasks ordered by id, optionally of one state; never a token.
    List {
        #[command(flatten)]
        target: Target,
        /// Only tasks in this state.
        #[arg(long)]
        state: Option<TaskStateArg>,
        /// Only the tasks of this group (any state).
        #[arg(long, conflicts_with = "state")]
        group: Option<String>,
        /// At most this many tasks (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Start after this id (the `next` cursor of the previous page).
        #[arg(long, value_name = "ID")]
        after: Option<String>,
    },
    /// One page of the tasks waiting for their not-before (delayed, or backing off after a failure), by due time; never a token.
    Delayed {
        #[command(flatten)]
        target: Target,
        /// At most this many tasks (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Start after this cursor (the `next` of the previous page).
        #[arg(long, value_name = "CURSOR")]
        after: Option<String>,
    },
    /// How many tasks the board holds in each state (from 256 count records, never the board); says when a board a format-1 kernel wrote is not fully counted yet.
    Count {
        #[command(flatten)]
        target: Target,
    },
    /// Count the tasks a format-1 kernel (0.2, 0.3) left uncounted, a page at a time, until the counts are exact.
    Recount {
        #[command(flatten)]
        target: Target,
        /// Tasks per transaction (1-1000).
        #[arg(long, default_value_t = 500)]
        page: u32,
    },
    /// One task by id, without its token.
    Show {
        #[command(flatten)]
        target: Target,
        /// The task id.
        id: String,
    },
    /// Load tasks from a JSON array of {id, title?, deps?, state?, priority?, not-before?, max-attempts?, group?} (FILE, or - for stdin) in one atomic call.
    Seed {
        #[command(flatten)]
        target: Target,
        /// The JSON file, or - for stdin. Re-seeding an id overwrites it and clears its claim.
        file: PathBuf,
    },
    /// Claim one task for an agent for a ttl; prints the minted token (shown only here).
    Claim {
        #[command(flatten)]
        target: Target,
        /// The task id.
        id: String,
        #[command(flatten)]
        lease: LeaseArgs,
    },
    /// Claim the first ready task (highest priority, then seed order), or answer that none is ready; prints the minted token.
    ClaimNext {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        lease: LeaseArgs,
    },
    /// Return a claimed task to open; only its current token may (else lease-lost).
    Release {
        #[command(flatten)]
        target: Target,
        /// The task id.
        id: String,
        #[command(flatten)]
        token: TokenArg,
    },
    /// Mark a claimed task done; only its current token may (again with that token: no-op).
    Complete {
        #[command(flatten)]
        target: Target,
        /// The task id.
        id: String,
        #[command(flatten)]
        token: TokenArg,
    },
    /// Extend a live claim to now + ttl; only its current token, only while live.
    Renew {
        #[command(flatten)]
        target: Target,
        /// The task id.
        id: String,
        #[command(flatten)]
        token: TokenArg,
        /// The new lease length from now.
        #[arg(long, value_parser = duration, value_name = "DURATION")]
        ttl: u64,
    },
    /// Bring a dead task back to open (attempts 0, last error and delay cleared) in one atomic call.
    Revive {
        #[command(flatten)]
        target: Target,
        /// The task id (refused with not-dead unless the task is dead).
        id: String,
    },
}

/// Group commands.
#[derive(Subcommand, Debug)]
pub enum Groups {
    /// A group's limit and its live claims (not-found when the group has no limit).
    Show {
        #[command(flatten)]
        target: Target,
        /// The group.
        group: String,
    },
    /// Allow at most LIMIT live claims in a group (1-100000), or remove its limit; revokes no claim.
    Limit(GroupLimitArgs),
    /// One page of the groups the board knows (a limit, a claim or a ready task), by name, with their limits and live claims.
    List {
        #[command(flatten)]
        target: Target,
        /// At most this many groups (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Start after this group (the `next` cursor of the previous page).
        #[arg(long, value_name = "GROUP")]
        after: Option<String>,
    },
}

/// `gak groups limit`: exactly one of LIMIT and `--remove`.
#[derive(Args, Debug)]
pub struct GroupLimitArgs {
    #[command(flatten)]
    pub target: Target,
    /// The group.
    pub group: String,
    /// At most this many live claims (1-100000); lowering it revokes no claim.
    #[arg(required_unless_present = "remove", conflicts_with = "remove")]
    pub limit: Option<u32>,
    /// Remove the group's limit: its tasks are claimed without one.
    #[arg(long)]
    pub remove: bool,
}

/// Who claims, and for how long.
#[derive(Args, Debug)]
pub struct LeaseArgs {
    /// The agent the claim is for (recorded as the task's owner).
    #[arg(long)]
    pub agent: String,
    /// How long the claim lives unless renewed (e.g. 30s).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub ttl: u64,
}

/// A claim token.
#[derive(Args, Debug)]
pub struct TokenArg {
    /// The token `tasks claim` printed (or GAK_TOKEN, which `ps` does not show).
    #[arg(long, env = "GAK_TOKEN", hide_env_values = true)]
    pub token: String,
}

/// Side-effect commands.
#[derive(Subcommand, Debug)]
pub enum Effects {
    /// One page of keys ordered by key, optionally of one state; never a holder or claim.
    List {
        #[command(flatten)]
        target: Target,
        /// Only keys in this state (an expired intent lists as uncertain).
        #[arg(long)]
        state: Option<KeyStateArg>,
        /// At most this many keys (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Start after this key (the `next` cursor of the previous page).
        #[arg(long, value_name = "KEY")]
        after: Option<String>,
    },
    /// How many keys are in each state (an expired intent counts as uncertain) and since when the oldest uncertain key is, from 256 count records, never the keys.
    Count {
        #[command(flatten)]
        target: Target,
    },
    /// Count the keys a format-1 kernel (0.2, 0.3) left uncounted, a page at a time, until the counts are exact.
    Recount {
        #[command(flatten)]
        target: Target,
        /// Keys per transaction (1-1000).
        #[arg(long, default_value_t = 500)]
        page: u32,
    },
    /// One key: state, resource, retry safety, deadline, reason; never its holder or claim.
    Show {
        #[command(flatten)]
        target: Target,
        /// The idempotency key.
        key: String,
    },
    /// Take the reconcile claim on an uncertain key (one reconciler at a time) and print it.
    Reconcile {
        #[command(flatten)]
        target: Target,
        /// The idempotency key.
        key: String,
        /// How long the claim keeps other reconcilers out.
        #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "15m")]
        ttl: u64,
    },
    /// Record the verdict on an uncertain key from downstream facts; the first verdict wins.
    Resolve(ResolveArgs),
}

/// `gak effects resolve`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("verdict").required(true).args(["applied", "not_applied"])))]
pub struct ResolveArgs {
    #[command(flatten)]
    pub target: Target,
    /// The idempotency key.
    pub key: String,
    /// The claim `effects reconcile` printed: refused (reconcile-taken) if it is no longer the key's.
    #[arg(long, env = "GAK_CLAIM", hide_env_values = true)]
    pub claim: Option<String>,
    /// The effect happened: the key completes and every retry replays RESULT.
    #[arg(long)]
    pub applied: bool,
    /// The effect's result as the downstream system recorded it (with --applied).
    #[arg(long, requires = "applied", value_name = "TEXT")]
    pub result: Option<String>,
    /// The effect did not happen: the key is cleared and the next attempt runs it.
    #[arg(long)]
    pub not_applied: bool,
    /// Clear an unsafe key too (with --not-applied): only when you know it did not happen.
    #[arg(long, requires = "not_applied")]
    pub force: bool,
}

/// Run commands.
#[derive(Subcommand, Debug)]
pub enum Runs {
    /// A run's saved snapshot (seq, fence, status, done steps) and terminal outcome, if any.
    Show {
        #[command(flatten)]
        target: Target,
        /// The run id.
        run: String,
    },
    /// The resume plan over a step file: what is skipped, what runs in order, what is untrusted and why.
    Plan {
        #[command(flatten)]
        target: Target,
        /// The run id.
        run: String,
        /// A JSON array of {id, depends-on?} in declaration order (or - for stdin).
        #[arg(long, value_name = "FILE")]
        steps: PathBuf,
    },
}

/// `gak prune --help`: what pruning gives up, stated where it is done.
const PRUNE_HELP: &str = "\
Remove records that finished more than DURATION ago, in batches of at most --limit, until
none is left: completed side-effect keys, done tasks that no unfinished task depends on,
and runs with a terminal outcome (their snapshot and outcomes).

What pruning gives up: a retry of a pruned key runs its effect again (the kernel no longer
remembers it happened), and a pruned run id starts over. Choose DURATION well past the
longest retry window of your runtime. Never removed: uncertain, in-flight and cleared
keys, resource and sink fences (so a stale holder can never win again).";

/// `gak prune`.
#[derive(Args, Debug)]
pub struct PruneArgs {
    #[command(flatten)]
    pub target: Target,
    /// Remove records that finished more than this long ago (e.g. 30d).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub older_than: u64,
    /// Records per batch (1-1000); each batch is one transaction.
    #[arg(long, default_value_t = 1000)]
    pub limit: u32,
    /// Show what the first batch would remove, and roll it back.
    #[arg(long)]
    pub dry_run: bool,
    /// A progress line on stderr (terminal only).
    #[arg(long)]
    pub progress: bool,
}

/// `gak demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// The store (GAK_STORE is not read: the demo writes demo records).
    #[arg(long, value_name = "URL", default_value = "sqlite:gak-demo.db")]
    pub store: String,
}

/// `gak conformance`.
#[derive(Args, Debug)]
pub struct ConformanceArgs {
    /// The store; each scenario gets a fresh one (a new file, schema or map).
    #[arg(long, value_name = "URL", default_value = "memory:")]
    pub store: String,
    /// A progress bar on stderr (terminal only).
    #[arg(long)]
    pub progress: bool,
    /// Vector files or directories of *.json (default: the built-in suite).
    #[arg(value_name = "FILE_OR_DIR")]
    pub paths: Vec<PathBuf>,
}

/// `gak component`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("what").required(true).multiple(true).args(["out", "wit"])))]
pub struct ComponentArgs {
    /// Write the component's exact bytes here (- for stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write the WIT package (gak:kernel) into this directory, one file per interface.
    #[arg(long, value_name = "DIR")]
    pub wit: Option<PathBuf>,
}

/// `gak bench --help`: what each implementation is, and how to read it.
const BENCH_HELP: &str = "\
Measure what the kernel costs on your store, beside baselines run on the same database, with
the same worker count, in the same run: ops/s (median over samples), p50 and p99 latency per
op. Each figure is a warm-up, then --samples samples with the implementations interleaved.

Implementations (--impl; each runs where it applies):
  kernel   the blocking API through the WebAssembly component, one kernel shared by the workers
  native   the same rules (gak-rules) compiled natively, over the same store binding and call
           loop: kernel/native is the WebAssembly boundary's tax
  sql      claim, acquire and drain hand-written in SQL on the bench's own tables
           (bench_sql_*), same database (sqlite and postgres only): kernel/sql is the generic
           store interface's tax
  ceiling  the database's raw single-row transaction loop (BEGIN; SELECT ... FOR UPDATE; UPDATE;
           COMMIT), reported under claim; on memory: a map under a mutex

Ops (--op): claim (fresh tasks, low contention), claim-hot (10 hot tasks, 1 ms leases; taken
refusals count as ops and show as refused), acquire-complete (fresh keys: acquire then
complete), acquire-replay (acquire of a completed key), save-if-newer, build-plan (1,000 steps),
drain (a queue drained one job at a time: claim-next then complete; every worker on one shared
board) and drain-batch (claim-batch of 100 then one complete-batch; an op is one job). The sql
baseline of the drains is the job queues' shape: WITH ... FOR UPDATE SKIP LOCKED LIMIT n, UPDATE
... RETURNING, then UPDATE ... WHERE id = ANY($1) AND state = 'claimed'.

Startup: compile_ms (Component::new, uncached), load_cached_ms (the cached artifact),
instantiate_us (Store::new + instantiate, once per worker), instance_bytes (the linear memory
a fresh instance is given), component_bytes, warm_start_ms (a new `gak tasks list` process
with the component cached).

Ratios above 1 mean the kernel is faster. Measure on a quiet machine, with a release build
(just bench); a debug build says so in its output.";

/// A worker count: at least 1.
fn worker_count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("a worker count is at least 1".into()),
        Ok(n) if n > 1024 => Err("at most 1024 workers".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a worker count")),
    }
}

fn bench_op(text: &str) -> Result<crate::bench::Op, String> {
    use crate::bench::Op;
    Op::parse(text).ok_or_else(|| {
        let all: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
        format!("unknown op {text:?} (expected one of {})", all.join(", "))
    })
}

fn bench_impl(text: &str) -> Result<crate::bench::Impl, String> {
    use crate::bench::Impl;
    Impl::parse(text).ok_or_else(|| {
        let all: Vec<&str> = Impl::ALL.iter().map(|i| i.name()).collect();
        format!("unknown impl {text:?} (expected one of {})", all.join(", "))
    })
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(s),
        _ => Err(format!("{text:?}: expected seconds, more than 0")),
    }
}

fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{text:?}: expected a whole number, at least 1")),
    }
}

/// `gak bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A store to measure; repeat for several (default memory:). SQL baselines create their own tables in the same database.
    #[arg(long = "store", value_name = "URL")]
    pub stores: Vec<String>,
    /// An op to measure; repeat for several (default: all).
    #[arg(long = "op", value_name = "OP", value_parser = bench_op)]
    pub ops: Vec<crate::bench::Op>,
    /// An implementation to measure; repeat for several (default: all that apply).
    #[arg(long = "impl", value_name = "IMPL", value_parser = bench_impl)]
    pub impls: Vec<crate::bench::Impl>,
    /// Worker threads per figure, comma-separated.
    #[arg(long, value_name = "N,N...", value_delimiter = ',', default_value = "1,8", value_parser = worker_count)]
    pub workers: Vec<usize>,
    /// Measured seconds per implementation per figure, split into the samples.
    #[arg(long, value_name = "S", default_value = "2", value_parser = positive_seconds)]
    pub seconds: f64,
    /// Samples per figure (the reported ops/s is their median).
    #[arg(long, value_name = "K", default_value = "5", value_parser = at_least_one)]
    pub samples: usize,
    /// Run each figure in N separate OS processes on one database (sqlite, postgres); their ops/s add up.
    #[arg(long, value_name = "N", default_value = "1", value_parser = at_least_one)]
    pub processes: usize,
    /// Write every figure, the startup figures and the machine as one JSON document.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an SVG of ops/s against workers, one panel per store and op, one line per implementation.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Run as one of the processes of --processes (internal).
    #[arg(long = "internal-child", hide = true)]
    pub internal_child: bool,
}

fn drain_batch(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(n),
        _ => Err(format!("{text:?}: expected a whole number from 1 to 1000")),
    }
}

fn group_limit(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!(
            "{text:?}: expected a whole number from 1 to 100000"
        )),
    }
}

/// `gak drain` (hidden; the peers harness, `bench/peers/run.mjs`, runs it).
#[derive(Args, Debug)]
pub struct DrainArgs {
    /// The store; on PostgreSQL the drain makes (and drops) a schema of its own, gak_peers_gak_<mode>_<pid>.
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// Jobs to seed and drain.
    #[arg(long, value_name = "N", default_value = "30000", value_parser = at_least_one)]
    pub jobs: usize,
    /// Worker threads.
    #[arg(long, value_name = "W", default_value = "8", value_parser = worker_count)]
    pub workers: usize,
    /// Jobs per claim: 1 is claim-next + complete, more is claim-batch + complete-batch.
    #[arg(long, value_name = "B", default_value = "1", value_parser = drain_batch)]
    pub batch: u32,
    /// Put every tenth job in the group `limited`, limited to N live claims: the drain samples the group's live claims throughout and fails if they ever exceed N, and reports the other jobs' rate apart.
    #[arg(long, value_name = "N", value_parser = group_limit)]
    pub group_limit: Option<u32>,
    /// The kernel's pool: connections the workers share (default: one per worker, and one more, as
    /// the peers harness gives each peer). Workers beyond it wait for a connection.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub max_connections: Option<usize>,
    /// Print one JSON object (the peers harness's row) instead of a sentence.
    #[arg(long)]
    pub json: bool,
}

/// `gak serve --help`.
const SERVE_HELP: &str = "\
The operator console in a browser: the board by state (paged), a task's page, dead tasks and
their revive, groups and their limits, side-effect keys (in flight, uncertain) and their
resolution, a run's snapshot and resume plan, and a prune with its dry run. Every read and
every action goes through the kernel component, as the CLI's commands do; /api/... answers the
CLI's --json shapes.

Safe by default: it listens on 127.0.0.1:7475 and refuses an address other than loopback
without --token or --token-file (then every request needs the token: an Authorization: Bearer
header, or the cookie the /login form sets). Every action is a POST carrying the page's CSRF
token; no task token, lease holder, reconcile claim or store password is ever shown.";

/// `gak serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The store: memory:, sqlite:PATH, postgres://USER@HOST:PORT/DB?schema=NAME.
    #[arg(long, env = "GAK_STORE", hide_env_values = true, value_name = "URL")]
    pub store: String,
    /// Address and port to listen on (port 0: any free port; the first line printed names it).
    #[arg(long, default_value = "127.0.0.1:7475", value_name = "ADDR")]
    pub listen: String,
    /// A bearer token every request must carry (required off loopback).
    #[arg(
        long,
        env = "GAK_SERVE_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// A file holding the bearer token (its first line).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}
