//! The JavaScript host's test environment, made by `cargo test` itself:
//! `host/js/node_modules` installed by `npm ci` from the committed lock
//! (skipped while a stamp says the lock and Node are unchanged), and the
//! component transpiled by jco into `host/js/gen/` (both ignored by git).
//! Used by the `js` suite and by the cross-language test (`xlang`).
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// What the reasons of this module start with when Node is missing, so
/// callers can name it ([`crate::pyenv::gate`]).
pub const NODE: &str = "Node 20+ and npm";

/// `host/js`.
pub fn package() -> PathBuf {
    crate::pyenv::repo().join("host").join("js")
}

fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A failed child process, with the tails of its output.
pub fn report(what: &str, out: &Output) -> String {
    format!(
        "{what} exited with {}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
        out.status,
        tail(&out.stdout, 150),
        tail(&out.stderr, 60)
    )
}

/// Node's version when Node 20+ and npm are both there, else why not.
pub fn toolchain() -> &'static Result<String, String> {
    static FOUND: OnceLock<Result<String, String>> = OnceLock::new();
    FOUND.get_or_init(|| {
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

/// Run `f` once per process and remember its answer.
fn once(
    cell: &Mutex<Option<Result<(), String>>>,
    f: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let mut done = cell.lock().unwrap_or_else(|p| p.into_inner());
    done.get_or_insert_with(f).clone()
}

/// Install `node_modules` from the lock unless the stamp says it is current.
pub fn npm_ci() -> Result<(), String> {
    static DONE: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    once(&DONE, install)
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
/// embeds, through the documented default lookup when it is published in
/// `target` (the cargo target dir) where the docs say, else by
/// `GAK_COMPONENT`.
pub fn component_env(cmd: &mut Command, target: &Path) -> Result<(), String> {
    let published = target.join("component/gak.wasm");
    cmd.env_remove("GAK_COMPONENT");
    if std::fs::read(&published).is_ok_and(|b| b == gak::COMPONENT_WASM) {
        cmd.env("CARGO_TARGET_DIR", target);
    } else {
        let copy = target.join("tmp/gak-js-component.wasm");
        std::fs::create_dir_all(target.join("tmp")).map_err(|e| e.to_string())?;
        std::fs::write(&copy, gak::COMPONENT_WASM).map_err(|e| e.to_string())?;
        cmd.env("GAK_COMPONENT", copy);
    }
    Ok(())
}

/// Transpile the component into `host/js/gen/` (after [`npm_ci`]).
pub fn transpile(target: &Path) -> Result<(), String> {
    static DONE: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    once(&DONE, || {
        npm_ci()?;
        let mut cmd = Command::new("node");
        cmd.arg("scripts/transpile.mjs").current_dir(package());
        component_env(&mut cmd, target)?;
        let out = cmd.output().map_err(|e| format!("cannot run node: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(report("node scripts/transpile.mjs", &out))
        }
    })
}

/// Node present, packages installed, component transpiled; else why not
/// (starting with [`NODE`] when Node itself is missing).
pub fn ready(target: &Path) -> Result<(), String> {
    toolchain()
        .as_ref()
        .map_err(|why| format!("{NODE}: {why}"))?;
    transpile(target)
}
