//! Rust and Python workers AT THE SAME TIME on one SQLite file and on one
//! PostgreSQL schema, Rust, Python and JavaScript workers on one SQLite
//! file, and all four languages — Rust, Python, JavaScript, Go — on one
//! SQLite file and on one PostgreSQL schema — protocol v1,
//! `host/HOSTS.md` — then the audit of `gak_tests::xlang`. Another host
//! language joins by adding its `WorkerCmd`.
use std::path::Path;

use gak::blocking::Kernel;
use gak_tests::pyenv::{self, Ready, gate};
use gak_tests::xlang::{self, Event, Params, WorkerCmd};
use gak_tests::{goenv, jsenv, pg};
use libtest_mimic::{Arguments, Failed, Trial};

/// Sized so that the workers' phases overlap. A Python worker needs ~0.3 s
/// to start (imports, component) while a Rust worker claims and releases in
/// ~0.1 ms, and SQLite's single writer lock lets one process run many
/// transactions in a row (a waiting Rust worker sleeps in SQLite's busy
/// handler, up to 100 ms at a time): with few rounds every Rust claim is
/// over before the first Python one (the audit then reports a serial run).
/// So the SQLite run has more rounds, and many keys so that the Rust
/// workers are still in the effects phase (where in-flight answers come
/// from) when the Python workers arrive. synchronous=normal: durability is
/// not what this test is about, and fsync-bound transactions would
/// serialize the phases.
const SQLITE: Params = Params {
    tasks: 4,
    rounds: 600,
    keys: 1500,
    sink_rounds: 25,
};
const POSTGRES: Params = Params {
    tasks: 4,
    rounds: 150,
    keys: 400,
    sink_rounds: 25,
};

/// Three Rust and three Python workers, interleaved so that neither
/// language starts all of its workers first.
fn workers(r: &Ready) -> Vec<WorkerCmd> {
    let rust = WorkerCmd::new("rust", env!("CARGO_BIN_EXE_gak-xworker"), &[]);
    let worker = pyenv::package_dir().join("tests").join("xworker.py");
    let mut python = WorkerCmd::new("python", &r.python, &[&worker.display().to_string()]);
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

/// Two workers of each language (Rust, Python, JavaScript), interleaved.
fn three_languages(r: &Ready) -> Vec<WorkerCmd> {
    let mut js = WorkerCmd::new(
        "js",
        "node",
        &[&jsenv::package()
            .join("test/xworker.mjs")
            .display()
            .to_string()],
    );
    js.env
        .push(("GAK_COMPONENT".into(), r.component.display().to_string()));
    let both = workers(r);
    let (python, rust) = (both[0].clone(), both[1].clone());
    (0..6)
        .map(|i| match i % 3 {
            0 => python.clone(),
            1 => rust.clone(),
            _ => js.clone(),
        })
        .collect()
}

/// The Go worker: `gak xworker` (`host/go/cmd/gak`), lines in `lang` "go".
fn go_worker(g: &goenv::Ready) -> WorkerCmd {
    WorkerCmd::new("go", &g.bin, &["xworker"])
}

/// Two workers of each of the four languages, interleaved.
fn four_languages(r: &Ready, g: &goenv::Ready) -> Vec<WorkerCmd> {
    let three = three_languages(r);
    let (python, rust, js) = (three[0].clone(), three[1].clone(), three[2].clone());
    let go = go_worker(g);
    (0..8)
        .map(|i| match i % 4 {
            0 => python.clone(),
            1 => go.clone(),
            2 => rust.clone(),
            _ => js.clone(),
        })
        .collect()
}

/// Rust, Python, JavaScript and Go workers on one SQLite file.
fn sqlite_four_languages((r, g): &(Ready, goenv::Ready)) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let url = format!(
        "sqlite:{}?synchronous=normal",
        dir.path().join("x4.db").display()
    );
    let open = || Kernel::open(&url).map_err(|e| e.to_string());
    let summary = xlang::run(&url, open, &four_languages(r, g), SQLITE)?;
    report("sqlite, four languages", &summary);
    Ok(())
}

/// Rust, Python, JavaScript and Go workers on one PostgreSQL schema.
fn postgres_four_languages((r, g, dsn): &(Ready, goenv::Ready, String)) -> Result<(), Failed> {
    let schema = pg::Schema::new(dsn, "xlang4");
    let open = || Ok(schema.kernel());
    let summary = xlang::run(&schema.url, open, &four_languages(r, g), POSTGRES)?;
    report("postgres, four languages", &summary);
    Ok(())
}

