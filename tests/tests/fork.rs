//! A forked child never reuses its parent's random state (HOSTS.md rule 7):
//! children of one parent that had already made kernel calls mint
//! distinct tokens — else a zombie's `complete` would be accepted under its
//! successor's token. (The Python host's suite checks the same with
//! `os.fork` and a fork-mode multiprocessing pool.)
use std::collections::HashSet;
use std::process::Command;

#[test]
fn forked_children_mint_distinct_tokens() {
    let out = Command::new(env!("CARGO_BIN_EXE_gak-forker"))
        .arg("6")
        .output()
        .expect("run gak-forker");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gak-forker failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tokens: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("token "))
        .collect();
    assert_eq!(tokens.len(), 7, "parent and six children:\n{stdout}");
    let distinct: HashSet<&str> = tokens.iter().copied().collect();
    assert_eq!(distinct.len(), tokens.len(), "repeated tokens:\n{stdout}");
}
