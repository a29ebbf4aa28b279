//! The Python host's test environment, made by `cargo test` itself: a
//! virtual environment in `host/python/.venv` (ignored by git) installed
//! from `host/python/requirements.lock` (exact pins with hashes) plus the
//! package in editable mode. It is re-created when the lock, the
//! `pyproject.toml` or the interpreter changes (a stamp file records them).
//!
//! Without Python 3.11+ (or without PostgreSQL, for the trials that need it)
//! the trials are reported IGNORED with the reason printed, and under
//! `CI=true` they FAIL: see [`gate`].
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use libtest_mimic::{Completion, Failed, Trial};

use crate::suite::{Requirement, Verdict, under_ci};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// `host/python`.
pub fn package_dir() -> PathBuf {
    repo().join("host").join("python")
}

/// A trial that runs `body` when `need` is met; otherwise the shared policy
/// ([`Requirement::judge`]): reported ignored with the reason, or failed
/// under `CI=true`.
pub fn gate<T: Clone + Send + 'static>(
    name: &str,
    need: &Result<T, String>,
    body: impl FnOnce(&T) -> Result<(), Failed> + Send + 'static,
) -> Trial {
    // A reason naming another requirement (PostgreSQL, Node) starts with it.
    let (what, found) = match need {
        Ok(_) => ("", Ok(String::new())),
        Err(why) => {
            let other = [PG, crate::jsenv::NODE, crate::goenv::GO, crate::cenv::CC]
                .into_iter()
                .find_map(|w| why.strip_prefix(w).map(|rest| (w, rest)));
            let (what, rest) = other.unwrap_or(("Python 3.11+", why.as_str()));
            (what, Err(rest.trim_start_matches([':', ' ']).to_owned()))
        }
    };
    match (need, Requirement::judge(what, &found, under_ci())) {
        (Ok(v), _) => {
            let v = v.clone();
            Trial::test(name, move || body(&v))
        }
        (Err(_), Verdict::Fail(why)) => Trial::test(name, move || Err(why.into())),
        (Err(_), Verdict::Skip(why) | Verdict::Run(why)) => {
            Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
        }
    }
}

fn version_ok(python: &str) -> Result<String, String> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sys; print(sys.executable); print('%d.%d' % sys.version_info[:2]); sys.exit(0 if sys.version_info >= (3, 11) else 3)",
        ])
        .output()
        .map_err(|e| format!("{python}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let exe = lines.next().unwrap_or_default().to_owned();
    let version = lines.next().unwrap_or("?").to_owned();
    if out.status.success() && !exe.is_empty() {
        Ok(exe)
    } else if out.status.code() == Some(3) {
        Err(format!("{python} is Python {version}, not 3.11+"))
    } else {
        Err(format!(
            "{python} does not run: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A Python 3.11+ interpreter: `$GAK_PYTHON`, else the first of `python3`,
/// `python3.13`, `python3.12`, `python3.11` that is one.
pub fn interpreter() -> Result<String, String> {
    if let Ok(p) = std::env::var("GAK_PYTHON") {
        return version_ok(&p);
    }
    let mut why = Vec::new();
    for p in ["python3", "python3.13", "python3.12", "python3.11"] {
        match version_ok(p) {
            Ok(exe) => return Ok(exe),
            Err(e) => why.push(e),
        }
    }
    Err(format!("no Python 3.11+ found ({})", why.join("; ")))
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Held while one process creates the venv (cargo may run test binaries
/// in parallel under other runners).
struct SetupLock(PathBuf);

impl SetupLock {
    fn take(path: PathBuf) -> Result<SetupLock, String> {
        let start = Instant::now();
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(SetupLock(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > Duration::from_secs(900));
                    if stale {
                        let _ = std::fs::remove_dir(&path);
                    } else if start.elapsed() > Duration::from_secs(900) {
                        return Err(format!("{} held for 15 minutes", path.display()));
                    } else {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
    }
}

impl Drop for SetupLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The venv's interpreter, creating or refreshing the venv first. Prints
/// how long the set-up took when it had to run.
pub fn venv() -> Result<PathBuf, String> {
    let python = interpreter()?;
    let dir = package_dir();
    let venv = dir.join(".venv");
    let bin = venv.join("bin").join("python");
    let read = |p: &str| std::fs::read_to_string(dir.join(p)).map_err(|e| format!("{p}: {e}"));
    let stamp = format!(
        "{python}\n--\n{}\n--\n{}",
        read("requirements.lock")?,
        read("pyproject.toml")?
    );
    let stamp_file = venv.join("gak-stamp");
    let _lock = SetupLock::take(dir.join(".venv.lock"))?;
    if bin.exists() && std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return Ok(bin);
    }
    let start = Instant::now();
    let _ = std::fs::remove_file(&stamp_file);
    run(Command::new(&python)
        .args(["-m", "venv", "--clear"])
        .arg(&venv))?;
    let pip = |args: &[&str]| {
        let mut c = Command::new(&bin);
        c.args(["-m", "pip", "--disable-pip-version-check", "install", "-q"])
            .args(args)
            .current_dir(&dir);
        run(&mut c)
    };
    pip(&["--require-hashes", "-r", "requirements.lock"])?;
    pip(&["--no-deps", "--no-build-isolation", "-e", "."])?;
    std::fs::write(&stamp_file, stamp).map_err(|e| format!("stamp: {e}"))?;
    eprintln!(
        "python: created {} from requirements.lock in {:.1} s",
        venv.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(bin)
}

/// The PostgreSQL DSN the tests use, if the server answers
/// ([`crate::pg::probe`]).
pub fn postgres() -> Result<String, String> {
    crate::pg::probe().map_err(|why| format!("{PG} {why}"))
}

/// How a PostgreSQL reason starts, so [`gate`] names what is missing.
const PG: &str = "PostgreSQL";

/// Run the venv's Python with `args` in `host/python`, with the repository's
/// component; a failure carries its output.
pub fn python(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, Failed> {
    let out = Command::new(bin)
        .args(args)
        .current_dir(package_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "python {args:?} failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into())
    }
}

/// The component the Rust host embeds, written where the Python host will
/// load it (`GAK_COMPONENT`), so both hosts run the very same bytes.
pub fn component() -> Result<PathBuf, String> {
    let path = package_dir().join(".venv").join("gak.wasm");
    if std::fs::read(&path).ok().as_deref() != Some(gak::COMPONENT_WASM) {
        let tmp = path.with_extension(format!("wasm.{}", std::process::id()));
        std::fs::write(&tmp, gak::COMPONENT_WASM)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(path)
}

/// The venv's interpreter and the component, ready for trials.
#[derive(Debug, Clone)]
pub struct Ready {
    /// `host/python/.venv/bin/python`.
    pub python: PathBuf,
    /// The component file (`GAK_COMPONENT` for every Python run).
    pub component: PathBuf,
}

/// Set up the Python side once per test binary.
pub fn ready() -> Result<Ready, String> {
    let python = venv()?;
    let component = component()?;
    Ok(Ready { python, component })
}
