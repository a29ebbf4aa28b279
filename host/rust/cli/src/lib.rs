//! The `gak` tool over the `gak` library: the operator CLI (task board,
//! side-effect keys, runs, retention), the conformance runner for the
//! vector files, the demo, and `gak bench`. Embedders link `gak`; this
//! crate carries what a program that runs gak from the shell needs (an
//! argument parser, progress bars, a plotter, a log subscriber), so none
//! of it reaches an embedder's dependency tree.
#![deny(missing_docs)]

/// `gak bench`: the measurements behind the subcommand (not a supported API).
#[doc(hidden)]
pub mod bench;
/// The command line (`gak --help`).
#[doc(hidden)]
pub mod cli;
pub mod conformance;
pub mod demo;
