//! SIGKILL end to end, on SQLite and PostgreSQL: a worker process
//! (`gak-crashy`) runs a three-step workflow whose steps apply counted side
//! effects; the test kills it with a real SIGKILL at a spread of points
//! (before the effect, after the effect but before `complete`, between
//! `complete` and the snapshot, and with a store transaction open), then
//! restarts workers until the run finishes.
//!
//! Afterwards, from the downstream file and the workers' logs: finished steps
//! were never re-run, no key's effect was applied twice, every key killed
//! inside its body surfaced as `uncertain` (never silently re-granted) and was
//! reconciled from the downstream truth, and every run finished.
//!
//! Synchronisation is by the worker's `PAUSED` line, never by sleeping; the
//! only waiting is the workers' own polling for a dead worker's lease to
//! expire, which is inherent to crash recovery.
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use gak::blocking::Kernel;
use gak::{Acquired, Action, Outcome, Status, TaskSeed, TaskState};
use gak_tests::pg;
use gak_tests::suite::{POSTGRES, Suite};

const BIN: &str = env!("CARGO_BIN_EXE_gak-crashy");
const STEPS: [&str; 3] = ["s1", "s2", "s3"];
const POINTS: [&str; 4] = [
    "before-effect",
    "after-effect",
    "after-complete",
    "mid-transaction",
];
/// Restarts allowed per run before the test gives up.
const MAX_RESTARTS: usize = 3;

fn sigkill_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("crash.db").display());
    exercise("sqlite", &url, dir.path());
}

fn sigkill_postgres(dsn: &str) {
    let schema = pg::Schema::new(dsn, "sigkill");
    let dir = tempfile::tempdir().unwrap();
    exercise("postgres", &schema.url, dir.path());
}

#[derive(Default)]
struct Tally {
    runs: usize,
    kills: usize,
    restarts: usize,
    reclaims: usize,
    applied: usize,
    not_applied: usize,
}

/// Every point × every step, one fresh run each, then one run killed at all
/// twelve points in a row.
fn exercise(backend: &str, url: &str, dir: &Path) {
    let started = Instant::now();
    let kernel = Kernel::open(url).expect("open the store");
    let mut tally = Tally::default();
    for step in STEPS {
        for point in POINTS {
            let run = format!("{point}-{step}");
            scenario(&kernel, url, dir, &run, &[(point, step)], &mut tally);
        }
    }
    let chain: Vec<(&str, &str)> = STEPS
        .iter()
        .flat_map(|s| POINTS.iter().map(move |p| (*p, *s)))
        .collect();
    scenario(&kernel, url, dir, "chain", &chain, &mut tally);

    assert_eq!(tally.kills, 2 * POINTS.len() * STEPS.len());
    // Killed transactions left the count records as exact as the board.
    gak_tests::assert_counted(&kernel);
    eprintln!(
        "sigkill {backend}: {} kill points, {} restarts, {} uncertain reconciled \
         ({} applied, {} not applied) over {} runs, {} re-claims after a claim expired during a slow call, {:.1} s",
        tally.kills,
        tally.restarts,
        tally.applied + tally.not_applied,
        tally.applied,
        tally.not_applied,
        tally.runs,
        tally.reclaims,
        started.elapsed().as_secs_f64()
    );
}

struct Files {
    effects: PathBuf,
    steps: PathBuf,
}

/// One run: a worker killed at each of `kills` in turn, then restarts until
/// it finishes, then the audit.
fn scenario(
    kernel: &Kernel,
    url: &str,
    dir: &Path,
    run: &str,
    kills: &[(&str, &str)],
    tally: &mut Tally,
) {
    kernel.taskboard().seed(&[TaskSeed::new(run)]).unwrap();
    let files = Files {
        effects: dir.join(format!("{run}.effects")),
        steps: dir.join(format!("{run}.steps")),
    };
    for (point, step) in kills {
        tally.reclaims += kill_at(url, run, &files, point, step);
        tally.kills += 1;
        if *point == "mid-transaction" {
            // Killed with the store transaction open: its write rolled back.
            let key = format!("{run}/{step}");
            let marker = kernel.with_downstream(|d| d.get(&key)).unwrap();
            assert_eq!(marker, None, "{key}: a killed transaction's write landed");
        }
    }
    let mut finished = false;
    for _ in 0..MAX_RESTARTS {
        tally.restarts += 1;
        let out = worker(url, run, &files, None)
            .stdin(Stdio::null())
            .output()
            .expect("run gak-crashy");
        let stdout = String::from_utf8_lossy(&out.stdout);
        for line in stdout.lines().filter(|l| l.starts_with("RECLAIMED")) {
            eprintln!("{run}: {line}");
            tally.reclaims += 1;
        }
        if out.status.success() && stdout.lines().any(|l| l == "FINISHED") {
            finished = true;
            break;
        }
        eprintln!(
            "!! {run}: restarted worker did not finish ({}):\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        finished,
        "{run}: not finished after {MAX_RESTARTS} restarts"
    );
    tally.runs += 1;
    audit(kernel, run, kills, &files, tally);
}

fn worker(url: &str, run: &str, files: &Files, pause: Option<String>) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg(url)
        .arg(run)
        .arg(&files.effects)
        .arg(&files.steps)
        .args(pause);
    cmd
}

