//! Embeds what the `gak` tool carries whatever checkout it runs beside:
//! `vectors/*.json` (the repository's `tests/vectors`) as the built-in
//! conformance suite, and `wit/*.wit` for `gak component --wit DIR`.
use std::env;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    embed(&manifest.join("vectors"), "json", "builtin_vectors.rs");
    embed(&manifest.join("wit"), "wit", "builtin_wit.rs");
}

/// Write `OUT_DIR/out` holding `[(file name, include_str!(path)), …]` for
/// every `*.ext` file of `dir`, in name order.
fn embed(dir: &Path, ext: &str, out: &str) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == ext));
    files.sort();
    assert!(!files.is_empty(), "no *.{ext} files in {}", dir.display());
    let mut code = String::from("[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f.file_name().expect("a file").to_string_lossy();
        code.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            f.display().to_string()
        ));
    }
    code.push(']');
    let path = PathBuf::from(env::var("OUT_DIR").expect("cargo sets it")).join(out);
    std::fs::write(&path, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}
