//! The JavaScript host (`host/js`), run by `cargo test --workspace`: one
//! named trial per step, so a failure names its step.
//!
//! - `npm_ci`: installs `host/js/node_modules` from `package-lock.json`, only
//!   when the lock (or the Node version, which native modules depend on)
//!   changed since the last install (a stamp file in `node_modules`);
//! - `transpile`: turns the component the Rust host embeds into JavaScript
//!   (`host/js/gen/`, ignored);
//! - `node_test`: Node's own test runner on `host/js/test/*.test.mjs`;
//!   `node_test_postgres_plain`: its PostgreSQL file again on plain
//!   connections (`sslmode=disable`), which the calling threads read and
//!   write themselves instead of going through the I/O thread;
//! - `vectors_memory`, `vectors_sqlite`, `vectors_postgres`: the built-in
//!   vectors through the JS runner (`node host/js/bin/gak.mjs conformance`),
//!   every scenario the Rust runner has (PostgreSQL: a schema per scenario;
//!   ignored without a server, failed under `CI=true`);
//! - `demo`, `demo_postgres`: the six-step demo on SQLite and on PostgreSQL;
//! - `sqlite_shared_with_rust`: one SQLite file written by the Rust host,
//!   continued by the JS host, read back by the Rust host;
//! - `readme_snippet`, `readme_postgres_snippet`: the README's "Embed it from
//!   JavaScript" programs (SQLite; PostgreSQL on a schema of its own);
//! - `golden_postgres_continued`: the golden PostgreSQL database (format 1)
//!   continued by the JavaScript host, read back by the Rust host.
//!
//! Without Node 20+ (and npm) every trial is reported ignored, with the
//! reason; under `CI=true` they fail instead.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gak::blocking::Kernel;
use gak::{Acquired, Action, TaskSeed};
use gak_tests::jsenv;
use gak_tests::suite::{POSTGRES, Requirement, Verdict, under_ci};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

type Step = Result<Completion, Failed>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// The target dir this test was built into (`CARGO_TARGET_TMPDIR` is its
/// `tmp/`): where the gak build script published `component/gak.wasm`.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR sits in the target dir")
        .to_path_buf()
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gak-js-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn failed(what: &str, out: &Output) -> Failed {
    Failed::from(jsenv::report(what, out))
}

/// Ignored (or, under `CI=true`, failed) when Node 20+ is missing.
fn need_node() -> Result<(), Step> {
    let found = jsenv::toolchain().clone();
    match Requirement::judge(jsenv::NODE, &found, under_ci()) {
        Verdict::Run(_) => Ok(()),
        Verdict::Fail(why) => Err(Err(Failed::from(why))),
        Verdict::Skip(why) => Err(Ok(Completion::ignored_with(why))),
    }
}

fn npm_ci() -> Result<(), Failed> {
    jsenv::npm_ci().map_err(Failed::from)
}

fn transpile() -> Result<(), Failed> {
    jsenv::transpile(&target_dir()).map_err(Failed::from)
}

/// `node ARGS` in `host/js` (after install and transpile), checked for success.
fn node(args: &[&str], cwd: Option<&Path>) -> Result<Output, Failed> {
    node_with(args, cwd, &[])
}

/// `node args…` with `env` set; its output, or the failure with both streams.
fn node_with(args: &[&str], cwd: Option<&Path>, env: &[(&str, &str)]) -> Result<Output, Failed> {
    ready()?;
    let mut cmd = Command::new("node");
    cmd.args(args).current_dir(cwd.unwrap_or(&jsenv::package()));
    cmd.envs(env.iter().copied());
    jsenv::component_env(&mut cmd, &target_dir())?;
    let out = cmd
        .output()
        .map_err(|e| Failed::from(format!("cannot run node: {e}")))?;
    if !out.status.success() {
        return Err(failed(&format!("node {}", args.join(" ")), &out));
    }
    Ok(out)
}

/// A count `node --test` reported (`# pass 12`).
fn reported(out: &Output, what: &str) -> Option<u32> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("# {what} ")))
        .and_then(|n| n.trim().parse::<u32>().ok())
}

