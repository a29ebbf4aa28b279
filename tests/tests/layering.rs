//! The layering is checked, not just drawn:
//! - the rules crate (`guest/`) depends on nothing host-side and on no I/O
//!   crate: its judgement must compile into the component and unit-test
//!   natively, with every effect going through the `Txn` trait;
//! - its test-only helpers (`testing` feature) are off in a normal build of
//!   `gak` and of the component;
//! - the component shim (`guest/component/src/lib.rs`) stays glue: no
//!   control flow outside the conversion module, and a line budget;
//! - a store binding never reaches into another binding
//!   (`host/rust/src/store/*`);
//! - the library is not the tool: `gak`'s dependency tree holds no argument
//!   parser, plotter, progress bar or log subscriber (those are `gak-cli`'s);
//! - the library's modules import one way (no circle), with floors: the
//!   engine below the kernel, the kernel below the typed API and the
//!   blocking layer, the builder beside the kernel (nothing low reaches up
//!   for a bench probe);
//! - the rules' modules (`guest/src`) import one way too.
//!
//! Test code (`tests.rs` files, `#[cfg(test)] mod tests { … }`) is not part
//! of the graph: a test may reach anything.
//!
//! Each check is a function of the text or metadata it reads, and each has a
//! self-check feeding it a violation, so the check itself cannot go blind.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root")
        .to_path_buf()
}

/// Run cargo (offline first: every package a build needs is present).
fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut last = String::new();
    for offline in [true, false] {
        let mut cmd = Command::new(&cargo);
        cmd.args(args).arg("--locked").current_dir(root());
        if offline {
            cmd.arg("--offline");
        }
        let out = cmd.output().expect("run cargo");
        if out.status.success() {
            return String::from_utf8(out.stdout).expect("utf-8");
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
    }
    panic!("cargo {args:?} failed: {last}")
}

fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().expect("rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc names its host")
        .to_owned()
}

// ------------------------------------------------------------- the rules crate

/// What the rules crate may depend on directly (normal dependencies), and
/// why. A new dependency is a decision: add it here with its reason.
const RULES_DIRECT: [(&str, &str); 4] = [
    ("serde", "records as data"),
    ("serde_json", "the stored format is JSON"),
    ("sha2", "capabilities are stored as SHA-256 digests"),
    ("base64", "results are stored as base64"),
];

/// Crates that mean host-side code or I/O; none may be reachable from the
/// rules crate's normal dependencies.
const FORBIDDEN: [&str; 24] = [
    "gak",
    "gak-tests",
    "gak-examples",
    "wasmtime",
    "wasmtime-wasi",
    "wit-bindgen",
    "getrandom",
    "tokio",
    "mio",
    "socket2",
    "futures-executor",
    "async-std",
    "rusqlite",
    "libsqlite3-sys",
    "tokio-postgres",
    "postgres",
    "postgres-protocol",
    "rustls",
    "openssl",
    "native-tls",
    "hyper",
    "reqwest",
    "tempfile",
    "tracing",
];

/// The rules crate's normal dependencies: the direct ones, and the whole
/// closure, from `cargo metadata` output.
fn rules_dependencies(metadata: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let name_of: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: BTreeMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .expect("a resolve")
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let normal_deps = |id: &str| -> Vec<String> {
        nodes[id]["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .expect("dep kinds")
                    .iter()
                    .any(|k| k["kind"].is_null() || k["kind"] == "build")
            })
            .map(|d| d["pkg"].as_str().unwrap().to_owned())
            .collect()
    };
    let rules = name_of
        .iter()
        .find(|(_, name)| **name == "gak-rules")
        .map(|(id, _)| *id)
        .expect("gak-rules in the metadata");
    let direct: BTreeSet<String> = normal_deps(rules)
        .iter()
        .map(|id| name_of[id.as_str()].to_owned())
        .collect();
    let mut seen = BTreeSet::new();
    let mut todo = normal_deps(rules);
    while let Some(id) = todo.pop() {
        if seen.insert(id.clone()) {
            todo.extend(normal_deps(&id));
        }
    }
    let closure = seen
        .iter()
        .map(|id| name_of[id.as_str()].to_owned())
        .collect();
    (direct, closure)
}

