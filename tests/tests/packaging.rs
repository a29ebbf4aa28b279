//! The published crates carry what they need to build offline: the
//! component (committed, and checked against the sources it was built
//! from), the WIT contract and the built-in vectors.
//!
//! After changing the guest or the WIT, refresh the committed component:
//! `GAK_BLESS=1 cargo test -p gak-tests --test packaging`.
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

// Only `output` is used here: the build itself runs in `gak-guest-build`.
#[allow(dead_code)]
#[path = "../../host/rust/guest_build.rs"]
mod guest_build;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the root")
        .to_path_buf()
}

/// Every file the component is built from, in a stable order.
fn sources(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in ["guest/src", "guest/component/src", "wit"] {
        walk(&root.join(dir), &mut files);
    }
    for file in [
        // The guest inherits its version, edition and lints from here, and
        // the component its build profile and (as a member) its lock file.
        "Cargo.toml",
        "Cargo.lock",
        "guest/Cargo.toml",
        "guest/component/Cargo.toml",
        "rust-toolchain.toml",
    ] {
        files.push(root.join(file));
    }
    files
}

fn sources_digest(root: &Path) -> String {
    let mut hasher = Sha256::new();
    for path in sources(root) {
        let relative = path.strip_prefix(root).expect("under the root");
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update(std::fs::read(&path).expect("readable source"));
        hasher.update([0]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The committed component is the one these sources build: byte for byte
/// the component `host/rust/build.rs` built for this test run (the build is
/// reproducible: paths are remapped, the toolchain pinned), and its stamp
/// names the sources it was built from. A guest, WIT or manifest change
/// without a refreshed component fails here.
#[test]
fn the_committed_component_matches_its_sources() {
    let root = root();
    let shipped = root.join("host/rust/component/gak.wasm");
    let stamp = root.join("host/rust/component/gak.wasm.sources");
    let digest = sources_digest(&root);
    if std::env::var_os("GAK_BLESS").is_some() {
        std::fs::write(&shipped, gak::COMPONENT_WASM).expect("write the component");
        std::fs::write(&stamp, format!("{digest}\n")).expect("write the stamp");
    }
    let recorded = std::fs::read_to_string(&stamp).unwrap_or_default();
    assert_eq!(
        recorded.trim(),
        digest,
        "host/rust/component/gak.wasm is stale: the guest or the WIT changed since it was built.\n\
         Refresh it: GAK_BLESS=1 cargo test -p gak-tests --test packaging"
    );
    let bytes = std::fs::read(&shipped).expect("the committed component");
    assert!(
        bytes.starts_with(b"\0asm"),
        "not a WebAssembly binary: {}",
        shipped.display()
    );
    assert!(
        bytes == gak::COMPONENT_WASM,
        "host/rust/component/gak.wasm ({} bytes) is not what its sources build ({} bytes).\n\
         Refresh it: GAK_BLESS=1 cargo test -p gak-tests --test packaging",
        bytes.len(),
        gak::COMPONENT_WASM.len()
    );
}

/// The component's bytes do not depend on where the checkout lives, nor on
/// which cargo command ran the build script: the sources, copied to another
/// directory (another path, another length), build the same bytes as here,
/// and they are built by the build script's own command from a process
/// whose environment is what `cargo clippy` gives a build script. (CI once
/// failed the test above by one byte: cargo hashed the absolute path of
/// `guest/`, then outside the component's own workspace, into gak-rules'
/// symbol names; and a `cargo clippy` before `cargo build` once shipped a
/// component of 507,739 bytes instead of 503,265, built by clippy-driver.)
#[test]
fn the_component_does_not_depend_on_where_the_checkout_lives() {
    /// Removes the copy however the test ends.
    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let root = root();
    let scratch =
        Scratch(std::env::temp_dir().join(format!("gak-relocated-{}", std::process::id())));
    let elsewhere = scratch.0.join("a/checkout/somewhere/else");
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached"])
        .current_dir(&root)
        .output()
        .expect("git lists the checkout's files");
    assert!(listed.status.success(), "git ls-files failed");
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).expect("utf-8 path");
        let from = root.join(name);
        if !from.is_file() {
            continue; // deleted in the work tree
        }
        let to = elsewhere.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).expect("mkdir");
        std::fs::copy(&from, &to).expect("copy");
    }
    let target_dir = elsewhere.join("target/guest");
    // What `cargo clippy` hands a build script: clippy-driver as the
    // workspace's compiler wrapper.
    let clippy_driver = Path::new(env!("CARGO"))
        .parent()
        .expect("cargo's directory")
        .join("clippy-driver");
    let out = Command::new(env!("CARGO_BIN_EXE_gak-guest-build"))
        .arg(&elsewhere)
        .arg(&target_dir)
        .env("CARGO", env!("CARGO"))
        .env("RUSTC_WORKSPACE_WRAPPER", &clippy_driver)
        .env(
            "CLIPPY_ARGS",
            "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
        )
        .output()
        .expect("run the relocated component's build");
    assert!(
        out.status.success(),
        "the relocated component did not build:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let relocated = std::fs::read(guest_build::output(&target_dir)).expect("relocated bytes");
    assert!(
        relocated == gak::COMPONENT_WASM,
        "built in {} the component has {} bytes, built here {}: a path or the outer build's environment leaks into its bytes",
        elsewhere.display(),
        relocated.len(),
        gak::COMPONENT_WASM.len()
    );
}

fn package_list(package: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args(["package", "--list", "--allow-dirty", "-p", package])
        .current_dir(root())
        .output()
        .expect("run cargo package --list");
    assert!(
        out.status.success(),
        "cargo package --list -p {package} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every `*.ext` file of the repository's `dir`, as `shipped/NAME`.
fn shipped(dir: &str, ext: &str, shipped: &str) -> Vec<String> {
    std::fs::read_dir(root().join(dir))
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(ext))
        .map(|name| format!("{shipped}/{name}"))
        .collect()
}

/// `cargo package` ships everything each crate needs to build offline: the
/// library its component, WIT and SQL; the tool its vectors and WIT.
#[test]
fn the_packages_carry_what_they_build_from() {
    let gak = package_list("gak");
    let mut required: Vec<String> = [
        "build.rs",
        "guest_build.rs",
        "Cargo.toml",
        "README.md",
        "LICENSE",
        "component/gak.wasm",
        "sql/postgres.sql",
        "src/lib.rs",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    required.extend(shipped("wit", ".wit", "wit"));
    for file in &required {
        assert!(gak.contains(file), "the gak package lacks {file}: {gak:?}");
    }
    let cli = package_list("gak-cli");
    let mut required: Vec<String> = [
        "build.rs",
        "Cargo.toml",
        "src/lib.rs",
        "src/main.rs",
        "vectors/README.md",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    required.extend(shipped("wit", ".wit", "wit"));
    required.extend(shipped("tests/vectors", ".json", "vectors"));
    for file in &required {
        assert!(
            cli.contains(file),
            "the gak-cli package lacks {file}: {cli:?}"
        );
    }
    let rules = package_list("gak-rules");
    for file in ["Cargo.toml", "README.md", "LICENSE", "src/lib.rs"] {
        assert!(
            rules.iter().any(|f| f == file),
            "gak-rules lacks {file}: {rules:?}"
        );
    }
}
