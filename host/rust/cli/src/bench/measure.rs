//! Samples: every worker on its own thread, started together, running ops
//! until the sample's time is up; latencies per op, throughput per sample.
use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::workload::{self, Context, Done, Worker};
use super::{Impl, Op, OpenStore, Options};

/// One implementation's measurements in one figure.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure {
    /// Who did the ops.
    pub imp: String,
    /// Ops per second of each sample (every worker, every process).
    pub samples: Vec<f64>,
    /// Ops measured.
    pub ops: u64,
    /// Of those, refused as the op expects under contention.
    pub refused: u64,
    /// Every op's latency, in nanoseconds.
    pub latencies_ns: Vec<u64>,
}

impl Figure {
    fn new(imp: Impl) -> Figure {
        Figure {
            imp: imp.name().to_owned(),
            samples: Vec::new(),
            ops: 0,
            refused: 0,
            latencies_ns: Vec::new(),
        }
    }

    /// The median of the samples' ops/s.
    pub fn ops_per_s(&self) -> f64 {
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        match s.len() {
            0 => 0.0,
            n if n % 2 == 1 => s[n / 2],
            n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
        }
    }

    /// The latency at quantile `q` (0..=1), in µs.
    pub fn latency_us(&mut self, q: f64) -> f64 {
        self.latencies_ns.sort_unstable();
        percentile(&self.latencies_ns, q) as f64 / 1_000.0
    }

    /// Add another process's measurements of the same figure: ops/s add up
    /// sample by sample (the processes ran them at the same time), latencies
    /// pool.
    pub fn merge(&mut self, other: Figure) {
        if self.samples.len() < other.samples.len() {
            self.samples.resize(other.samples.len(), 0.0);
        }
        for (mine, theirs) in self.samples.iter_mut().zip(other.samples) {
            *mine += theirs;
        }
        self.ops += other.ops;
        self.refused += other.refused;
        self.latencies_ns.extend(other.latencies_ns);
    }
}

/// The value at quantile `q` of `sorted` (nearest rank); 0 when empty.
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// What one worker did in one sample.
struct WorkerSample {
    ops: u64,
    refused: u64,
    /// The sample's time minus the worker's untimed refills.
    busy: Duration,
    latencies_ns: Vec<u64>,
}

