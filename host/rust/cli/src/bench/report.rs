//! What a run reports: the JSON document (`--json`) and the table on stdout.
use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::Startup;

/// One implementation's figure for one store, op and worker count.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResultRow {
    /// The op (`claim`, `claim-hot`, …).
    pub op: String,
    /// The store, as its binding describes it (never a password).
    pub store: String,
    /// Worker threads per process.
    pub workers: usize,
    /// `kernel`, `native`, `sql` or `ceiling`.
    #[serde(rename = "impl")]
    pub imp: String,
    /// Median over the samples of every worker's (and process's) ops/s.
    pub ops_per_s: f64,
    /// Median latency of one op, µs.
    pub p50_us: f64,
    /// 99th percentile latency of one op, µs.
    pub p99_us: f64,
    /// Ops measured (every sample, worker and process).
    pub ops: u64,
    /// Of those, refused as the op expects under contention (`taken`).
    pub refused: u64,
    /// Each sample's ops/s.
    pub samples: Vec<f64>,
    /// OS processes that ran the figure together (their ops/s add up).
    pub processes: usize,
}

/// The machine the figures were measured on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    /// Logical CPUs this process may use.
    pub cores: usize,
    /// `linux`, `macos`, …
    pub os: String,
    /// `x86_64`, `aarch64`, …
    pub arch: String,
    /// This gak's version.
    pub gak_version: String,
    /// Whether this binary is an unoptimised debug build (its figures say
    /// little about release performance).
    pub debug_build: bool,
    /// Seconds of measurement per implementation per figure, samples per
    /// figure.
    pub seconds: f64,
    /// Samples per figure.
    pub samples: usize,
}

impl Machine {
    /// This machine.
    pub fn here(seconds: f64, samples: usize) -> Machine {
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
            gak_version: env!("CARGO_PKG_VERSION").to_owned(),
            debug_build: cfg!(debug_assertions),
            seconds,
            samples,
        }
    }
}

/// The whole run, as `--json` writes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Every figure.
    pub results: Vec<ResultRow>,
    /// Start-up figures.
    pub startup: Startup,
    /// Where it ran.
    pub machine: Machine,
}

/// The ratios the table prints after each figure: the kernel's ops/s over
/// each baseline's.
pub const RATIOS: [&str; 3] = ["native", "sql", "ceiling"];

/// A figure's name: (store, op, workers).
pub type FigureKey = (String, String, usize);

/// The rows grouped by (store, op, workers), in run order.
pub fn groups(rows: &[ResultRow]) -> Vec<(FigureKey, Vec<&ResultRow>)> {
    let mut order: Vec<FigureKey> = Vec::new();
    let mut by: BTreeMap<FigureKey, Vec<&ResultRow>> = BTreeMap::new();
    for r in rows {
        let k = (r.store.clone(), r.op.clone(), r.workers);
        if !by.contains_key(&k) {
            order.push(k.clone());
        }
        by.entry(k).or_default().push(r);
    }
    order
        .into_iter()
        .map(|k| {
            let v = by.remove(&k).unwrap_or_default();
            (k, v)
        })
        .collect()
}

/// The kernel's ops/s over `baseline`'s in one group, if both ran.
pub fn ratio(group: &[&ResultRow], baseline: &str) -> Option<f64> {
    let of = |name: &str| group.iter().find(|r| r.imp == name).map(|r| r.ops_per_s);
    match (of("kernel"), of(baseline)) {
        (Some(k), Some(b)) if b > 0.0 => Some(k / b),
        _ => None,
    }
}

/// The table for people: one block per store, op and worker count.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    for ((store, op, workers), rows) in groups(&report.results) {
        let processes = rows.first().map_or(1, |r| r.processes);
        let who = if processes > 1 {
            format!("{processes} processes × {workers} workers")
        } else if workers == 1 {
            "1 worker".to_owned()
        } else {
            format!("{workers} workers")
        };
        let _ = writeln!(out, "{store} · {op} · {who}");
        let _ = writeln!(
            out,
            "  {:<8} {:>12} {:>10} {:>10} {:>9}",
            "impl", "ops/s", "p50 µs", "p99 µs", "refused"
        );
        for r in &rows {
            let refused = if r.refused > 0 {
                format!("{:.0}%", 100.0 * r.refused as f64 / r.ops.max(1) as f64)
            } else {
                "-".to_owned()
            };
            let _ = writeln!(
                out,
                "  {:<8} {:>12.0} {:>10.1} {:>10.1} {:>9}",
                r.imp, r.ops_per_s, r.p50_us, r.p99_us, refused
            );
        }
        let ratios: Vec<String> = RATIOS
            .iter()
            .filter_map(|b| ratio(&rows, b).map(|x| format!("kernel/{b} {x:.2}")))
            .collect();
        if !ratios.is_empty() {
            let _ = writeln!(out, "  {}", ratios.join("   "));
        }
        out.push('\n');
    }
    let s = &report.startup;
    let _ = writeln!(
        out,
        "startup: compile {:.0} ms · load cached {:.2} ms · instantiate {:.1} µs · instance {} KiB · component {} KiB · warm start {}",
        s.compile_ms,
        s.load_cached_ms,
        s.instantiate_us,
        s.instance_bytes / 1024,
        s.component_bytes / 1024,
        s.warm_start_ms
            .map_or("n/a".to_owned(), |ms| format!("{ms:.1} ms"))
    );
    let m = &report.machine;
    let _ = writeln!(
        out,
        "machine: {} cores, {}/{}, gak {}{}",
        m.cores,
        m.os,
        m.arch,
        m.gak_version,
        if m.debug_build {
            " (debug build: figures are not release figures)"
        } else {
            ""
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(store: &str, op: &str, workers: usize, imp: &str, ops_per_s: f64) -> ResultRow {
        ResultRow {
            op: op.into(),
            store: store.into(),
            workers,
            imp: imp.into(),
            ops_per_s,
            p50_us: 1.0,
            p99_us: 2.0,
            ops: 10,
            refused: 0,
            samples: vec![ops_per_s],
            processes: 1,
        }
    }

    #[test]
    fn figures_group_in_run_order_and_ratios_divide_the_kernel_by_the_baseline() {
        let rows = vec![
            row("sqlite:b.db", "claim", 8, "kernel", 300.0),
            row("memory", "claim", 1, "kernel", 90.0),
            row("sqlite:b.db", "claim", 8, "sql", 400.0),
            row("memory", "claim", 1, "native", 100.0),
            row("sqlite:b.db", "claim", 8, "ceiling", 0.0),
        ];
        let groups = groups(&rows);
        let keys: Vec<&FigureKey> = groups.iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                &("sqlite:b.db".to_owned(), "claim".to_owned(), 8),
                &("memory".to_owned(), "claim".to_owned(), 1)
            ]
        );
        assert_eq!(ratio(&groups[0].1, "sql"), Some(0.75));
        // No ratio against a baseline that did nothing or did not run.
        assert_eq!(ratio(&groups[0].1, "ceiling"), None);
        assert_eq!(ratio(&groups[0].1, "native"), None);
        assert_eq!(ratio(&groups[1].1, "native"), Some(0.9));
    }
}
