//! The Go package (`host/go`, cgo over libgak), run by `cargo test
//! --workspace`: one named trial per step, so a failure names its step.
//!
//! - `vet`, `test_race`: `go vet ./...` and `go test -race ./...` (the
//!   package's own tests, the vectors and the host-protocol cases);
//! - `conformance_memory|sqlite|postgres`: the built-in vectors through the
//!   Go runner (`go run ./cmd/gak conformance`), every scenario the Rust
//!   runner has;
//! - `conformance_fails_a_wrong_vector`, `component_flag`: the runner's
//!   own behaviour;
//! - `host_protocol`, `host_protocol_postgres`: the shared host-protocol
//!   cases that apply to this host (the rest are skipped, each with its
//!   reason, and only the scripted-store ones may be), and the fuzzers'
//!   cases (`tests/host-protocol/fuzz`, or `$GAK_HOST_FUZZ_DIR`): SQL texts
//!   on SQLite (and PostgreSQL), passwords through every URL entry point
//!   and the tool, retry sequences on PostgreSQL;
//! - `readme_snippet`: the README's "Embed it from Go" code, in a fresh
//!   module set up as the README says;
//! - `gofmt`: `gofmt -l` finds nothing to reformat (the generated files
//!   included);
//! - `a_stale_build_is_refused`: a copy of the package compiled against a
//!   `gak.h` of another ABI, linked with this libgak, refuses it when it
//!   loads — `gak.Open` answers a sentence naming both versions — while
//!   the same copy against the real header opens;
//! - `latency_tool`: `cmd/gak-latency` prints what `host/latency.py` parses.
//!
//! Without Go 1.19+ every trial is reported ignored, with the reason; under
//! `CI=true` they fail instead.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gak_tests::goenv::{self, Ready};
use gak_tests::suite::Suite;
use gak_tests::{cenv, pg, pyenv};

