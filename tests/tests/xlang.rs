//! Rust and Python workers AT THE SAME TIME on one SQLite file and on one
//! PostgreSQL schema (protocol v1, `host/HOSTS.md`), then the audit of
//! `gak_tests::xlang`. Another host language joins by adding its
//! `WorkerCmd` to `workers()`.
use std::sync::Arc;

use gak::{Kernel, SystemClock};
use gak_tests::pyenv::{self, Ready, gate};
use gak_tests::xlang::{self, Event, Params, WorkerCmd};
use libtest_mimic::{Arguments, Failed, Trial};

/// Sized so that the workers' phases overlap: a Python worker needs ~0.3 s
/// to start (imports, component), and SQLite's single writer lock lets one
/// process run many transactions in a row, so the SQLite run has many keys:
/// the Rust workers are still in the effects phase (where in-flight answers
/// come from) when the Python workers arrive. SQLite runs
/// with synchronous=normal: durability is not what this test is about, and
/// fsync-bound transactions would serialize the phases.
const SQLITE: Params = Params {
    tasks: 4,
    rounds: 300,
    keys: 1500,
    sink_rounds: 25,
};
const POSTGRES: Params = Params {
    tasks: 4,
    rounds: 150,
    keys: 60,
    sink_rounds: 25,
};

/// Three Rust and three Python workers, interleaved so that neither
/// language starts all of its workers first.
fn workers(r: &Ready) -> Vec<WorkerCmd> {
    let rust = WorkerCmd::new("rust", env!("CARGO_BIN_EXE_gak-xworker"), &[]);
    let mut python = WorkerCmd::new("python", &r.python, &["-m", "gak.xworker"]);
    python
        .env
        .push(("GAK_COMPONENT".into(), r.component.display().to_string()));
    (0..6)
        .map(|i| {
            if i % 2 == 0 {
                python.clone()
            } else {
                rust.clone()
            }
        })
        .collect()
}

fn report(store: &str, summary: &xlang::Summary) {
    println!("{store}: {summary}");
}

fn sqlite(r: &Ready) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let url = format!(
        "sqlite:{}?synchronous=normal",
        dir.path().join("x.db").display()
    );
    let open = || Kernel::open(&url).map_err(|e| e.to_string());
    let summary = xlang::run(&url, open, &workers(r), SQLITE)?;
    report("sqlite", &summary);
    Ok(())
}

fn postgres(r: &Ready, dsn: &str) -> Result<(), Failed> {
    let name = format!("t_xlang_{}", std::process::id());
    let base = gak::store::postgres::PostgresBackend::parse(dsn)?;
    let backend = base.with_schema(&name)?;
    backend.drop_schema().map_err(|e| format!("{e:?}"))?;
    backend.ensure_schema().map_err(|e| format!("{e:?}"))?;
    let sep = if dsn.contains('?') { '&' } else { '?' };
    let url = format!("{dsn}{sep}schema={name}");
    let backend = Arc::new(backend);
    let open = || {
        Kernel::with_backend(backend.clone(), Arc::new(SystemClock::default()))
            .map_err(|e| e.to_string())
    };
    let result = xlang::run(&url, open, &workers(r), POSTGRES);
    let dropped = base.with_schema(&name)?.drop_schema();
    let summary = result?;
    dropped.map_err(|e| format!("{e:?}"))?;
    report("postgres", &summary);
    Ok(())
}

fn event(t: u64, lang: &str, event: &str) -> Event {
    Event {
        t,
        worker: format!("{lang}-0"),
        lang: lang.into(),
        event: event.into(),
        task: Some("t0".into()),
        key: Some("key-0".into()),
        fence: Some(1),
    }
}

/// The overlap audit must reject a serial run (every Rust win before every
/// Python win) and accept an interleaved one.
fn audit_rejects_a_serial_run() -> Result<(), Failed> {
    let refusals = [
        event(50, "rust", "taken"),
        event(51, "python", "in-flight"),
        event(52, "rust", "sink-stale"),
    ];
    let serial: Vec<Event> = [
        event(1, "rust", "win"),
        event(2, "rust", "win"),
        event(3, "python", "win"),
        event(4, "python", "win"),
    ]
    .into_iter()
    .chain(refusals.iter().cloned())
    .collect();
    if xlang::audit_overlap(&serial).is_ok() {
        return Err("a serial run passed the overlap audit".into());
    }
    // Serial in worker order too: rust-0, python-0, rust-1.
    let mut abab = serial.clone();
    abab[1].worker = "rust-1".into();
    abab[1].t = 5;
    if xlang::audit_overlap(&abab).is_ok() {
        return Err("workers running one after another passed the overlap audit".into());
    }
    let mut interleaved = serial.clone();
    interleaved[1].t = 5;
    xlang::audit_overlap(&interleaved).map_err(|e| format!("interleaved run refused: {e}"))?;
    let quiet: Vec<Event> = interleaved
        .iter()
        .filter(|e| e.event != "sink-stale")
        .cloned()
        .collect();
    if xlang::audit_overlap(&quiet).is_ok() {
        return Err("a run without sink-stale refusals passed".into());
    }
    let one_sided: Vec<Event> = interleaved
        .iter()
        .filter(|e| !(e.lang == "python" && e.event == "win"))
        .cloned()
        .collect();
    if xlang::audit_overlap(&one_sided).is_ok() {
        return Err("a run where python never won passed".into());
    }
    Ok(())
}

fn main() {
    let mut args = Arguments::from_args();
    // One store at a time: the runs share two cores, and contention on each
    // database is what the test is about.
    args.test_threads.get_or_insert(1);
    let ready = pyenv::ready();
    let with_pg = ready
        .clone()
        .and_then(|r| pyenv::postgres().map(|dsn| (r, dsn)));
    let trials = vec![
        Trial::test(
            "xlang::audit_rejects_a_serial_run",
            audit_rejects_a_serial_run,
        ),
        gate("xlang::sqlite_rust3_python3", &ready, sqlite),
        gate("xlang::postgres_rust3_python3", &with_pg, |(r, dsn)| {
            postgres(r, dsn)
        }),
    ];
    libtest_mimic::run(&args, trials).exit();
}
