//! The JavaScript host (`host/js`), run by `cargo test --workspace`: one
//! named trial per step, so a failure names its step.
//!
//! - `npm_ci`: installs `host/js/node_modules` from `package-lock.json`, only
//!   when the lock (or the Node version, which native modules depend on)
//!   changed since the last install (a stamp file in `node_modules`);
//! - `transpile`: turns the component the Rust host embeds into JavaScript
//!   (`host/js/gen/`, ignored);
//! - `node_test`: Node's own test runner on `host/js/test/*.test.mjs`;
//! - `vectors_memory`, `vectors_sqlite`: the built-in vectors through the JS
//!   runner (`node host/js/bin/gak.mjs conformance`), every scenario the Rust
//!   runner has;
//! - `demo`: the six-step demo on SQLite;
//! - `sqlite_shared_with_rust`: one SQLite file written by the Rust host,
//!   continued by the JS host, read back by the Rust host;
//! - `readme_snippet`: the README's "Embed it from JavaScript" code.
//!
//! Without Node 20+ (and npm) every trial is reported ignored, with the
//! reason; under `CI=true` they fail instead.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use gak::blocking::Kernel;
use gak::{Acquired, Action, TaskSeed};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

type Step = Result<Completion, Failed>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

fn package() -> PathBuf {
    repo().join("host/js")
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

fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn report(what: &str, out: &Output) -> String {
    format!(
        "{what} exited with {}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
        out.status,
        tail(&out.stdout, 150),
        tail(&out.stderr, 60)
    )
}

fn failed(what: &str, out: &Output) -> Failed {
    Failed::from(report(what, out))
}

fn message(f: &Failed) -> String {
    f.message().unwrap_or("failed").to_owned()
}

/// Node and npm, when both are there and Node is 20 or newer.
fn toolchain() -> &'static Result<String, String> {
    static NODE: OnceLock<Result<String, String>> = OnceLock::new();
    NODE.get_or_init(|| {
        let version = Command::new("node")
            .arg("--version")
            .output()
            .map_err(|e| format!("`node` not found ({e})"))?;
        let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
        let major: u32 = version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| format!("cannot read the Node version {version:?}"))?;
        if major < 20 {
            return Err(format!("Node {version} is older than 20"));
        }
        Command::new("npm")
            .arg("--version")
            .output()
            .map_err(|e| format!("`npm` not found ({e})"))?;
        Ok(version)
    })
}

/// Ignored (or, under `CI=true`, failed) when Node 20+ is missing.
fn need_node() -> Result<(), Step> {
    match toolchain() {
        Ok(_) => Ok(()),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => Err(Err(Failed::from(
            format!("the JavaScript host needs Node 20+ and npm, and CI=true: {why}"),
        ))),
        Err(why) => Err(Ok(Completion::ignored_with(format!(
            "needs Node 20+ and npm: {why}"
        )))),
    }
}

/// Install `node_modules` from the lock unless the stamp says it is current.
fn npm_ci() -> Result<(), Failed> {
    static DONE: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = done.as_ref() {
        return r.clone().map_err(Failed::from);
    }
    let r = install();
    *done = Some(r.clone());
    r.map_err(Failed::from)
}

fn install() -> Result<(), String> {
    let pkg = package();
    let lock = std::fs::read(pkg.join("package-lock.json")).map_err(|e| e.to_string())?;
    let node = toolchain().as_ref().map_err(Clone::clone)?;
    let mut hasher = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&lock, &mut hasher);
    let stamp_text = format!("{:016x} node {node}\n", std::hash::Hasher::finish(&hasher));
    let stamp = pkg.join("node_modules/.gak-npm-ci-stamp");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == stamp_text) {
        return Ok(());
    }
    let mut ci = Command::new("npm");
    ci.args(["ci", "--no-audit", "--no-fund"]).current_dir(&pkg);
    // better-sqlite3 compiles from source here (its prebuilt download is not
    // reachable); node-gyp needs the Node headers, which the Node install
    // ships next to the binary: point it there unless npm is told already.
    if std::env::var_os("npm_config_nodedir").is_none()
        && let Some(prefix) = node_prefix()
    {
        ci.env("npm_config_nodedir", prefix);
    }
    let out = ci.output().map_err(|e| format!("cannot run npm: {e}"))?;
    if !out.status.success() {
        return Err(report("npm ci", &out));
    }
    std::fs::write(&stamp, stamp_text).map_err(|e| e.to_string())
}

/// The install prefix of `node` when it has the headers node-gyp needs.
fn node_prefix() -> Option<PathBuf> {
    let out = Command::new("node")
        .args(["-p", "process.execPath"])
        .output()
        .ok()?;
    let exe = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let prefix = exe.parent()?.parent()?.to_path_buf();
    prefix
        .join("include/node/node.h")
        .exists()
        .then_some(prefix)
}

