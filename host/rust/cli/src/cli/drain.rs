//! `gak drain` (hidden): drain N trivial jobs with W threads, the way the
//! peers harness (`bench/peers/run.mjs`) drains graphile-worker's and
//! pg-boss's, so gak's figure is printed in the same table, from the same
//! run, on the same database.
//!
//! On PostgreSQL the drain makes a schema of its own,
//! `gak_peers_gak_<mode>_<pid>` (the URL's `?schema=` is ignored), and drops
//! it afterwards, failing when it is still there. It seeds N open tasks
//! (1,000 per `seed`), opens the pool (each worker makes one read call), and
//! then starts the clock and W threads that each loop: batch 1,
//! `claim-next` then `complete`; batch B > 1, `claim-batch(B)` then one
//! `complete-batch`, until a claim finds nothing free and no task is open.
//! The window ends at the last completion. Every task must be completed
//! exactly once and no completion refused, else the drain fails (exit 1).
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use gak::blocking::{Kernel, run_future as run};
use gak::store::facts::{StoreKind, store_kind};
use gak::{Completion, CompletionAnswer, TaskSeed, TaskState};
use serde_json::json;

use super::args::DrainArgs;
use super::failure::{Failure, Outcome};

/// Who claims (the agent of every claim).
const AGENT: &str = "w";
/// A lease no drain outlives: a claim is never taken over mid-drain.
const TTL_MS: u64 = 600_000;
/// At most this many tasks per `seed` call. Not the peers' 5,000: on
/// PostgreSQL a seed takes an advisory lock per key in one transaction, and
/// a server with the default lock table (`max_locks_per_transaction` 64 ×
/// `max_connections` 100) answers a seed of about 4,500 tasks with "out of
/// shared memory". Seeding is outside the measured window.
const SEED_CHUNK: usize = 1_000;
/// A page of `list`, when checking the board afterwards.
const PAGE: u32 = 1_000;
/// How long a worker keeps claiming while every claim comes back empty and
/// the board still lists an open task.
const STALL: Duration = Duration::from_secs(30);
/// A worker's wait after its first empty claim while tasks are open,
/// doubled after each further one, at most `IDLE_DOUBLINGS` times (16 ms).
const IDLE_FIRST: Duration = Duration::from_micros(125);
const IDLE_DOUBLINGS: u32 = 7;

/// The id of job `i`.
fn job(i: usize) -> String {
    format!("job-{i:07}")
}

/// With `--group-limit`, the group every tenth job is in.
const LIMITED: &str = "limited";

/// Is job `id` in the limited group (every tenth job, from the first, as
/// seeded)?
fn limited(id: &str) -> bool {
    id.strip_prefix("job-")
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| n % 10 == 0)
}

/// How often the sampler reads the limited group's live claims.
const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// What one worker did.
#[derive(Default)]
struct Worked {
    /// The jobs it completed, in order.
    completed: Vec<String>,
    /// Claim calls (each `claim-next` or `claim-batch`).
    claims: u64,
    /// Claims that found nothing free while the board still listed an open
    /// task (the worker claimed again).
    empty_with_open: u64,
    /// When its last completion returned.
    last: Option<Instant>,
    /// When its last completion of a job outside the limited group returned.
    last_other: Option<Instant>,
}