fn ready() -> Ready {
    goenv::ready().unwrap_or_else(|e| panic!("{e}"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gak-go-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `go ARGS` in `cwd` with the test environment.
fn go(args: &[&str], cwd: &Path, extra: &[(&str, &str)]) -> Output {
    let r = ready();
    let mut cmd = Command::new("go");
    cmd.args(args).current_dir(cwd);
    goenv::env(&mut cmd, &r.lib);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.output().expect("run go")
}

fn tool(args: &[&str]) -> Output {
    Command::new(ready().bin)
        .args(args)
        .current_dir(goenv::package())
        .output()
        .expect("run the Go gak tool")
}

fn succeeded(what: &str, out: &Output) -> String {
    assert!(out.status.success(), "{}", cenv::report(what, out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn vet() {
    succeeded(
        "go vet ./...",
        &go(&["vet", "./..."], &goenv::package(), &[]),
    );
}

fn test_race(dsn: Option<&str>) {
    let extra: Vec<(&str, &str)> = dsn.map(|d| ("GAK_PG_DSN", d)).into_iter().collect();
    let out = go(
        &["test", "-race", "-count=1", "./..."],
        &goenv::package(),
        &extra,
    );
    let stdout = succeeded("go test -race ./...", &out);
    let passed = stdout.lines().filter(|l| l.starts_with("ok ")).count();
    assert!(
        passed >= 2,
        "expected the package and the conformance tests to pass:\n{stdout}"
    );
}

fn conformance(store: &str) {
    let out = tool(&["conformance", "--store", store]);
    let stdout = succeeded(&format!("gak conformance --store {store}"), &out);
    let want = format!("{} passed, 0 failed", gak_tests::builtin_scenarios());
    assert_eq!(stdout.lines().last(), Some(want.as_str()), "{stdout}");
}

fn conformance_fails_a_wrong_vector() {
    let dir = scratch("wrong");
    let wrong = dir.join("wrong.json");
    std::fs::write(
        &wrong,
        r#"{"scenario": "wrong", "steps": [
          {"call": "taskboard.seed", "args": {"tasks": [{"id": "a"}]}, "ok": null},
          {"call": "taskboard.claim", "args": {"id": "a", "agent": "w", "ttl": 100}, "ok": {"fence": 2}}]}"#,
    )
    .expect("write");
    let out = tool(&["conformance", &wrong.display().to_string()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        cenv::report("conformance", &out)
    );
    assert_eq!(
        stdout.lines().last(),
        Some("0 passed, 1 failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL") && stdout.contains("step 1"),
        "{stdout}"
    );
    let unknown = tool(&["conformance", "--store", "nosuch:x"]);
    assert_eq!(
        unknown.status.code(),
        Some(2),
        "{}",
        cenv::report("conformance", &unknown)
    );
}

fn component_flag() {
    let target = ready().lib.parent().expect("target dir").to_path_buf();
    let published = target.join("component/gak.wasm");
    let file = tests_file(&["vectors", "checkpoint.json"]);
    let ours = tool(&[
        "conformance",
        "--component",
        &published.display().to_string(),
        &file,
    ]);
    succeeded("conformance --component (the embedded one)", &ours);
    let older = tests_file(&["golden", "gak-0.2.0.wasm"]);
    let refused = tool(&["conformance", "--component", &older, &file]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "{}",
        cenv::report("conformance --component (another)", &refused)
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not the component this libgak embeds")
    );
    let missing = tool(&["conformance", "--component", "/nonexistent/gak.wasm", &file]);
    assert_eq!(
        missing.status.code(),
        Some(2),
        "a missing --component file must be an error"
    );
}

fn tests_file(parts: &[&str]) -> String {
    let mut p = pyenv::repo().join("tests");
    for part in parts {
        p = p.join(part);
    }
    p.display().to_string()
}

fn host_protocol(dsn: Option<&str>) {
    let mut args = vec!["host-protocol"];
    if let Some(dsn) = dsn {
        args.extend(["--postgres", dsn]);
    }
    let out = tool(&args);
    let stdout = succeeded("gak host-protocol", &out);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.contains(" passed, 0 failed, "), "{stdout}");
    let passed: usize = last
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        passed >= if dsn.is_some() { 23 } else { 17 },
        "only {passed} cases ran:\n{stdout}"
    );
    let mut replays = vec![
        "fuzz/sql.json [sqlite]",
        "fuzz/passwords.json [open]",
        "fuzz/passwords.json [cli]",
    ];
    if dsn.is_some() {
        replays.extend([
            "fuzz/sql.json [postgres]",
            "fuzz/retries.json [postgres] write-fenced",
            "fuzz/retries.json [postgres] with-downstream",
        ]);
    }
    for replay in replays {
        let line = format!("ok   {replay}: ");
        assert!(
            stdout.lines().any(|l| l.starts_with(&line)),
            "no {line:?} line:\n{stdout}"
        );
    }
    for skip in stdout.lines().filter(|l| l.starts_with("SKIP")) {
        let scripted =
            skip.contains("[scripted]") && skip.contains("the Rust host's transaction loop");
        let no_postgres = dsn.is_none() && skip.contains("[postgres]");
        assert!(
            scripted || no_postgres,
            "a case skipped that applies to this host: {skip}"
        );
    }
}

fn gofmt() {
    let out = Command::new("gofmt")
        .args(["-l", "."])
        .current_dir(goenv::package())
        .output()
        .expect("run gofmt");
    let listed = succeeded("gofmt -l .", &out);
    assert!(listed.trim().is_empty(), "not gofmt'ed:\n{listed}");
}

/// Copy the files (recursively) of `from` into `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let path = entry.expect("entry").path();
        let dest = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).expect("copy");
        }
    }
}

