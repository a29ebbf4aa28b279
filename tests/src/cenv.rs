//! libgak for tests: built by `cargo build -p gak-c` (once per test
//! binary), and C programs compiled against it with the system `cc`.
//! Used by the `c_abi` and `go` suites and the cross-language test.
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// What the reasons of this module start with when no C compiler with
/// LeakSanitizer is there ([`crate::pyenv::gate`] names it).
pub const CC: &str = "a C compiler (cc) with LeakSanitizer";

/// The libraries a program linking `libgak.a` needs besides it (rustc's
/// `--print native-static-libs` for the crate).
pub const NATIVE_LIBS: [&str; 6] = ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"];

/// `host/c`.
pub fn package() -> PathBuf {
    crate::pyenv::repo().join("host").join("c")
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
        tail(&out.stdout, 80),
        tail(&out.stderr, 60)
    )
}

/// The folder holding `libgak.a` (and `libgak.so`), built for this test
/// run's profile, or why it could not be built.
pub fn libgak() -> &'static Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let mut build = Command::new(env!("CARGO"));
        build
            .args(["build", "-p", "gak-c", "--message-format=json"])
            .current_dir(crate::pyenv::repo())
            .stderr(Stdio::inherit());
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        let out = build
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !out.status.success() {
            return Err(report("cargo build -p gak-c", &out));
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "gak")
            .flat_map(|m| {
                m["filenames"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|f| f.as_str().map(PathBuf::from))
                    .collect::<Vec<_>>()
            })
            .find(|f| f.file_name().is_some_and(|n| n == "libgak.a"))
            .and_then(|f| f.parent().map(Path::to_path_buf))
            .ok_or_else(|| "cargo build -p gak-c reported no libgak.a".to_owned())
    })
}

/// `cc` when it can build a program with `-fsanitize=leak`, else why not.
pub fn compiler() -> &'static Result<String, String> {
    static FOUND: OnceLock<Result<String, String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let version = Command::new("cc")
            .arg("--version")
            .output()
            .map_err(|e| format!("{CC}: `cc` not found ({e})"))?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let src = dir.path().join("probe.c");
        std::fs::write(&src, "int main(void) { return 0; }\n").map_err(|e| e.to_string())?;
        let out = Command::new("cc")
            .arg("-fsanitize=leak")
            .arg(&src)
            .arg("-o")
            .arg(dir.path().join("probe"))
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "{CC}: cc -fsanitize=leak failed (install the compiler's sanitizer runtime: liblsan0, or libclang-rt-14-dev for clang): {}",
                tail(&out.stderr, 5)
            ));
        }
        Ok(String::from_utf8_lossy(&version.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned())
    })
}

/// A C compiler with LeakSanitizer, for [`crate::suite::Suite::needs`].
pub static COMPILER: crate::suite::Requirement = crate::suite::Requirement::new(
    "a C compiler (cc) with LeakSanitizer",
    "install gcc (its liblsan0) or clang with libclang-rt-14-dev to run it",
    || {
        compiler().clone().map_err(|why| {
            why.trim_start_matches(CC)
                .trim_start_matches(": ")
                .to_owned()
        })
    },
);

/// Compile `source` against `gak.h` and libgak into `out`, with
/// LeakSanitizer and warnings as errors; `defines` are `-D` flags.
pub fn compile(source: &Path, out: &Path, defines: &[&str]) -> Result<(), String> {
    let lib = libgak().as_ref().map_err(Clone::clone)?;
    let mut cc = Command::new("cc");
    cc.args([
        "-std=c11",
        "-D_POSIX_C_SOURCE=200809L",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-g",
        "-fsanitize=leak",
    ])
    .args(defines)
    .arg("-I")
    .arg(package().join("include"))
    .arg(source)
    .arg(lib.join("libgak.a"))
    .args(NATIVE_LIBS)
    .arg("-o")
    .arg(out);
    let built = cc.output().map_err(|e| format!("cannot run cc: {e}"))?;
    if !built.status.success() {
        return Err(report(&format!("cc {}", source.display()), &built));
    }
    Ok(())
}

/// Does `stdout` hold what `host/latency.py` parses — a `-- STORE` line
/// for `store`, then `LABEL  N µs/op` for `label` — with a figure above 0?
pub fn latency_line(stdout: &str, store: &str, label: &str) -> bool {
    let mut current = "";
    for line in stdout.lines() {
        if let Some(s) = line.strip_prefix("-- ") {
            current = s;
            continue;
        }
        let Some((head, _)) = line.split_once(" µs/op") else {
            continue;
        };
        let mut words = head.rsplitn(2, char::is_whitespace);
        let figure: f64 = words
            .next()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0.0);
        let name = words.next().unwrap_or_default().trim();
        if current.starts_with(store) && name == label && figure > 0.0 {
            return true;
        }
    }
    false
}