/// Run `gak drain`.
pub fn run_drain(args: DrainArgs) -> Outcome {
    let mode = if args.batch == 1 {
        "unbatched"
    } else {
        "batched"
    };
    let kind = store_kind(&args.store).ok_or_else(|| {
        Failure::Usage(gak::OpenError::UnknownStore(args.store.clone()).to_string())
    })?;
    let schema = (kind == StoreKind::Postgres)
        .then(|| format!("gak_peers_gak_{mode}_{}", std::process::id()));
    let connections = args.max_connections.unwrap_or(args.workers + 1);
    let store = Store::open(&args.store, schema.as_deref(), connections)?;
    let drained = drain(&store.kernel, &args);
    let dropped = store.close();
    let report = drained?;
    dropped?;

    let seconds = report.window.as_secs_f64();
    let jobs_per_s = args.jobs as f64 / seconds;
    if args.json {
        let row = json!({
            "peer": "gak",
            "version": env!("CARGO_PKG_VERSION"),
            "mode": mode,
            "batch": args.batch,
            "workers": args.workers,
            "jobs": args.jobs,
            "seconds": seconds,
            "jobs_per_s": jobs_per_s,
            "cpu_seconds": report.cpu_seconds,
            "completed": report.completed,
            "claims": report.claims,
            "empty_claims_with_open": report.empty_with_open,
            "store": report.store,
            "schema": schema,
            "settings": {
                "agent": AGENT,
                "ttl_ms": TTL_MS,
                "max_connections": connections,
                "call": if args.batch == 1 {
                    "claim-next + complete"
                } else {
                    "claim-batch + complete-batch"
                },
            },
            "group": report.group.as_ref().map(|g| json!({
                "name": LIMITED,
                "limit": g.limit,
                "jobs": g.jobs,
                "max_live_sampled": g.max_live,
                "samples": g.samples,
            })),
            "others": report.group.as_ref().map(|g| json!({
                "jobs": args.jobs - g.jobs,
                "seconds": g.others_window.as_secs_f64(),
                "jobs_per_s": (args.jobs - g.jobs) as f64 / g.others_window.as_secs_f64(),
            })),
        });
        println!("{row}");
    } else {
        let cpu = report
            .cpu_seconds
            .map_or_else(String::new, |c| format!(", {c:.2} s of CPU"));
        println!(
            "drained {} jobs with {} workers ({connections} connections), batch {}, on {}: {seconds:.3} s, \
             {jobs_per_s:.0} jobs/s{cpu}; {} claim calls, every job completed once",
            args.jobs, args.workers, args.batch, report.store, report.claims,
        );
        if let Some(g) = &report.group {
            let others = (args.jobs - g.jobs) as f64 / g.others_window.as_secs_f64();
            println!(
                "group {LIMITED} (limit {}, {} jobs): at most {} live claims in {} samples; \
                 the other {} jobs drained at {others:.0} jobs/s",
                g.limit,
                g.jobs,
                g.max_live,
                g.samples,
                args.jobs - g.jobs,
            );
        }
    }
    Ok(())
}

/// The kernel the drain runs on, and the schema it made.
struct Store {
    kernel: Kernel,
    #[cfg(feature = "postgres")]
    own: Option<gak::store::postgres::PostgresBackend>,
}

impl Store {
    /// A kernel on `url` with a pool of `connections`; on PostgreSQL on a
    /// fresh schema `schema`.
    fn open(url: &str, schema: Option<&str>, connections: usize) -> Result<Store, Failure> {
        let builder = gak::Kernel::builder().max_connections(connections);
        match schema {
            #[cfg(feature = "postgres")]
            Some(schema) => {
                use gak::store::postgres::PostgresBackend;
                let backend = PostgresBackend::parse(url)?.with_schema(schema)?;
                let storage = |e: gak::store::StoreFault| {
                    Failure::Storage(format!("making the schema {schema}: {e}"))
                };
                run(backend.drop_schema()).map_err(storage)?;
                run(backend.ensure_schema()).map_err(storage)?;
                let store = Store {
                    kernel: Kernel::from(
                        builder
                            .backend(Arc::new(backend.clone()))
                            .build()
                            .map_err(Failure::from)?,
                    ),
                    own: Some(backend),
                };
                Ok(store)
            }
            _ => Ok(Store {
                kernel: builder.store(url).open_blocking()?,
                #[cfg(feature = "postgres")]
                own: None,
            }),
        }
    }

    /// Drop the schema the drain made, and check it is gone.
    fn close(self) -> Outcome {
        #[cfg(feature = "postgres")]
        if let Some(backend) = self.own {
            drop(self.kernel);
            let schema = backend.schema().to_owned();
            let failed = |e: String| Failure::Storage(format!("dropping the schema {schema}: {e}"));
            run(backend.drop_schema()).map_err(|e| failed(e.to_string()))?;
            let left: Option<String> = run(async {
                let client = backend.connect().await.map_err(|e| e.to_string())?;
                let row = client
                    .query_one("SELECT to_regnamespace($1)::text", &[&schema])
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(row.get(0))
            })
            .map_err(failed)?;
            if left.is_some() {
                return Err(failed("it is still there after the drop".into()));
            }
        }
        Ok(())
    }
}

/// What the sampler saw of the limited group, and the other jobs' window.
struct GroupReport {
    limit: u32,
    jobs: usize,
    max_live: u32,
    samples: u64,
    others_window: Duration,
}

/// What a drain measured.
struct Report {
    group: Option<GroupReport>,
    window: Duration,
    cpu_seconds: Option<f64>,
    completed: usize,
    claims: u64,
    empty_with_open: u64,
    store: String,
}