/// A copy of the package, its header `gak.h` passed through `edit`, with a
/// program that opens a kernel: its output and status.
fn open_against(name: &str, edit: impl Fn(&str) -> String) -> Output {
    let dir = scratch(name);
    copy_tree(&goenv::package(), &dir.join("host/go"));
    let header = std::fs::read_to_string(cenv::package().join("include/gak.h")).expect("gak.h");
    std::fs::create_dir_all(dir.join("host/c/include")).expect("mkdir");
    std::fs::write(dir.join("host/c/include/gak.h"), edit(&header)).expect("gak.h");
    let main = dir.join("host/go/cmd/abicheck");
    std::fs::create_dir_all(&main).expect("mkdir");
    std::fs::write(
        main.join("main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\n\tgak \"github.com/gak-kernel/gak/host/go\"\n)\n\n\
         func main() {\n\tk, err := gak.Open(\"memory:\")\n\tif err != nil {\n\t\tfmt.Println(gak.Code(err), err)\n\t\tos.Exit(3)\n\t}\n\
         \t_ = k.Close()\n\tfmt.Println(\"opened\")\n}\n",
    )
    .expect("main.go");
    let bin = dir.join("abicheck");
    let built = go(
        &["build", "-o", &bin.display().to_string(), "./cmd/abicheck"],
        &dir.join("host/go"),
        &[],
    );
    succeeded(&format!("go build ({name})"), &built);
    Command::new(&bin).output().expect("run the program")
}

/// A Go package compiled against one `gak.h` and linked with a libgak of
/// another ABI refuses it when it loads, with a sentence naming both; the
/// same copy against the real header opens (the check has teeth).
fn a_stale_build_is_refused() {
    let same = open_against("abi-same", str::to_owned);
    assert_eq!(
        succeeded("the copy against the real gak.h", &same).trim(),
        "opened"
    );
    let header = std::fs::read_to_string(cenv::package().join("include/gak.h")).expect("gak.h");
    let version: u32 = header
        .lines()
        .find_map(|l| l.strip_prefix("#define GAK_ABI_VERSION "))
        .and_then(|v| v.trim().parse().ok())
        .expect("gak.h defines GAK_ABI_VERSION");
    let stale = version + 100;
    let out = open_against("abi-stale", |h| {
        h.replace(
            &format!("#define GAK_ABI_VERSION {version}\n"),
            &format!("#define GAK_ABI_VERSION {stale}\n"),
        )
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        cenv::report("the stale copy", &out)
    );
    for want in [
        "storage ".to_owned(),
        format!("libgak.a is ABI {version} ("),
        format!("compiled against a gak.h of ABI {stale} ("),
    ] {
        assert!(stdout.contains(&want), "no {want:?} in:\n{stdout}");
    }
}

/// `cmd/gak-latency` runs and prints what `host/latency.py` parses.
fn latency_tool() {
    let out = go(&["run", "./cmd/gak-latency", "20"], &goenv::package(), &[]);
    let stdout = succeeded("go run ./cmd/gak-latency 20", &out);
    for (store, label) in [
        ("memory:", "taskboard.claim (fresh task)"),
        ("sqlite:", "sideeffect.acquire (fresh key)"),
        ("memory:", "sideeffect.acquire (replayed key)"),
    ] {
        assert!(
            cenv::latency_line(&stdout, store, label),
            "no {label:?} on {store}:\n{stdout}"
        );
    }
}

/// The README's "Embed it from Go": its code block in a new module, set up
/// with the README's commands.
fn readme_snippet() {
    let readme = std::fs::read_to_string(pyenv::repo().join("README.md")).expect("README");
    let section = readme
        .split("## Embed it from Go")
        .nth(1)
        .expect("README has \"Embed it from Go\"");
    let code = section
        .split("```go\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a ```go block in the section");
    let want = code
        .lines()
        .find_map(|l| l.trim().strip_prefix("// Output: "))
        .expect("the snippet says its output");
    let dir = scratch("readme");
    let module = goenv::package();
    let replace = format!(
        "-replace=github.com/gak-kernel/gak/host/go={}",
        module.display()
    );
    succeeded(
        "go mod init",
        &go(&["mod", "init", "example.com/onboarding"], &dir, &[]),
    );
    let edit = go(
        &[
            "mod",
            "edit",
            "-require=github.com/gak-kernel/gak/host/go@v0.0.0",
            &replace,
        ],
        &dir,
        &[],
    );
    succeeded("go mod edit", &edit);
    std::fs::write(dir.join("main.go"), code).expect("main.go");
    let stdout = succeeded("go run .", &go(&["run", "."], &dir, &[]));
    assert_eq!(stdout.trim(), want, "the snippet printed something else");
}

fn main() {
    let mut suite = Suite::new();
    let go = &goenv::TOOLCHAIN;
    let go_pg = &goenv::TOOLCHAIN_AND_POSTGRES;
    suite.needs(go, "go::vet", |_| vet());
    suite.needs(go, "go::test_race", |_| {
        test_race(pg::probe().ok().as_deref())
    });
    suite.needs(go, "go::conformance_memory", |_| conformance("memory:"));
    suite.needs(go, "go::conformance_sqlite", |_| {
        let dir = scratch("vectors-sqlite");
        conformance(&format!("sqlite:{}", dir.join("v.db").display()));
    });
    suite.needs(go_pg, "go::conformance_postgres", |dsn| {
        let schema = format!("gak_go_{}", std::process::id());
        let sep = if dsn.contains('?') { '&' } else { '?' };
        conformance(&format!("{dsn}{sep}schema={schema}"));
    });
    suite.needs(go, "go::conformance_fails_a_wrong_vector", |_| {
        conformance_fails_a_wrong_vector()
    });
    suite.needs(go, "go::component_flag", |_| component_flag());
    suite.needs(go, "go::host_protocol", |_| host_protocol(None));
    suite.needs(go_pg, "go::host_protocol_postgres", |dsn| {
        host_protocol(Some(dsn))
    });
    suite.needs(go, "go::readme_snippet", |_| readme_snippet());
    suite.needs(go, "go::latency_tool", |_| latency_tool());
    suite.needs(go, "go::gofmt", |_| gofmt());
    suite.needs(go, "go::a_stale_build_is_refused", |_| {
        a_stale_build_is_refused()
    });
    suite.run();
}
