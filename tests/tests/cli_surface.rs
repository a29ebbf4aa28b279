//! The `gak` binary's own surface: help, logging, the component export, and
//! the demo and conformance commands whose output is a public interface.
use std::path::Path;

use gak_tests::cli::{Operator, run_gak};

fn sqlite(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("ops.db").display())
}

#[test]
fn help_names_every_store_form_and_the_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["--help"][..], &["-h"], &["help"]] {
        let ran = run_gak(dir.path(), args, &[], &[], None);
        ran.expect_code(0);
        for needle in [
            "memory:",
            "sqlite:PATH",
            "postgres://",
            "schema=",
            "Exit codes",
            "3 storage",
        ] {
            assert!(
                ran.stdout.contains(needle),
                "gak {args:?} lacks {needle}:\n{}",
                ran.stdout
            );
        }
    }
    let store_help = run_gak(dir.path(), &["tasks", "list", "--help"], &[], &[], None);
    assert!(
        store_help.stdout.contains("postgres://"),
        "{}",
        store_help.stdout
    );
}

#[test]
fn logs_go_to_stderr_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = Operator::new(&sqlite(dir.path()), dir.path());
    op.run_with(&["tasks", "seed", "-"], &[], Some("[]"))
        .expect_code(0);
    let quiet = op.run(&["tasks", "list", "--json"]);
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);
    let logged = op.run_with(&["tasks", "list", "--json"], &[("GAK_LOG", "debug")], None);
    assert!(
        logged.stderr.contains("opened the store"),
        "{}",
        logged.stderr
    );
    assert_eq!(logged.json(), quiet.json(), "logs never reach stdout");
}

#[test]
fn component_writes_the_exact_bytes_and_the_wit_package() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_gak(
        dir.path(),
        &["component", "--out", "gak.wasm", "--wit", "wit"],
        &[],
        &[],
        None,
    );
    ran.expect_code(0);
    assert_eq!(
        std::fs::read(dir.path().join("gak.wasm")).unwrap(),
        gak::COMPONENT_WASM
    );
    let repo_wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&repo_wit).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "wit") {
            let name = path.file_name().unwrap().to_owned();
            let written = std::fs::read_to_string(dir.path().join("wit").join(&name)).unwrap();
            assert_eq!(written, std::fs::read_to_string(&path).unwrap(), "{name:?}");
            names.push(name);
        }
    }
    assert!(names.len() >= 8, "{names:?}");
    let piped = std::process::Command::new(gak_tests::cli::gak_bin())
        .args(["component", "--out", "-"])
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert_eq!(
        piped.stdout,
        gak::COMPONENT_WASM,
        "stdout carries the bytes alone"
    );
}

#[test]
fn conformance_and_demo_keep_their_output() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_gak(dir.path(), &["conformance", "--progress"], &[], &[], None);
    ran.expect_code(0);
    let last = ran.stdout.lines().last().unwrap();
    let (passed, failed) = last.split_once(" passed, ").expect("closing line");
    assert!(
        passed.parse::<usize>().unwrap() > 20 && failed == "0 failed",
        "{last}"
    );
    assert!(
        ran.stdout
            .lines()
            .filter(|l| l.starts_with("ok   builtin:"))
            .count()
            > 20
    );
    assert!(
        ran.stderr.is_empty(),
        "no bar frames when stderr is not a terminal: {}",
        ran.stderr
    );

    std::fs::write(dir.path().join("broken.json"), "{not json").unwrap();
    let bad = run_gak(dir.path(), &["conformance", "broken.json"], &[], &[], None);
    bad.expect_code(1);
    assert!(
        bad.stdout.starts_with("FAIL broken.json") && bad.stdout.ends_with("0 passed, 1 failed\n"),
        "{}",
        bad.stdout
    );

    let store = sqlite(dir.path());
    let demo = run_gak(dir.path(), &["demo", "--store", &store], &[], &[], None);
    demo.expect_code(0);
    let lines: Vec<&str> = demo.stdout.lines().collect();
    assert!(
        lines[0].starts_with("gak demo on sqlite:"),
        "{}",
        demo.stdout
    );
    assert_eq!(lines.len(), 7, "{}", demo.stdout);
    for (i, line) in lines[1..].iter().enumerate() {
        assert!(line.starts_with(&format!("{}. ", i + 1)), "{line}");
    }
}
