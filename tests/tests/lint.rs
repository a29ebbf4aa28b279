//! The lints run with the tests, so the README's one test command (which
//! `.ci/run` runs) keeps the code formatted and clippy-clean: before, they
//! passed only because people remembered `just lint`.
//!
//! - `fmt`: `cargo fmt --check` over the workspace (the component crate
//!   included: it is a member);
//! - `clippy`: `cargo clippy --workspace --all-targets -- -D warnings`.
use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

fn cargo(args: &[&str]) -> Result<(), Failed> {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(root())
        .output()
        .map_err(|e| Failed::from(format!("cannot run cargo: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Failed::from(format!(
        "cargo {} failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )))
}

fn main() {
    let args = Arguments::from_args();
    let trials = vec![
        Trial::test("fmt", || cargo(&["fmt", "--all", "--", "--check"])),
        Trial::test("clippy", || {
            cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ])
        }),
    ];
    libtest_mimic::run(&args, trials).exit();
}
