//! `gak-forker N`: a parent that has already made kernel calls (its pool
//! holds a warm instance) forks N children; each child claims a task of its
//! copy of the board and prints the token it was handed (`token <hex>`),
//! as does the parent for its own claim. Run by `tests/tests/fork.rs`: no
//! two of them may be equal (HOSTS.md rule 7).
#![allow(unsafe_code)] // fork(2) and waitpid(2)

use std::io::Write;

use gak::TaskSeed;
use gak::blocking::Kernel;

fn main() {
    let children: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("usage: gak-forker N");
    let kernel = Kernel::open("memory:").expect("open");
    let seeds: Vec<TaskSeed> = (0..=children)
        .map(|i| TaskSeed::new(&format!("t{i}")))
        .collect();
    kernel.taskboard().seed(&seeds).expect("seed");
    // The parent's own claim: its instance (and random state) is now warm.
    let mine = kernel
        .taskboard()
        .claim("t0", "parent", 60_000)
        .expect("claim");
    println!("token {}", mine.token.expect("a claim hands out a token"));
    std::io::stdout().flush().expect("flush");
    let mut pids = Vec::new();
    for i in 1..=children {
        // SAFETY: the process is single-threaded here but for the kernel's
        // idle runtime workers, which the child never needs (memory store).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let task = kernel
                .taskboard()
                .claim(&format!("t{i}"), &format!("child-{i}"), 60_000)
                .expect("child claim");
            println!("token {}", task.token.expect("token"));
            std::io::stdout().flush().expect("flush");
            // SAFETY: leave without running the parent's exit handlers.
            unsafe { libc::_exit(0) };
        }
        pids.push(pid);
    }
    for pid in pids {
        let mut status = 0;
        // SAFETY: waiting for a child this process forked.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "a child failed"
        );
    }
}