/// Kills its child on drop, so a failing test leaves no worker behind.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start a worker that pauses at `point` of `step`, wait for it to say so,
/// and SIGKILL it there. Returns how often the worker re-claimed the run
/// before pausing.
fn kill_at(url: &str, run: &str, files: &Files, point: &str, step: &str) -> usize {
    let child = worker(url, run, files, Some(format!("{point}:{step}")))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn gak-crashy");
    let mut reaper = Reaper(child);
    let stdout = reaper.0.stdout.take().expect("piped stdout");
    let mut reclaims = 0;
    let mut lines = BufReader::new(stdout).lines();
    let paused = loop {
        match lines.next() {
            Some(Ok(line)) if line.starts_with("RECLAIMED") => {
                eprintln!("{run}: {line}");
                reclaims += 1;
            }
            Some(Ok(line)) => break line,
            _ => {
                let status = reaper.0.wait().expect("wait");
                panic!("{run}: worker ended ({status}) before pausing at {point} {step}")
            }
        }
    };
    assert_eq!(paused, format!("PAUSED {point} {step}"), "{run}");
    reaper.0.kill().expect("SIGKILL the worker");
    let status = reaper.0.wait().expect("wait for the killed worker");
    assert_eq!(status.signal(), Some(9), "{run}: {status}");
    reclaims
}

fn lines(path: &Path) -> Vec<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.lines().map(str::to_owned).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("read {}: {e}", path.display()),
    }
}

fn audit(kernel: &Kernel, run: &str, kills: &[(&str, &str)], files: &Files, tally: &mut Tally) {
    let effects = lines(&files.effects);
    let log = lines(&files.steps);
    let context = || format!("{run}\neffects: {effects:#?}\nsteps log: {log:#?}");
    assert_eq!(effects.len(), STEPS.len(), "{}", context());

    for step in STEPS {
        let key = format!("{run}/{step}");
        let killed = |point: &str| kills.iter().filter(|k| **k == (point, step)).count();

        // The downstream truth: applied exactly once.
        let applied = effects.iter().filter(|l| **l == key).count();
        assert_eq!(applied, 1, "{key} applied {applied} times\n{}", context());

        // A finished step is never started again.
        let start = format!("start {step}");
        let done = format!("done {step}");
        let dones: Vec<usize> = (0..log.len()).filter(|&i| log[i] == done).collect();
        assert_eq!(
            dones.len(),
            1,
            "{key} finished {} times\n{}",
            dones.len(),
            context()
        );
        assert!(
            !log[dones[0]..].contains(&start),
            "{key} re-run after it finished\n{}",
            context()
        );

        // Every kill inside the body surfaced as uncertain exactly once and
        // was reconciled from the downstream truth; no other run of the key
        // ever saw it uncertain.
        let uncertain = log
            .iter()
            .filter(|l| l.starts_with(&format!("uncertain {key} ")))
            .count();
        let verdict = |applied: bool| {
            log.iter()
                .filter(|l| **l == format!("reconciled {key} applied={applied}"))
                .count()
        };
        let (before, after) = (killed("before-effect"), killed("after-effect"));
        assert_eq!(
            verdict(false),
            before,
            "{key}: not-applied verdicts\n{}",
            context()
        );
        assert_eq!(
            verdict(true),
            after,
            "{key}: applied verdicts\n{}",
            context()
        );
        assert_eq!(uncertain, before + after, "{key}: uncertain\n{}", context());
        tally.not_applied += before;
        tally.applied += after;

        // The kernel agrees: the key only replays the first result, the
        // step's outcome and progress marker are recorded.
        let result = format!("applied {key}").into_bytes();
        let action = Action::new(&key, &format!("{run}/effects"));
        assert_eq!(
            kernel.sideeffect().acquire(&action, 1_000).unwrap(),
            Acquired::Replayed(result.clone()),
            "{key}"
        );
        assert_eq!(
            kernel.commitgate().read(run, Some(step)).unwrap(),
            Outcome {
                status: Status::Succeeded,
                result
            },
            "{key}"
        );
        let marker = kernel.with_downstream(|d| d.get(&key)).unwrap();
        assert_eq!(marker.as_deref(), Some("recorded"), "{key}");
    }

    let task = kernel
        .taskboard()
        .list(None, None, 1000)
        .map(|p| p.items)
        .unwrap()
        .into_iter()
        .find(|t| t.id == run)
        .expect("the run's task");
    assert_eq!(task.state, TaskState::Done, "{run}");
    assert_eq!(
        kernel.commitgate().read(run, None).unwrap(),
        Outcome {
            status: Status::Succeeded,
            result: b"finished".to_vec()
        },
        "{run}"
    );
    let done: BTreeSet<String> = kernel
        .checkpoint()
        .load(run)
        .unwrap()
        .done
        .into_iter()
        .collect();
    assert_eq!(
        done,
        STEPS.iter().map(|s| (*s).to_owned()).collect(),
        "{run}"
    );
}

fn main() {
    let mut suite = Suite::new();
    suite.test("sigkill_sqlite", sigkill_sqlite);
    suite.needs(&POSTGRES, "sigkill_postgres", sigkill_postgres);
    suite.run();
}
