//! Supplies the kernel component to the host as `GAK_COMPONENT_WASM`.
//!
//! Two modes:
//! - **In the repository** (`../../guest/component` exists): build the
//!   component from source for `wasm32-wasip2`, so `cargo build` / `cargo
//!   test` on a fresh checkout need no manual step, and publish it at
//!   `<target>/component/gak.wasm` for hosts in other languages. The build
//!   remaps source paths, so the bytes do not depend on where the checkout
//!   lives; a test compares them with the committed `component/gak.wasm`.
//! - **From the published crate** (no guest sources): use the committed
//!   `component/gak.wasm`; nothing is built, nothing is installed.
//!
//! The inner build uses its own target dir (an outer `--release` build would
//! otherwise wait forever on the outer target dir's lock), the root
//! workspace's `component` profile and lock file, and a clean environment
//! (outer RUSTFLAGS / target settings must not leak into it).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "guest_build.rs"]
mod guest_build;
use guest_build::TARGET;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed={}", manifest.join("wit").display());
    println!("cargo:rerun-if-env-changed=GAK_COMPONENT_WASM_OVERRIDE");
    if let Ok(path) = env::var("GAK_COMPONENT_WASM_OVERRIDE") {
        println!("cargo:rustc-env=GAK_COMPONENT_WASM={path}");
        return;
    }
    let root = manifest.ancestors().nth(2).map(Path::to_path_buf);
    match root.filter(|r| r.join("guest/component/Cargo.toml").exists()) {
        Some(root) => build_from_source(&root),
        None => {
            let shipped = manifest.join("component/gak.wasm");
            println!("cargo:rerun-if-changed={}", shipped.display());
            assert!(shipped.exists(), "the crate ships no {}", shipped.display());
            println!("cargo:rustc-env=GAK_COMPONENT_WASM={}", shipped.display());
        }
    }
}

fn build_from_source(root: &Path) {
    for watched in [
        "wit",
        "guest/src",
        "guest/Cargo.toml",
        "guest/component/src",
        "guest/component/Cargo.toml",
        // The component is a member of the root workspace: its lock file and
        // the `component` profile live there.
        "Cargo.toml",
        "Cargo.lock",
        "host/rust/guest_build.rs",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    ensure_target();
    let target_root = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let target_dir = target_root.join("guest");
    let mut build = guest_build::command(cargo.as_ref(), root, &target_dir);
    let out = build
        .output()
        .expect("cannot run cargo for the guest build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines().filter(|l| l.starts_with("warning")) {
        println!("cargo:warning=guest: {line}");
    }
    if !out.status.success() {
        panic!("building the gak component failed:\n{stderr}");
    }
    let wasm = guest_build::output(&target_dir);
    assert!(wasm.exists(), "guest build produced no {}", wasm.display());
    println!("cargo:rustc-env=GAK_COMPONENT_WASM={}", wasm.display());
    // The documented place where hosts in other languages find the
    // component after the README's commands (see host/HOSTS.md).
    let published = target_root.join("component");
    let copied = std::fs::create_dir_all(&published)
        .and_then(|()| std::fs::copy(&wasm, published.join("gak.wasm")));
    if let Err(e) = copied {
        println!(
            "cargo:warning=cannot copy the component to {}: {e}",
            published.display()
        );
    }
}

/// Fresh machines lack the wasm target and `RUSTUP_AUTO_INSTALL=0` stops
/// rust-toolchain.toml from installing it: install it here, loudly.
fn ensure_target() {
    let sysroot = Command::new(env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot
        .as_deref()
        .is_some_and(|s| Path::new(s).join("lib/rustlib").join(TARGET).exists());
    if installed {
        return;
    }
    println!("cargo:warning=the {TARGET} target is missing; running `rustup target add {TARGET}`");
    let mut add = Command::new("rustup");
    add.args(["target", "add", TARGET]);
    if let Ok(toolchain) = env::var("RUSTUP_TOOLCHAIN") {
        add.args(["--toolchain", &toolchain]);
    }
    let status = add.status();
    if !status.is_ok_and(|s| s.success()) {
        panic!(
            "the {TARGET} target is missing and `rustup target add {TARGET}` failed; install it by hand"
        );
    }
}
