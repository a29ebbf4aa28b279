//! `gak-guest-build ROOT TARGET_DIR`: the component build `host/rust/build.rs`
//! starts, run from a process of its own so a test can give that process the
//! environment a build script inherits (under `cargo clippy`, a
//! `RUSTC_WORKSPACE_WRAPPER` naming clippy-driver) and check the bytes do not
//! depend on it. Prints the built component's path.
#[path = "../../../host/rust/guest_build.rs"]
mod guest_build;

use std::path::PathBuf;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(root), Some(target_dir)) = (args.next(), args.next()) else {
        eprintln!("usage: gak-guest-build ROOT TARGET_DIR");
        std::process::exit(2);
    };
    let (root, target_dir) = (PathBuf::from(root), PathBuf::from(target_dir));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = guest_build::command(&cargo, &root, &target_dir)
        .output()
        .expect("run cargo for the component");
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        std::process::exit(1);
    }
    println!("{}", guest_build::output(&target_dir).display());
}
