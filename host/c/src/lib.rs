//! libgak: the gak kernel behind a small C ABI, for C, Go and any language
//! with a C FFI. The header is `include/gak.h` (made from this crate by
//! cbindgen; `tests/header.rs` checks it is current).
//!
//! Every exported function wraps the Rust host's blocking API
//! ([`gak_host::blocking::Kernel`]): the same component, store bindings,
//! transaction protocol and runner, so this crate adds no rule of its own.
//! What it adds is the boundary:
//!
//! - records cross as C structs (`gak_task`, `gak_lease`, …) and strings as
//!   (pointer, length) pairs; arguments are borrowed for the call, answers
//!   are owned by the caller's struct until its `_clear` function;
//! - every failure is a `gak_error` with the contract's kebab-case code;
//! - no panic unwinds into the caller: it becomes a `storage` error;
//! - sizes are checked from the lengths the caller passed before a byte of
//!   an argument is read (HOSTS.md rule 16; `limits`);
//! - callbacks (a fenced sink's body, an effect body) run on the calling
//!   thread, inside the call; a call from one into the same kernel, on that
//!   thread, is refused with `invalid-input` at once; a thread the body
//!   starts that calls the kernel waits for the body's locks (each attempt
//!   at most the kernel's connection wait on memory and PostgreSQL,
//!   SQLite's busy timeout on SQLite, as many attempts as the retry policy
//!   allows), then fails with `storage`.
// The C ABI is raw pointers by nature: every block says why it is sound.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs)]

pub mod abi;
mod codes;
pub mod error;
pub mod kernel;
mod limits;
pub mod records;
pub mod runner;
pub mod runs;
pub mod sideeffect;
pub mod sink;
pub mod taskboard;
