//! The README's "Operating gak" section cannot rot: every `$ gak …` line of
//! its console blocks is run, in order, on a fresh SQLite store, and its
//! output is compared with the output shown below it. Times, relative times
//! and capabilities (32 hex digits) differ between runs: they are compared
//! by shape, and a capability shown in the README stands for the one the
//! real run minted (a later `--token`/`--claim` gets the real one).
use std::collections::HashMap;
use std::path::Path;

use gak_tests::cli::Operator;
use gak_tests::worked;

const WORKER: &str = env!("CARGO_BIN_EXE_gak-effect-worker");
const README: &str = include_str!("../../README.md");

/// One step of the example: a command and the output it should print, or
/// the marked comment where the worker dies.
#[derive(Debug)]
enum Step {
    Export(String, String),
    Gak(Vec<String>, Vec<String>),
    WorkerDies,
}

fn section() -> &'static str {
    let start = README
        .find("## Operating gak")
        .expect("the README has an Operating gak section");
    let rest = &README[start + 3..];
    let end = rest.find("\n## ").map_or(rest.len(), |e| e);
    &rest[..end]
}

/// The ```json block (the board file) and every step of the ```console blocks.
fn parse() -> (String, Vec<Step>) {
    let mut json = None;
    let mut steps = Vec::new();
    let mut block: Option<&str> = None;
    for line in section().lines() {
        match (block, line.trim_end()) {
            (None, fence) if fence.starts_with("```") => block = Some(&line[3..]),
            (Some(_), "```") => block = None,
            (Some("json"), text) => {
                let board = json.get_or_insert_with(String::new);
                board.push_str(text);
                board.push('\n');
            }
            (Some("console"), text) => {
                if let Some(cmd) = text.strip_prefix("$ ") {
                    let words: Vec<String> = cmd.split_whitespace().map(str::to_owned).collect();
                    if words[0] == "export" {
                        let (k, v) = words[1].split_once('=').expect("export K=V");
                        steps.push(Step::Export(k.to_owned(), v.to_owned()));
                    } else {
                        assert_eq!(words[0], "gak", "only gak commands in the example: {cmd}");
                        steps.push(Step::Gak(words[1..].to_vec(), Vec::new()));
                    }
                } else if text.starts_with("# ") && text.contains("SIGKILL") {
                    steps.push(Step::WorkerDies);
                } else if let Some(Step::Gak(_, out)) = steps.last_mut() {
                    out.push(text.to_owned());
                }
            }
            _ => {}
        }
    }
    (json.expect("the example shows the board file"), steps)
}

fn is_hex128(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn is_utc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20 && b[4] == b'-' && b[10] == b'T' && b[19] == b'Z'
}

/// A line's words with times and relative times replaced by their shape.
fn shape(line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let (w, next) = (words[i], words.get(i + 1).copied().unwrap_or(""));
        if (w == "(in" && next.ends_with(')')) || (w.starts_with('(') && next == "ago)") {
            out.push("(<relative>)".to_owned());
            i += 2;
            continue;
        }
        out.push(if is_utc(w) {
            "<utc>".to_owned()
        } else {
            w.to_owned()
        });
        i += 1;
    }
    out
}

/// Compare shown and actual output; learn which real capability each shown
/// one stands for.
fn compare(cmd: &str, shown: &[String], actual: &str, caps: &mut HashMap<String, String>) {
    let actual: Vec<&str> = actual.lines().collect();
    assert_eq!(
        shown.len(),
        actual.len(),
        "`gak {cmd}` printed {} lines, the README shows {}:\n{}",
        actual.len(),
        shown.len(),
        actual.join("\n")
    );
    for (s, a) in shown.iter().zip(&actual) {
        let (sw, aw) = (shape(s), shape(a));
        assert_eq!(
            sw.len(),
            aw.len(),
            "`gak {cmd}`: README line {s:?}, actual {a:?}"
        );
        for (x, y) in sw.iter().zip(&aw) {
            if is_hex128(x) && is_hex128(y) {
                let real = caps.entry(x.clone()).or_insert_with(|| y.clone());
                assert_eq!(real, y, "`gak {cmd}`: {x} stands for two capabilities");
            } else {
                assert_eq!(x, y, "`gak {cmd}`: README line {s:?}, actual {a:?}");
            }
        }
    }
}

#[test]
fn every_gak_command_in_the_operating_section_runs_as_shown() {
    let (board, steps) = parse();
    let commands = steps.iter().filter(|s| matches!(s, Step::Gak(..))).count();
    assert!(commands >= 8, "the example lost its commands: {steps:?}");
    assert!(
        steps.iter().any(|s| matches!(s, Step::WorkerDies)),
        "no worker dies in the example"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tasks.json"), board).unwrap();
    let mut op: Option<Operator> = None;
    let mut caps: HashMap<String, String> = HashMap::new();
    for step in &steps {
        match step {
            Step::Export(k, v) => {
                assert_eq!(k, "GAK_STORE");
                op = Some(Operator::new(v, dir.path()));
            }
            Step::WorkerDies => {
                let op = op.as_mut().expect("export GAK_STORE first");
                let store = absolute(op.store(), dir.path());
                worked::hold(Path::new(WORKER), &store).kill();
                op.poll_json(
                    &["effects", "list", "--state", "uncertain"],
                    worked::EXPIRY_DEADLINE,
                    |d| d["items"].as_array().is_some_and(|i| !i.is_empty()),
                );
            }
            Step::Gak(args, shown) => {
                let op = op.as_mut().expect("export GAK_STORE first");
                let real: Vec<String> = args
                    .iter()
                    .map(|a| caps.get(a).cloned().unwrap_or_else(|| a.clone()))
                    .collect();
                let real: Vec<&str> = real.iter().map(String::as_str).collect();
                let ran = op.run(&real);
                ran.expect_code(0);
                compare(&args.join(" "), shown, &ran.stdout, &mut caps);
            }
        }
    }
    assert_eq!(
        worked::probe(
            Path::new(WORKER),
            &absolute(op.unwrap().store(), dir.path())
        ),
        "REPLAYED re_3PqX9",
        "the next attempt replays, as the README says"
    );
}

/// The worker runs in the test's directory: make a relative SQLite path
/// absolute.
fn absolute(store: &str, dir: &Path) -> String {
    match store.strip_prefix("sqlite:") {
        Some(path) if !path.starts_with('/') => format!("sqlite:{}", dir.join(path).display()),
        _ => store.to_owned(),
    }
}

#[test]
fn the_shape_compare_tolerates_only_times_and_capabilities() {
    let mut caps = HashMap::new();
    let shown = vec!["until  2026-12-01T09:40:16Z (in 29s)".to_owned()];
    compare(
        "x",
        &shown,
        "until  2030-01-01T00:00:00Z (3m ago)",
        &mut caps,
    );
    let wrong = std::panic::catch_unwind(|| {
        compare(
            "x",
            &["state  claimed".to_owned()],
            "state  open",
            &mut HashMap::new(),
        )
    });
    assert!(wrong.is_err(), "a different word must fail the comparison");
}
