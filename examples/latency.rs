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
    let per = start.elapsed() / n;
    println!(
        "{label:<44} {:>9.1} µs/op {:>9.0} ops/s",
        per.as_secs_f64() * 1e6,
        1.0 / per.as_secs_f64()
    );
    Ok(())
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
    let url = format!("{dsn}?schema={schema}");
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
