//! `gak bench`: parse, measure (in `gak::bench`), print the table, write the
//! JSON and the plot.
use std::io::IsTerminal;

use super::args::BenchArgs;
use super::failure::{Failure, Outcome};
use super::progress;
use crate::bench::{
    self as bench, Impl, Machine, Op, OpenStore, Options, Report, ResultRow, StoreKind,
};

/// Run `gak bench`.
pub fn run(args: BenchArgs) -> Outcome {
    let options = options(&args)?;
    if args.internal_child {
        return child(&options);
    }
    let mut stores = Vec::new();
    for url in &options.stores {
        let with_sql = options
            .impls
            .iter()
            .any(|i| matches!(i, Impl::Sql | Impl::Ceiling));
        stores.push(OpenStore::open(url, with_sql).map_err(Failure::Storage)?);
    }
    let figures = options.figures();
    let ticks: usize = figures
        .iter()
        .map(|(url, op, _)| options.impls_for(*op, url).len() * options.samples)
        .sum();
    let on_tty = std::io::stdout().is_terminal();
    let bar = progress::bar(on_tty, Some(ticks as u64));
    let mut results: Vec<ResultRow> = Vec::new();
    for (url, op, workers) in figures {
        let store = stores
            .iter()
            .find(|s| s.url == url)
            .expect("every store was opened");
        let impls = options.impls_for(op, &url);
        if impls.is_empty() {
            continue;
        }
        bar.set_message(format!("{} · {op} · {workers}w", store.describe()));
        let measured = if options.processes > 1 {
            let f = bench::process::run_figure(&url, op, workers, &impls, &options);
            bar.inc((impls.len() * options.samples) as u64);
            f
        } else {
            bench::run_figure(
                store,
                op,
                workers,
                &impls,
                &options,
                &mut || Ok(()),
                &mut || bar.inc(1),
            )
        };
        let measured = measured.map_err(|why| {
            Failure::Storage(format!(
                "{op} on {} with {workers} workers: {why}",
                store.describe()
            ))
        })?;
        for mut f in measured {
            results.push(ResultRow {
                op: op.name().to_owned(),
                store: store.describe(),
                workers,
                imp: f.imp.clone(),
                ops_per_s: f.ops_per_s(),
                p50_us: f.latency_us(0.50),
                p99_us: f.latency_us(0.99),
                ops: f.ops,
                refused: f.refused,
                samples: f.samples.clone(),
                processes: options.processes,
            });
        }
    }
    bar.set_message("startup figures");
    let startup = bench::measure_startup().map_err(Failure::Storage)?;
    bar.finish_and_clear();
    let report = Report {
        results,
        startup,
        machine: Machine::here(options.seconds, options.samples),
    };
    print!("{}", bench::report::table(&report));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Failure::Storage(format!("encoding the report: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Failure::Storage(format!("writing {}: {e}", path.display())))?;
    }
    if let Some(path) = &args.plot {
        let svg = bench::plot::svg(&report.results).map_err(Failure::Storage)?;
        std::fs::write(path, svg)
            .map_err(|e| Failure::Storage(format!("writing {}: {e}", path.display())))?;
    }
    Ok(())
}

/// The options, checked: usage errors name what is wrong.
fn options(args: &BenchArgs) -> Result<Options, Failure> {
    let stores = if args.stores.is_empty() {
        vec!["memory:".to_owned()]
    } else {
        args.stores.clone()
    };
    for url in &stores {
        match gak::store::facts::store_kind(url) {
            None => {
                return Err(Failure::Usage(
                    gak::OpenError::UnknownStore(url.clone()).to_string(),
                ));
            }
            Some(StoreKind::Memory) if args.processes > 1 => {
                return Err(Failure::Usage(
                    "--processes needs a store processes can share (sqlite: or postgres://): memory: lives inside one process".into(),
                ));
            }
            Some(_) => {}
        }
    }
    let ops = if args.ops.is_empty() {
        Op::ALL.to_vec()
    } else {
        dedup(&args.ops)
    };
    // Report order, whatever the order asked in.
    let impls: Vec<Impl> = Impl::ALL
        .into_iter()
        .filter(|i| args.impls.is_empty() || args.impls.contains(i))
        .collect();
    Ok(Options {
        stores,
        ops,
        impls,
        workers: dedup(&args.workers),
        seconds: args.seconds,
        samples: args.samples,
        processes: args.processes,
    })
}

fn dedup<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut out = Vec::new();
    for &i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// One process of `--processes`: one store, op and worker count; its
/// figures go to stdout as one JSON line.
fn child(options: &Options) -> Outcome {
    let (Some(url), [op], [workers]) = (
        options.stores.first(),
        options.ops.as_slice(),
        options.workers.as_slice(),
    ) else {
        return Err(Failure::Usage(
            "a bench child measures one store, op and worker count".into(),
        ));
    };
    let impls = options.impls_for(*op, url);
    let store = OpenStore::open(url, true).map_err(Failure::Storage)?;
    let figures = bench::run_figure(
        &store,
        *op,
        *workers,
        &impls,
        options,
        &mut bench::process::wait_for_go,
        &mut || {},
    )
    .map_err(Failure::Storage)?;
    let line = serde_json::to_string(&figures)
        .map_err(|e| Failure::Storage(format!("encoding the figures: {e}")))?;
    println!("{line}");
    Ok(())
}
