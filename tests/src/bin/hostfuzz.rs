//! Writes the host-protocol fuzzers' cases (`tests/host-protocol/fuzz/`):
//! `gak-hostfuzz [--seed N] [--sql N] [--passwords N] [--retries N] [--out DIR]`.
//! Without options it writes the committed files (`just soak` asks for more
//! cases under another seed, into a scratch directory every host replays).
use std::path::PathBuf;

use anyhow::{Context, bail};
use gak_tests::hostfuzz;

fn main() -> anyhow::Result<()> {
    let mut seed = hostfuzz::SEED;
    let (mut sql, mut passwords, mut retries) = (
        hostfuzz::SQL_CASES,
        hostfuzz::PASSWORD_CASES,
        hostfuzz::RETRY_CASES,
    );
    let mut out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("host-protocol/fuzz");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seed" => seed = value.parse().context("--seed")?,
            "--sql" => sql = value.parse().context("--sql")?,
            "--passwords" => passwords = value.parse().context("--passwords")?,
            "--retries" => retries = value.parse().context("--retries")?,
            "--out" => out = PathBuf::from(value),
            other => bail!("unknown option {other}"),
        }
    }
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    for (name, text) in hostfuzz::files(seed, sql, passwords, retries) {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
