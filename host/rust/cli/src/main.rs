//! The `gak` binary: operate a store's task board, side-effect keys and
//! runs; replay conformance vectors; tell the demo; export the component.
//! `gak --help` lists the commands, store URLs and exit codes.
use std::process::ExitCode;

mod cli;

/// The bench's types, from the library (`gak::bench`).
use gak::bench as bench_api;

fn main() -> ExitCode {
    cli::main()
}
