//! The Go host's test environment: Go 1.19+ (`golang-go`; `.ci/run`
//! installs it), libgak built by cargo ([`crate::cenv::libgak`]), and the
//! Go tool `gak` (`host/go/cmd/gak`) built against it once per test binary.
//! Used by the `go` suite and the cross-language test (`xlang`).
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// What the reasons of this module start with when Go is missing, so
/// callers can name it ([`crate::pyenv::gate`]).
pub const GO: &str = "Go 1.19+";

/// Go 1.19+, for [`crate::suite::Suite::needs`].
pub static TOOLCHAIN: crate::suite::Requirement = crate::suite::Requirement::new(
    GO,
    "apt-get update && apt-get install -y golang-go (.ci/run does) to run it",
    || {
        toolchain().clone().map_err(|why| {
            why.trim_start_matches(GO)
                .trim_start_matches(": ")
                .to_owned()
        })
    },
);

/// Go 1.19+ and PostgreSQL: the handle is the DSN.
pub static TOOLCHAIN_AND_POSTGRES: crate::suite::Requirement = crate::suite::Requirement::new(
    "Go 1.19+ and PostgreSQL",
    "install golang-go and set GAK_PG_DSN to a reachable server to run it",
    || toolchain().clone().and_then(|_| crate::pg::probe()),
);

/// `host/go`.
pub fn package() -> PathBuf {
    crate::pyenv::repo().join("host").join("go")
}

/// Go's version when `go` is 1.19 or newer, else why not.
pub fn toolchain() -> &'static Result<String, String> {
    static FOUND: OnceLock<Result<String, String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let out = Command::new("go")
            .args(["env", "GOVERSION"])
            .output()
            .map_err(|e| format!("{GO}: `go` not found ({e}); apt-get install -y golang-go"))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let minor: u32 = version
            .strip_prefix("go1.")
            .and_then(|rest| rest.split(['.', 'r', 'b']).next())
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| format!("{GO}: cannot read the Go version {version:?}"))?;
        if minor < 19 {
            return Err(format!("{GO}: {version} is older than 1.19"));
        }
        Ok(version)
    })
}

/// Environment for every `go` child: link libgak from `lib` (the README's
/// recipe: CGO_LDFLAGS=-L…), rebuild the cgo package whenever libgak or
/// its header changed (cgo does not hash files outside the package), no
/// module proxy (the package has no dependency), no network.
pub fn env(cmd: &mut Command, lib: &Path) {
    let mut stamp = std::hash::DefaultHasher::new();
    for file in [
        lib.join("libgak.a"),
        crate::cenv::package().join("include/gak.h"),
    ] {
        let meta = std::fs::metadata(&file).ok();
        std::hash::Hash::hash(&meta.as_ref().map(|m| m.len()), &mut stamp);
        std::hash::Hash::hash(&meta.and_then(|m| m.modified().ok()), &mut stamp);
    }
    cmd.env("CGO_LDFLAGS", format!("-L{}", lib.display()))
        .env(
            "CGO_CFLAGS",
            format!(
                "-O2 -g -DGAK_LIB_STAMP={:x}",
                std::hash::Hasher::finish(&stamp)
            ),
        )
        .env("CGO_ENABLED", "1")
        .env("GOFLAGS", "-mod=readonly")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local");
}

/// What a Go trial needs: the libgak folder and the built tool.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The folder holding `libgak.a`.
    pub lib: PathBuf,
    /// The `gak` tool built from `host/go/cmd/gak`.
    pub bin: PathBuf,
}

/// Go, libgak and the Go tool, once per test binary (reasons for a
/// missing Go start with [`GO`]).
pub fn ready() -> Result<Ready, String> {
    static READY: OnceLock<Result<Ready, String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            toolchain().as_ref().map_err(Clone::clone)?;
            let lib = crate::cenv::libgak()
                .as_ref()
                .map_err(Clone::clone)?
                .clone();
            let target = lib.parent().unwrap_or(&lib).join("tmp");
            std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
            // Built aside, then renamed over the last one: a test binary
            // still running the old one keeps it.
            let bin = target.join("gak-go");
            let fresh = target.join(format!("gak-go.{}", std::process::id()));
            let mut build = Command::new("go");
            build
                .args(["build", "-o"])
                .arg(&fresh)
                .arg("./cmd/gak")
                .current_dir(package());
            env(&mut build, &lib);
            let out = build.output().map_err(|e| format!("cannot run go: {e}"))?;
            if !out.status.success() {
                return Err(crate::cenv::report("go build ./cmd/gak", &out));
            }
            std::fs::rename(&fresh, &bin).map_err(|e| e.to_string())?;
            Ok(Ready { lib, bin })
        })
        .clone()
}
