//! `gak bench`: it runs on every store, its JSON has every figure it
//! promises, `--processes` and `--plot` work, bad input is a usage error,
//! and the SQL baseline decides claims and acquires as the rules do (so
//! `kernel / sql` compares equal work). Timings and ratios are never
//! asserted: only that figures exist and are sane.
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use gak::blocking::Kernel;
use gak::store::sqlite::{SqliteBackend, Synchronous};
use gak::{Acquired, Action, Error, ManualClock, TaskSeed};
use gak_cli::bench::sql::{Conn, Database};
use gak_tests::cli::gak_bin;
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};
use serde_json::Value;

fn main() {
    let mut suite = Suite::new();
    suite.test(
        "memory_json_has_every_op_and_impl_that_applies",
        memory_json,
    );
    suite.test("sqlite_runs_the_sql_and_ceiling_baselines", sqlite_figures);
    suite.test(
        "processes_on_sqlite_report_the_summed_figure",
        processes_on_sqlite,
    );
    suite.test("plot_writes_an_svg_with_a_line_per_impl", plot_svg);
    suite.test("bad_input_is_a_usage_error", bad_input);
    suite.test(
        "sql_decides_as_the_rules_do_on_sqlite",
        sql_equivalence_sqlite,
    );
    suite.needs(&POSTGRES, "postgres_runs_every_baseline", postgres_figures);
    suite.needs(
        &POSTGRES,
        "sql_decides_as_the_rules_do_on_postgres",
        sql_equivalence_postgres,
    );
    suite.run();
}

fn gak(args: &[&str], dir: &Path) -> Output {
    Command::new(gak_bin())
        .args(args)
        .current_dir(dir)
        .env_remove("GAK_STORE")
        .output()
        .expect("run gak")
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} exited {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run `gak bench ARGS --json FILE` in a temp dir; the parsed report.
fn bench(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "out.json"]);
    let out = gak(&all, dir.path());
    ok(&out, &all.join(" "));
    let text = std::fs::read_to_string(dir.path().join("out.json")).expect("the JSON file");
    serde_json::from_str(&text).expect("the JSON parses")
}

/// Every (op, impl, workers) in `want` has a sane result; nothing else is
/// reported.
fn assert_results(report: &Value, want: &[(&str, &str)], workers: &[u64]) {
    let results = report["results"].as_array().expect("results");
    for (op, imp) in want {
        for w in workers {
            let found: Vec<&Value> = results
                .iter()
                .filter(|r| r["op"] == *op && r["impl"] == *imp && r["workers"] == *w)
                .collect();
            assert_eq!(found.len(), 1, "{op} {imp} {w}: {results:#?}");
            let r = found[0];
            for field in ["ops_per_s", "p50_us", "p99_us"] {
                assert!(r[field].is_number(), "{op} {imp} {field}: {r}");
            }
            assert!(r["store"].is_string(), "{r}");
            let ops = r["ops_per_s"].as_f64().unwrap();
            assert!(ops > 0.0, "{op} {imp}: {r}");
            let (p50, p99) = (r["p50_us"].as_f64().unwrap(), r["p99_us"].as_f64().unwrap());
            assert!(p50 > 0.0 && p50 <= p99, "{op} {imp}: {r}");
        }
    }
    assert_eq!(
        results.len(),
        want.len() * workers.len(),
        "only what applies: {results:#?}"
    );
    let startup = &report["startup"];
    for field in [
        "compile_ms",
        "load_cached_ms",
        "instantiate_us",
        "instance_bytes",
        "component_bytes",
        "warm_start_ms",
    ] {
        let v = startup[field].as_f64();
        assert!(v.is_some_and(|v| v > 0.0), "startup {field}: {startup}");
    }
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);
}

const OPS: [&str; 8] = [
    "claim",
    "claim-hot",
    "acquire-complete",
    "acquire-replay",
    "save-if-newer",
    "build-plan",
    "drain",
    "drain-batch",
];

fn memory_json() {
    let report = bench(&[
        "--store",
        "memory:",
        "--seconds",
        "0.2",
        "--samples",
        "2",
        "--workers",
        "1,2",
    ]);
    let mut want: Vec<(&str, &str)> = Vec::new();
    for op in OPS {
        want.push((op, "kernel"));
        want.push((op, "native"));
    }
    want.push(("claim", "ceiling"));
    assert_results(&report, &want, &[1, 2]);
    let hot = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "claim-hot" && r["workers"] == 2)
        .unwrap();
    assert!(hot["refused"].is_u64(), "{hot}");
}

