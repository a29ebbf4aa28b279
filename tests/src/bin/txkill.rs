//! A worker that stops inside a transaction for the in-transaction crash
//! test: its binding pauses right before (or right after) COMMIT, prints
//! where it is, and waits to be killed.
//!
//! usage: gak-txkill SQLITE_PATH before-commit|after-commit OPERATION
use std::io::{BufRead, Write};
use std::sync::Arc;

use anyhow::{Result, bail};
use gak::store::{Backend, Session, StoreFault};
use gak::{Action, ManualClock, TaskSeed};

/// Wraps a binding: every commit announces itself and blocks on stdin.
struct Pausing {
    inner: Arc<dyn Backend>,
    after: bool,
}

struct PausingSession {
    inner: Box<dyn Session>,
    after: bool,
}

fn pause(at: &str) {
    println!("PAUSED {at}");
    let _ = std::io::stdout().flush();
    // Blocks until the parent kills us; EOF (parent gone) also stops here.
    let _ = std::io::stdin().lock().read_line(&mut String::new());
    std::process::exit(3);
}

impl Backend for Pausing {
    fn session(&self) -> Result<Box<dyn Session>, StoreFault> {
        Ok(Box::new(PausingSession {
            inner: self.inner.session()?,
            after: self.after,
        }))
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

impl Session for PausingSession {
    fn begin(&mut self) -> Result<(), StoreFault> {
        self.inner.begin()
    }
    fn get(&mut self, t: &'static str, k: &str) -> Result<Option<String>, StoreFault> {
        self.inner.get(t, k)
    }
    fn put(&mut self, t: &'static str, k: &str, v: &str) -> Result<(), StoreFault> {
        self.inner.put(t, k, v)
    }
    fn delete(&mut self, t: &'static str, k: &str) -> Result<(), StoreFault> {
        self.inner.delete(t, k)
    }
    fn scan(
        &mut self,
        t: &'static str,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreFault> {
        self.inner.scan(t, prefix, after, limit)
    }
    fn commit(&mut self) -> Result<(), StoreFault> {
        if !self.after {
            pause("before-commit");
        }
        self.inner.commit()?;
        pause("after-commit");
        Ok(())
    }
    fn rollback(&mut self) {
        self.inner.rollback()
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, at, op] = args.as_slice() else {
        bail!("usage: gak-txkill SQLITE_PATH before-commit|after-commit OPERATION");
    };
    let inner = gak::store::open(&format!("sqlite:{path}"))?;
    let backend = Arc::new(Pausing {
        inner,
        after: at == "after-commit",
    });
    let kernel = gak::Kernel::with_backend(backend, Arc::new(ManualClock::at(1_000)))?;
    match op.as_str() {
        // Many writes in one transaction: 200 tasks.
        "seed" => {
            let tasks: Vec<TaskSeed> = (0..200)
                .map(|i| TaskSeed::new(&format!("t{i:03}")))
                .collect();
            kernel.taskboard().seed(&tasks)?;
        }
        // Two records in one write: the resource hold and the key's intent.
        "acquire" => {
            kernel
                .sideeffect()
                .acquire(&Action::new("k", "r"), 60_000)?;
        }
        other => bail!("unknown operation {other}"),
    }
    bail!("the commit hook did not pause")
}