/// A fresh tag per figure: figures and runs never share a task or key.
pub(super) fn tag() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let run = gak::measure::random128() as u32;
    format!("b{run:08x}{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// PostgreSQL's default `max_connections` is 100: keep every figure's
/// connections (all implementations, all processes) below this, or each
/// sample connects afresh (see [`run_figure`]).
const PG_CONNECTIONS: usize = 80;

/// A figure's shared context. Each `round` gets a new kernel (a new pool)
/// and new names.
fn context(
    store: &OpenStore,
    backend: &Arc<dyn gak::store::Backend>,
    shared: &str,
    workers: usize,
    round: usize,
) -> Result<Context, String> {
    let kernel = gak::Kernel::builder()
        .backend(backend.clone())
        .max_connections(workers + 1)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(Context {
        kernel: kernel.into(),
        backend: backend.clone(),
        sql: store.sql.clone(),
        own: format!("{shared}p{}r{round}", std::process::id()),
        shared: shared.to_owned(),
        process: i64::from(std::process::id()),
        map: Arc::new(Mutex::new(HashMap::new())),
    })
}

/// How many ops a worker will do in `time`, from a run of `took`.
fn pace(measured: &[WorkerSample], took: Duration, time: Duration) -> usize {
    let per_worker = measured.iter().map(|w| w.ops).max().unwrap_or(0);
    (per_worker as f64 * time.as_secs_f64() / took.as_secs_f64().max(1e-6)) as usize
}

/// Measure one figure in this process: every implementation of `impls`,
/// warmed up, then sampled in turn. `start` is called once every worker is
/// set up, before the warm-up (children of `--processes` wait there for the
/// common start instant). `tick` is called after every sample.
///
/// Every implementation's workers are set up once and kept across the
/// samples (warm connections, prepared statements) — unless that would hold
/// more PostgreSQL connections than the server allows by default (e.g. 32
/// workers × 4 implementations): then each implementation connects afresh
/// for each of its samples, with a warm-up of its own, and lets go after.
///
/// # Errors
/// A sentence: the store failed, or an op got an answer it must not.
pub fn run_figure(
    store: &OpenStore,
    op: Op,
    workers: usize,
    impls: &[Impl],
    options: &Options,
    start: &mut dyn FnMut() -> Result<(), String>,
    tick: &mut dyn FnMut(),
) -> Result<Vec<Figure>, String> {
    let backend = store.backend_for_figure();
    // `--processes` children share the hot set through the tag their
    // parent hands them.
    let shared = std::env::var(super::process::TAG_ENV).unwrap_or_else(|_| tag());
    let connections = workers * impls.len() * options.processes.max(1);
    let keep = store.kind != super::StoreKind::Postgres || connections <= PG_CONNECTIONS;
    let time = options.sample_time();
    let warm_up = (time / 2).clamp(Duration::from_millis(50), Duration::from_millis(500));
    let mut figures: Vec<Figure> = impls.iter().map(|&i| Figure::new(i)).collect();
    let mut hints: Vec<usize> = vec![0; impls.len()];
    let mut kept: Vec<Vec<Box<dyn Worker>>> = Vec::new();
    let first = context(store, &backend, &shared, workers, 0)?;
    if keep {
        for &imp in impls {
            kept.push(workload::build(&first, imp, op, workers)?);
        }
    }
    start()?;
    if keep {
        for (i, set) in kept.iter_mut().enumerate() {
            hints[i] = pace(&sample(set, warm_up)?, warm_up, time);
        }
    }
    let n = impls.len();
    let mut round = 0;
    for s in 0..options.samples.max(1) {
        // Interleave, rotating who goes first, so drift hits all alike.
        for k in 0..n {
            let i = (s + k) % n;
            let mut fresh = None;
            let set = if keep {
                &mut kept[i]
            } else {
                round += 1;
                let ctx = context(store, &backend, &shared, workers, round)?;
                let mut set = workload::build(&ctx, impls[i], op, workers)?;
                hints[i] = pace(&sample(&mut set, warm_up)?, warm_up, time);
                &mut fresh.insert((ctx, set)).1
            };
            for w in set.iter_mut() {
                w.prepare(hints[i])?;
            }
            let measured = sample(set, time)?;
            let figure = &mut figures[i];
            let mut rate = 0.0;
            let mut most = 0;
            for w in measured {
                if w.busy > Duration::ZERO {
                    rate += w.ops as f64 / w.busy.as_secs_f64();
                }
                most = most.max(w.ops);
                figure.ops += w.ops;
                figure.refused += w.refused;
                figure.latencies_ns.extend(w.latencies_ns);
            }
            figure.samples.push(rate);
            hints[i] = most as usize;
            // A fresh set's connections close here.
            drop(fresh);
            tick();
        }
    }
    Ok(figures)
}

/// Every worker on its own thread for `time`, started together.
fn sample(workers: &mut [Box<dyn Worker>], time: Duration) -> Result<Vec<WorkerSample>, String> {
    let barrier = Barrier::new(workers.len());
    let results: Vec<Result<WorkerSample, String>> = thread::scope(|scope| {
        let handles: Vec<_> = workers
            .iter_mut()
            .map(|w| {
                let barrier = &barrier;
                scope.spawn(move || run_worker(w.as_mut(), barrier, time))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a bench worker panicked".into()))
            })
            .collect()
    });
    results.into_iter().collect()
}

fn run_worker(
    worker: &mut dyn Worker,
    barrier: &Barrier,
    time: Duration,
) -> Result<WorkerSample, String> {
    let mut latencies_ns = Vec::with_capacity(4096);
    let (mut ops, mut refused, mut setup) = (0, 0, Duration::ZERO);
    barrier.wait();
    let start = Instant::now();
    let deadline = start + time;
    loop {
        let t0 = Instant::now();
        if t0 >= deadline {
            break;
        }
        let done = worker.op()?;
        let took = t0.elapsed();
        match done {
            Done::Ok => ops += 1,
            Done::Refused => {
                ops += 1;
                refused += 1;
            }
            Done::Setup => {
                setup += took;
                continue;
            }
        }
        latencies_ns.push(took.as_nanos() as u64);
    }
    Ok(WorkerSample {
        ops,
        refused,
        busy: start.elapsed().saturating_sub(setup),
        latencies_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&[7], 0.99), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn merged_figures_add_rates_sample_by_sample() {
        let mut a = Figure::new(Impl::Kernel);
        a.samples = vec![10.0, 20.0, 30.0];
        a.latencies_ns = vec![1, 2];
        let mut b = a.clone();
        b.samples = vec![1.0, 2.0, 3.0];
        a.merge(b);
        assert_eq!(a.samples, vec![11.0, 22.0, 33.0]);
        assert_eq!(a.ops_per_s(), 22.0);
        assert_eq!(a.latencies_ns.len(), 4);
    }
}
