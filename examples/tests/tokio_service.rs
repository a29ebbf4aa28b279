//! The tokio service example on SQLite and on PostgreSQL (TLS disabled):
//! every job done once, every mail sent once, from many concurrent tasks.
#[path = "../tokio_service.rs"]
mod service;

use gak_tests::suite::{POSTGRES, Suite};

fn check(served: service::Served) {
    assert_eq!(served.jobs_done, 120);
    assert_eq!(served.sends.len(), 60);
    assert!(served.sends.values().all(|n| *n == 1), "{:?}", served.sends);
}

async fn tokio_service_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("svc.db").display());
    check(service::serve(&url, 120, 24).await.unwrap());
}

async fn tokio_service_on_postgres_without_tls(dsn: String) {
    let schema = gak_tests::pg::Schema::new(&dsn, "service");
    let url = format!("{}&sslmode=disable", schema.url);
    check(service::serve(&url, 120, 24).await.unwrap());
}

fn main() {
    let mut suite = Suite::new();
    suite.tokio("tokio_service_on_sqlite", tokio_service_on_sqlite);
    suite.needs_tokio(
        &POSTGRES,
        "tokio_service_on_postgres_without_tls",
        tokio_service_on_postgres_without_tls,
    );
    suite.run();
}
