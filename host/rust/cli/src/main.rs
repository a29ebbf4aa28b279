//! The `gak` binary: operate a store's task board, side-effect keys and
//! runs; replay conformance vectors; tell the demo; export the component.
//! `gak --help` lists the commands, store URLs and exit codes.
use std::process::ExitCode;

fn main() -> ExitCode {
    gak_cli::cli::main()
}
