//! The queue worker for code without an async runtime: the same loop as
//! [`crate::Worker`], with handlers that block. Each handler runs on a
//! thread of the shared pool (`spawn_blocking`), so its claim is renewed
//! while it blocks; a panic in it fails its task (`panicked: …`).
use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use super::{Kernel, run};
use crate::{Backoff, Error, Stop, Task, Worked};

/// A queue worker over a [`Kernel`] (see [`crate::Worker`]).
#[derive(Clone, Debug)]
pub struct Worker(crate::Worker);

impl Worker {
    /// A worker claiming as `agent` (defaults as [`crate::Worker::new`]).
    pub fn new(kernel: &Kernel, agent: &str) -> Self {
        Worker(crate::Worker::new(&kernel.as_async(), agent))
    }

    /// Claim up to `n` (1-1000) tasks at a time; also the concurrency.
    pub fn batch(self, n: u32) -> Self {
        Worker(self.0.batch(n))
    }

    /// Run at most `n` handlers at once (default: the batch).
    pub fn concurrency(self, n: usize) -> Self {
        Worker(self.0.concurrency(n))
    }

    /// The claims' ttl in ms.
    pub fn ttl(self, ms: u64) -> Self {
        Worker(self.0.ttl(ms))
    }

    /// How long to wait before polling an empty board again.
    pub fn idle(self, wait: Duration) -> Self {
        Worker(self.0.idle(wait))
    }

    /// The back-off of failed handlers.
    pub fn backoff(self, backoff: Backoff) -> Self {
        Worker(self.0.backoff(backoff))
    }

    /// A handle that stops this worker, from any thread or a handler.
    pub fn stopper(&self) -> Stop {
        self.0.stopper()
    }

    /// Work until stopped (see [`crate::Worker::run`]).
    ///
    /// # Errors
    /// `invalid-input` (a bad option).
    pub fn run<F, E>(&self, handler: F) -> Result<Worked, Error>
    where
        F: Fn(Task) -> Result<(), E> + Send + Sync + 'static,
        E: Display + Send + 'static,
    {
        let handler = Arc::new(handler);
        run(self.0.run(|task| blocking(handler.clone(), task)))
    }

    /// Work until a claim finds no free task (or a stop).
    ///
    /// # Errors
    /// The first error of a call.
    pub fn run_until_idle<F, E>(&self, handler: F) -> Result<Worked, Error>
    where
        F: Fn(Task) -> Result<(), E> + Send + Sync + 'static,
        E: Display + Send + 'static,
    {
        let handler = Arc::new(handler);
        run(self
            .0
            .run_until_idle(|task| blocking(handler.clone(), task)))
    }
}

/// Run a blocking handler on the pool; its panic resumes here, where the
/// worker turns it into the task's failure.
async fn blocking<F, E>(handler: Arc<F>, task: Task) -> Result<(), E>
where
    F: Fn(Task) -> Result<(), E> + Send + Sync + 'static,
    E: Send + 'static,
{
    match tokio::task::spawn_blocking(move || handler(task)).await {
        Ok(answer) => answer,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => std::panic::resume_unwind(Box::new(e.to_string())),
    }
}
