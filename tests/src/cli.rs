//! Driving the `gak` binary as an operator would: run a command, read its
//! exit code, stdout and stderr, parse its `--json`. Every output is kept so a
//! test can check that a capability (token, holder, claim) appears only in
//! the output of the command that minted it.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `gak` binary: `GAK_BIN` when set, else built (or found fresh) by
/// `cargo build -p gak-cli --bin gak`. Cargo gives a package's tests only
/// its own binaries (`CARGO_BIN_EXE_*`), and `gak` belongs to `gak-cli`.
pub fn gak_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("GAK_BIN") {
            return PathBuf::from(bin);
        }
        let mut build = Command::new(env!("CARGO"));
        build
            .args([
                "build",
                "-p",
                "gak-cli",
                "--bin",
                "gak",
                "--message-format=json",
            ])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .stderr(Stdio::inherit());
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        let out = build.output().expect("run cargo to build the gak binary");
        assert!(
            out.status.success(),
            "cargo build -p gak-cli --bin gak failed"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|m| m["target"]["name"] == "gak")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("cargo reported the gak executable")
    })
}

/// What one command printed.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The arguments after `gak`.
    pub args: Vec<String>,
    /// The exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Ran {
    /// Stdout parsed as the one JSON document `--json` promises.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "gak {} printed no JSON document ({e}):\n{}",
                self.args.join(" "),
                self.stdout
            )
        })
    }

    /// Panic unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Ran {
        assert_eq!(
            self.code,
            code,
            "gak {} exited {} (wanted {code})\nstdout:\n{}\nstderr:\n{}",
            self.args.join(" "),
            self.code,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Stdout and stderr together.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// An operator session against one store: every command gets `--store`
/// through `GAK_STORE`, and every output is kept.
pub struct Operator {
    store: String,
    dir: PathBuf,
    /// Every command run so far, in order.
    pub log: Vec<Ran>,
}

impl Operator {
    /// Commands on `store`, run in `dir` (where relative file names live).
    pub fn new(store: &str, dir: &Path) -> Operator {
        Operator {
            store: store.to_owned(),
            dir: dir.to_owned(),
            log: Vec::new(),
        }
    }

    /// The store URL.
    pub fn store(&self) -> &str {
        &self.store
    }

    /// Run `gak ARGS…` and keep its output.
    pub fn run(&mut self, args: &[&str]) -> Ran {
        self.run_with(args, &[], None)
    }

    /// Run `gak ARGS…` with extra environment and optional stdin.
    pub fn run_with(&mut self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Ran {
        let ran = run_gak(
            &self.dir,
            args,
            &[("GAK_STORE", self.store.as_str())],
            env,
            stdin,
        );
        self.log.push(ran.clone());
        ran
    }

    /// Run with `--json`, demand exit 0, and parse the document.
    pub fn json(&mut self, args: &[&str]) -> Value {
        let mut with = args.to_vec();
        with.push("--json");
        let ran = self.run(&with);
        ran.expect_code(0);
        ran.json()
    }

    /// Poll `gak ARGS… --json` until `done` holds for its document, at most
    /// `deadline`: a lease expires in real time, so the test asks the CLI
    /// again (never sleeps blindly) and gives up loudly.
    pub fn poll_json(
        &mut self,
        args: &[&str],
        deadline: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            let doc = self.json(args);
            if done(&doc) {
                return doc;
            }
            assert!(
                start.elapsed() < deadline,
                "gak {} did not reach the expected state within {deadline:?}; last answer:\n{doc:#}",
                args.join(" ")
            );
            // Between two polls: each poll is a whole process start, so this
            // only keeps a tight loop from hogging a small machine.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Panic if `secret` appears in the output of any command other than
    /// those for which `minted_by` is true.
    pub fn assert_shown_only_by(&self, what: &str, secret: &str, minted_by: impl Fn(&Ran) -> bool) {
        assert!(secret.len() >= 16, "{what} is not a capability: {secret:?}");
        for ran in &self.log {
            if minted_by(ran) {
                continue;
            }
            assert!(
                !ran.all().contains(secret),
                "the {what} leaked into the output of `gak {}`:\n{}",
                ran.args.join(" "),
                ran.all()
            );
        }
    }
}

/// Run `gak` in `dir` with `base` then `env` variables; `GAK_LOG`/`RUST_LOG`
/// are cleared so logs never mix into what is checked.
pub fn run_gak(
    dir: &Path,
    args: &[&str],
    base: &[(&str, &str)],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Ran {
    let mut cmd = Command::new(gak_bin());
    cmd.args(args)
        .current_dir(dir)
        .env_remove("GAK_STORE")
        .env_remove("GAK_TOKEN")
        .env_remove("GAK_CLAIM")
        .env_remove("GAK_LOG")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in base.iter().chain(env) {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start gak");
    if let Some(text) = stdin {
        use std::io::Write;
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(text.as_bytes()).expect("write gak's stdin");
    }
    let out = child.wait_with_output().expect("wait for gak");
    let ran = Ran {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !ran.stderr.contains("panicked"),
        "gak {} panicked:\n{}",
        args.join(" "),
        ran.stderr
    );
    ran
}

/// The field names of a JSON object, sorted.
pub fn fields(v: &Value) -> Vec<String> {
    let mut names: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not a JSON object: {v}"))
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

/// Panic unless `v` is an object with exactly the documented `names`.
pub fn assert_fields(what: &str, v: &Value, names: &[&str]) {
    let mut want: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    want.sort();
    assert_eq!(fields(v), want, "{what}: documented fields differ in {v:#}");
}

/// The documented `--json` fields (README, "Operating gak").
pub mod doc {
    /// A task (`tasks show`, `tasks list` items, `tasks renew`, `tasks
    /// revive`).
    pub const TASK: &[&str] = &[
        "id",
        "title",
        "deps",
        "state",
        "owner",
        "until",
        "fence",
        "priority",
        "not-before",
        "max-attempts",
        "group",
        "attempts",
        "last-error",
    ];
    /// A task a command just claimed (`tasks claim`, `tasks claim-next`).
    pub const CLAIMED_TASK: &[&str] = &[
        "id",
        "title",
        "deps",
        "state",
        "owner",
        "until",
        "fence",
        "priority",
        "not-before",
        "max-attempts",
        "group",
        "attempts",
        "last-error",
        "token",
    ];
    /// A page (`tasks list`, `effects list`).
    pub const PAGE: &[&str] = &["items", "next"];
    /// A key (`effects show`, `effects list` items).
    pub const KEY: &[&str] = &[
        "key",
        "state",
        "retry-safety",
        "fingerprint",
        "resource",
        "until",
        "reason",
        "completed-at",
        "reconciling-until",
    ];
    /// `effects reconcile`.
    pub const RECONCILE: &[&str] = &["key", "resource", "claim", "until"];
    /// `effects resolve --applied`.
    pub const RESOLVED_APPLIED: &[&str] = &["key", "resolved", "result"];
    /// `effects resolve --not-applied`.
    pub const RESOLVED_CLEARED: &[&str] = &["key", "resolved"];
    /// The board's counts (`tasks count`; `tasks recount` adds `pages`).
    pub const COUNTS: &[&str] = &[
        "open", "claimed", "done", "failed", "dead", "total", "exact",
    ];
    /// `effects count` / `effects recount` (with `pages`).
    pub const KEY_COUNTS: &[&str] = &[
        "cleared",
        "in-flight",
        "uncertain",
        "completed",
        "total",
        "oldest-uncertain",
        "oldest-uncertain-age-ms",
        "capped",
        "exact",
    ];
    /// A group's tasks by state (`groups list`'s `tasks`).
    pub const TASK_STATES: &[&str] = &["open", "claimed", "done", "failed", "dead"];
    /// A group (`groups show`, `groups limit`).
    pub const GROUP: &[&str] = &["group", "limit", "live"];
    /// `tasks seed`.
    pub const SEED: &[&str] = &["seeded"];
    /// `tasks release` / `tasks complete`.
    pub const RELEASED: &[&str] = &["id", "released", "state"];
    /// `tasks complete`.
    pub const COMPLETED: &[&str] = &["id", "completed", "state"];
    /// `runs show`.
    pub const RUN: &[&str] = &["run-id", "snapshot", "outcome"];
    /// A snapshot inside `runs show`.
    pub const SNAPSHOT: &[&str] = &["run-id", "seq", "fence", "status", "done", "fields"];
    /// An outcome inside `runs show` (UTF-8 result).
    pub const OUTCOME: &[&str] = &["status", "result"];
    /// `runs plan`.
    pub const PLAN: &[&str] = &["run-id", "seq", "skip", "run", "untrusted"];
    /// An untrusted entry of `runs plan`.
    pub const UNTRUSTED: &[&str] = &["step", "why"];
    /// `prune`.
    pub const PRUNE: &[&str] = &[
        "dry-run",
        "before",
        "batches",
        "removed-keys",
        "removed-tasks",
        "removed-runs",
        "more",
    ];
    /// An error on stderr with `--json`.
    pub const ERROR: &[&str] = &["error", "message", "exit"];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(args: &[&str], stdout: &str) -> Ran {
        Ran {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            code: 0,
            stdout: stdout.to_owned(),
            stderr: String::new(),
        }
    }

    #[test]
    fn the_leak_check_catches_a_capability_in_another_output() {
        let secret = "0123456789abcdef0123456789abcdef";
        let mut op = Operator::new("memory:", Path::new("."));
        op.log
            .push(ran(&["tasks", "claim", "t"], &format!("token  {secret}")));
        op.log.push(ran(&["tasks", "show", "t"], "state claimed"));
        op.assert_shown_only_by("token", secret, |r| r.args[1] == "claim");
        op.log
            .push(ran(&["tasks", "list"], &format!("t claimed {secret}")));
        let leaked = std::panic::catch_unwind(|| {
            op.assert_shown_only_by("token", secret, |r| r.args[1] == "claim")
        });
        assert!(
            leaked.is_err(),
            "a token in `tasks list` must fail the check"
        );
    }
}