fn drain(kernel: &Kernel, args: &DrainArgs) -> Result<Report, Failure> {
    let store = kernel.backend().describe();
    let board = kernel.taskboard();
    let refused = |what: &str| {
        let f = Failure::on(kernel, what.to_owned());
        move |e| f(e)
    };
    if !board
        .list(None, None, 1)
        .map_err(refused("the board"))?
        .items
        .is_empty()
    {
        return Err(Failure::Usage(format!(
            "the board of {store} is not empty: gak drain needs a store of its own \
             (memory:, a new SQLite file, or PostgreSQL, where it makes its own schema)"
        )));
    }
    if let Some(limit) = args.group_limit {
        board
            .set_group_limit(LIMITED, Some(limit))
            .map_err(refused("setting the group limit"))?;
    }
    for start in (0..args.jobs).step_by(SEED_CHUNK) {
        let seeds: Vec<TaskSeed> = (start..args.jobs.min(start + SEED_CHUNK))
            .map(|i| {
                let seed = TaskSeed::new(&job(i));
                match args.group_limit {
                    Some(_) if i % 10 == 0 => seed.group(LIMITED),
                    _ => seed,
                }
            })
            .collect();
        board.seed(&seeds).map_err(refused("seeding"))?;
    }

    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(args.workers + 1));
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    let mut handles = Vec::new();
    for _ in 0..args.workers {
        let kernel = kernel.clone();
        let (done, stop, start, failure) =
            (done.clone(), stop.clone(), start.clone(), failure.clone());
        let (jobs, batch) = (args.jobs as u64, args.batch);
        handles.push(std::thread::spawn(move || {
            // Open this worker's connection (and its component instance)
            // before the clock starts, as the peers' pools are open before
            // their first job.
            let warm = kernel.taskboard().list(Some(TaskState::Done), None, 1);
            start.wait();
            let worked = warm
                .map_err(|e| format!("opening the pool: {e}"))
                .and_then(|_| work(&kernel, batch, jobs, &done, &stop));
            worked.unwrap_or_else(|why| {
                stop.store(true, Ordering::Relaxed);
                failure
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(why);
                Worked::default()
            })
        }));
    }
    // The sampler: the limited group's live claims, read throughout the
    // drain on a connection of its own.
    let finished = Arc::new(AtomicBool::new(false));
    let sampler = args.group_limit.map(|_| {
        let (kernel, finished) = (kernel.clone(), finished.clone());
        std::thread::spawn(move || -> Result<(u32, u64), String> {
            let (mut max, mut samples) = (0, 0);
            while !finished.load(Ordering::Acquire) {
                let group = kernel
                    .taskboard()
                    .get_group(LIMITED)
                    .map_err(|e| format!("get-group: {e}"))?;
                max = max.max(group.live);
                samples += 1;
                std::thread::sleep(SAMPLE_EVERY);
            }
            Ok((max, samples))
        })
    });
    let cpu_before = process_cpu();
    start.wait();
    let began = Instant::now();
    let worked: Vec<Worked> = handles
        .into_iter()
        .map(|h| h.join().expect("a drain worker panicked"))
        .collect();
    let cpu_after = process_cpu();
    finished.store(true, Ordering::Release);
    let sampled = sampler
        .map(|s| s.join().expect("the sampler panicked"))
        .transpose()
        .map_err(Failure::Failed)?;
    if let Some(why) = failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(Failure::Failed(why));
    }

    let last = worked.iter().filter_map(|w| w.last).max().unwrap_or(began);
    let mut seen = HashSet::with_capacity(args.jobs);
    let mut completed = 0;
    for id in worked.iter().flat_map(|w| &w.completed) {
        completed += 1;
        if !seen.insert(id.as_str()) {
            return Err(Failure::Failed(format!("{id} was completed twice")));
        }
    }
    if completed != args.jobs || (0..args.jobs).any(|i| !seen.contains(job(i).as_str())) {
        return Err(Failure::Failed(format!(
            "{completed} of {} jobs completed",
            args.jobs
        )));
    }
    // The store's word: every seeded task is done, none open or claimed.
    let mut listed = 0;
    let mut after: Option<String> = None;
    loop {
        let page = board
            .list(None, after.as_deref(), PAGE)
            .map_err(refused("the board"))?;
        for task in &page.items {
            if task.state != TaskState::Done {
                return Err(Failure::Failed(format!(
                    "{} is {:?} after the drain",
                    task.id, task.state
                )));
            }
        }
        listed += page.items.len();
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    if listed != args.jobs {
        return Err(Failure::Failed(format!(
            "the board lists {listed} tasks after the drain, not {}",
            args.jobs
        )));
    }
    let group = match (args.group_limit, sampled) {
        (Some(limit), Some((max_live, samples))) => {
            if max_live > limit {
                return Err(Failure::Failed(format!(
                    "the group {LIMITED} had {max_live} live claims at once (limit {limit})"
                )));
            }
            let last_other = worked
                .iter()
                .filter_map(|w| w.last_other)
                .max()
                .unwrap_or(began);
            Some(GroupReport {
                limit,
                jobs: args.jobs.div_ceil(10),
                max_live,
                samples,
                others_window: last_other.duration_since(began),
            })
        }
        _ => None,
    };
    Ok(Report {
        group,
        window: last.duration_since(began),
        cpu_seconds: cpu_before.zip(cpu_after).map(|(a, b)| b - a),
        completed,
        claims: worked.iter().map(|w| w.claims).sum(),
        empty_with_open: worked.iter().map(|w| w.empty_with_open).sum(),
        store,
    })
}

