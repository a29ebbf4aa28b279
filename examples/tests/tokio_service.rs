//! The tokio service example on SQLite and on PostgreSQL (TLS disabled):
//! every job done once, every mail sent once, from many concurrent tasks.
#[path = "../tokio_service.rs"]
mod service;

fn check(served: service::Served) {
    assert_eq!(served.jobs_done, 120);
    assert_eq!(served.sends.len(), 60);
    assert!(served.sends.values().all(|n| *n == 1), "{:?}", served.sends);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_service_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("svc.db").display());
    check(service::serve(&url, 120, 24).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_service_on_postgres_without_tls() {
    let Some(dsn) = gak_tests::pg::dsn() else {
        return;
    };
    let schema = gak_tests::pg::Schema::new(&dsn, "service");
    let url = format!("{}&sslmode=disable", schema.url);
    check(service::serve(&url, 120, 24).await.unwrap());
}
