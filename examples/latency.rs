//! Per-operation latency through the component, on each embedded binding.
//!
//! cargo run --release -p gak-examples --example latency [-- N]
//!
//! Not a benchmark suite (that is `just bench`): a quick look at what one
//! call costs, for the numbers in issue notes.
use std::time::Instant;

use anyhow::Result;
use gak::blocking::Kernel;
use gak::{Acquired, Action, TaskSeed};

fn measure(label: &str, n: u32, mut op: impl FnMut(u32) -> Result<()>) -> Result<()> {
    for i in 0..n / 10 {
        op(i)?; // warm-up
    }
    let start = Instant::now();
    for i in n / 10..n / 10 + n {
        op(i)?;
    }
    report(label, start.elapsed() / n);
    Ok(())
}

async fn measure_async(
    label: &str,
    n: u32,
    mut op: impl AsyncFnMut(u32) -> Result<()>,
) -> Result<()> {
    for i in 0..n / 10 {
        op(i).await?; // warm-up
    }
    let start = Instant::now();
    for i in n / 10..n / 10 + n {
        op(i).await?;
    }
    report(label, start.elapsed() / n);
    Ok(())
}

fn report(label: &str, per: std::time::Duration) {
    println!(
        "{label:<44} {:>9.1} µs/op {:>9.0} ops/s",
        per.as_secs_f64() * 1e6,
        1.0 / per.as_secs_f64()
    );
}

fn run(url: &str, n: u32) -> Result<()> {
    let kernel = Kernel::open(url)?;
    println!("-- {url}");
    let tasks: Vec<TaskSeed> = (0..n + n / 10)
        .map(|i| TaskSeed::new(&format!("t{i}")))
        .collect();
    kernel.taskboard().seed(&tasks)?;
    measure("taskboard.claim (fresh task)", n, |i| {
        kernel
            .taskboard()
            .claim(&format!("t{i}"), "w", 60_000)
            .map(drop)
            .map_err(Into::into)
    })?;
    measure("sideeffect.acquire (fresh key)", n, |i| {
        let a = Action::new(&format!("k{i}"), &format!("r{i}"));
        kernel
            .sideeffect()
            .acquire(&a, 60_000)
            .map(drop)
            .map_err(Into::into)
    })?;
    // The same calls through the async API, awaited one after another from a
    // task on a multi-threaded tokio runtime (SQLite goes through tokio's
    // blocking pool; PostgreSQL awaits on the runtime).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let core = kernel.as_async();
    let fresh: Vec<TaskSeed> = (0..n + n / 10)
        .map(|i| TaskSeed::new(&format!("async-t{i}")))
        .collect();
    kernel.taskboard().seed(&fresh)?;
    rt.block_on(async {
        measure_async("taskboard.claim (fresh task), async", n, async |i| {
            core.taskboard()
                .claim(&format!("async-t{i}"), "w", 60_000)
                .await
                .map(drop)
                .map_err(Into::into)
        })
        .await?;
        measure_async("sideeffect.acquire (fresh key), async", n, async |i| {
            let a = Action::new(&format!("async-k{i}"), &format!("async-r{i}"));
            core.sideeffect()
                .acquire(&a, 60_000)
                .await
                .map(drop)
                .map_err(Into::into)
        })
        .await
    })?;
    measure("sideeffect.acquire (replayed key)", n, |_| {
        let a = Action::new("done-key", "r-done");
        if let Acquired::Granted(l) = kernel.sideeffect().acquire(&a, 60_000)? {
            kernel.sideeffect().complete(&a, &l, b"ok")?;
        }
        Ok(())
    })?;
    measure("checkpoint.build-plan (3 steps, pure)", n, |_| {
        let steps = [
            gak::StepDef::new("a", &[]),
            gak::StepDef::new("b", &["a"]),
            gak::StepDef::new("c", &["b"]),
        ];
        kernel
            .checkpoint()
            .build_plan(&steps, None)
            .map(drop)
            .map_err(Into::into)
    })?;
    Ok(())
}

fn main() -> Result<()> {
    let n: u32 = std::env::args().nth(1).map_or(Ok(5_000), |s| s.parse())?;
    let dir = std::env::temp_dir().join(format!("gak-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    run("memory:", n)?;
    run(&format!("sqlite:{}", dir.join("full.db").display()), n)?;
    run(
        &format!(
            "sqlite:{}?synchronous=normal",
            dir.join("normal.db").display()
        ),
        n,
    )?;
    std::fs::remove_dir_all(&dir)?;
    let dsn = std::env::var("GAK_PG_DSN")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("gak_latency_{}", std::process::id());
    // TLS off, as the other bindings have no encryption to pay for.
    let url = format!("{dsn}?schema={schema}&sslmode=disable");
    match gak::store::postgres::PostgresBackend::parse(&url) {
        Ok(pg) if gak::blocking::run_future(pg.ensure_schema()).is_ok() => {
            let r = run(&url, n / 5);
            let _ = gak::blocking::run_future(pg.drop_schema());
            r?;
        }
        _ => println!("-- postgres: not reachable at {dsn}, skipped"),
    }
    Ok(())
}
