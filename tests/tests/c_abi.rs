//! libgak's C ABI (`host/c`, `gak.h`), from C: programs compiled by the
//! system `cc` against `libgak.a` and run under LeakSanitizer.
//!
//! - `every_function_under_leaksanitizer`: `host/c/tests/abi.c` calls every
//!   function of the header as it says, clears every answer and frees every
//!   error; the leak checker must find nothing;
//! - `leaksanitizer_catches_a_forgotten_clear`: the same program with one
//!   `gak_task_clear` left out must be caught (the negative control);
//! - `demo_on_memory|sqlite|postgres`: the six-step demo story
//!   (`host/c/examples/demo.c`) through `gak.h` alone;
//! - `readme_snippet`: the README's "Embed it from C" program;
//! - `latency_tool`: `host/c/bench/latency.c` prints what
//!   `host/latency.py` parses;
//! - `every_export_is_exercised_from_c`: each function the header declares
//!   is called by one of the two programs;
//! - `every_export_catches_panics`: each exported function of the crate runs
//!   its body through the panic guard (or is one of the few that cannot
//!   panic);
//! - `sizes_are_checked_before_reading`: every entry point that takes a
//!   contract value refuses an oversized one with `invalid-input` before it
//!   reads a byte of it (`host/c/tests/boundary.c sizes`: the argument's
//!   memory ends at an unreadable page, so reading first crashes);
//! - `a_call_answers_its_last_attempt_on_postgres`: a body that met a
//!   serialization failure and failed, then succeeded on the re-run,
//!   committed (`boundary.c retries`, `gak_sideeffect_write_fenced` and
//!   `gak_kernel_with_downstream`).
//!
//! Without a C compiler with LeakSanitizer the C trials are ignored, with
//! the reason; under `CI=true` they fail.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gak_tests::cenv;
use gak_tests::pg;
use gak_tests::suite::{Requirement, Suite};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gak-c-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// PostgreSQL and the C compiler, for the demo on PostgreSQL.
static CC_AND_POSTGRES: Requirement = Requirement::new(
    "PostgreSQL and a C compiler with LeakSanitizer",
    "set GAK_PG_DSN to a reachable server and install a C compiler to run it",
    || cenv::compiler().clone().and_then(|_| pg::probe()),
);

fn build(source: &str, name: &str, defines: &[&str]) -> PathBuf {
    let out = scratch(name).join(name);
    cenv::compile(&cenv::package().join(source), &out, defines).unwrap_or_else(|e| panic!("{e}"));
    out
}

fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        // A leak report exits with 23; everything else the program decides.
        .env("LSAN_OPTIONS", "exitcode=23")
        .output()
        .expect("run the C program")
}