/// A Go trial: gated like the others when Go (or what else it needs) is
/// missing, but failed — never ignored — when Go is there and the Go tool
/// or libgak does not build.
fn gate_go<T: Clone + Send + 'static>(
    name: &str,
    need: &Result<T, String>,
    body: impl FnOnce(&T) -> Result<(), Failed> + Send + 'static,
) -> Trial {
    if goenv::toolchain().is_ok()
        && let Err(why) = goenv::ready()
    {
        return Trial::test(name, move || Err(why.into()));
    }
    gate(name, need, body)
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

/// Rust, Python and JavaScript workers on one SQLite file.
fn sqlite_three_languages(r: &Ready) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let url = format!(
        "sqlite:{}?synchronous=normal",
        dir.path().join("x3.db").display()
    );
    let open = || Kernel::open(&url).map_err(|e| e.to_string());
    let summary = xlang::run(&url, open, &three_languages(r), SQLITE)?;
    report("sqlite, three languages", &summary);
    Ok(())
}

fn postgres(r: &Ready, dsn: &str) -> Result<(), Failed> {
    let schema = pg::Schema::new(dsn, "xlang");
    let open = || Ok(schema.kernel());
    let summary = xlang::run(&schema.url, open, &workers(r), POSTGRES)?;
    report("postgres", &summary);
    Ok(())
}

/// The overlap audit must reject serial runs and accept concurrent ones.
fn audit_rejects_a_serial_run() -> Result<(), Failed> {
    let ev = |t: u64, worker: &str, event: &str, key: &str| Event {
        t,
        worker: worker.into(),
        lang: worker.split('-').next().unwrap_or_default().into(),
        event: event.into(),
        task: Some("t0".into()),
        key: Some(key.into()),
        fence: Some(1),
    };
    let refusals = || {
        vec![
            ev(50, "rust-0", "taken", ""),
            ev(51, "rust-0", "in-flight", "key-9"),
            ev(52, "rust-1", "body", "key-9"),
            ev(53, "rust-0", "sink-stale", ""),
        ]
    };
    let run = |wins: &[(u64, &str)], extra: Vec<Event>| {
        let mut all: Vec<Event> = wins.iter().map(|(t, w)| ev(*t, w, "win", "")).collect();
        all.extend(refusals());
        all.extend(extra);
        xlang::audit_overlap(&all)
    };
    // Language after language.
    if run(
        &[
            (1, "rust-0"),
            (2, "rust-0"),
            (3, "python-0"),
            (4, "python-0"),
        ],
        vec![],
    )
    .is_ok()
    {
        return Err("a run of one language after the other passed".into());
    }
    // Worker after worker: rust-0, python-0, rust-1.
    if run(&[(1, "rust-0"), (2, "python-0"), (3, "rust-1")], vec![]).is_ok() {
        return Err("workers running one after another passed".into());
    }
    // Concurrent claims: a python win inside rust-0's claim phase.
    run(&[(1, "rust-0"), (2, "python-0"), (3, "rust-0")], vec![])
        .map_err(|e| format!("interleaved claims refused: {e}"))?;
    // Worker after worker for claims, but python saw rust's live intent.
    let cross = vec![
        ev(60, "python-0", "in-flight", "key-7"),
        ev(61, "rust-1", "body", "key-7"),
    ];
    run(&[(1, "rust-0"), (2, "python-0"), (3, "rust-1")], cross)
        .map_err(|e| format!("cross-language in-flight refused: {e}"))?;
    // Every refusal kind must show up; every language must win.
    let quiet: Vec<Event> = [(1, "rust-0"), (2, "python-0"), (3, "rust-0")]
        .iter()
        .map(|(t, w)| ev(*t, w, "win", ""))
        .chain(refusals().into_iter().filter(|e| e.event != "sink-stale"))
        .collect();
    if xlang::audit_overlap(&quiet).is_ok() {
        return Err("a run without sink-stale refusals passed".into());
    }
    let mut one_sided = refusals();
    one_sided.push(ev(1, "rust-0", "win", ""));
    one_sided.push(ev(2, "python-0", "taken", ""));
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
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR sits in the target dir")
        .to_path_buf();
    let with_js = ready
        .clone()
        .and_then(|r| jsenv::ready(&target).map(|()| r));
    let with_js_go = with_js.clone().and_then(|r| goenv::ready().map(|g| (r, g)));
    let with_pg_js_go = with_pg
        .clone()
        .and_then(|(r, dsn)| jsenv::ready(&target).map(|()| (r, dsn)))
        .and_then(|(r, dsn)| goenv::ready().map(|g| (r, g, dsn)));
    let trials = vec![
        Trial::test(
            "xlang::audit_rejects_a_serial_run",
            audit_rejects_a_serial_run,
        ),
        gate("xlang::sqlite_rust3_python3", &ready, sqlite),
        gate(
            "xlang::sqlite_rust2_python2_js2",
            &with_js,
            sqlite_three_languages,
        ),
        gate("xlang::postgres_rust3_python3", &with_pg, |(r, dsn)| {
            postgres(r, dsn)
        }),
        gate_go(
            "xlang::sqlite_rust2_python2_js2_go2",
            &with_js_go,
            sqlite_four_languages,
        ),
        gate_go(
            "xlang::postgres_rust2_python2_js2_go2",
            &with_pg_js_go,
            postgres_four_languages,
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}
