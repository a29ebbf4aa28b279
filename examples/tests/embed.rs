//! The README's embedding example runs and keeps its promise.
#[path = "../embed.rs"]
mod embed;

#[test]
fn embed_example_sends_the_mail_once() {
    let dir = tempfile::tempdir().unwrap();
    let seen = embed::run(&dir.path().join("embed.db").display().to_string()).unwrap();
    assert_eq!(seen.emails_sent, 1);
    assert_eq!(
        seen.after_restart,
        gak::Ran::Replayed(b"message-id <a1@mail>".to_vec())
    );
}