fn sql_ops(store: &str) -> Value {
    bench(&[
        "--store",
        store,
        "--op",
        "claim",
        "--op",
        "claim-hot",
        "--op",
        "acquire-complete",
        "--op",
        "acquire-replay",
        "--op",
        "drain",
        "--op",
        "drain-batch",
        "--seconds",
        "0.2",
        "--samples",
        "2",
        "--workers",
        "1,2",
    ])
}

fn sql_want() -> Vec<(&'static str, &'static str)> {
    let mut want = Vec::new();
    for op in [
        "claim",
        "claim-hot",
        "acquire-complete",
        "acquire-replay",
        "drain",
        "drain-batch",
    ] {
        for imp in ["kernel", "native", "sql"] {
            want.push((op, imp));
        }
    }
    want.push(("claim", "ceiling"));
    want
}

fn sqlite_figures() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("b.db").display());
    let report = sql_ops(&store);
    assert_results(&report, &sql_want(), &[1, 2]);
}

fn postgres_figures(dsn: &str) {
    let schema = pg::Schema::new(dsn, "bench");
    let report = sql_ops(&schema.url);
    assert_results(&report, &sql_want(), &[1, 2]);
    let store = report["results"][0]["store"].as_str().unwrap();
    assert!(store.contains(&schema.name), "{store}");
}

fn processes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let report = bench(&[
        "--store",
        &store,
        "--processes",
        "2",
        "--op",
        "claim",
        "--op",
        "claim-hot",
        "--impl",
        "kernel",
        "--impl",
        "sql",
        "--workers",
        "1",
        "--seconds",
        "0.3",
        "--samples",
        "2",
    ]);
    let want = [
        ("claim", "kernel"),
        ("claim", "sql"),
        ("claim-hot", "kernel"),
        ("claim-hot", "sql"),
    ];
    assert_results(&report, &want, &[1]);
    for r in report["results"].as_array().unwrap() {
        assert_eq!(r["processes"], 2, "{r}");
        // Summed: each sample's rate is the two processes' together, and
        // both processes' ops are counted.
        assert_eq!(r["samples"].as_array().unwrap().len(), 2, "{r}");
    }
}

