//! Every wait is bounded (HOSTS.md rule 15): a sink body that starts a task
//! (a goroutine, a C thread) which calls the same kernel, and waits for
//! it, would wait for ever — the inner call needs what the body's
//! transaction holds. Nothing can tell that task from an unrelated caller,
//! so each attempt of the inner call waits at most the kernel's connection
//! wait, as busy; after the retry bound it fails with `storage`; the body
//! then goes on and its call commits.
use std::time::{Duration, Instant};

use gak::{Error, Kernel, SinkError};
use gak_tests::suite::{POSTGRES, Suite};

const WAIT: Duration = Duration::from_millis(300);

/// The body's call, with an inner call from a task of its own.
async fn body_waits_for_an_inner_call(kernel: Kernel) {
    let inner = kernel.clone();
    let started = Instant::now();
    let sideeffect = kernel.sideeffect();
    let call = sideeffect.write_fenced("r", 1, async move |down| {
        down.put("r/before", "1").await.map_err(|e| e.to_string())?;
        let inner = inner.clone();
        // Not the body's task: the re-entrancy check cannot see it.
        let seen = tokio::spawn(async move { inner.sideeffect().sink_seen("r").await })
            .await
            .map_err(|e| e.to_string())?;
        match seen {
            Err(Error::Storage(_)) => Ok(()),
            other => Err(format!("the inner call answered {other:?}, not storage")),
        }
    });
    // The test's own bound, so a wait that is not bounded fails it.
    let answer = tokio::time::timeout(WAIT * 60, call)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the call did not end within {:?}: an unbounded wait",
                WAIT * 60
            )
        });
    let took = started.elapsed();
    match answer {
        Ok(()) => {}
        Err(SinkError::Body(why)) => panic!("{why}"),
        Err(SinkError::Kernel(e)) => panic!("the outer call failed: {e}"),
    }
    assert!(
        took < WAIT * 60,
        "the inner call was not bounded by the connection wait: {took:?}"
    );
    assert_eq!(kernel.sideeffect().sink_seen("r").await.expect("seen"), 1);
}

fn main() {
    let mut suite = Suite::new();
    suite.tokio(
        "memory: a body waiting for an inner call of the same kernel ends",
        || async {
            let kernel = Kernel::builder()
                .store("memory:")
                .connection_wait(WAIT)
                .open()
                .await
                .expect("open");
            body_waits_for_an_inner_call(kernel).await;
        },
    );
    suite.needs_tokio(
        &POSTGRES,
        "postgres: a body waiting for an inner call of the same kernel ends",
        |dsn| async move {
            let sep = if dsn.contains('?') { '&' } else { '?' };
            let url = format!("{dsn}{sep}schema=bw_{}", std::process::id());
            let kernel = Kernel::builder()
                .store(&url)
                .connection_wait(WAIT)
                .open()
                .await
                .expect("open");
            body_waits_for_an_inner_call(kernel).await;
            let backend = gak::store::postgres::PostgresBackend::parse(&url).expect("parse");
            backend.drop_schema().await.expect("drop");
        },
    );
    suite.run()
}