/// One worker's loop: claim (one or a batch), complete, until a claim finds
/// nothing free and nothing is open (the rest is held by other workers,
/// which complete it).
fn work(
    kernel: &Kernel,
    batch: u32,
    jobs: u64,
    done: &AtomicU64,
    stop: &AtomicBool,
) -> Result<Worked, String> {
    let board = kernel.taskboard();
    let mut worked = Worked::default();
    let mut empty_since: Option<Instant> = None;
    let mut empty_streak = 0u32;
    while !stop.load(Ordering::Relaxed) {
        worked.claims += 1;
        let claimed: Vec<(String, String)> = if batch == 1 {
            board
                .claim_next(AGENT, TTL_MS)
                .map_err(|e| format!("claim-next: {e}"))?
                .into_iter()
                .map(|t| (t.id, t.token.unwrap_or_default()))
                .collect()
        } else {
            board
                .claim_batch(AGENT, TTL_MS, batch)
                .map_err(|e| format!("claim-batch: {e}"))?
                .into_iter()
                .map(|t| (t.id, t.token.unwrap_or_default()))
                .collect()
        };
        if claimed.is_empty() {
            if done.load(Ordering::Acquire) >= jobs {
                break;
            }
            // The counts, not a listing: a listing reads the open task's
            // record, which locks it on PostgreSQL, and claimers pass over
            // a task another call holds (skip-locked claiming). With 32
            // workers, those listing the last open tasks between empty
            // claims kept every claimer from them, for good (seen here).
            let counts = board.count().map_err(|e| format!("count: {e}"))?;
            if counts.open == 0 {
                break;
            }
            worked.empty_with_open += 1;
            let since = *empty_since.get_or_insert_with(Instant::now);
            if since.elapsed() > STALL {
                let open = board
                    .list(Some(TaskState::Open), None, 1)
                    .map_err(|e| format!("list: {e}"))?;
                return Err(format!(
                    "stalled: every claim for {} s found nothing free while {} is open",
                    STALL.as_secs(),
                    open.items.first().map_or("a task", |t| t.id.as_str())
                ));
            }
            // A worker's idle wait, growing while claims come back empty:
            // what is left is held by other workers, which complete it.
            std::thread::sleep(IDLE_FIRST * (1 << empty_streak));
            empty_streak = (empty_streak + 1).min(IDLE_DOUBLINGS);
            continue;
        }
        empty_since = None;
        empty_streak = 0;
        if let [(id, token)] = claimed.as_slice() {
            board
                .complete(id, token)
                .map_err(|e| format!("complete {id}: {e}"))?;
        } else {
            let items: Vec<Completion> = claimed
                .iter()
                .map(|(id, token)| Completion::new(id, token))
                .collect();
            let answers = board
                .complete_batch(&items)
                .map_err(|e| format!("complete-batch: {e}"))?;
            if let Some(a) = answers
                .iter()
                .find(|a| a.answer != CompletionAnswer::Completed)
            {
                return Err(format!("complete-batch answered {a:?}"));
            }
            if answers.len() != items.len() {
                return Err(format!(
                    "complete-batch answered {} of {} items",
                    answers.len(),
                    items.len()
                ));
            }
        }
        let now = Instant::now();
        worked.last = Some(now);
        if claimed.iter().any(|(id, _)| !limited(id)) {
            worked.last_other = Some(now);
        }
        done.fetch_add(claimed.len() as u64, Ordering::AcqRel);
        worked
            .completed
            .extend(claimed.into_iter().map(|(id, _)| id));
    }
    Ok(worked)
}

/// User plus system CPU seconds of this process so far (Linux: from
/// `/proc/self/stat`, in USER_HZ = 100 ticks a second); `None` elsewhere.
fn process_cpu() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces) in
    // parentheses: state is field 3, utime 14 and stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}
