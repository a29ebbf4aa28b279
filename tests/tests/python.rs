//! The Python host (`host/python`), run by `cargo test`: its pytest suite,
//! the conformance vectors on memory / SQLite / PostgreSQL through
//! `python -m gak conformance`, the demo and the README snippet. Each is a
//! named trial; without Python 3.11+ (or PostgreSQL) it is IGNORED with the
//! reason printed, and under `CI=true` it FAILS.
use gak_tests::pyenv::{self, Ready, gate};
use libtest_mimic::{Arguments, Failed};

fn env(r: &Ready) -> Vec<(&'static str, String)> {
    vec![("GAK_COMPONENT", r.component.display().to_string())]
}

fn run_python(r: &Ready, args: &[&str], extra: &[(&str, &str)]) -> Result<String, Failed> {
    let owned = env(r);
    let mut all: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(extra);
    pyenv::python(&r.python, args, &all)
}

fn vectors(r: &Ready, store: &str) -> Result<(), Failed> {
    let out = run_python(r, &["-m", "gak", "conformance", "--store", store], &[])?;
    let last = out.lines().last().unwrap_or_default();
    let want = format!("{} passed, 0 failed", gak_tests::builtin_scenarios());
    if last != want {
        return Err(format!("closing line {last:?}, expected {want:?}:\n{out}").into());
    }
    println!("{store}: {last}");
    Ok(())
}

fn readme_snippet(r: &Ready) -> Result<(), Failed> {
    let readme = std::fs::read_to_string(pyenv::repo().join("README.md"))?;
    let section = readme
        .split("## Embed it from Python")
        .nth(1)
        .ok_or("README.md has no \"## Embed it from Python\" section")?;
    let code = section
        .split("```python\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .ok_or("the section has no ```python block")?;
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("snippet.py");
    std::fs::write(&script, code)?;
    let out = std::process::Command::new(&r.python)
        .arg(&script)
        .current_dir(dir.path())
        .env("GAK_COMPONENT", &r.component)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "the README snippet failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    print!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}

fn demo(r: &Ready) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite:{}", dir.path().join("demo.db").display());
    let out = run_python(r, &["-m", "gak", "demo", "--store", &url], &[])?;
    let numbered = out
        .lines()
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .count();
    if numbered != 6 || !out.contains("zombie worker-a's save refused: fence-stale") {
        return Err(format!("unexpected demo output:\n{out}").into());
    }
    Ok(())
}

fn failing_vector_fails(r: &Ready) -> Result<(), Failed> {
    // Discrimination: a vector that expects the wrong answer must fail the
    // runner, name the step and exit non-zero.
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("wrong.json");
    std::fs::write(
        &file,
        r#"[{"scenario": "wrong", "steps": [
            {"call": "taskboard.get", "args": {"id": "nope"}, "ok": {"id": "nope"}}]}]"#,
    )?;
    let out = std::process::Command::new(&r.python)
        .args(["-m", "gak", "conformance"])
        .arg(&file)
        .env("GAK_COMPONENT", &r.component)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() || !text.contains("0 passed, 1 failed") || !text.contains("step 0") {
        return Err(format!("a wrong vector was not reported: {text}").into());
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let ready = pyenv::ready();
    let postgres = ready.clone().and_then(|r| {
        pyenv::postgres().map(|dsn| {
            let sep = if dsn.contains('?') { '&' } else { '?' };
            (
                r,
                format!("{dsn}{sep}schema=gak_pyvec_{}", std::process::id()),
            )
        })
    });
    let sqlite_dir = tempfile::tempdir().expect("temp dir");
    let sqlite_url = format!("sqlite:{}", sqlite_dir.path().join("v.db").display());
    let pg_dsn = pyenv::postgres();
    let trials = vec![
        gate("python::pytest", &ready, move |r| {
            let pg = pg_dsn.unwrap_or_default();
            let out = run_python(
                r,
                &["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                &[("GAK_PG_DSN", pg.as_str())],
            )?;
            println!("pytest: {}", out.lines().last().unwrap_or_default());
            Ok(())
        }),
        gate("python::vectors_memory", &ready, |r| vectors(r, "memory:")),
        gate("python::vectors_sqlite", &ready, move |r| {
            vectors(r, &sqlite_url)
        }),
        gate("python::vectors_postgres", &postgres, |(r, url)| {
            vectors(r, url)
        }),
        gate(
            "python::conformance_fails_a_wrong_vector",
            &ready,
            failing_vector_fails,
        ),
        gate("python::demo", &ready, demo),
        gate("python::readme_snippet", &ready, readme_snippet),
    ];
    let conclusion = libtest_mimic::run(&args, trials);
    drop(sqlite_dir);
    conclusion.exit();
}