fn every_function_under_leaksanitizer() {
    let abi = build("tests/abi.c", "abi", &[]);
    let db = scratch("abi-db").join("abi.db");
    let out = run(&abi, &[&db.display().to_string()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(", 0 failed"),
        "{}",
        cenv::report("abi", &out)
    );
    let checks: u32 = stdout
        .split("abi: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(checks > 200, "only {checks} checks ran:\n{stdout}");
}

fn leaksanitizer_catches_a_forgotten_clear() {
    let leaky = build("tests/abi.c", "abi-leaky", &["-DGAK_LEAK_ON_PURPOSE"]);
    let db = scratch("abi-leaky-db").join("abi.db");
    let out = run(&leaky, &[&db.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(23),
        "{}",
        cenv::report("abi (leaky)", &out)
    );
    assert!(
        stderr.contains("LeakSanitizer: detected memory leaks"),
        "{stderr}"
    );
}

/// `host/c/tests/boundary.c`, built once.
fn boundary() -> &'static Path {
    static BOUNDARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BOUNDARY.get_or_init(|| build("tests/boundary.c", "boundary", &[]))
}

fn check_boundary(args: &[&str], at_least: u32) {
    let out = run(boundary(), args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(", 0 failed"),
        "{}",
        cenv::report(&format!("boundary {}", args[0]), &out)
    );
    let checks: u32 = stdout
        .split(": ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(checks >= at_least, "only {checks} checks ran:\n{stdout}");
}

/// The demo program, built once for the three stores.
fn demo() -> &'static Path {
    static DEMO: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DEMO.get_or_init(|| build("examples/demo.c", "demo", &[]))
}

fn check_demo(store: &str) {
    let out = run(demo(), &[store]);
    assert!(out.status.success(), "{}", cenv::report("demo", &out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{stdout}");
    for (i, line) in lines.iter().enumerate() {
        assert!(line.starts_with(&format!("{}. ", i + 1)), "{line}");
    }
    for promise in [
        "plan skipped [reserve-stock, charge-card], ran only [ship-parcel]",
        "body calls charge-card=1 reserve-stock=1 ship-parcel=1",
        "zombie worker-a's save refused: fence-stale",
        "8 workers raced to claim one open task: 1 winner",
        "7 refused as taken",
        "retry refused without calling the body (yes)",
        "the key now only replays (refund r-81 settled); refund body calls = 1",
    ] {
        assert!(
            stdout.contains(promise),
            "missing {promise:?} in:\n{stdout}"
        );
    }
}

/// The README's "Embed it from C", compiled and run.
fn readme_snippet() {
    let readme =
        std::fs::read_to_string(gak_tests::pyenv::repo().join("README.md")).expect("README");
    let section = readme
        .split("## Embed it from C")
        .nth(1)
        .expect("README has \"Embed it from C\"");
    let code = section
        .split("```c\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a ```c block in the section");
    let want = code
        .split("/* prints: ")
        .nth(1)
        .and_then(|s| s.split(" */").next())
        .expect("the snippet says what it prints");
    let dir = scratch("readme");
    std::fs::write(dir.join("app.c"), code).expect("app.c");
    let app = dir.join("app");
    cenv::compile(&dir.join("app.c"), &app, &[]).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&app, &[]);
    assert!(
        out.status.success(),
        "{}",
        cenv::report("the README's C program", &out)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want);
}

/// `host/c/bench/latency.c` runs and prints what `host/latency.py` parses.
fn latency_tool() {
    let tool = build("bench/latency.c", "latency", &[]);
    let out = run(&tool, &["20"]);
    assert!(out.status.success(), "{}", cenv::report("latency", &out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for (store, label) in [
        ("memory:", "taskboard.claim (fresh task)"),
        ("sqlite:", "sideeffect.acquire (fresh key)"),
        ("memory:", "checkpoint.build-plan (3 steps, pure)"),
    ] {
        assert!(
            cenv::latency_line(&stdout, store, label),
            "no {label:?} on {store}:\n{stdout}"
        );
    }
}

/// The function names `gak.h` declares.
fn header_functions() -> Vec<String> {
    let header = std::fs::read_to_string(cenv::package().join("include/gak.h")).expect("gak.h");
    header
        .lines()
        .filter(|l| !l.starts_with("//") && !l.starts_with(' ') && !l.starts_with("typedef"))
        .filter_map(|l| {
            let open = l.find('(')?;
            let name = l[..open].rsplit([' ', '*']).next()?;
            name.starts_with("gak_").then(|| name.to_owned())
        })
        .collect()
}

fn every_export_is_exercised_from_c() {
    let functions = header_functions();
    assert!(
        functions.len() > 60,
        "only {} functions found in gak.h",
        functions.len()
    );
    let programs = ["tests/abi.c", "examples/demo.c"]
        .map(|p| std::fs::read_to_string(cenv::package().join(p)).expect("C program"))
        .join("\n");
    let missing: Vec<&String> = functions
        .iter()
        .filter(|f| !programs.contains(&format!("{f}(")))
        .collect();
    assert!(missing.is_empty(), "not called from C: {missing:?}");
}

fn every_export_catches_panics() {
    // These only read or free a handle, or make a static answer: nothing in
    // them can panic, so there is nothing to catch.
    let trivial = [
        "gak_error_code",
        "gak_error_message",
        "gak_error_free",
        "gak_clock_manual",
        "gak_clock_now",
        "gak_clock_advance",
        "gak_clock_free",
        "gak_version",
        "gak_abi_version",
        "gak_abi_layout",
        "gak_component",
        "gak_kernel_open",
    ];
    let mut checked = 0;
    for entry in std::fs::read_dir(cenv::package().join("src")).expect("src") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("source");
        for chunk in text.split("#[unsafe(no_mangle)]").skip(1) {
            let name = chunk
                .split("fn ")
                .nth(1)
                .and_then(|s| s.split('(').next())
                .expect("a function after no_mangle")
                .to_owned();
            let body = chunk.split("\n}\n").next().unwrap_or_default();
            let guarded = ["guard(", "guard_value(", "clearing("]
                .iter()
                .any(|g| body.contains(g));
            assert!(
                guarded || trivial.contains(&name.as_str()),
                "{name} ({}) does not run through the panic guard",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 60, "only {checked} exports found");
}

fn main() {
    let mut suite = Suite::new();
    suite.test(
        "c_abi::every_export_is_exercised_from_c",
        every_export_is_exercised_from_c,
    );
    suite.test(
        "c_abi::every_export_catches_panics",
        every_export_catches_panics,
    );
    let cc = &cenv::COMPILER;
    suite.needs(cc, "c_abi::every_function_under_leaksanitizer", |_| {
        every_function_under_leaksanitizer()
    });
    suite.needs(cc, "c_abi::leaksanitizer_catches_a_forgotten_clear", |_| {
        leaksanitizer_catches_a_forgotten_clear()
    });
    suite.needs(cc, "c_abi::readme_snippet", |_| readme_snippet());
    suite.needs(cc, "c_abi::latency_tool", |_| latency_tool());
    suite.needs(cc, "c_abi::demo_on_memory", |_| check_demo("memory:"));
    suite.needs(cc, "c_abi::demo_on_sqlite", |_| {
        let db = scratch("demo-sqlite").join("demo.db");
        check_demo(&format!("sqlite:{}", db.display()));
    });
    suite.needs(&CC_AND_POSTGRES, "c_abi::demo_on_postgres", |dsn| {
        let schema = pg::Schema::new(dsn, "cdemo");
        check_demo(&schema.url);
    });
    suite.needs(cc, "c_abi::sizes_are_checked_before_reading", |_| {
        check_boundary(&["sizes"], 38)
    });
    suite.needs(
        &CC_AND_POSTGRES,
        "c_abi::a_call_answers_its_last_attempt_on_postgres",
        |dsn| {
            let schema = pg::Schema::new(dsn, "cretry");
            check_boundary(&["retries", &schema.url], 15);
        },
    );
    suite.run();
}
