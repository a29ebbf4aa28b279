//! A worker that stops inside a transaction for the in-transaction crash
//! test: its binding pauses right before (or right after) COMMIT, prints
//! where it is, and waits to be killed.
//!
//! usage: `gak-txkill SQLITE_PATH before-commit|after-commit OPERATION`
use std::any::Any;
use std::future::Future;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{Result, bail};
use gak::store::{Backend, Session, StoreFuture};
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
    fn session(&self) -> StoreFuture<'_, Box<dyn Session>> {
        Box::pin(async move {
            let session: Box<dyn Session> = Box::new(PausingSession {
                inner: self.inner.session().await?,
                after: self.after,
            });
            Ok(session)
        })
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

impl Session for PausingSession {
    fn begin(&mut self) -> StoreFuture<'_, ()> {
        self.inner.begin()
    }
    fn get_many<'a>(
        &'a mut self,
        keys: &'a [(&'static str, &'a str)],
    ) -> StoreFuture<'a, Vec<Option<String>>> {
        self.inner.get_many(keys)
    }
    fn write<'a>(&'a mut self, writes: &'a [gak::store::Write<'a>]) -> StoreFuture<'a, ()> {
        self.inner.write(writes)
    }
    fn scan<'a>(
        &'a mut self,
        t: &'static str,
        prefix: &'a str,
        after: Option<&'a str>,
        limit: u32,
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        self.inner.scan(t, prefix, after, limit)
    }
    fn commit(&mut self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if !self.after {
                pause("before-commit");
            }
            self.inner.commit().await?;
            pause("after-commit");
            Ok(())
        })
    }
    fn rollback(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.inner.rollback()
    }
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, at, op] = args.as_slice() else {
        bail!("usage: gak-txkill SQLITE_PATH before-commit|after-commit OPERATION");
    };
    let inner = gak::blocking::run_future(gak::store::open(&format!("sqlite:{path}")))?;
    let backend = Arc::new(Pausing {
        inner,
        after: at == "after-commit",
    });
    let kernel = gak::blocking::Kernel::with_backend(backend, Arc::new(ManualClock::at(1_000)))?;
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
