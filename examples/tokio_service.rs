//! gak inside a tokio service: a queue of jobs drained by many concurrent
//! tasks on one kernel. Each task claims the next ready job, sends its
//! e-mail through the Runner (at most once per idempotency key, even when
//! two tasks race for the same key) and completes the job.
//!
//! cargo run -p gak-examples --example tokio_service [-- STORE_URL]
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::{Result, bail};
use gak::{Action, BodyError, Error, Kernel, Ran, Runner, TaskSeed};

/// What the service did, for the example's test.
#[derive(Debug)]
pub struct Served {
    /// Jobs completed.
    pub jobs_done: usize,
    /// Mails each idempotency key actually sent.
    pub sends: BTreeMap<String, u32>,
}

/// Serve `jobs` jobs with `workers` concurrent tasks on the store at `url`.
pub async fn serve(url: &str, jobs: usize, workers: usize) -> Result<Served> {
    let kernel = Kernel::builder()
        .store(url)
        .max_connections(8)
        .open()
        .await?;
    let seeds: Vec<TaskSeed> = (0..jobs)
        .map(|i| TaskSeed::new(&format!("job-{i}")))
        .collect();
    kernel.taskboard().seed(&seeds).await?;
    // The "mail provider": counts what was really sent per idempotency key.
    let sends = Arc::new(Mutex::new(BTreeMap::<String, u32>::new()));
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let (kernel, sends) = (kernel.clone(), sends.clone());
        tasks.spawn(async move { work(&kernel, &format!("worker-{w}"), &sends).await });
    }
    let mut jobs_done = 0;
    while let Some(joined) = tasks.join_next().await {
        jobs_done += joined??;
    }
    let sends = sends.lock().expect("sends").clone();
    Ok(Served { jobs_done, sends })
}

/// One worker: claim, send, complete, until no job is ready.
async fn work(kernel: &Kernel, name: &str, sends: &Mutex<BTreeMap<String, u32>>) -> Result<usize> {
    let runner = Runner::new(kernel, 30_000);
    let mut done = 0;
    while let Some(job) = kernel.taskboard().claim_next(name, 30_000).await? {
        // Jobs 2k and 2k+1 mail the same user: the second one replays.
        let user = job.id.trim_start_matches("job-").parse::<usize>()? / 2;
        let mail = Action::new(
            &format!("welcome-mail/user-{user}"),
            &format!("mailbox/{user}"),
        );
        loop {
            let ran = runner
                .run(&mail, async |lease| {
                    // A real body calls the provider with lease.key as its
                    // idempotency key; here it records the send.
                    *sends
                        .lock()
                        .expect("sends")
                        .entry(lease.key.clone())
                        .or_default() += 1;
                    tokio::task::yield_now().await;
                    Ok::<_, BodyError<Error>>(format!("sent to user {user}").into_bytes())
                })
                .await?;
            match ran {
                Ran::Applied(_) | Ran::Replayed(_) => break,
                // Another task holds this key's attempt: let it finish.
                Ran::InFlight | Ran::Contended(_) => tokio::task::yield_now().await,
                other => bail!("{}: {other:?}", mail.key),
            }
        }
        let token = job.token.as_deref().unwrap_or_default();
        kernel.taskboard().complete(&job.id, token).await?;
        done += 1;
    }
    Ok(done)
}

#[allow(dead_code)] // used when built as the example, not when included by its test
#[tokio::main]
async fn main() -> Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| {
        let path = std::env::temp_dir().join("gak-service.db");
        let _ = std::fs::remove_file(&path);
        format!("sqlite:{}", path.display())
    });
    let served = serve(&url, 200, 32).await?;
    let twice = served.sends.values().filter(|n| **n != 1).count();
    println!(
        "{} jobs done by 32 tasks; {} mails, {} sent more than once",
        served.jobs_done,
        served.sends.len(),
        twice
    );
    if twice > 0 {
        bail!("a mail was sent twice");
    }
    Ok(())
}
