//! One module per host language; each answers the files it generates.
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::{Contract, Output};

pub mod c;
pub mod cabi;
pub mod go;
pub mod js;
pub mod python;
pub mod rust;
pub mod store;
pub mod vectors;

/// Pure exported functions: hosts call them without a transaction, and
/// only the call's total size is the host's to bound (HOSTS.md rule 16).
pub const PURE: &[&str] = &["checkpoint.build-plan"];

/// Every generated file.
pub fn all(c: &Contract, root: &Path) -> Result<Vec<Output>, String> {
    let mut out = Vec::new();
    out.extend(rust::emit(c, root)?);
    out.extend(python::emit(c, root)?);
    out.extend(js::emit(c, root)?);
    out.extend(c::emit(c, root)?);
    out.extend(go::emit(c, root)?);
    out.extend(store::emit(c, root)?);
    Ok(out)
}

/// The files other than `wit/` the generators read, relative to the root.
pub fn inputs() -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    files.extend(store::INPUTS.iter().map(std::path::PathBuf::from));
    files
}

/// `text` as `rustfmt` formats it with the repository's `rustfmt.toml`, so
/// generated Rust passes `cargo fmt --check` unchanged.
pub fn rustfmt(root: &Path, text: &str) -> Result<String, String> {
    let rustfmt = std::env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into());
    let mut child = Command::new(rustfmt)
        .args(["--edition", "2024", "--emit", "stdout", "--config-path"])
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run rustfmt: {e}"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(text.as_bytes())
        .map_err(|e| format!("rustfmt: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("rustfmt: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "rustfmt refused the generated code:\n{}\n--- code ---\n{text}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("rustfmt: {e}"))
}

/// `docs` as comment lines, each opened by `prefix` (`/// `, `# `, ` * `),
/// indented by `indent`; nothing when `docs` is empty.
pub fn comment(docs: &str, indent: &str, prefix: &str) -> String {
    let mut out = String::new();
    for line in docs.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            out.push_str(indent);
            out.push_str(prefix.trim_end());
        } else {
            out.push_str(indent);
            out.push_str(prefix);
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}
