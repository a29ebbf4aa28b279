//! `include/gak.h` is exactly what cbindgen makes of this crate (with
//! `cbindgen.toml`): a function, record or constant changed in Rust and not
//! in the header fails here. Regenerate: `GAK_BLESS=1 cargo test -p gak-c
//! --test header`.
use std::path::Path;

#[test]
fn the_committed_header_matches_the_crate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate");
    let mut made = Vec::new();
    bindings.write(&mut made);
    let made = String::from_utf8(made).expect("UTF-8");
    let path = dir.join("include/gak.h");
    if std::env::var_os("GAK_BLESS").is_some() {
        std::fs::write(&path, &made).expect("write include/gak.h");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == made,
        "include/gak.h is not what the crate exports; regenerate it: GAK_BLESS=1 cargo test -p gak-c --test header"
    );
    // The header is the ABI's whole documentation: every function says
    // who owns what it touches.
    for needle in [
        "WHO FREES WHAT",
        "gak_error_free",
        "gak_task_clear",
        "gak_kernel_free",
    ] {
        assert!(made.contains(needle), "the header lost {needle:?}");
    }
    let functions = made.matches("\nstruct gak_error *gak_").count();
    assert!(
        functions > 30,
        "only {functions} fallible functions in the header"
    );
}