/// Err names every layering violation in the rules crate's dependencies.
fn check_rules_dependencies(
    direct: &BTreeSet<String>,
    closure: &BTreeSet<String>,
) -> Result<(), String> {
    let mut wrong = Vec::new();
    for dep in direct {
        if !RULES_DIRECT.iter().any(|(name, _)| name == dep) {
            wrong.push(format!(
                "gak-rules depends on {dep}, which is not in the allowed list"
            ));
        }
    }
    for dep in closure {
        if FORBIDDEN.contains(&dep.as_str()) {
            wrong.push(format!(
                "gak-rules reaches {dep} (host-side or I/O) through its dependencies"
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

#[test]
fn the_rules_crate_depends_on_nothing_host_side_or_io() {
    let metadata: Value = serde_json::from_str(&cargo(&[
        "metadata",
        "--format-version",
        "1",
        "--filter-platform",
        &host_triple(),
        "--manifest-path",
        "guest/Cargo.toml",
    ]))
    .expect("cargo metadata is JSON");
    let (direct, closure) = rules_dependencies(&metadata);
    assert!(direct.contains("serde_json"), "{direct:?}");
    check_rules_dependencies(&direct, &closure).unwrap_or_else(|why| panic!("{why}"));

    // The check has teeth.
    let with = |extra: &str| {
        let mut d = direct.clone();
        d.insert(extra.into());
        let mut c = closure.clone();
        c.insert(extra.into());
        (d, c)
    };
    for bad in ["tokio", "rusqlite", "gak", "wasmtime"] {
        let (d, c) = with(bad);
        assert!(check_rules_dependencies(&d, &c).is_err(), "{bad} passed");
    }
    let mut sneaky = closure.clone();
    sneaky.insert("mio".into());
    assert!(check_rules_dependencies(&direct, &sneaky).is_err());
}

/// The `testing` feature's line in `cargo tree -f "{p} [{f}]"` output.
fn rules_features(tree: &str) -> Vec<String> {
    tree.lines()
        .filter(|l| l.contains("gak-rules v"))
        .map(|l| {
            l.rsplit_once('[')
                .and_then(|(_, f)| f.split_once(']'))
                .map_or(String::new(), |(f, _)| f.to_owned())
        })
        .collect()
}

#[test]
fn a_normal_build_does_not_enable_the_testing_helpers() {
    let gak = cargo(&["tree", "-p", "gak", "-e", "normal,build", "-f", "{p} [{f}]"]);
    let component = cargo(&[
        "tree",
        "--manifest-path",
        "guest/component/Cargo.toml",
        "--target",
        "wasm32-wasip2",
        "-e",
        "normal,build",
        "-f",
        "{p} [{f}]",
    ]);
    for (what, tree) in [("gak", gak), ("the component", component)] {
        let features = rules_features(&tree);
        assert!(
            !features.is_empty(),
            "{what} does not build gak-rules:\n{tree}"
        );
        for f in &features {
            assert!(
                !f.split(',').any(|f| f == "testing"),
                "a normal build of {what} enables gak-rules/testing:\n{tree}"
            );
        }
    }
    // The check has teeth.
    let enabled = "gak v0.1.0 (/x) []\n├── gak-rules v0.1.0 (/y) [testing]\n";
    assert_eq!(rules_features(enabled), ["testing"]);
}

// ----------------------------------------------------------- the component shim

/// The shim's line budget: today ~210 lines of glue.
const SHIM_LINES: usize = 320;

/// Control flow the shim may keep outside `convert.rs`, by exact (trimmed)
/// line. Each would be a conversion that could move into `convert.rs`
/// (generated from the WIT); the list only ever shrinks, and is empty.
const SHIM_ALLOWED: [&str; 0] = [];

/// Code without comments or string literals (so a keyword in a doc or a
/// message does not count).
fn code_only(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        match (in_str, c) {
            (false, '/') if chars.peek() == Some(&'/') => break,
            (false, '"') => in_str = true,
            (true, '\\') => {
                chars.next();
            }
            (true, '"') => in_str = false,
            (false, c) => out.push(c),
            (true, _) => {}
        }
    }
    out
}

/// Err lists the shim's lines that decide something, and a blown budget.
fn check_shim(source: &str) -> Result<(), String> {
    let mut wrong = Vec::new();
    let lines = source.lines().count();
    if lines > SHIM_LINES {
        wrong.push(format!(
            "{lines} lines (budget {SHIM_LINES}): logic belongs in gak-rules"
        ));
    }
    for (n, line) in source.lines().enumerate() {
        let code = code_only(line);
        let words: Vec<&str> = code
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let control = words
            .iter()
            .any(|w| matches!(*w, "if" | "match" | "loop" | "while"))
            // `for` as a loop; `impl Trait for Type` is not one.
            || (words.contains(&"for") && words.contains(&"in") && !words.contains(&"impl"));
        if control && !SHIM_ALLOWED.contains(&line.trim()) {
            wrong.push(format!("line {}: {}", n + 1, line.trim()));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the component shim grew logic (move it into gak-rules, or conversions into convert.rs):\n{}",
            wrong.join("\n")
        ))
    }
}

#[test]
fn the_component_shim_is_only_glue() {
    let source = std::fs::read_to_string(root().join("guest/component/src/lib.rs"))
        .expect("the shim's source");
    check_shim(&source).unwrap_or_else(|why| panic!("{why}"));
    // The check has teeth.
    for bad in [
        "    if ttl == 0 { return Err(Error::InvalidInput(String::new())); }",
        "    let x = match state { _ => 1 };",
        "    for t in tasks { store::put(t) }",
        "    while n > 0 { n -= 1 }",
        "    loop { break }",
    ] {
        assert!(check_shim(&format!("{source}\n{bad}\n")).is_err(), "{bad}");
    }
    assert!(check_shim(&format!("{source}{}", "\n".repeat(SHIM_LINES))).is_err());
    assert!(check_shim(&format!("{source}\n// if this were logic\n")).is_ok());
    assert!(check_shim(&format!("{source}\nimpl Foo for Bar {{}}\n")).is_ok());
}

// -------------------------------------------------------------- the bindings

/// Each binding under `host/rust/src/store/`: its name and source files.
/// Files of `store/` every binding may use: the binding interface
/// (`mod.rs`) and the store facts generated from the WIT and
/// `host/sql/store.json` (`facts.rs`), and the store-URL grammar every
/// binding and message shares (`url.rs`).
const SHARED_STORE_MODULES: [&str; 3] = ["mod", "facts", "url"];

fn bindings() -> BTreeMap<String, Vec<(PathBuf, String)>> {
    let dir = root().join("host/rust/src/store");
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("the store bindings") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        let files: Vec<PathBuf> = if path.is_dir() {
            std::fs::read_dir(&path)
                .expect("a binding's folder")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect()
        } else if !SHARED_STORE_MODULES.contains(&name.as_str())
            && path.extension().is_some_and(|e| e == "rs")
        {
            vec![path.clone()]
        } else {
            continue;
        };
        let sources = files
            .into_iter()
            .map(|p| {
                let text = std::fs::read_to_string(&p).expect("source");
                (p, text)
            })
            .collect();
        found.insert(name, sources);
    }
    found
}

/// What marks a reach into each binding: its module path, its driver.
fn marks(binding: &str) -> Vec<String> {
    let mut m = vec![
        format!("super::{binding}"),
        format!("store::{binding}"),
        format!("super::super::{binding}"),
    ];
    match binding {
        "sqlite" => m.extend(["rusqlite".to_owned()]),
        "postgres" => m.extend(["tokio_postgres".to_owned()]),
        _ => {}
    }
    m
}

/// Err lists every place where one binding's code names another binding.
fn check_bindings(bindings: &BTreeMap<String, Vec<(PathBuf, String)>>) -> Result<(), String> {
    let mut wrong = Vec::new();
    for (name, files) in bindings {
        for other in bindings.keys().filter(|o| *o != name) {
            let marks = marks(other);
            for (path, text) in files {
                for (n, line) in text.lines().enumerate() {
                    let code = code_only(line);
                    if let Some(mark) = marks.iter().find(|m| code.contains(m.as_str())) {
                        wrong.push(format!(
                            "{}:{}: the {name} binding reaches into {other} ({mark})",
                            path.display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

#[test]
fn no_store_binding_imports_another() {
    let found = bindings();
    for expected in ["memory", "sqlite", "postgres"] {
        assert!(found.contains_key(expected), "{found:?}");
    }
    check_bindings(&found).unwrap_or_else(|why| panic!("{why}"));
    // The check has teeth.
    for (into, line) in [
        ("sqlite", "use super::memory::MemoryBackend;"),
        ("memory", "let c: rusqlite::Connection = todo();"),
        ("postgres", "use crate::store::sqlite::SqliteBackend;"),
        ("sqlite", "use super::super::postgres::PostgresBackend;"),
    ] {
        let mut bad = found.clone();
        bad.get_mut(into)
            .expect("a binding")
            .push((PathBuf::from("injected.rs"), line.to_owned()));
        assert!(check_bindings(&bad).is_err(), "{line} in {into} passed");
    }
}

// ------------------------------------------------------ the library and the tool

/// Crates only a command-line tool needs.
const TOOL_CRATES: [&str; 4] = ["clap", "plotters", "indicatif", "tracing-subscriber"];

/// The tool crates in a `cargo tree -e normal --prefix none -f "{p}"` listing.
fn tool_crates_in(tree: &str) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| TOOL_CRATES.contains(name))
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_library_pulls_in_no_tool_crates() {
    let library = cargo(&[
        "tree", "-p", "gak", "-e", "normal", "--prefix", "none", "-f", "{p}",
    ]);
    assert!(library.contains("wasmtime v"), "no tree? {library}");
    assert_eq!(tool_crates_in(&library), Vec::<String>::new(), "{library}");
    // The tool has them; the check has teeth.
    let tool = cargo(&[
        "tree", "-p", "gak-cli", "-e", "normal", "--prefix", "none", "-f", "{p}",
    ]);
    assert_eq!(
        tool_crates_in(&tool),
        TOOL_CRATES
            .iter()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    );
}

/// The library's top-level modules and what each refers to (`crate::m`, or an
/// item `crate::Item` the root re-exports from `m`). Files under `m/` count as
/// `m`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    // `pub use m::{A, B};` and `pub use m::A;` at the root: item -> module.
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    for line in lib.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.trim_end_matches(';').split_once("::") else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            reexports.insert(
                item.to_owned(),
                module.trim_start_matches("crate::").to_owned(),
            );
        }
    }
    let mut files = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    walk(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in files {
        let relative = path.strip_prefix(src).expect("under src");
        let top = relative
            .components()
            .next()
            .expect("a component")
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" || path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source file");
        let refs = graph.entry(top.clone()).or_default();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            if line.trim() == "#[cfg(test)]"
                && lines
                    .peek()
                    .is_some_and(|next| next.starts_with("mod ") && next.ends_with('{'))
            {
                // A test module, to its closing brace at the margin.
                for inner in lines.by_ref() {
                    if inner == "}" {
                        break;
                    }
                }
                continue;
            }
            let code = code_only(line);
            for name in crate_references(&code) {
                let module = reexports.get(&name).cloned().unwrap_or(name);
                if module != top {
                    refs.insert(module);
                }
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for refs in graph.values_mut() {
        refs.retain(|r| modules.contains(r));
    }
    graph
}

/// The names that follow `crate::` in `code`, inside `{…}` groups too.
fn crate_references(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: the first word after `{` or a
            // comma at depth 0 (`kernel::{A, B}` counts as `kernel`).
            let mut depth = 0usize;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && (c.is_alphanumeric() || c == '_') => {
                        let w = word(&group[j..]);
                        if w != "self" {
                            out.push(w);
                        }
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(word(rest));
        }
    }
    out
}

/// A circle among the modules, if any (as `a -> b -> a`).
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle.join(" -> "));
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// Everything `from` reaches through the graph.
fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_owned()];
    while let Some(node) = todo.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if seen.insert(next.clone()) {
                todo.push(next.clone());
            }
        }
    }
    seen
}

/// No circle, and the floors: nothing below reaches what stands above it.
fn check_floors(graph: &BTreeMap<String, BTreeSet<String>>) -> Result<(), String> {
    if let Some(circle) = find_circle(graph) {
        return Err(format!("an import circle: {circle}"));
    }
    for (low, high) in [
        ("engine", "kernel"),
        ("kernel", "api"),
        ("kernel", "blocking"),
        ("kernel", "builder"),
        ("store", "kernel"),
        ("protocol", "kernel"),
    ] {
        if reaches(graph, low).contains(high) {
            return Err(format!("{low} reaches up to {high}"));
        }
    }
    Ok(())
}

#[test]
fn the_library_imports_one_way() {
    let graph = module_graph(&root().join("host/rust/src"));
    for expected in [
        "engine", "kernel", "api", "blocking", "builder", "store", "protocol",
    ] {
        assert!(graph.contains_key(expected), "{graph:?}");
    }
    check_floors(&graph).unwrap_or_else(|why| panic!("{why}\n{graph:#?}"));
    // The check has teeth: the circles this crate once had.
    for (from, to) in [
        ("engine", "blocking"),
        ("builder", "kernel"),
        ("store", "blocking"),
    ] {
        let mut bad = graph.clone();
        bad.entry(from.to_owned())
            .or_default()
            .insert(to.to_owned());
        if from == "builder" {
            bad.entry("kernel".to_owned())
                .or_default()
                .insert("builder".to_owned());
        }
        assert!(check_floors(&bad).is_err(), "{from} -> {to} passed");
    }
    assert_eq!(
        crate_references("use crate::{api::X, kernel::{A, B}, Kernel}; crate::store::open(x)"),
        ["api", "kernel", "Kernel", "store"]
    );
}

#[test]
fn the_rules_import_one_way() {
    let graph = module_graph(&root().join("guest/src"));
    for expected in [
        "taskboard",
        "retention",
        "sideeffect",
        "checkpoint",
        "keys",
        "txn",
    ] {
        assert!(graph.contains_key(expected), "{graph:?}");
    }
    if let Some(circle) = find_circle(&graph) {
        panic!("an import circle in the rules: {circle}\n{graph:#?}");
    }
    // The check has teeth: the circle the rules once had (`release_held`
    // in retention, called by the taskboard, which retention reads).
    let mut bad = graph.clone();
    bad.entry("taskboard".to_owned())
        .or_default()
        .insert("retention".to_owned());
    assert!(find_circle(&bad).is_some(), "taskboard -> retention passed");
}