fn plot_svg() {
    let dir = tempfile::tempdir().unwrap();
    let out = gak(
        &[
            "bench",
            "--store",
            "memory:",
            "--op",
            "claim",
            "--seconds",
            "0.1",
            "--samples",
            "1",
            "--workers",
            "1,2",
            "--plot",
            "p.svg",
        ],
        dir.path(),
    );
    ok(&out, "bench --plot");
    let svg = std::fs::read_to_string(dir.path().join("p.svg")).expect("the SVG");
    assert!(
        svg.trim_start().starts_with("<svg"),
        "{}",
        &svg[..svg.len().min(200)]
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    // kernel, native and ceiling: a data line each, in the implementation's
    // colour (the plot's palette: kernel red, native blue, ceiling grey).
    for (imp, colour) in [
        ("kernel", "#D62728"),
        ("native", "#1F77B4"),
        ("ceiling", "#7F7F7F"),
    ] {
        let line = format!("stroke=\"{colour}\" stroke-width=\"2\" points=");
        assert!(svg.contains(&line), "no {imp} line:\n{svg}");
    }
    for imp in ["kernel", "native", "ceiling"] {
        assert!(svg.contains(imp), "no {imp} in the legend");
    }
}

fn bad_input() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (vec!["bench", "--op", "teleport"], "unknown op"),
        (vec!["bench", "--impl", "assembly"], "unknown impl"),
        (vec!["bench", "--workers", "0"], "at least 1"),
        (vec!["bench", "--workers", "1,0"], "at least 1"),
        (vec!["bench", "--seconds", "0"], "seconds"),
        (
            vec!["bench", "--processes", "2"],
            "memory: lives inside one process",
        ),
        (vec!["bench", "--store", "nosuch://x"], "unknown store"),
    ] {
        let out = gak(&args, dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// An answer reduced to what both sides must agree on (not tokens).
fn claim_shape(r: Result<u64, Error>) -> String {
    match r {
        Ok(fence) => format!("claimed fence {fence}"),
        Err(e) => format!("refused {}", e.name()),
    }
}

fn acquire_shape(r: Result<Acquired, Error>) -> String {
    match r {
        Ok(Acquired::Granted(l)) => format!("granted fence {} until {}", l.fence, l.until),
        Ok(Acquired::Replayed(r)) => format!("replayed {}", String::from_utf8_lossy(&r)),
        Ok(Acquired::InFlight) => "in-flight".into(),
        Ok(Acquired::Uncertain(why)) => format!("uncertain {why}"),
        Ok(Acquired::Contended(until)) => format!("contended until {until}"),
        Ok(other) => format!("{other:?}"),
        Err(e) => format!("refused {}", e.name()),
    }
}

/// Claim and acquire scenarios through the kernel (a manual clock) and
/// the SQL baseline (the same instants), answer by answer.
fn equivalence(kernel: &Kernel, clock: &ManualClock, sql: &mut Conn) {
    let now = || gak::Clock::now(clock);
    let ttl = 1_000;
    let mut tokens = (String::new(), String::new());
    let claim = |sql: &mut Conn, id: &str, agent: &str, tokens: &mut (String, String)| {
        let k = kernel.taskboard().claim(id, agent, ttl).map(|t| {
            tokens.0 = t.token.clone().unwrap_or_default();
            t.fence
        });
        let s = sql
            .claim(id, agent, ttl, now())
            .expect("sql claim")
            .map(|c| {
                tokens.1 = c.token;
                c.fence
            });
        (claim_shape(k), claim_shape(s))
    };
    kernel.taskboard().seed(&[TaskSeed::new("t1")]).unwrap();
    sql.seed_tasks(&["t1".to_owned()]).unwrap();
    let steps = [
        ("missing task", "nope", "a", 0),
        ("fresh task", "t1", "a", 0),
        ("live claim held by another", "t1", "b", 0),
        ("the same claimer again, still live", "t1", "a", 999),
        ("expired: taken over with fence+1", "t1", "b", 1),
    ];
    for (what, id, agent, advance) in steps {
        clock.advance(advance);
        let (k, s) = claim(sql, id, agent, &mut tokens);
        assert_eq!(k, s, "{what}");
    }
    // Both minted a token of the same form (each its own).
    for token in [&tokens.0, &tokens.1] {
        assert!(
            token.len() == 32 && token.chars().all(|c| c.is_ascii_hexdigit()),
            "{token}"
        );
    }
    assert_ne!(tokens.0, tokens.1);
    kernel.taskboard().complete("t1", &tokens.0).unwrap();
    sql.complete_task("t1", &tokens.1).unwrap().unwrap();
    let (k, s) = claim(sql, "t1", "c", &mut tokens);
    assert_eq!(k, s, "done task");
    assert_eq!(k, "refused terminal");

    let acquire = |sql: &mut Conn, key: &str, resource: &str| {
        let action = Action::new(key, resource);
        let k = kernel.sideeffect().acquire(&action, ttl);
        let s = sql.acquire(key, resource, ttl, now()).expect("sql acquire");
        (k, s)
    };
    let (k, s) = acquire(sql, "k1", "r1");
    let (k, s) = (acquire_shape(k), acquire_shape(s));
    assert_eq!(k, s, "fresh key");
    assert!(k.starts_with("granted fence 1"), "{k}");
    for (what, key, resource, advance) in [
        ("held key", "k1", "r1", 0),
        ("another key on the held resource", "k2", "r1", 10),
        ("expired intent", "k1", "r1", ttl),
        (
            "the resource's hold expired: granted with fence+1",
            "k2",
            "r1",
            0,
        ),
    ] {
        clock.advance(advance);
        let (k, s) = acquire(sql, key, resource);
        assert_eq!(acquire_shape(k), acquire_shape(s), "{what}");
    }
    let (k, s) = acquire(sql, "k3", "r3");
    let (Ok(Acquired::Granted(kl)), Ok(Acquired::Granted(sl))) = (k, s) else {
        panic!("a fresh key on a free resource is granted");
    };
    kernel
        .sideeffect()
        .complete(&Action::new("k3", "r3"), &kl, b"ok")
        .unwrap();
    assert!(sql.complete(&sl, b"ok").unwrap());
    let (k, s) = acquire(sql, "k3", "r3");
    let (k, s) = (acquire_shape(k), acquire_shape(s));
    assert_eq!(k, s, "completed key");
    assert_eq!(k, "replayed ok");
}

fn sql_equivalence_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eq.db");
    let backend = SqliteBackend::open(&path.display().to_string()).unwrap();
    let clock = Arc::new(ManualClock::at(1_000_000));
    let kernel = Kernel::with_backend(Arc::new(backend), clock.clone()).unwrap();
    let db = Database::sqlite(&path, Synchronous::Normal);
    db.ensure_tables().unwrap();
    let mut conn = db.connect().unwrap();
    equivalence(&kernel, &clock, &mut conn);
}

fn sql_equivalence_postgres(dsn: &str) {
    let schema = pg::Schema::new(dsn, "bench_eq");
    let clock = Arc::new(ManualClock::at(1_000_000));
    let kernel = schema.kernel_with(clock.clone());
    let backend = gak::store::postgres::PostgresBackend::parse(&schema.url).unwrap();
    let db = Database::postgres(backend);
    db.ensure_tables().unwrap();
    let mut conn = db.connect().unwrap();
    equivalence(&kernel, &clock, &mut conn);
}
