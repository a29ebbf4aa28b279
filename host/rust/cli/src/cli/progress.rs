//! Progress on stderr for long commands, only when asked and only on a
//! terminal: a redirected stderr (a log file, CI) never gets bar frames.
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps (a spinner when `len` is unknown), hidden unless
/// `asked` and stderr is a terminal.
pub fn bar(asked: bool, len: Option<u64>) -> ProgressBar {
    if !asked || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match len {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let template = match len {
        Some(_) => "{elapsed_precise} [{bar:30}] {pos}/{len} {msg}",
        None => "{elapsed_precise} {spinner} {msg}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
