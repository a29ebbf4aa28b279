//! The one command that builds the kernel component from the repository's
//! sources: used by `build.rs` and by the packaging test that rebuilds the
//! component in a copy of the checkout elsewhere (its bytes must not depend
//! on where the checkout lives).
use std::env;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The component's target.
pub const TARGET: &str = "wasm32-wasip2";

/// `cargo build` of the component crate for [`TARGET`] with the root
/// workspace's `component` profile and lock file, into `target_dir`, in a
/// clean environment (an outer build's RUSTFLAGS, target settings or
/// compiler wrapper must not leak in) and with every source path remapped, so the bytes are the same
/// wherever `root` and the cargo home are.
pub fn command(cargo: &OsStr, root: &Path, target_dir: &Path) -> Command {
    let mut build = Command::new(cargo);
    build
        .args([
            "build",
            "--locked",
            "--profile",
            "component",
            "--target",
            TARGET,
        ])
        .args(["--package", "gak-component", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        // `cargo clippy` sets the workspace wrapper to clippy-driver, which
        // compiles the component to other bytes (507,738 instead of 503,265
        // when measured): the embedded component must not depend on which
        // cargo command ran before.
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CLIPPY_CONF_DIR",
    ] {
        build.env_remove(var);
    }
    let mut remap = vec![format!("--remap-path-prefix={}=/gak", root.display())];
    if let Some(home) = env::var_os("CARGO_HOME") {
        remap.push(format!(
            "--remap-path-prefix={}=/cargo",
            Path::new(&home).display()
        ));
    } else if let Some(home) = env::var_os("HOME") {
        let home = Path::new(&home).join(".cargo");
        remap.push(format!("--remap-path-prefix={}=/cargo", home.display()));
    }
    build.env("CARGO_ENCODED_RUSTFLAGS", remap.join("\u{1f}"));
    build
}

/// Where [`command`] leaves the component.
pub fn output(target_dir: &Path) -> PathBuf {
    target_dir.join(TARGET).join("component/gak_component.wasm")
}