fn ready() -> Result<(), Failed> {
    jsenv::ready(&target_dir()).map_err(Failed::from)
}

/// A trial that needs Node: ignored (or failed under CI) without it.
fn trial(name: &str, run: fn() -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || {
        if let Err(skip) = need_node() {
            return skip;
        }
        run().map(|()| Completion::Completed)
    })
}

/// A trial that needs PostgreSQL as well as Node: ignored without a server
/// (failed under `CI=true`), as every suite's PostgreSQL tests are.
fn postgres_trial(name: &str, run: fn(&str) -> Result<(), Failed>) -> Trial {
    Trial::ignorable_test(name, move || {
        if let Err(skip) = need_node() {
            return skip;
        }
        match POSTGRES.verdict() {
            Verdict::Run(dsn) => run(&dsn).map(|()| Completion::Completed),
            Verdict::Fail(why) => Err(Failed::from(why)),
            Verdict::Skip(why) => Ok(Completion::ignored_with(why)),
        }
    })
}

fn vectors(store: &str) -> Result<(), Failed> {
    let out = node(&["bin/gak.mjs", "conformance", "--store", store], None)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let want = format!("{} passed, 0 failed", gak_tests::builtin_scenarios());
    if stdout.lines().last() != Some(want.as_str()) {
        return Err(failed(&format!("conformance (expected {want:?})"), &out));
    }
    Ok(())
}