/// Environment for every Node child: find the component the Rust host
/// embeds, through the documented default lookup when it is published where
/// the docs say, else by `GAK_COMPONENT`.
fn component_env(cmd: &mut Command) -> Result<(), Failed> {
    let target = target_dir();
    let published = target.join("component/gak.wasm");
    cmd.env_remove("GAK_COMPONENT");
    if std::fs::read(&published).is_ok_and(|b| b == gak::COMPONENT_WASM) {
        cmd.env("CARGO_TARGET_DIR", &target);
    } else {
        let copy = target.join("tmp/gak-js-component.wasm");
        std::fs::write(&copy, gak::COMPONENT_WASM).map_err(|e| Failed::from(e.to_string()))?;
        cmd.env("GAK_COMPONENT", copy);
    }
    Ok(())
}

/// `node ARGS` in `host/js` (after install and transpile), checked for success.
fn node(args: &[&str], cwd: Option<&Path>) -> Result<Output, Failed> {
    ready()?;
    let mut cmd = Command::new("node");
    cmd.args(args).current_dir(cwd.unwrap_or(&package()));
    component_env(&mut cmd)?;
    let out = cmd
        .output()
        .map_err(|e| Failed::from(format!("cannot run node: {e}")))?;
    if !out.status.success() {
        return Err(failed(&format!("node {}", args.join(" ")), &out));
    }
    Ok(out)
}

fn transpile() -> Result<(), Failed> {
    static DONE: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = done.as_ref() {
        return r.clone().map_err(Failed::from);
    }
    let r = npm_ci().and_then(|()| {
        let mut cmd = Command::new("node");
        cmd.arg("scripts/transpile.mjs").current_dir(package());
        component_env(&mut cmd)?;
        let out = cmd
            .output()
            .map_err(|e| Failed::from(format!("cannot run node: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(failed("node scripts/transpile.mjs", &out))
        }
    });
    *done = Some(r.as_ref().map(|_| ()).map_err(message));
    r
}

fn ready() -> Result<(), Failed> {
    npm_ci()?;
    transpile()
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

/// How many scenarios the built-in vectors hold (as the Rust runner parses them).
fn builtin_scenarios() -> usize {
    gak::conformance::builtin()
        .iter()
        .map(|(name, text)| {
            gak::conformance::parse_file(text)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .len()
        })
        .sum()
}

fn vectors(store: &str) -> Result<(), Failed> {
    let out = node(&["bin/gak.mjs", "conformance", "--store", store], None)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let want = format!("{} passed, 0 failed", builtin_scenarios());
    if stdout.lines().last() != Some(want.as_str()) {
        return Err(failed(&format!("conformance (expected {want:?})"), &out));
    }
    Ok(())
}

fn node_test() -> Result<(), Failed> {
    let mut files: Vec<String> = std::fs::read_dir(package().join("test"))
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    let count = |what: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# {what} ")))
            .and_then(|n| n.trim().parse::<u32>().ok())
    };
    match (count("pass"), count("fail")) {
        (Some(pass), Some(0)) if pass > 0 => Ok(()),
        _ => Err(failed("node --test (no passing tests reported)", &out)),
    }
}

fn demo() -> Result<(), Failed> {
    let dir = scratch("demo");
    let store = format!("sqlite:{}", dir.join("demo.db").display());
    let out = node(&["bin/gak.mjs", "demo", "--store", &store], None)?;
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

    let script = package().join("test/fixtures/shared-sqlite.mjs");
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

/// The first ```js block under "## Embed it from JavaScript" in README.md.
fn readme_snippet() -> Result<(), Failed> {
    let readme = std::fs::read_to_string(repo().join("README.md"))
        .map_err(|e| Failed::from(e.to_string()))?;
    let section = readme
        .split_once("## Embed it from JavaScript")
        .ok_or("README.md has no \"Embed it from JavaScript\" section")?
        .1;
    let code = section
        .split_once("```js\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .ok_or("the section has no ```js block")?
        .0;
    // Inside the package (so `import … from 'gak'` resolves to it), in an
    // ignored folder; run from a scratch dir (the snippet writes gak.db).
    let file = package().join("gen/readme/snippet.mjs");
    std::fs::create_dir_all(file.parent().expect("a folder"))
        .map_err(|e| Failed::from(e.to_string()))?;
    std::fs::write(&file, code).map_err(|e| Failed::from(e.to_string()))?;
    let dir = scratch("readme");
    node(&[&file.display().to_string()], Some(&dir))?;
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
        trial("demo", demo),
        trial("sqlite_shared_with_rust", sqlite_shared_with_rust),
        trial("readme_snippet", readme_snippet),
    ];
    libtest_mimic::run(&args, trials).exit();
}
