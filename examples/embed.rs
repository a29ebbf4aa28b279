//! Embedding gak in a Rust program: open a kernel, seed a task, claim it,
//! run one effect through the Runner, "crash", and resume.
//!
//! cargo run -p gak-examples --example embed [-- PATH.db]
use anyhow::{Result, bail};
use gak::blocking::{Kernel, Runner};
use gak::{BodyError, Error, Ran, TaskSeed};

/// What happened, so the example's test can check it.
#[derive(Debug, PartialEq, Eq)]
pub struct Seen {
    /// How many times the e-mail body actually ran.
    pub emails_sent: u32,
    /// What the second process got back from the Runner.
    pub after_restart: Ran,
}

/// Run the story on the SQLite file at `path`.
pub fn run(path: &str) -> Result<Seen> {
    let url = format!("sqlite:{path}");
    let mut emails_sent = 0;
    let action = gak::Action::new("welcome-mail/user-42", "smtp").with_fingerprint("tmpl-v3");

    // --- first process -------------------------------------------------
    {
        let kernel = Kernel::open(&url)?;
        kernel
            .taskboard()
            .seed(&[TaskSeed::new("onboard-user-42")])?;
        let task = kernel
            .taskboard()
            .claim("onboard-user-42", "worker-1", 30_000)?;
        println!("claimed {} with fence {}", task.id, task.fence);

        let runner = Runner::new(&kernel, 30_000);
        let ran = runner.run(&action, |lease| {
            // Pass lease.key to the mail API as its idempotency key.
            emails_sent += 1;
            println!("sending welcome mail (idempotency key {})", lease.key);
            Ok::<_, BodyError<Error>>(b"message-id <a1@mail>".to_vec())
        });
        println!("first run: {ran:?}");
        // The process dies here: the task is never completed.
    }

    // --- after a restart -------------------------------------------------
    let kernel = Kernel::open(&url)?;
    let runner = Runner::new(&kernel, 30_000);
    let after_restart = runner.run(&action, |_| {
        emails_sent += 1;
        Ok::<_, BodyError<Error>>(b"a second mail".to_vec())
    })?;
    println!("after restart: {after_restart:?} (the mail was not sent again)");
    if emails_sent != 1 {
        bail!("the body ran {emails_sent} times");
    }
    Ok(Seen {
        emails_sent,
        after_restart,
    })
}

#[allow(dead_code)] // used when built as the example, not when included by its test
fn main() -> Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        std::env::temp_dir()
            .join("gak-embed.db")
            .display()
            .to_string()
    });
    let _ = std::fs::remove_file(&path);
    run(&path).map(drop)
}