fn node_test() -> Result<(), Failed> {
    let mut files: Vec<String> = std::fs::read_dir(jsenv::package().join("test"))
        .map_err(|e| Failed::from(e.to_string()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".test.mjs"))
        .map(|n| format!("test/{n}"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err("no test/*.test.mjs files".into());
    }
    let mut args = vec!["--test"];
    args.extend(files.iter().map(String::as_str));
    let out = node(&args, None)?;
    match (reported(&out, "pass"), reported(&out, "fail")) {
        (Some(pass), Some(0)) if pass > 0 => Ok(()),
        _ => Err(failed("node --test (no passing tests reported)", &out)),
    }
}

/// `test/postgres.test.mjs` again on plain connections (`sslmode=disable`),
/// which the calling threads read and write themselves (`Line.direct`);
/// `node_test` runs it on the server's default, TLS where it is offered,
/// through the I/O thread.
fn node_test_postgres_plain(dsn: &str) -> Result<(), Failed> {
    let plain = format!(
        "{dsn}{}sslmode=disable",
        if dsn.contains('?') { '&' } else { '?' }
    );
    let out = node_with(
        &["--test", "test/postgres.test.mjs"],
        None,
        &[("GAK_PG_DSN", &plain)],
    )?;
    let counts = ["pass", "fail", "skipped"].map(|what| reported(&out, what));
    match counts {
        [Some(pass), Some(0), Some(0)] if pass > 0 => Ok(()),
        _ => Err(failed(
            "node --test test/postgres.test.mjs (sslmode=disable): not every test passed",
            &out,
        )),
    }
}

fn demo() -> Result<(), Failed> {
    let dir = scratch("demo");
    demo_on(&format!("sqlite:{}", dir.join("demo.db").display()))
}

/// The demo on PostgreSQL (the blocking kernel: a tool), a schema of its own.
fn demo_postgres(dsn: &str) -> Result<(), Failed> {
    let schema = gak_tests::pg::Schema::new(dsn, "demo_js");
    demo_on(&schema.url)
}

fn demo_on(store: &str) -> Result<(), Failed> {
    let out = node(&["bin/gak.mjs", "demo", "--store", store], None)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let numbered: Vec<&str> = stdout.lines().skip(1).collect();
    let ok = numbered.len() == 6
        && numbered
            .iter()
            .enumerate()
            .all(|(i, l)| l.starts_with(&format!("{}. ", i + 1)))
        && stdout.contains("zombie worker-a's save refused: fence-stale")
        && stdout.contains("1 winner");
    if !ok {
        return Err(failed("demo (six numbered lines)", &out));
    }
    Ok(())
}

fn sqlite_shared_with_rust() -> Result<(), Failed> {
    let fail = |e: gak::Error| Failed::from(format!("rust host: {e}"));
    let dir = scratch("shared");
    let rust_db = dir.join("rust.db");
    let kernel = Kernel::open(&format!("sqlite:{}", rust_db.display()))
        .map_err(|e| Failed::from(e.to_string()))?;
    let board = kernel.taskboard();
    board
        .seed(&[TaskSeed::new("t1"), TaskSeed::new("t2")])
        .map_err(fail)?;
    board.claim("t1", "rust-agent", 60_000).map_err(fail)?;
    let k1 = Action::new("k1", "r1");
    let Acquired::Granted(lease) = kernel.sideeffect().acquire(&k1, 60_000).map_err(fail)? else {
        return Err("k1 is not granted to the Rust host".into());
    };
    kernel
        .sideeffect()
        .complete(&k1, &lease, b"from-rust")
        .map_err(fail)?;

    let script = jsenv::package().join("test/fixtures/shared-sqlite.mjs");
    node(
        &[
            &script.display().to_string(),
            &rust_db.display().to_string(),
            &dir.join("fresh-js.db").display().to_string(),
        ],
        None,
    )?;

    let t2 = board.get("t2").map_err(fail)?;
    if t2.owner.as_deref() != Some("js-agent") || t2.fence != 1 {
        return Err(format!("t2 after the JS host: {t2:?}").into());
    }
    let again = kernel
        .sideeffect()
        .acquire(&Action::new("k2", "r2"), 60_000)
        .map_err(fail)?;
    if again != Acquired::Replayed(b"from-js".to_vec()) {
        return Err(format!("k2 after the JS host: {again:?}").into());
    }
    let row = kernel
        .with_downstream(|down| down.get("from-js"))
        .map_err(fail)?;
    let seen = kernel.sideeffect().sink_seen("ledger").map_err(fail)?;
    if row.as_deref() != Some("yes") || seen != 5 {
        return Err(format!("sink after the JS host: row {row:?}, seen fence {seen}").into());
    }
    Ok(())
}

/// The `n`-th (from 1) ```js block under "## Embed it from JavaScript" in
/// README.md, after `edit`, written inside the package (so `import … from
/// 'gak'` resolves to it) in an ignored folder as `name`: its path.
fn readme_block(
    n: usize,
    name: &str,
    edit: impl FnOnce(&str) -> Result<String, Failed>,
) -> Result<PathBuf, Failed> {
    let readme = std::fs::read_to_string(repo().join("README.md"))
        .map_err(|e| Failed::from(e.to_string()))?;
    let section = readme
        .split_once("## Embed it from JavaScript")
        .ok_or("README.md has no \"Embed it from JavaScript\" section")?
        .1;
    let section = section.split_once("\n## ").map_or(section, |(s, _)| s);
    let code = section
        .split("```js\n")
        .nth(n)
        .and_then(|rest| rest.split_once("\n```"))
        .ok_or(format!("the section has no ```js block number {n}"))?
        .0;
    let file = jsenv::package().join("gen/readme").join(name);
    std::fs::create_dir_all(file.parent().expect("a folder"))
        .map_err(|e| Failed::from(e.to_string()))?;
    std::fs::write(&file, edit(code)?).map_err(|e| Failed::from(e.to_string()))?;
    Ok(file)
}

/// The section's first ```js block (SQLite), run from a scratch dir (it
/// writes gak.db).
fn readme_snippet() -> Result<(), Failed> {
    let file = readme_block(1, "snippet.mjs", |code| Ok(code.to_owned()))?;
    let dir = scratch("readme");
    node(&[&file.display().to_string()], Some(&dir))?;
    Ok(())
}

/// The section's second ```js block (PostgreSQL), on a schema of its own.
fn readme_postgres_snippet(dsn: &str) -> Result<(), Failed> {
    let written = "postgres://postgres@127.0.0.1:5432/test?schema=gak_readme";
    let schema = gak_tests::pg::Schema::new(dsn, "readme_js");
    let file = readme_block(2, "postgres.mjs", |code| {
        if !code.contains(written) {
            return Err(format!("the PostgreSQL snippet does not open {written}").into());
        }
        Ok(code.replace(written, &schema.url))
    })?;
    let out = node(&[&file.display().to_string()], None)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.trim() != "send-invoice done" {
        return Err(failed(
            "the PostgreSQL snippet (expected \"send-invoice done\")",
            &out,
        ));
    }
    Ok(())
}

/// The golden PostgreSQL database (format 1, tests/golden/) restored into a
/// fresh schema, continued by the JavaScript host
/// (`test/fixtures/golden.mjs`), then read back by the Rust host: what the
/// JavaScript host decided is what the Rust host sees.
fn golden_postgres_continued(dsn: &str) -> Result<(), Failed> {
    use gak_tests::golden;
    let schema = gak_tests::pg::Schema::new(dsn, "golden_js");
    let script = std::fs::read_to_string(golden::dir().join("format1-postgres.sql"))
        .map_err(|e| Failed::from(e.to_string()))?;
    golden::restore_postgres(&schema.kernel(), &schema.name, &script);
    let fixture = jsenv::package().join("test/fixtures/golden.mjs");
    let caps = golden::dir().join("capabilities.json");
    let out = node(
        &[
            &fixture.display().to_string(),
            &schema.url,
            &caps.display().to_string(),
            &golden::REPLAY_AT.to_string(),
        ],
        None,
    )?;
    if String::from_utf8_lossy(&out.stdout).trim() != "continued" {
        return Err(failed("golden.mjs (expected \"continued\")", &out));
    }
    let kernel = schema.kernel();
    let fail = |e: gak::Error| Failed::from(e.to_string());
    let se = kernel.sideeffect();
    let day = 24 * 3_600_000;
    let replayed = |key: &str, resource: &str| se.acquire(&Action::new(key, resource), day);
    if replayed("k-inflight", "r-c").map_err(fail)? != Acquired::Replayed(b"late-js".to_vec()) {
        return Err(
            "k-inflight: the JavaScript host's late verdict is not what Rust replays".into(),
        );
    }
    let uncertain = Action::new("k-uncertain", "r-e")
        .unsafe_to_retry()
        .with_fingerprint("fp-1");
    if se.acquire(&uncertain, day).map_err(fail)? != Acquired::Replayed(b"sent-js".to_vec()) {
        return Err("k-uncertain: not resolved as the JavaScript host resolved it".into());
    }
    let board = kernel.taskboard();
    let f = board.get("f").map_err(fail)?;
    let (a, g) = (board.get("a").map_err(fail)?, board.get("g").map_err(fail)?);
    if f.owner.as_deref() != Some("js-w2") || f.fence != 2 || a.owner.as_deref() != Some("js-w3") {
        return Err(format!("tasks after the JavaScript host: f {f:?}, a {a:?}").into());
    }
    if g.state != gak::TaskState::Done {
        return Err(format!("g after the JavaScript host: {g:?}").into());
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        trial("npm_ci", npm_ci),
        trial("transpile", transpile),
        trial("node_test", node_test),
        trial("vectors_memory", || vectors("memory:")),
        trial("vectors_sqlite", || {
            let dir = scratch("vectors");
            vectors(&format!("sqlite:{}", dir.join("v.db").display()))
        }),
        postgres_trial("vectors_postgres", |dsn| {
            // Each scenario a schema of its own under this base name, dropped after it.
            let sep = if dsn.contains('?') { '&' } else { '?' };
            vectors(&format!("{dsn}{sep}schema=js_vectors"))
        }),
        trial("demo", demo),
        postgres_trial("demo_postgres", demo_postgres),
        postgres_trial("node_test_postgres_plain", node_test_postgres_plain),
        trial("sqlite_shared_with_rust", sqlite_shared_with_rust),
        trial("readme_snippet", readme_snippet),
        postgres_trial("readme_postgres_snippet", readme_postgres_snippet),
        postgres_trial("golden_postgres_continued", golden_postgres_continued),
    ];
    libtest_mimic::run(&args, trials).exit();
}
